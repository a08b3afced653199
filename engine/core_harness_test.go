package engine

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

// fakeCatalog describes tables for query.Compile. It is not PostgreSQL: it
// only says what shape the tables have.
type fakeCatalog struct {
	tables map[string]*query.Table
}

func (c *fakeCatalog) Table(_ context.Context, schema, name string) (*query.Table, error) {
	if t, ok := c.tables[schema+"."+name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("table %s.%s: %w", schema, name, query.ErrNoTable)
}

var typeOIDs = map[string]uint32{
	"int2": change.OIDInt2, "int4": change.OIDInt4, "int8": change.OIDInt8, "text": change.OIDText,
	"varchar": change.OIDVarchar, "bool": change.OIDBool, "numeric": change.OIDNumeric,
	"float8": change.OIDFloat8, "date": change.OIDDate, "timestamptz": change.OIDTimestamptz,
	"jsonb": change.OIDJSONB,
}

var cCollation = query.Collation{OID: 950, Name: "C", Provider: 'c', Collate: "C", Deterministic: true}

// hrow is a row of the harness's database: text values (nil: NULL) in
// the table's column order.
type hrow []*string

// htable is a table of the harness's database.
type htable struct {
	name string
	rel  *change.Relation
	cat  *query.Table
}

// htxn is a committed transaction of the harness's database.
type htxn struct {
	xid     uint32
	lsn     change.LSN
	changes []change.Change
}

// harness drives a Core against an in-memory database whose every state
// (at any snapshot) it can compute, and checks each live subscription's
// result, as rebuilt from the outputs, against the query evaluated over
// the database by brute force.
type harness struct {
	seen    func(Output) // when set, called with every output collected
	t       testing.TB
	cat     *fakeCatalog
	core    *Core
	tables  map[string]*htable
	byOID   map[uint32]*htable
	history []htxn
	pending []change.Change // the transaction being written
	live    map[string]map[string]hrow
	nextOID uint32
	nextXID uint32
	lsn     change.LSN

	plans   map[SubID]*query.Plan
	models  map[SubID]*model
	reads   map[ReadID]ReadRequest
	readIDs []ReadID
	keyName map[string]string
	check   bool
	// verified counts checks of single-table (false) and join (true) subscriptions.
	verified map[bool]int
	// clock is the database's now() as last given to the core (Clock).
	clock    change.Timestamp
	clockSet bool
	out      strings.Builder

	// readOrder, when set, reorders (or repeats) the rows of every read
	// answer delivers (PostgreSQL returns rows in no promised order).
	readOrder func([]query.Row) []query.Row
}

// model is what a subscriber has been told.
type model struct {
	mode     Mode
	accepted bool
	gone     bool
	rows     []ResultRow
	count    int64
}

func newHarness(t testing.TB, opts CoreOptions) *harness {
	return &harness{
		t: t, cat: &fakeCatalog{tables: map[string]*query.Table{}}, core: NewCore(opts),
		tables: map[string]*htable{}, byOID: map[uint32]*htable{}, nextOID: 16384, nextXID: 700,
		plans: map[SubID]*query.Plan{}, models: map[SubID]*model{}, reads: map[ReadID]ReadRequest{},
		keyName: map[string]string{}, check: true, verified: map[bool]int{},
	}
}

// createTable adds a table: each column "name type [pk]".
func (h *harness) createTable(name string, cols []string) {
	h.nextOID++
	qt := &query.Table{OID: h.nextOID, Schema: "public", Name: name}
	rel := &change.Relation{OID: h.nextOID, Schema: "public", Table: name, ReplicaIdentity: 'd'}
	for _, c := range cols {
		f := strings.Fields(c)
		oid, ok := typeOIDs[f[1]]
		if !ok {
			h.t.Fatalf("unknown type %q", f[1])
		}
		typ, _ := change.BuiltinType(oid)
		col := query.Column{Name: f[0], TypeOID: oid, DeclaredOID: oid, TypeMod: -1, Type: typ}
		if oid == change.OIDText || oid == change.OIDVarchar {
			col.Collation = cCollation
		}
		pk := len(f) > 2 && f[2] == "pk"
		if pk {
			qt.PrimaryKey = append(qt.PrimaryKey, f[0])
			col.NotNull = true
		}
		qt.Columns = append(qt.Columns, col)
		rel.Columns = append(rel.Columns, change.Column{Name: f[0], TypeOID: oid, TypeMod: -1, Key: pk})
	}
	ht := &htable{name: name, rel: rel, cat: qt}
	h.tables[name] = ht
	h.byOID[qt.OID] = ht
	h.cat.tables["public."+name] = qt
}

func (h *harness) compile(sql string, binds []query.Bind) (*query.Plan, *query.Refusal) {
	opts := query.DefaultOptions()
	opts.Catalog = h.cat
	plan, r, err := query.Compile(context.Background(), sql, binds, opts)
	if err != nil {
		h.t.Fatalf("compile %q: %v", sql, err)
	}
	return plan, r
}

func (h *harness) subscribe(id SubID, sql string, mode Mode) {
	plan, r := h.compile(sql, nil)
	if r != nil {
		h.t.Fatalf("compile %q: refused: %v", sql, r)
	}
	h.plans[id] = plan
	h.models[id] = &model{mode: mode}
	h.core.Subscribe(id, plan, mode)
	h.collect()
}

func (h *harness) unsubscribe(id SubID) {
	h.core.Unsubscribe(id)
	if m := h.models[id]; m != nil {
		m.gone = true
	}
	h.collect()
}

// key of a row of ht, as the core encodes it.
func (h *harness) rowKey(ht *htable, r hrow) string {
	var b []byte
	for _, k := range ht.cat.PrimaryKey {
		col, i := ht.cat.Column(k)
		b = query.AppendKey(b, col.TypeOID, h.decode(col, r[i]))
	}
	return string(b)
}

func (h *harness) decode(col *query.Column, s *string) any {
	if s == nil {
		return nil
	}
	v, err := change.Decode(col.Type, change.TextValue(*s), nil)
	if err != nil {
		h.t.Fatalf("decode %q as %s: %v", *s, col.Type.Name, err)
	}
	return v
}

// now returns the database with every committed transaction (shared:
// don't change it).
func (h *harness) now() map[string]map[string]hrow {
	if h.live == nil {
		h.live = h.state(func(htxn) bool { return true })
	}
	return h.live
}

// state returns the database as a snapshot sees it: per table, rows by key.
func (h *harness) state(visible func(htxn) bool) map[string]map[string]hrow {
	st := map[string]map[string]hrow{}
	for name := range h.tables {
		st[name] = map[string]hrow{}
	}
	for _, tx := range h.history {
		if !visible(tx) {
			continue
		}
		for _, ch := range tx.changes {
			h.applyTo(st, ch)
		}
	}
	return st
}

func toH(r change.Row) hrow {
	out := make(hrow, len(r))
	for i, v := range r {
		if v.Kind == change.Text {
			s := string(v.Data)
			out[i] = &s
		}
	}
	return out
}

func (h *harness) applyTo(st map[string]map[string]hrow, ch change.Change) {
	switch ch.Op {
	case change.OpTruncate:
		for _, rel := range ch.Truncate.Rels {
			st[h.byOID[rel.OID].name] = map[string]hrow{}
		}
		return
	case change.OpInsert, change.OpUpdate, change.OpDelete:
	default:
		return
	}
	ht := h.byOID[ch.Rel.OID]
	rows := st[ht.name]
	var old hrow
	if ch.Old != nil {
		k := h.rowKey(ht, toH(ch.Old))
		old = rows[k]
		delete(rows, k)
	}
	if ch.Op == change.OpDelete {
		return
	}
	nr := toH(ch.New)
	if old == nil {
		k := h.rowKey(ht, nr)
		old = rows[k]
	}
	for i, v := range ch.New {
		if v.Kind == change.Unchanged {
			nr[i] = old[i]
		}
	}
	k := h.rowKey(ht, nr)
	rows[k] = nr
	h.keyName[k] = h.fmtKey(ht, nr)
}

func (h *harness) fmtKey(ht *htable, r hrow) string {
	var parts []string
	for _, k := range ht.cat.PrimaryKey {
		_, i := ht.cat.Column(k)
		parts = append(parts, deref(r[i]))
	}
	return strings.Join(parts, ",")
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}

// qrow builds a source's values of a plan's row from a database row.
func (h *harness) srcVals(src *query.Source, ht *htable, r hrow) []any {
	out := make([]any, len(src.Columns))
	for j, c := range src.Columns {
		_, i := ht.cat.Column(c.Name)
		out[j] = h.decode(&src.Columns[j], r[i])
	}
	return out
}

// joined enumerates the joined rows of a plan over a database state (before
// the filter), with their keys.
func (h *harness) joined(plan *query.Plan, st map[string]map[string]hrow) ([]query.Row, []string) {
	var rows []query.Row
	var keys []string
	var rec func(i int, cur query.Row, key string)
	rec = func(i int, cur query.Row, key string) {
		if i == len(plan.Sources) {
			rows = append(rows, slices.Clone(cur))
			keys = append(keys, key)
			return
		}
		src := plan.Sources[i]
		ht := h.tables[src.Table.Name]
		tkeys := make([]string, 0, len(st[ht.name]))
		for k := range st[ht.name] {
			tkeys = append(tkeys, k)
		}
		slices.Sort(tkeys)
		if src.Join == query.JoinAnti {
			// NOT IN (subquery), by PostgreSQL's rules.
			on := src.On[0]
			var x any
			if cur[on.Other] != nil {
				x = cur[on.Other][on.OtherColumn]
			}
			kept, nulls, match := 0, false, false
			for _, k := range tkeys {
				vals := h.srcVals(src, ht, st[ht.name][k])
				if plan.EvalSource(i, vals) != query.True {
					continue
				}
				kept++
				switch a := vals[on.Column]; {
				case a == nil:
					nulls = true
				case x != nil && string(query.AppendKey(nil, src.Columns[on.Column].TypeOID, a)) ==
					string(query.AppendKey(nil, plan.Sources[on.Other].Columns[on.OtherColumn].TypeOID, x)):
					match = true
				}
			}
			if kept == 0 || x != nil && !nulls && !match {
				rec(i+1, cur, key)
			}
			return
		}
		found := false
		for _, k := range tkeys {
			vals := h.srcVals(src, ht, st[ht.name][k])
			ok := true
			for _, on := range src.On {
				a, b := vals[on.Column], cur[on.Other]
				if b == nil || a == nil || b[on.OtherColumn] == nil {
					ok = false
					break
				}
				oa := query.AppendKey(nil, src.Columns[on.Column].TypeOID, a)
				ob := query.AppendKey(nil, plan.Sources[on.Other].Columns[on.OtherColumn].TypeOID, b[on.OtherColumn])
				if string(oa) != string(ob) {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
			if src.Join == query.JoinSemi {
				// IN (subquery): once, if any row of it matches.
				if plan.EvalSource(i, vals) == query.True {
					found = true
				}
				continue
			}
			found = true
			cur[i] = vals
			rec(i+1, cur, key+k)
			cur[i] = nil
		}
		if found && src.Join == query.JoinSemi {
			rec(i+1, cur, key)
		}
		if !found && src.Join == query.JoinLeft {
			nk := ""
			for j := 0; j < src.KeyN; j++ {
				nk += string(query.AppendKey(nil, 0, nil))
			}
			cur[i] = nil
			rec(i+1, cur, key+nk)
		}
	}
	rec(0, make(query.Row, len(plan.Sources)), "")
	return rows, keys
}

// oracle evaluates a plan over a database state by brute force.
func (h *harness) oracle(plan *query.Plan, st map[string]map[string]hrow) ([]ResultRow, int64) {
	rows, keys := h.joined(plan, st)
	type kr struct {
		q   query.Row
		key string
	}
	var kept []kr
	for i, r := range rows {
		if h.keeps(plan, r, false) {
			kept = append(kept, kr{r, keys[i]})
		}
	}
	if plan.Count {
		return nil, int64(len(kept))
	}
	if plan.Agg != nil {
		var qs []query.Row
		for _, k := range kept {
			qs = append(qs, k.q)
		}
		return aggOracle(plan, qs), 0
	}
	sort.SliceStable(kept, func(i, j int) bool {
		if c := plan.CompareWindow(kept[i].q, kept[j].q); c != 0 {
			return c < 0
		}
		return kept[i].key < kept[j].key
	})
	ordered := len(plan.Order) > 0 || plan.Limit >= 0 || plan.Offset > 0
	if ordered {
		lo := min(int(plan.Offset), len(kept))
		kept = kept[lo:]
		if plan.Limit >= 0 && int(plan.Limit) < len(kept) {
			kept = kept[:plan.Limit]
		}
	}
	var out []ResultRow
	for _, k := range kept {
		out = append(out, ResultRow{Key: Key(k.key), Values: plan.Project(k.q)})
	}
	if !ordered {
		slices.SortFunc(out, func(a, b ResultRow) int { return strings.Compare(string(a.Key), string(b.Key)) })
	}
	return out, 0
}

// collect takes the core's Ready, records it and applies outputs to the
// subscribers' models.
func (h *harness) collect() {
	rd := h.core.Ready()
	for _, r := range rd.Reads {
		h.reads[r.ID] = r
		h.readIDs = append(h.readIDs, r.ID)
		fmt.Fprintf(&h.out, "read %d sources=%v want=%d\n", r.ID, r.Sources, r.Want)
	}
	for _, o := range rd.Outputs {
		if h.seen != nil {
			h.seen(o)
		}
		h.out.WriteString(h.fmtOutput(o))
		h.out.WriteByte('\n')
		m := h.models[o.Sub]
		if m == nil {
			h.t.Fatalf("output for unknown sub %d", o.Sub)
		}
		if m.gone {
			h.t.Errorf("output %v for sub %d after it was gone", o.Kind, o.Sub)
		}
		switch o.Kind {
		case OutputAccepted:
			if m.accepted {
				h.t.Errorf("sub %d accepted twice", o.Sub)
			}
			m.accepted = true
			m.rows = slices.Clone(o.Rows)
			if o.Held.Len() > 0 && o.Rows != nil {
				h.t.Errorf("sub %d: an Accepted with both Rows and Held", o.Sub)
			}
			for k, vals := range o.Held.All() {
				m.rows = append(m.rows, ResultRow{Key: k, Values: slices.Clone(vals)})
			}
			if m.mode == ModeRowsUnordered && len(h.plans[o.Sub].Order) == 0 {
				// In no particular order: the model keeps the result by
				// key, as it does after a Delta of an unordered query.
				slices.SortFunc(m.rows, func(a, b ResultRow) int { return strings.Compare(string(a.Key), string(b.Key)) })
			}
			m.count = o.Count
		case OutputDelta:
			if !m.accepted {
				h.t.Errorf("delta for sub %d before accepted", o.Sub)
			}
			if o.Order != nil || o.Moves != nil {
				prev := make([]Key, len(m.rows))
				for i, r := range m.rows {
					prev[i] = r.Key
				}
				if err := checkMoves(prev, o); err != nil {
					h.t.Errorf("sub %d: %v", o.Sub, err)
				}
			}
			m.count = o.Count
			for _, kc := range o.KeyChanges {
				// A key change names a removed row and an upserted one
				// the result did not hold.
				held := slices.ContainsFunc(m.rows, func(r ResultRow) bool { return r.Key == kc.To })
				up := slices.ContainsFunc(o.Rows, func(r ResultRow) bool { return r.Key == kc.To })
				if !slices.Contains(o.Removed, kc.From) || !up || held {
					h.t.Errorf("sub %d: key change %s->%s is not a removed row and a new one", o.Sub, h.fmtKeyB(kc.From), h.fmtKeyB(kc.To))
				}
			}
			for _, k := range o.Removed {
				i := slices.IndexFunc(m.rows, func(r ResultRow) bool { return r.Key == k })
				if i < 0 {
					h.t.Errorf("sub %d: delta removes %s, not in the result", o.Sub, h.fmtKeyB(k))
					continue
				}
				m.rows = slices.Delete(m.rows, i, i+1)
			}
			for _, r := range o.Rows {
				i := slices.IndexFunc(m.rows, func(x ResultRow) bool { return x.Key == r.Key })
				if i < 0 {
					m.rows = append(m.rows, r)
				} else {
					m.rows[i] = r
				}
			}
			if o.Order != nil {
				by := map[Key]ResultRow{}
				for _, r := range m.rows {
					by[r.Key] = r
				}
				m.rows = m.rows[:0]
				for _, k := range o.Order {
					r, ok := by[k]
					if !ok {
						h.t.Errorf("sub %d: order names %s, not in the result", o.Sub, h.fmtKeyB(k))
					}
					m.rows = append(m.rows, r)
				}
				if len(by) != len(o.Order) {
					h.t.Errorf("sub %d: order has %d keys, result %d rows", o.Sub, len(o.Order), len(by))
				}
			} else {
				slices.SortFunc(m.rows, func(a, b ResultRow) int { return strings.Compare(string(a.Key), string(b.Key)) })
			}
		case OutputRefused, OutputEnded:
			m.gone = true
		}
	}
	if h.check {
		h.verify()
	}
}

// verify compares every live subscription's model with the oracle at the
// core's position.
func (h *harness) verify() {
	if h.core.st.inTxn {
		return
	}
	h.verifyHolders()
	st := h.now()
	for id, m := range h.models {
		if m.gone || !m.accepted || m.mode == ModeTouch {
			continue
		}
		sb := h.core.st.subs.get(id)
		if sb == nil || sb.v.status != viewLive {
			continue
		}
		plan := h.plans[id]
		h.verified[len(plan.Sources) > 1]++
		want, count := h.oracle(plan, st)
		if plan.Count {
			if m.count != count {
				h.t.Errorf("sub %d at %v: count = %d, want %d", id, h.core.Position(), m.count, count)
			}
			continue
		}
		got := h.fmtRows(m.rows)
		if w := h.fmtRows(want); got != w {
			h.t.Errorf("sub %d (%s) at %v:\n got %s\nwant %s", id, plan.Text, h.core.Position(), got, w)
		}
	}
}

// verifyHolders checks that every row a table holds, outside a
// transaction, is held, and only by live view sources of that table
// named by their holder ids: a hold a view source left behind when it
// ended would name whichever view source takes its id next.
func (h *harness) verifyHolders() {
	st := h.core.st
	if noExt.read != nil || noExt.js != nil || noExt.agg != nil || noExt.clk != nil || noExt.evalErr != nil || noExt.touchedAt != 0 || noExt.staleAt != 0 {
		h.t.Fatalf("the views' shared empty rare part was written: %+v", noExt)
	}
	for _, tb := range st.tables {
		for id := range tb.rows.all() {
			first, more := tb.rows.holders(id)
			if first == 0 {
				h.t.Errorf("table %s: row %q is held by no view", tb.name, tb.rows.key(id))
				continue
			}
			for _, hid := range append([]uint32{first}, more...) {
				if vs := st.holderSrc(hid); vs == nil || vs.t != tb || tb.srcs.get(vs) != vs || vs.v.status == viewDead {
					h.t.Errorf("table %s: row %q is held by holder id %d, not a live view source of the table", tb.name, tb.rows.key(id), hid)
				}
			}
		}
	}
}

func (h *harness) fmtKeyB(k Key) string {
	if n, ok := h.splitKey(string(k)); ok {
		return n
	}
	return hex.EncodeToString([]byte(k))
}

// splitKey names a (possibly joined) key by the rows it is made of.
func (h *harness) splitKey(k string) (string, bool) {
	if k == "" {
		return "", true
	}
	if k[0] == 0 {
		rest, ok := h.splitKey(k[1:])
		return "null/" + rest, ok
	}
	for i := len(k); i > 0; i-- {
		if n, ok := h.keyName[k[:i]]; ok {
			rest, ok := h.splitKey(k[i:])
			if ok {
				if rest == "" {
					return n, true
				}
				return n + "/" + strings.TrimSuffix(rest, "/"), true
			}
		}
	}
	return "", false
}

func fmtVal(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return strconv.Quote(x)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	s, err := change.FormatOID(0, v, nil)
	if err != nil {
		return fmt.Sprint(v)
	}
	return s
}

func (h *harness) fmtRow(r ResultRow) string {
	var parts []string
	for _, v := range r.Values {
		parts = append(parts, fmtVal(v))
	}
	return "(" + strings.Join(parts, ",") + ")"
}

func (h *harness) fmtRows(rs []ResultRow) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, h.fmtRow(r))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func (h *harness) fmtOutput(o Output) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sub %d %s", o.Sub, o.Kind)
	switch o.Kind {
	case OutputAccepted:
		fmt.Fprintf(&b, " @%v", o.LSN)
		if h.plans[o.Sub] != nil && h.plans[o.Sub].Count {
			fmt.Fprintf(&b, " count=%d", o.Count)
		} else if o.Columns != nil {
			b.WriteString(" " + h.fmtRows(o.Rows))
		}
	case OutputDelta:
		fmt.Fprintf(&b, " @%v", o.LSN)
		if h.plans[o.Sub] != nil && h.plans[o.Sub].Count {
			fmt.Fprintf(&b, " count=%d", o.Count)
		}
		for _, r := range o.Rows {
			b.WriteString(" +" + h.fmtRow(r))
		}
		for _, k := range o.Removed {
			b.WriteString(" -" + h.fmtKeyB(k))
		}
		for _, kc := range o.KeyChanges {
			b.WriteString(" key=" + h.fmtKeyB(kc.From) + "->" + h.fmtKeyB(kc.To))
		}
		if o.Order != nil {
			var ks []string
			for _, k := range o.Order {
				ks = append(ks, h.fmtKeyB(k))
			}
			b.WriteString(" order=" + strings.Join(ks, ";"))
		}
	case OutputTouched:
		fmt.Fprintf(&b, " @%v", o.LSN)
	default:
		fmt.Fprintf(&b, " retryable=%v: %s", o.Retryable, o.Reason)
	}
	return b.String()
}

// --- writing transactions ---

func txt(s string) change.Value { return change.TextValue(s) }

// vals turns words into a row of ht: "null" is NULL, "@u" unchanged TOAST.
func (h *harness) vals(ht *htable, words []string) change.Row {
	if len(words) != len(ht.rel.Columns) {
		h.t.Fatalf("table %s has %d columns, got %d values %q", ht.name, len(ht.rel.Columns), len(words), words)
	}
	r := make(change.Row, len(words))
	for i, w := range words {
		switch w {
		case "null":
			r[i] = change.Value{Kind: change.Null}
		case "@u":
			r[i] = change.Value{Kind: change.Unchanged}
		default:
			r[i] = txt(w)
		}
	}
	return r
}

// keyRow is an old tuple holding only the key columns.
func (h *harness) keyRow(ht *htable, key []string) change.Row {
	r := make(change.Row, len(ht.rel.Columns))
	j := 0
	for i, c := range ht.rel.Columns {
		if c.Key {
			r[i] = txt(key[j])
			j++
		}
	}
	return r
}

func (h *harness) insert(table string, words ...string) {
	ht := h.tables[table]
	h.pending = append(h.pending, change.Change{Op: change.OpInsert, Rel: ht.rel, New: h.vals(ht, words)})
}

// update writes an update; oldKey (nil: the key did not change) is the
// old key's values.
func (h *harness) update(table string, oldKey []string, words ...string) {
	ht := h.tables[table]
	ch := change.Change{Op: change.OpUpdate, Rel: ht.rel, New: h.vals(ht, words)}
	if oldKey != nil {
		ch.Old = h.keyRow(ht, oldKey)
	}
	h.pending = append(h.pending, ch)
}

func (h *harness) delete(table string, key ...string) {
	ht := h.tables[table]
	h.pending = append(h.pending, change.Change{Op: change.OpDelete, Rel: ht.rel, Old: h.keyRow(ht, key)})
}

func (h *harness) truncate(tables ...string) {
	tr := &change.Truncate{}
	for _, t := range tables {
		tr.Rels = append(tr.Rels, h.tables[t].rel)
	}
	h.pending = append(h.pending, change.Change{Op: change.OpTruncate, Truncate: tr})
}

// commit commits the pending changes as one transaction (in fragments of
// at most frag changes when frag > 0) and feeds it to the core.
func (h *harness) commit(frag int) change.LSN {
	h.nextXID++
	h.lsn += 0x10
	tx := htxn{xid: h.nextXID, lsn: h.lsn, changes: h.pending}
	h.pending = nil
	h.history = append(h.history, tx)
	st := h.now()
	for _, ch := range tx.changes {
		h.applyTo(st, ch)
	}
	n := len(tx.changes)
	if frag <= 0 {
		frag = max(n, 1)
	}
	for i := 0; i == 0 || i < n; i += frag {
		end := min(i+frag, n)
		h.core.Apply(&change.Txn{XID: tx.xid, CommitLSN: tx.lsn, Fragment: i / frag, Last: end == n, Changes: tx.changes[i:end]})
		if end < n {
			h.collect()
		}
	}
	h.collect()
	return tx.lsn
}

// answer runs a pending read against the database as seen at lsn with the
// given transactions still in progress, and delivers it.
func (h *harness) answer(id ReadID, at change.LSN, inProgress ...uint32) {
	req, ok := h.reads[id]
	if !ok {
		h.t.Fatalf("no read %d", id)
	}
	delete(h.reads, id)
	h.readIDs = slices.DeleteFunc(h.readIDs, func(x ReadID) bool { return x == id })
	snap := Snapshot{LSN: at, Xmax: uint64(h.nextXID) + 1, Now: h.clock}
	visible := func(tx htxn) bool {
		return tx.lsn < at && !slices.Contains(inProgress, tx.xid)
	}
	for _, tx := range h.history {
		if !visible(tx) {
			snap.Xip = append(snap.Xip, uint64(tx.xid))
		}
	}
	slices.Sort(snap.Xip)
	snap.Xmin = snap.Xmax
	if len(snap.Xip) > 0 {
		snap.Xmin = snap.Xip[0]
	}
	st := h.state(visible)
	plan := req.Plan
	var rows []query.Row
	if len(req.Sources) == 1 && len(plan.Sources) > 1 {
		// One source of a join: every row of its table (a superset of
		// what the core asked for; the core filters).
		si := req.Sources[0]
		src := plan.Sources[si]
		ht := h.tables[src.Table.Name]
		keys := make([]string, 0)
		for k := range st[ht.name] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			r := make(query.Row, len(plan.Sources))
			r[si] = h.srcVals(src, ht, st[ht.name][k])
			rows = append(rows, r)
		}
	} else {
		jr, _ := h.joined(plan, st)
		var kept []query.Row
		for _, r := range jr {
			if h.keeps(plan, r, true) {
				kept = append(kept, r)
			}
		}
		if plan.Agg == nil && (len(plan.Order) > 0 || plan.Limit >= 0 || plan.Offset > 0) {
			sort.SliceStable(kept, func(i, j int) bool { return plan.CompareWindow(kept[i], kept[j]) < 0 })
		}
		if req.Want > 0 && int64(len(kept)) > req.Want {
			kept = kept[:req.Want]
		}
		rows = kept
	}
	complete := req.Want == 0 || int64(len(rows)) < req.Want
	if h.readOrder != nil {
		rows = h.readOrder(rows)
	}
	h.core.ReadDone(id, ReadResult{Snapshot: snap, Rows: rows, Complete: complete})
	h.collect()
}

