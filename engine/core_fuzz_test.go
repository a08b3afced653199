package engine

// FuzzCore drives a Core through its public API only (NewCore, Subscribe,
// Unsubscribe, Apply, Advance, ReadDone, Ready, Position), so the core's
// internals can change under it. The fuzzer's bytes are a stream of
// decisions: which query to subscribe (compiled by query.Compile against a
// catalog of two tables: random supported shapes, constants and binds,
// LIMIT/OFFSET up to 2^63-1, empty and NULL-only IN and ANY lists, NULL
// binds), which transaction to commit, when each read lands and at which
// snapshot, when the stream advances. The fuzzer holds the tables itself
// and checks:
//   - no call panics;
//   - every output makes sense for a subscriber (accepted once, deltas only
//     after it and with increasing LSNs, removed keys held, Order naming
//     exactly the held rows, nothing after refused or ended, no refusal
//     code but the ones the fuzzer provoked);
//   - at every quiet point (every read answered, the stream past every
//     snapshot) each accepted rows-mode subscription holds exactly what
//     the plan's own evaluation (query.Plan.Eval, CompareWindow, Project,
//     OFFSET and LIMIT) gives over the fuzzer's tables, a count its count,
//     and no subscription is left waiting;
//   - a touch-mode subscription accepted before a transaction that changes
//     its result is touched at that transaction's commit LSN;
//   - the same decisions run twice give the same outputs, byte for byte.
// The seed corpus is under testdata/fuzz/FuzzCore; `go test` runs it, and
// scripts/fuzz.sh (make test) fuzzes for a bounded time.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

func FuzzCore(f *testing.F) {
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"))
	f.Add([]byte("subscribe, write, land, advance: \x00\x10\x20\x30\x40\x50\x60\x70\x80\x90\xa0\xb0\xc0\xd0\xe0\xf0"))
	f.Add([]byte{0, 9, 9, 9, 9, 9, 3, 3, 3, 3, 12, 12, 12, 12, 0, 1, 2, 5, 7, 9, 11, 13, 255, 254, 253})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1024 {
			data = data[:1024] // 200 steps take fewer bytes
		}
		// A run takes milliseconds; one that does not has found a loop.
		// Fuzzing has no time limit per input, so fail loudly (the panic
		// ends the worker and the fuzzer keeps the input as a crasher).
		watchdog := time.AfterFunc(fzTimeout, func() {
			buf := make([]byte, 1<<20)
			panic(fmt.Sprintf("FuzzCore: one run took over %v; goroutines:\n%s", fzTimeout, buf[:runtime.Stack(buf, true)]))
		})
		defer watchdog.Stop()
		first := fzRun(t, data)
		if t.Failed() {
			return
		}
		if second := fzRun(t, data); second != first {
			t.Fatalf("the same decisions gave different outputs:\nfirst:\n%s\nsecond:\n%s", first, second)
		}
	})
}

// fzTimeout bounds one input's two runs.
const fzTimeout = 20 * time.Second

// fzBytes hands out the fuzzer's decisions; past the end every decision
// is 0.
type fzBytes struct {
	b []byte
	i int
}

func (d *fzBytes) more() bool { return d.i < len(d.b) }

// n returns a decision in [0, k).
func (d *fzBytes) n(k int) int {
	if d.i >= len(d.b) || k <= 1 {
		d.i++
		return 0
	}
	v := int(d.b[d.i])
	d.i++
	return v % k
}

type fzCatalog map[string]*query.Table

func (c fzCatalog) Table(_ context.Context, schema, name string) (*query.Table, error) {
	if t := c[schema+"."+name]; t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("table %s.%s: %w", schema, name, query.ErrNoTable)
}

// fzTable is one of the fuzzer's tables: its catalog entry, its relation
// and its rows by the text of their key (values in text form, nil NULL).
type fzTable struct {
	cat *query.Table
	rel *change.Relation
}

type fzTxn struct {
	xid     uint32
	lsn     change.LSN
	changes []change.Change
}

type fzRead struct {
	req   ReadRequest
	asked change.LSN // the core's position when it asked
}

type fzSub struct {
	plan     *query.Plan
	mode     Mode
	accepted bool
	gone     bool
	lsn      change.LSN
	rows     map[Key][]any
	order    []Key
	count    int64
	touched  []change.LSN
}

type fzState struct {
	t       *testing.T
	d       *fzBytes
	core    *Core
	cat     fzCatalog
	tables  []*fzTable
	history []fzTxn
	lsn     change.LSN
	xid     uint32
	reads   map[ReadID]*fzRead
	subs    map[SubID]*fzSub
	nextSub SubID
	// What the fuzzer provoked: refusals with these codes are expected.
	failReads bool
	rowLimit  int
	out       strings.Builder
}

var fzTypes = map[string]uint32{"int4": change.OIDInt4, "int8": change.OIDInt8, "text": change.OIDText}

func fzNewTable(oid uint32, name string, cols ...string) *fzTable {
	qt := &query.Table{OID: oid, Schema: "public", Name: name}
	rel := &change.Relation{OID: oid, Schema: "public", Table: name, ReplicaIdentity: 'd'}
	for _, c := range cols {
		f := strings.Fields(c)
		oid := fzTypes[f[1]]
		typ, _ := change.BuiltinType(oid)
		col := query.Column{Name: f[0], TypeOID: oid, DeclaredOID: oid, TypeMod: -1, Type: typ}
		if oid == change.OIDText {
			col.Collation = query.Collation{OID: 950, Name: "C", Provider: 'c', Collate: "C", Deterministic: true}
		}
		pk := len(f) > 2
		if pk {
			qt.PrimaryKey = append(qt.PrimaryKey, f[0])
			col.NotNull = true
		}
		qt.Columns = append(qt.Columns, col)
		rel.Columns = append(rel.Columns, change.Column{Name: f[0], TypeOID: oid, TypeMod: -1, Key: pk})
	}
	return &fzTable{cat: qt, rel: rel}
}

// fzRun runs the decisions in data against a new core and returns the
// transcript of its outputs.
func fzRun(t *testing.T, data []byte) string {
	s := &fzState{t: t, d: &fzBytes{b: data}, cat: fzCatalog{}, reads: map[ReadID]*fzRead{}, subs: map[SubID]*fzSub{}, lsn: 0x1000, xid: 700}
	s.tables = []*fzTable{
		fzNewTable(16385, "t1", "id int4 pk", "a int4", "b text", "c int8"),
		fzNewTable(16386, "t2", "k1 int4 pk", "k2 int4 pk", "ref int4", "v text"),
	}
	for _, tb := range s.tables {
		s.cat["public."+tb.cat.Name] = tb.cat
	}
	opts := CoreOptions{WindowMargin: 1 + s.d.n(4)}
	if s.d.n(4) == 0 {
		s.rowLimit = 3 + s.d.n(8)
		opts.ReadRowLimit = s.rowLimit
	}
	s.failReads = s.d.n(4) == 0
	s.core = NewCore(opts)
	for step := 0; step < 200 && s.d.more(); step++ {
		switch op := s.d.n(16); {
		case op < 3:
			s.subscribe()
		case op < 4:
			s.unsubscribe()
		case op < 7:
			s.land()
		case op < 8:
			s.core.Advance(s.lsn + 1)
			s.collect()
		case op < 9:
			s.settle()
		default:
			s.commit()
		}
		if t.Failed() {
			t.Fatalf("failed at step %d; transcript:\n%s", step, fzTail(s.out.String(), 4000))
		}
	}
	s.settle()
	if t.Failed() {
		t.Fatalf("failed at the end; transcript:\n%s", fzTail(s.out.String(), 4000))
	}
	return s.out.String()
}

func fzTail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// --- queries ---

// int8 extremes and small values for LIMIT and OFFSET.
var fzCounts = []int64{0, 1, 2, 3, 5, math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - 32, math.MaxInt64 - 33, 1 << 62, 1 << 40}

type fzQuery struct {
	sql   strings.Builder
	binds []query.Bind
}

// bind appends a placeholder with b.
func (q *fzQuery) bind(b query.Bind) {
	q.binds = append(q.binds, b)
	fmt.Fprintf(&q.sql, "$%d", len(q.binds))
}

// value writes an int4 value: a literal, NULL, or a bind (int4, int8,
// untyped text, binary int4, NULL).
func (s *fzState) value(q *fzQuery) {
	v := s.d.n(7) - 1
	if s.d.n(16) == 0 {
		v = []int{math.MaxInt32, math.MinInt32}[s.d.n(2)]
	}
	txt := []byte(strconv.Itoa(v))
	switch s.d.n(8) {
	case 0, 1, 2:
		q.sql.Write(txt)
	case 3:
		q.sql.WriteString("NULL")
	case 4:
		q.bind(query.Bind{OID: change.OIDInt4, Data: txt})
	case 5:
		q.bind(query.Bind{OID: change.OIDInt8, Data: txt})
	case 6:
		q.bind(query.Bind{Data: txt})
	default:
		if s.d.n(2) == 0 {
			q.bind(query.Bind{OID: change.OIDInt4})
		} else {
			q.bind(query.Bind{OID: change.OIDInt4, Format: query.FormatBinary, Data: binary.BigEndian.AppendUint32(nil, uint32(int32(v)))})
		}
	}
}