// answerAll answers every pending read at the current position.
func (h *harness) answerAll() {
	for len(h.readIDs) > 0 {
		h.answer(h.readIDs[0], h.lsn+1)
	}
	h.core.Advance(h.lsn + 1)
	h.collect()
}

// keeps evaluates a plan's WHERE over a row at the harness's clock: for a
// read (hold), the rows a clocked view must hold, else its result.
func (h *harness) keeps(plan *query.Plan, r query.Row, hold bool) bool {
	if !plan.Clocked() {
		return plan.Eval(r) == query.True
	}
	if !h.clockSet {
		return false
	}
	thr, err := plan.Thresholds(nil, h.clock)
	if err != nil {
		return false
	}
	if hold {
		return plan.Eval(r) == query.True && plan.HoldsAt(r, thr)
	}
	t, _ := plan.EvalAt(r, thr)
	return t == query.True
}

// setClock gives the core the database's clock at a new position.
func (h *harness) setClock(t change.Timestamp) {
	h.lsn += 0x10
	if !h.clockSet || t.Cmp(h.clock) > 0 {
		h.clock, h.clockSet = t, true // the core ignores a clock going back
	}
	h.core.Clock(h.lsn, t)
	h.collect()
}

// note writes a comment line into the transcript.
func (h *harness) note(s string) { h.out.WriteString("# " + s + "\n") }