// count writes a LIMIT or OFFSET count: a literal or an int8 bind.
func (s *fzState) count(q *fzQuery) {
	n := fzCounts[s.d.n(len(fzCounts))]
	switch s.d.n(4) {
	case 0:
		q.bind(query.Bind{OID: change.OIDInt8, Data: []byte(strconv.FormatInt(n, 10))})
	case 1:
		q.bind(query.Bind{OID: change.OIDInt8, Format: query.FormatBinary, Data: binary.BigEndian.AppendUint64(nil, uint64(n))})
	default:
		q.sql.WriteString(strconv.FormatInt(n, 10))
	}
}

// pred writes a predicate on t1's columns (alias p, "" for none).
func (s *fzState) pred(q *fzQuery, p string) {
	col := func(c string) {
		if p != "" {
			q.sql.WriteString(p + ".")
		}
		q.sql.WriteString(c)
	}
	switch s.d.n(14) {
	case 0:
		col("a")
		q.sql.WriteString(" = ")
		s.value(q)
	case 1:
		col("a")
		q.sql.WriteString(" IN (")
		s.value(q)
		q.sql.WriteString(", ")
		s.value(q)
		q.sql.WriteString(")")
	case 2:
		col("a")
		q.sql.WriteString([]string{" IN (NULL)", " IN (NULL, NULL)", " NOT IN (NULL)", " NOT IN (NULL, 1)"}[s.d.n(4)])
	case 3:
		col("a")
		q.sql.WriteString(" NOT IN (")
		s.value(q)
		q.sql.WriteString(", ")
		s.value(q)
		q.sql.WriteString(")")
	case 4:
		col("a")
		q.sql.WriteString([]string{" = ANY('{}')", " <> ALL('{}')", " = ANY('{NULL}')", " = ANY('{1,NULL,3}')", " <> ALL('{NULL}')"}[s.d.n(5)])
	case 5:
		col("a")
		q.sql.WriteString([]string{" = ANY(", " <> ALL("}[s.d.n(2)])
		arr := []string{"{}", "{NULL}", "{1,2}", "{0,NULL,5}"}[s.d.n(4)]
		b := query.Bind{OID: change.OIDInt4Array, Data: []byte(arr)}
		if s.d.n(4) == 0 {
			b.Data = nil
		}
		q.bind(b)
		q.sql.WriteString(")")
	case 6:
		col("a")
		q.sql.WriteString([]string{" > ", " <= ", " <> "}[s.d.n(3)])
		s.value(q)
	case 7:
		col("a")
		q.sql.WriteString(" BETWEEN ")
		s.value(q)
		q.sql.WriteString(" AND ")
		s.value(q)
	case 8:
		col("b")
		q.sql.WriteString([]string{" = 'x1'", " IS NULL", " LIKE 'x%'", " > 'x2'"}[s.d.n(4)])
	case 9:
		col("c")
		q.sql.WriteString([]string{" IS NULL", " >= 2", " = 9223372036854775807", " < -9223372036854775808"}[s.d.n(4)])
	case 10:
		col("a")
		q.sql.WriteString(" IS NOT DISTINCT FROM ")
		s.value(q)
	case 11:
		q.sql.WriteString("NOT (")
		s.pred(q, p)
		q.sql.WriteString(")")
	case 12:
		q.sql.WriteString("(")
		s.pred(q, p)
		q.sql.WriteString(" OR ")
		s.pred(q, p)
		q.sql.WriteString(")")
	default:
		s.pred(q, p)
		q.sql.WriteString(" AND ")
		s.pred(q, p)
	}
}

// limit writes nothing, LIMIT, OFFSET, both, or FETCH FIRST.
func (s *fzState) limit(q *fzQuery) {
	switch s.d.n(7) {
	case 0, 1:
	case 2:
		q.sql.WriteString(" LIMIT ")
		s.count(q)
	case 3:
		q.sql.WriteString(" OFFSET ")
		s.count(q)
	case 4:
		q.sql.WriteString(" FETCH FIRST ")
		s.count(q)
		q.sql.WriteString(" ROWS ONLY")
	case 5:
		q.sql.WriteString([]string{" LIMIT ALL", " LIMIT NULL"}[s.d.n(2)])
	default:
		q.sql.WriteString(" LIMIT ")
		s.count(q)
		q.sql.WriteString(" OFFSET ")
		s.count(q)
	}
}

func (s *fzState) query() *fzQuery {
	q := &fzQuery{}
	if s.d.n(4) == 0 {
		// Joins of t1 and t2.
		q.sql.WriteString([]string{
			"SELECT t1.id, t2.k2, t2.v FROM t1 JOIN t2 ON t2.k1 = t1.a",
			"SELECT t1.id, t2.k1, t2.k2 FROM t1 LEFT JOIN t2 ON t2.ref = t1.id",
			"SELECT t1.id, t2.v FROM t1 LEFT JOIN t2 ON t2.ref = t1.id AND t2.k1 = t1.a",
			"SELECT count(*) FROM t1 JOIN t2 ON t2.ref = t1.id",
			"SELECT t2.k1, t2.k2, t1.b FROM t2 JOIN t1 ON t1.id = t2.ref",
		}[s.d.n(5)])
		if s.d.n(2) == 0 {
			q.sql.WriteString(" WHERE ")
			s.pred(q, "t1")
		}
		if s.d.n(2) == 0 {
			q.sql.WriteString([]string{" ORDER BY t1.id", " ORDER BY t1.a DESC NULLS LAST", " ORDER BY t1.b, t1.id DESC"}[s.d.n(3)])
		}
		s.limit(q)
		return q
	}
	q.sql.WriteString([]string{"SELECT * FROM t1", "SELECT id, a FROM t1", "SELECT id, b, c FROM t1", "SELECT count(*) FROM t1"}[s.d.n(4)])
	if s.d.n(4) != 0 {
		q.sql.WriteString(" WHERE ")
		s.pred(q, "")
	}
	if s.d.n(2) == 0 {
		q.sql.WriteString([]string{" ORDER BY a", " ORDER BY a DESC, c", " ORDER BY b NULLS FIRST", " ORDER BY c DESC NULLS LAST, a", " ORDER BY id"}[s.d.n(5)])
	}
	s.limit(q)
	return q
}

func (s *fzState) subscribe() {
	q := s.query()
	opts := query.DefaultOptions()
	opts.Catalog = s.cat
	plan, refusal, err := query.Compile(context.Background(), q.sql.String(), q.binds, opts)
	if err != nil {
		s.t.Fatalf("compile %q: %v", q.sql.String(), err)
	}
	if refusal != nil {
		fmt.Fprintf(&s.out, "refused at compile %q: %s\n", q.sql.String(), refusal.Code)
		return
	}
	s.nextSub++
	mode := ModeRows
	if s.d.n(6) == 0 {
		mode = ModeTouch
	}
	s.subs[s.nextSub] = &fzSub{plan: plan, mode: mode, rows: map[Key][]any{}}
	fmt.Fprintf(&s.out, "subscribe %d %s %q %d binds\n", s.nextSub, mode, q.sql.String(), len(q.binds))
	s.core.Subscribe(s.nextSub, plan, mode)
	s.collect()
}

func (s *fzState) unsubscribe() {
	var live []SubID
	for id, sb := range s.subs {
		if !sb.gone {
			live = append(live, id)
		}
	}
	if len(live) == 0 {
		return
	}
	slices.Sort(live)
	id := live[s.d.n(len(live))]
	s.subs[id].gone = true
	fmt.Fprintf(&s.out, "unsubscribe %d\n", id)
	s.core.Unsubscribe(id)
	s.collect()
}

// --- the tables ---

// state returns the tables as a snapshot that sees visible sees them:
// rows by their key's text.
func (s *fzState) state(visible func(fzTxn) bool) []map[string][]*string {
	st := make([]map[string][]*string, len(s.tables))
	for i := range st {
		st[i] = map[string][]*string{}
	}
	for _, tx := range s.history {
		if visible(tx) {
			for _, ch := range tx.changes {
				s.applyTo(st, ch)
			}
		}
	}
	return st
}

func (s *fzState) tableOf(oid uint32) int {
	for i, tb := range s.tables {
		if tb.cat.OID == oid {
			return i
		}
	}
	s.t.Fatalf("no table %d", oid)
	return -1
}

func fzText(r change.Row) []*string {
	out := make([]*string, len(r))
	for i, v := range r {
		if v.Kind == change.Text {
			x := string(v.Data)
			out[i] = &x
		}
	}
	return out
}

func (s *fzState) keyText(ti int, r []*string) string {
	var b strings.Builder
	for i, c := range s.tables[ti].rel.Columns {
		if c.Key {
			b.WriteString(*r[i])
			b.WriteByte('/')
		}
	}
	return b.String()
}

func (s *fzState) applyTo(st []map[string][]*string, ch change.Change) {
	if ch.Op == change.OpTruncate {
		for _, rel := range ch.Truncate.Rels {
			st[s.tableOf(rel.OID)] = map[string][]*string{}
		}
		return
	}
	ti := s.tableOf(ch.Rel.OID)
	rows := st[ti]
	var old []*string
	if ch.Old != nil {
		k := s.keyText(ti, fzText(ch.Old))
		old = rows[k]
		delete(rows, k)
	}
	if ch.Op == change.OpDelete {
		return
	}
	nr := fzText(ch.New)
	if old == nil {
		old = rows[s.keyText(ti, nr)]
	}
	for i, v := range ch.New {
		if v.Kind == change.Unchanged {
			nr[i] = old[i]
		}
	}
	rows[s.keyText(ti, nr)] = nr
}