// itemsHarness is a harness with a window margin of 2 and one table,
// items(id int4 pk, name text, price int4, cat text).
func itemsHarness(t *testing.T) *harness {
	h := newHarness(t, CoreOptions{WindowMargin: 2})
	h.createTable("items", []string{"id int4 pk", "name text", "price int4", "cat text"})
	return h
}

func itoa(i int) string { return strconv.Itoa(i) }

// joinHarness is a harness with authors(id, name) and books(id, author,
// title, year), three authors and three books committed.
func joinHarness(t *testing.T) *harness {
	h := newHarness(t, CoreOptions{})
	h.createTable("authors", []string{"id int4 pk", "name text"})
	h.createTable("books", []string{"id int4 pk", "author int4", "title text", "year int4"})
	h.insert("authors", "1", "ann")
	h.insert("authors", "2", "bob")
	h.insert("authors", "3", "cy")
	h.insert("books", "10", "1", "a1", "2001")
	h.insert("books", "11", "1", "a2", "2002")
	h.insert("books", "20", "2", "b1", "2003")
	h.commit(0)
	return h
}

// aggOracle aggregates the rows a grouped plan's filter keeps from
// scratch: each group's aggregates from fresh states, HAVING, then the
// groups' order and LIMIT/OFFSET (or key order).
func aggOracle(plan *query.Plan, rows []query.Row) []ResultRow {
	g := plan.Agg
	type grp struct {
		keys []any
		args [][]any
		// DISTINCT ON: the first row's group row so far
		first query.Row
	}
	groups := map[string]*grp{}
	var order []string
	if !g.Grouped() {
		groups[""] = &grp{}
		order = append(order, "")
	}
	for _, r := range rows {
		keys, args := make([]any, len(g.KeyOIDs)), make([]any, len(g.Aggs))
		if err := g.Eval(r, keys, args); err != nil {
			continue
		}
		kb, _ := appendGroupKey(nil, nil, g, keys)
		gr := groups[string(kb)]
		if gr == nil {
			gr = &grp{keys: keys}
			groups[string(kb)] = gr
			order = append(order, string(kb))
		}
		gr.args = append(gr.args, args)
		if f := g.First; f != nil {
			// The first row by the ORDER BY, as the group rows compare
			// (their keys are equal within a group).
			vals := make([]any, len(f.OIDs))
			if err := f.EvalFirst(r, vals); err != nil {
				continue
			}
			cand := query.Row{append(append([]any{}, keys...), vals...)}
			if gr.first == nil || g.Post.Compare(cand, gr.first) < 0 {
				gr.first = cand
			}
		}
	}
	type out struct {
		key string
		row query.Row
	}
	var outs []out
	for _, k := range order {
		gr := groups[k]
		r := append([]any{}, gr.keys...)
		for i := range g.Aggs {
			var st query.AggState
			for _, a := range gr.args {
				g.Aggs[i].Add(&st, a[i], 1)
			}
			v, _ := g.Aggs[i].Result(&st, int64(len(gr.args)))
			r = append(r, v)
		}
		if gr.first != nil {
			r = append(r, gr.first[0][len(gr.keys):]...)
		}
		if g.Post.Eval(query.Row{r}) == query.True {
			outs = append(outs, out{k, query.Row{r}})
		}
	}
	post := g.Post
	ordered := len(post.Order) > 0 || post.Limit >= 0 || post.Offset > 0
	if ordered {
		sort.SliceStable(outs, func(i, j int) bool { return post.CompareWindow(outs[i].row, outs[j].row) < 0 })
		lo := min(int(post.Offset), len(outs))
		outs = outs[lo:]
		if post.Limit >= 0 && int(post.Limit) < len(outs) {
			outs = outs[:post.Limit]
		}
	} else {
		slices.SortFunc(outs, func(a, b out) int { return strings.Compare(a.key, b.key) })
	}
	res := []ResultRow{}
	for _, o := range outs {
		res = append(res, ResultRow{Key: Key(o.key), Values: post.Project(o.row)})
	}
	return res
}