// commit writes a transaction of one to four changes and applies it, in
// fragments, to the core.
func (s *fzState) commit() {
	st := s.state(func(fzTxn) bool { return true })
	var changes []change.Change
	val := func(k int) change.Value {
		switch s.d.n(10) {
		case 0:
			return change.Value{Kind: change.Null}
		case 1:
			return change.TextValue([]string{"2147483647", "-2147483648", "9223372036854775807"}[s.d.n(3)])
		}
		return change.TextValue(strconv.Itoa(s.d.n(k) - 1))
	}
	nonNull := func(k int) change.Value { return change.TextValue(strconv.Itoa(s.d.n(k))) }
	for i, n := 0, 1+s.d.n(4); i < n; i++ {
		ti := s.d.n(3) % 2 // t1 twice as often
		tb := s.tables[ti]
		if s.d.n(24) == 0 {
			changes = append(changes, change.Change{Op: change.OpTruncate, Truncate: &change.Truncate{Rels: []*change.Relation{tb.rel}}})
			s.applyTo(st, changes[len(changes)-1])
			continue
		}
		row := func() change.Row {
			if ti == 0 {
				c := val(6)
				if c.Kind == change.Text && string(c.Data) == "-2147483648" {
					c = change.TextValue("-9223372036854775808")
				}
				b := change.TextValue("x" + strconv.Itoa(s.d.n(4)))
				if s.d.n(5) == 0 {
					b = change.Value{Kind: change.Null}
				}
				a := val(6)
				if a.Kind == change.Text && string(a.Data) == "9223372036854775807" {
					a = change.TextValue("2147483647")
				}
				return change.Row{nonNull(12), a, b, c}
			}
			ref := val(12)
			if ref.Kind == change.Text && string(ref.Data) == "9223372036854775807" {
				ref = change.Value{Kind: change.Null}
			}
			return change.Row{nonNull(6), nonNull(3), ref, change.TextValue("v" + strconv.Itoa(s.d.n(3)))}
		}
		keys := make([]string, 0, len(st[ti]))
		for k := range st[ti] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		keyOnly := func(r []*string) change.Row {
			out := make(change.Row, len(r))
			for j, c := range tb.rel.Columns {
				if c.Key {
					out[j] = change.TextValue(*r[j])
				}
			}
			return out
		}
		var ch change.Change
		switch op := s.d.n(8); {
		case op < 3 || len(keys) == 0:
			nr := row()
			if st[ti][s.keyText(ti, fzText(nr))] != nil {
				continue // the key is taken: PostgreSQL would refuse it
			}
			ch = change.Change{Op: change.OpInsert, Rel: tb.rel, New: nr}
		case op < 6:
			old := st[ti][keys[s.d.n(len(keys))]]
			nr := row()
			if s.d.n(3) != 0 {
				// The key stays.
				for j, c := range tb.rel.Columns {
					if c.Key {
						nr[j] = change.TextValue(*old[j])
					}
				}
			} else if st[ti][s.keyText(ti, fzText(nr))] != nil {
				continue
			}
			ch = change.Change{Op: change.OpUpdate, Rel: tb.rel, New: nr}
			if s.keyText(ti, fzText(nr)) != s.keyText(ti, old) {
				ch.Old = keyOnly(old)
			}
			if ti == 0 && old[2] != nil && s.d.n(3) == 0 {
				ch.New[2] = change.Value{Kind: change.Unchanged} // b TOASTed, not sent
			}
		default:
			ch = change.Change{Op: change.OpDelete, Rel: tb.rel, Old: keyOnly(st[ti][keys[s.d.n(len(keys))]])}
		}
		changes = append(changes, ch)
		s.applyTo(st, ch)
	}
	s.xid++
	s.lsn += 0x10
	tx := fzTxn{xid: s.xid, lsn: s.lsn, changes: changes}
	// Touch-mode subscriptions accepted before it must be touched at its
	// commit if it changes their result.
	type touchWant struct {
		id  SubID
		was string
	}
	var touches []touchWant
	now := s.state(func(fzTxn) bool { return true })
	for _, id := range s.liveIDs() {
		if sb := s.subs[id]; sb.mode == ModeTouch && sb.accepted {
			touches = append(touches, touchWant{id, s.oracleText(sb.plan, now)})
		}
	}
	s.history = append(s.history, tx)
	fmt.Fprintf(&s.out, "commit xid %d at %v: %d changes\n", tx.xid, tx.lsn, len(changes))
	frag := 1 + s.d.n(3)
	for i, fr := 0, 0; i == 0 || i < len(changes); i, fr = i+frag, fr+1 {
		end := min(i+frag, len(changes))
		s.core.Apply(&change.Txn{XID: tx.xid, CommitLSN: tx.lsn, Fragment: fr, Last: end == len(changes), Changes: changes[i:end]})
		s.collect()
	}
	after := s.state(func(fzTxn) bool { return true })
	for _, w := range touches {
		sb := s.subs[w.id]
		if sb.gone {
			continue
		}
		if s.oracleText(sb.plan, after) != w.was && !slices.Contains(sb.touched, tx.lsn) {
			s.t.Errorf("touch sub %d (%s): transaction at %v changed its result and it was not touched", w.id, sb.plan.Text, tx.lsn)
		}
	}
}

// --- reads ---

// land answers one pending read: at a snapshot that sees every
// transaction the core had applied when it asked, and maybe some after
// (or one the stream has not reached yet), or with a failure.
func (s *fzState) land() {
	if len(s.reads) == 0 {
		return
	}
	ids := make([]ReadID, 0, len(s.reads))
	for id := range s.reads {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	r := s.reads[ids[s.d.n(len(ids))]]
	var at []change.LSN
	for _, tx := range s.history {
		if tx.lsn > r.asked {
			at = append(at, tx.lsn+1)
		}
	}
	at = append(at, max(r.asked, s.lsn)+1, s.lsn+0x30)
	s.answer(r, at[s.d.n(len(at))])
}

func (s *fzState) answer(r *fzRead, at change.LSN) {
	delete(s.reads, r.req.ID)
	if s.failReads && s.d.n(8) == 0 {
		fmt.Fprintf(&s.out, "read %d fails\n", r.req.ID)
		fail := classifyRead(errors.New("fuzz: the read failed"))
		s.core.ReadDone(r.req.ID, ReadResult{Failed: &fail})
		s.collect()
		return
	}
	visible := func(tx fzTxn) bool { return tx.lsn < at }
	snap := Snapshot{LSN: at, Xmax: uint64(s.xid) + 1}
	for _, tx := range s.history {
		if !visible(tx) {
			snap.Xip = append(snap.Xip, uint64(tx.xid))
		}
	}
	snap.Xmin = snap.Xmax
	if len(snap.Xip) > 0 {
		snap.Xmin = snap.Xip[0]
	}
	st := s.state(visible)
	plan := r.req.Plan
	var rows []query.Row
	if len(r.req.Sources) == 1 && len(plan.Sources) > 1 {
		// One source of a join: every row of its table (a superset of what
		// the read's SQL selects; the core keeps what it needs).
		si := r.req.Sources[0]
		ti := s.tableOf(plan.Sources[si].Table.OID)
		keys := make([]string, 0, len(st[ti]))
		for k := range st[ti] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			row := make(query.Row, len(plan.Sources))
			row[si] = s.srcVals(plan.Sources[si], st[ti][k])
			rows = append(rows, row)
		}
	} else {
		rows, _ = s.evaluate(plan, st)
		if r.req.Want > 0 && int64(len(rows)) > r.req.Want {
			rows = rows[:r.req.Want]
		}
	}
	if r.req.RowLimit > 0 && len(rows) > r.req.RowLimit {
		fmt.Fprintf(&s.out, "read %d over the row limit\n", r.req.ID)
		fail := classifyRead(fmt.Errorf("fuzz: %w", ErrRowLimit))
		s.core.ReadDone(r.req.ID, ReadResult{Failed: &fail})
		s.collect()
		return
	}
	fmt.Fprintf(&s.out, "read %d lands at %v: %d rows\n", r.req.ID, at, len(rows))
	s.core.ReadDone(r.req.ID, ReadResult{Snapshot: snap, Rows: rows, Complete: r.req.Want == 0 || int64(len(rows)) < r.req.Want})
	s.collect()
}

// settle lands every read and moves the stream past every snapshot; then
// every subscription is accepted or gone and each rows-mode one is exact.
func (s *fzState) settle() {
	s.lsn += 0x100
	s.core.Advance(s.lsn)
	s.collect()
	for round := 0; len(s.reads) > 0; round++ {
		if round > 100 {
			s.t.Fatalf("reads still asked for after 100 rounds of answering them")
		}
		ids := make([]ReadID, 0, len(s.reads))
		for id := range s.reads {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			if r := s.reads[id]; r != nil {
				s.answer(r, s.lsn+1)
			}
		}
		s.lsn += 0x10
		s.core.Advance(s.lsn)
		s.collect()
	}
	fmt.Fprintf(&s.out, "settled at %v\n", s.core.Position())
	st := s.state(func(fzTxn) bool { return true })
	for _, id := range s.liveIDs() {
		sb := s.subs[id]
		if !sb.accepted {
			s.t.Errorf("sub %d (%s): neither accepted nor refused with every read answered", id, sb.plan.Text)
			continue
		}
		if sb.mode != ModeRows {
			continue
		}
		if got, want := sb.text(), s.oracleText(sb.plan, st); got != want {
			s.t.Errorf("sub %d (%s) at %v:\n got %s\nwant %s", id, sb.plan.Text, s.core.Position(), got, want)
		}
	}
}

// --- the oracle ---

func (s *fzState) srcVals(src *query.Source, r []*string) []any {
	ti := s.tableOf(src.Table.OID)
	out := make([]any, len(src.Columns))
	for j := range src.Columns {
		_, i := s.tables[ti].cat.Column(src.Columns[j].Name)
		if r[i] == nil {
			continue
		}
		v, err := change.Decode(src.Columns[j].Type, change.TextValue(*r[i]), nil)
		if err != nil {
			s.t.Fatalf("decode %q: %v", *r[i], err)
		}
		out[j] = v
	}
	return out
}

// evaluate returns the plan's result over st: the joined rows its filter
// keeps, in CompareWindow order (for every plan: it is a total order),
// with their keys. OFFSET and LIMIT are not applied.
func (s *fzState) evaluate(p *query.Plan, st []map[string][]*string) ([]query.Row, []Key) {
	type kr struct {
		row query.Row
		key string
	}
	var out []kr
	var rec func(i int, cur query.Row, key []byte)
	rec = func(i int, cur query.Row, key []byte) {
		if i == len(p.Sources) {
			if p.Eval(cur) == query.True {
				out = append(out, kr{slices.Clone(cur), string(key)})
			}
			return
		}
		src := p.Sources[i]
		ti := s.tableOf(src.Table.OID)
		keys := make([]string, 0, len(st[ti]))
		for k := range st[ti] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		found := false
		for _, k := range keys {
			vals := s.srcVals(src, st[ti][k])
			ok := true
			for _, on := range src.On {
				a, other := vals[on.Column], cur[on.Other]
				if a == nil || other == nil || other[on.OtherColumn] == nil ||
					string(query.AppendKey(nil, src.Columns[on.Column].TypeOID, a)) !=
						string(query.AppendKey(nil, p.Sources[on.Other].Columns[on.OtherColumn].TypeOID, other[on.OtherColumn])) {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
			found = true
			k := key
			for j := 0; j < src.KeyN; j++ {
				k = query.AppendKey(k, src.Columns[j].TypeOID, vals[j])
			}
			cur[i] = vals
			rec(i+1, cur, k)
			cur[i] = nil
		}
		if !found && src.Join == query.JoinLeft {
			k := key
			for j := 0; j < src.KeyN; j++ {
				k = query.AppendKey(k, 0, nil)
			}
			rec(i+1, cur, k)
		}
	}
	rec(0, make(query.Row, len(p.Sources)), nil)
	slices.SortStableFunc(out, func(a, b kr) int { return p.CompareWindow(a.row, b.row) })
	rows := make([]query.Row, len(out))
	keys := make([]Key, len(out))
	for i, x := range out {
		rows[i], keys[i] = x.row, Key(x.key)
	}
	return rows, keys
}

// oracleText is the plan's result over st in the form fzSub.text gives.
func (s *fzState) oracleText(p *query.Plan, st []map[string][]*string) string {
	rows, keys := s.evaluate(p, st)
	if p.Count {
		return fmt.Sprintf("count %d", len(rows))
	}
	ordered := len(p.Order) > 0 || p.Limit >= 0 || p.Offset > 0
	if ordered {
		lo := int(min(p.Offset, int64(len(rows))))
		hi := int(min(p.WindowEnd(0), int64(len(rows))))
		rows, keys = rows[lo:hi], keys[lo:hi]
	}
	lines := make([]string, len(rows))
	for i := range rows {
		lines[i] = fzLine(keys[i], p.Project(rows[i]))
	}
	if !ordered {
		slices.Sort(lines)
	}
	return strings.Join(lines, "\n")
}

func fzLine(k Key, vals []any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%x:", string(k))
	for _, v := range vals {
		fmt.Fprintf(&b, " %T(%v)", v, v)
	}
	return b.String()
}

// text is what the subscriber holds, in the oracle's form.
func (sb *fzSub) text() string {
	if sb.plan.Count {
		return fmt.Sprintf("count %d", sb.count)
	}
	ordered := len(sb.plan.Order) > 0 || sb.plan.Limit >= 0 || sb.plan.Offset > 0
	var lines []string
	if ordered {
		for _, k := range sb.order {
			lines = append(lines, fzLine(k, sb.rows[k]))
		}
	} else {
		for k, v := range sb.rows {
			lines = append(lines, fzLine(k, v))
		}
		slices.Sort(lines)
	}
	return strings.Join(lines, "\n")
}

// --- outputs ---

func (s *fzState) liveIDs() []SubID {
	var ids []SubID
	for id, sb := range s.subs {
		if !sb.gone {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// collect takes the core's Ready: reads to answer, outputs checked and
// applied to each subscriber's state.
func (s *fzState) collect() {
	rd := s.core.Ready()
	for _, r := range rd.Reads {
		if s.reads[r.ID] != nil {
			s.t.Errorf("read %d asked for twice", r.ID)
		}
		s.reads[r.ID] = &fzRead{req: r, asked: s.core.Position()}
		fmt.Fprintf(&s.out, "read %d asked: %d sources, want %d\n", r.ID, len(r.Sources), r.Want)
	}
	for _, o := range rd.Outputs {
		sb := s.subs[o.Sub]
		fmt.Fprintf(&s.out, "sub %d %s at %v: %d rows, %d removed, %d in order, count %d, code %q\n",
			o.Sub, o.Kind, o.LSN, len(o.Rows), len(o.Removed), len(o.Order), o.Count, o.Code)
		switch {
		case sb == nil:
			s.t.Errorf("output %s for sub %d, never subscribed", o.Kind, o.Sub)
			continue
		case sb.gone:
			s.t.Errorf("output %s for sub %d after it was gone", o.Kind, o.Sub)
			continue
		}
		switch o.Kind {
		case OutputAccepted:
			if sb.accepted {
				s.t.Errorf("sub %d accepted twice", o.Sub)
			}
			sb.accepted, sb.lsn, sb.count = true, o.LSN, o.Count
			for _, r := range o.Rows {
				if _, dup := sb.rows[r.Key]; dup {
					s.t.Errorf("sub %d accepted with key %x twice", o.Sub, string(r.Key))
				}
				sb.rows[r.Key] = r.Values
				sb.order = append(sb.order, r.Key)
			}
		case OutputDelta, OutputTouched:
			if !sb.accepted {
				s.t.Errorf("sub %d: %s before accepted", o.Sub, o.Kind)
			}
			if o.LSN <= sb.lsn {
				s.t.Errorf("sub %d: %s at %v, not after %v", o.Sub, o.Kind, o.LSN, sb.lsn)
			}
			sb.lsn = o.LSN
			if o.Kind == OutputTouched {
				if sb.mode != ModeTouch {
					s.t.Errorf("sub %d: touched in rows mode", o.Sub)
				}
				sb.touched = append(sb.touched, o.LSN)
				continue
			}
			if sb.mode != ModeRows {
				s.t.Errorf("sub %d: delta in touch mode", o.Sub)
			}
			if err := checkMoves(sb.order, o); err != nil {
				s.t.Errorf("sub %d: %v", o.Sub, err)
			}
			sb.count = o.Count
			for _, k := range o.Removed {
				if _, ok := sb.rows[k]; !ok {
					s.t.Errorf("sub %d: delta removes key %x, not held", o.Sub, string(k))
				}
				delete(sb.rows, k)
				sb.order = slices.DeleteFunc(sb.order, func(x Key) bool { return x == k })
			}
			for _, r := range o.Rows {
				if _, ok := sb.rows[r.Key]; !ok {
					sb.order = append(sb.order, r.Key)
				}
				sb.rows[r.Key] = r.Values
			}
			if o.Order != nil {
				seen := map[Key]bool{}
				for _, k := range o.Order {
					if _, ok := sb.rows[k]; !ok || seen[k] {
						s.t.Errorf("sub %d: order names key %x, not held or twice", o.Sub, string(k))
					}
					seen[k] = true
				}
				if len(o.Order) != len(sb.rows) {
					s.t.Errorf("sub %d: order lists %d keys, %d rows held", o.Sub, len(o.Order), len(sb.rows))
				}
				sb.order = slices.Clone(o.Order)
			}
		case OutputRefused, OutputEnded:
			if o.Kind == OutputRefused && sb.accepted || o.Kind == OutputEnded && !sb.accepted {
				s.t.Errorf("sub %d: %s after accepted = %v", o.Sub, o.Kind, sb.accepted)
			}
			sb.gone = true
			switch {
			case o.Code == CodeRowLimit && s.rowLimit > 0:
			case o.Code == CodeReadFailed && s.failReads:
			default:
				s.t.Errorf("sub %d (%s): %s with code %q: %s", o.Sub, sb.plan.Text, o.Kind, o.Code, o.Reason)
			}
		default:
			s.t.Errorf("sub %d: output of kind %d", o.Sub, o.Kind)
		}
	}
}
