package engine

import (
	"fmt"
	"slices"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

// state is the Core's state.
type state struct {
	opts CoreOptions
	pos  change.LSN // last commit applied or Advance position
	out  Ready
	// applied is the commit LSN of the last transaction applied: a
	// transaction at or below it is a duplicate.
	applied change.LSN

	views  map[string]*view // by plan.Key
	subs   map[SubID]*sub
	tables map[uint32]*table
	nextV  uint64

	// reads asked for and not landed; log holds, while any is pending,
	// the committed transactions since the oldest of them was asked for.
	reads map[ReadID]*read
	// doneReads are the reads answered and not landed yet (some may be
	// gone from reads: they are skipped).
	doneReads []ReadID
	nextR     ReadID
	log       []*logTxn
	logBase   int // absolute index of log[0]

	// The transaction being applied.
	inTxn   bool
	cur     *logTxn
	ov      map[ovKey]*pend
	ovList  []*pend
	dirty   []*view
	epoch   uint64
	refresh []*view // views to re-read once the transaction is settled
	// refilling are the views that went to re-read their result (some
	// may have landed since: touchRefilling drops them).
	refilling []*view

	// Scratch reused across transactions, so that a change allocates
	// only what it keeps.
	spare    *logTxn // a transaction record not kept in the log
	pendFree []*pend // pend records of settled transactions
	markFn   func(*viewSource)
	markKeys [2]string // the old and new key of the change being routed
	keysBuf  []string
	nextsBuf []settleNext
	cmpBuf   []byte // sameOutput's scratch
	qScratch rowScratch
}

// read is a read asked for and not landed yet.
type read struct {
	id       ReadID
	v        *view
	src      int // -1: the whole query; else one source of a join
	logStart int // absolute log index of the first transaction it may miss
	want     int64
	done     bool
	snap     Snapshot
	rows     []query.Row
	held     []rowVals // a single-table read's rows, encoded (readHeld)
	complete bool
}

// logTxn is a committed transaction kept for reads that have not landed.
type logTxn struct {
	xid     uint32
	lsn     change.LSN
	changes []*change.Change
}

type ovKey struct {
	oid uint32
	key string
}

// pend is a row changed by the transaction being applied.
type pend struct {
	tb     *table
	key    string
	before rowVals  // the row before the transaction (zero: not held)
	after  []any    // nil: deleted
	h      *heldRow // the row object that holds it once committed
}

func newState(opts CoreOptions) *state {
	s := &state{
		opts:   opts,
		views:  make(map[string]*view),
		subs:   make(map[SubID]*sub),
		tables: make(map[uint32]*table),
		reads:  make(map[ReadID]*read),
		ov:     make(map[ovKey]*pend),
	}
	s.markFn = s.markVS
	return s
}

func (s *state) ready() Ready {
	r := s.out
	s.out = Ready{}
	return r
}

func (s *state) stats() Stats {
	st := Stats{Views: len(s.views), Subs: len(s.subs), PendingReads: len(s.reads)}
	for _, tb := range s.tables {
		st.HeldRows += len(tb.rows)
	}
	return st
}

func (s *state) refuse(id SubID, code query.Code, reason string, retryable bool) {
	s.out.Outputs = append(s.out.Outputs, Output{Sub: id, Kind: OutputRefused, Code: code, Reason: reason, Retryable: retryable})
}

// subscribe registers a subscription, creating its view if needed.
func (s *state) subscribe(id SubID, plan *query.Plan, mode Mode) {
	if _, ok := s.subs[id]; ok {
		s.refuse(id, CodeInternal, fmt.Sprintf("subscription %d already exists", id), false)
		return
	}
	if plan == nil || len(plan.Sources) == 0 {
		s.refuse(id, CodeInternal, "no plan", false)
		return
	}
	v := s.views[plan.Key]
	if v == nil {
		var reason string
		if v, reason = s.newView(plan); v == nil {
			s.refuse(id, CodeInternal, reason, false)
			return
		}
	}
	sb := &sub{id: id, mode: mode, v: v}
	s.subs[id] = sb
	v.subs = append(v.subs, sb)
	if v.status == viewLive {
		sb.accepted = true
		s.out.Outputs = append(s.out.Outputs, v.accepted(sb, s.pos))
	}
}

// newView creates a view for plan and asks for its hydration.
func (s *state) newView(plan *query.Plan) (*view, string) {
	for _, src := range plan.Sources {
		if len(src.Table.RowKey()) == 0 || src.KeyN == 0 {
			return nil, fmt.Sprintf("table %s.%s has no primary key", src.Table.Schema, src.Table.Name)
		}
	}
	s.nextV++
	v := &view{id: s.nextV, plan: plan, rset: newRset(plan, s.opts.WindowMargin)}
	for i, src := range plan.Sources {
		tb := s.tables[src.Table.OID]
		if tb == nil {
			tb = newTable(src.Table)
			s.tables[src.Table.OID] = tb
		}
		vs := &viewSource{v: v, idx: i, src: src, t: tb, col: make([]int, len(src.Columns))}
		for j := range src.Columns {
			p := tb.column(src.Columns[j].Name)
			vs.col[j] = p
			tb.typeColumn(p, &src.Columns[j])
			tb.cols[p].need++
		}
		if v.isJoin() {
			vs.rows = make(map[string]*heldRow)
			vs.byJoin = make(map[string]map[string]*heldRow)
		}
		tb.srcs[vs] = struct{}{}
		tb.route.add(vs)
		v.srcs = append(v.srcs, vs)
	}
	if v.isJoin() {
		s.initJoin(v)
	}
	s.views[plan.Key] = v
	v.status = viewHydrating
	s.askRead(v)
	return v, ""
}

// askRead asks for the reads a view needs to (re)build its result.
func (s *state) askRead(v *view) {
	if v.isJoin() {
		s.askJoinReads(v)
		return
	}
	p := v.plan
	margin := int64(s.opts.WindowMargin)
	sql := p.Render(query.RenderOptions{Columns: query.SelectNeeded, Window: v.ordered, Margin: margin})
	args, oids, formats := p.Args()
	var want int64
	if v.window {
		want = int64(v.cap)
	}
	s.nextR++
	r := &read{id: s.nextR, v: v, src: -1, logStart: s.logBase + len(s.log), want: want}
	s.reads[r.id] = r
	v.read = r
	s.out.Reads = append(s.out.Reads, ReadRequest{
		ID: r.id, Plan: p, Sources: allSources(len(p.Sources)),
		SQL: sql, Args: args, ArgOIDs: oids, ArgFormats: formats,
		Want: want, RowLimit: s.opts.ReadRowLimit,
	})
}

func allSources(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// unsubscribe removes a subscription; its view dies with its last one.
func (s *state) unsubscribe(id SubID) {
	sb := s.subs[id]
	if sb == nil {
		return
	}
	delete(s.subs, id)
	v := sb.v
	v.subs = slices.DeleteFunc(v.subs, func(x *sub) bool { return x == sb })
	if len(v.subs) == 0 {
		s.killView(v)
	}
}

// endView ends every subscription of v with code and reason and drops it.
func (s *state) endView(v *view, code query.Code, reason string, retryable bool) {
	for _, sb := range v.subs {
		kind := OutputEnded
		if !sb.accepted {
			kind = OutputRefused
		}
		s.out.Outputs = append(s.out.Outputs, Output{Sub: sb.id, Kind: kind, LSN: s.pos, Code: code, Reason: reason, Retryable: retryable})
		delete(s.subs, sb.id)
	}
	v.subs = nil
	s.killView(v)
}

// killView drops a view: its routes, the rows it holds, its pending read.
func (s *state) killView(v *view) {
	if v.status == viewDead {
		return
	}
	v.status = viewDead
	if s.views[v.plan.Key] == v {
		delete(s.views, v.plan.Key)
	}
	if v.read != nil {
		delete(s.reads, v.read.id)
		v.read = nil
	}
	for _, r := range s.reads {
		if r.v == v {
			delete(s.reads, r.id)
		}
	}
	s.releaseRset(v, &v.rset)
	for _, vs := range v.srcs {
		tb := vs.t
		tb.route.remove(vs)
		delete(tb.srcs, vs)
		for _, p := range vs.col {
			tb.cols[p].need--
		}
		for k, h := range vs.rows {
			s.release(tb, k, h, vs)
		}
		vs.rows, vs.byJoin = nil, nil
		if len(tb.srcs) == 0 {
			delete(s.tables, tb.oid)
		}
	}
	s.trimLog()
}

// release drops vs's hold on row h (key k of tb), forgetting the row when
// nothing holds it.
func (s *state) release(tb *table, k string, h *heldRow, vs *viewSource) {
	h.dropHolder(vs)
	if len(h.holders) == 0 && tb.rows[k] == h {
		delete(tb.rows, k)
	}
}

func (s *state) releaseRset(v *view, rs *rset) {
	if v.isJoin() {
		return
	}
	vs := v.srcs[0]
	for k, e := range rs.result {
		s.release(vs.t, k, e.row, vs)
	}
}

// intern makes the rows of a freshly built single-table result the shared
// held rows, taking a hold on each.
func (s *state) intern(v *view, rs *rset) {
	vs := v.srcs[0]
	tb := vs.t
	for k, e := range rs.result {
		h := tb.rows[k]
		if h == nil {
			h = e.row
			tb.rows[k] = h
		} else {
			tb.mergeHeld(h, e.row.rowVals)
			if rs.ordered {
				e.row = h
			} else {
				rs.result[k] = h.entry(k)
			}
		}
		h.addHolder(vs)
	}
}

// advance moves the position on without a transaction.
func (s *state) advance(lsn change.LSN) {
	if s.inTxn {
		return
	}
	if lsn > s.pos {
		s.pos = lsn
	}
	s.land()
}

// apply applies one fragment of a transaction.
func (s *state) apply(t *change.Txn) {
	if t.Fragment == 0 || !s.inTxn {
		if t.CommitLSN != 0 && t.CommitLSN <= s.applied {
			return // a duplicate after a reconnect
		}
		s.inTxn = true
		if s.spare != nil {
			s.cur, s.spare = s.spare, nil
			s.cur.xid, s.cur.lsn = t.XID, t.CommitLSN
		} else {
			s.cur = &logTxn{xid: t.XID, lsn: t.CommitLSN}
		}
	}
	for i := range t.Changes {
		ch := &t.Changes[i]
		s.cur.changes = append(s.cur.changes, ch)
		switch ch.Op {
		case change.OpRelation:
			s.relation(ch.Rel)
		case change.OpInsert, change.OpUpdate, change.OpDelete:
			if ch.Rel == nil {
				continue
			}
			if tb := s.tables[ch.Rel.OID]; tb != nil {
				s.rowChange(tb, ch)
			}
		case change.OpTruncate:
			if ch.Truncate == nil {
				continue
			}
			for _, rel := range ch.Truncate.Rels {
				if tb := s.tables[rel.OID]; tb != nil {
					s.truncate(tb)
				}
			}
		}
	}
	if t.Last {
		s.finish(t.CommitLSN)
	}
}

// current returns a row as the transaction has left it so far, or nil.
func (s *state) current(tb *table, key string) []any {
	if p := s.ov[ovKey{tb.oid, key}]; p != nil {
		return p.after
	}
	if h := tb.rows[key]; h != nil {
		return h.values()
	}
	return nil
}

func (s *state) setPend(tb *table, key string, after []any) {
	k := ovKey{tb.oid, key}
	p := s.ov[k]
	if p == nil {
		if n := len(s.pendFree); n > 0 {
			p = s.pendFree[n-1]
			s.pendFree = s.pendFree[:n-1]
			*p = pend{tb: tb, key: key}
		} else {
			p = &pend{tb: tb, key: key}
		}
		if h := tb.rows[key]; h != nil {
			p.before = h.rowVals
		}
		s.ov[k] = p
		s.ovList = append(s.ovList, p)
	}
	p.after = after
}

// touch marks key of a view source's table as changed for its view.
func (s *state) touch(vs *viewSource, keys ...string) {
	v := vs.v
	if v.status != viewLive {
		if v.status == viewRefilling && !v.dirty {
			// Its result waits for a read, which will bring this
			// transaction in; its touch-mode subscribers are told at
			// this commit (finish), not when the read lands.
			v.dirty = true
			s.dirty = append(s.dirty, v)
		}
		return
	}
	if !v.dirty {
		v.dirty = true
		s.dirty = append(s.dirty, v)
	}
	if v.isJoin() {
		s.touchJoin(vs, keys...)
		return
	}
	for _, k := range keys {
		if k != "" {
			v.touchKey(k)
		}
	}
}

// rowChange applies an insert, update or delete to the overlay and marks
// the views it can affect.
func (s *state) rowChange(tb *table, ch *change.Change) {
	var newKey string
	oldKey, oldVals := s.oldRow(tb, ch)
	if ch.Old != nil && oldKey == "" {
		// The old row does not carry the row key: the replica identity
		// changed and its Relation came before the views did.
		s.identityLost(tb)
		return
	}
	var newVals []any
	if ch.Op != change.OpDelete {
		// fill serves values the change did not send (unchanged TOAST);
		// decoding the held row is skipped when every value was sent.
		var fill []any
		needFill := missing(ch.New)
		if oldKey != "" && needFill {
			fill = s.current(tb, oldKey)
		}
		if fill == nil && ch.OldIsRow && oldVals != nil {
			fill = oldVals
		}
		newVals, _ = tb.decodeRow(ch.Rel, ch.New, fill, s.opts.Types)
		if fill == nil && ch.Op == change.OpUpdate && needFill {
			// No old key sent: the key did not change; fill unchanged
			// values from the held row.
			if k, ok := tb.keyOf(newVals); ok {
				if cur := s.current(tb, k); cur != nil {
					fillUnchanged(newVals, ch, tb.relMap(ch.Rel), cur)
				}
			}
		}
		newKey, _ = tb.keyOf(newVals)
	}
	// Views holding the old or new version of the row, and views its new
	// values route to.
	s.epoch++
	s.markKeys = [2]string{oldKey, newKey}
	mark := s.markFn
	for _, k := range s.markKeys {
		if k == "" {
			continue
		}
		if h := tb.rows[k]; h != nil {
			for _, vs := range h.holders {
				mark(vs)
			}
		}
		if p := s.ov[ovKey{tb.oid, k}]; p != nil && p.h != nil {
			for _, vs := range p.h.holders {
				mark(vs)
			}
		}
	}
	if newVals != nil {
		tb.route.match(newVals, mark)
	}
	if len(s.refilling) > 0 {
		s.touchRefilling(tb)
	}
	if oldKey != "" && (ch.Op == change.OpDelete || oldKey != newKey) {
		s.setPend(tb, oldKey, nil)
	}
	if newKey != "" {
		s.setPend(tb, newKey, newVals)
	} else if ch.Op != change.OpDelete {
		// The new row's key is unknown: every view of the table must
		// re-read.
		for vs := range tb.srcs {
			if vs.v.status == viewLive {
				s.refresh = append(s.refresh, vs.v)
			}
		}
	}
}

// oldRow decodes a change's old row (its replica identity, or the whole
// row under REPLICA IDENTITY FULL) and returns its key ("" when the change
// carries none: an insert, or an update that kept the identity's values)
// and its values.
func (s *state) oldRow(tb *table, ch *change.Change) (string, []any) {
	if ch.Old == nil {
		return "", nil
	}
	ov, _ := tb.decodeRow(ch.Rel, ch.Old, nil, s.opts.Types)
	k, _ := tb.keyOf(ov)
	return k, ov
}

// replayRow decodes a logged change of tb for a read being brought to the
// core's position, against priv (the read's rows so far, by key): the old
// row's key and, for an insert or an update, the new row's key and values
// (values the change did not send filled from priv's row). ok is false
// when the new row's key is unknown.
func (s *state) replayRow(tb *table, ch *change.Change, priv func(key string) []any) (oldKey, newKey string, newVals []any, ok bool) {
	oldKey, _ = s.oldRow(tb, ch)
	if ch.Op == change.OpDelete {
		return oldKey, "", nil, true
	}
	if oldKey == "" {
		nv, _ := tb.decodeRow(ch.Rel, ch.New, nil, s.opts.Types)
		oldKey, _ = tb.keyOf(nv)
	}
	var fill []any
	if missing(ch.New) {
		fill = priv(oldKey)
	}
	newVals, _ = tb.decodeRow(ch.Rel, ch.New, fill, s.opts.Types)
	newKey, ok = tb.keyOf(newVals)
	return oldKey, newKey, newVals, ok
}

// markVS marks vs touched by the change being routed (once per change).
func (s *state) markVS(vs *viewSource) {
	if vs.mark == s.epoch {
		return
	}
	vs.mark = s.epoch
	s.touch(vs, s.markKeys[0], s.markKeys[1])
}

// fillUnchanged fills the values a change did not send (unchanged TOAST)
// from cur, the row as held.
func fillUnchanged(vals []any, ch *change.Change, m []int, cur []any) {
	for i, v := range ch.New {
		if v.Kind != change.Unchanged && v.Kind != change.Absent || i >= len(m) {
			continue
		}
		if p := m[i]; p < len(cur) && !isUnloaded(cur[p]) {
			vals[p] = cur[p]
		}
	}
}

// truncate empties a table within the transaction.
func (s *state) truncate(tb *table) {
	for k := range tb.rows {
		s.setPend(tb, k, nil)
	}
	for _, p := range s.ovList {
		if p.tb == tb {
			p.after = nil
		}
	}
	for vs := range tb.srcs {
		v := vs.v
		if v.status != viewLive && v.status != viewRefilling {
			continue
		}
		if !v.dirty {
			v.dirty = true
			s.dirty = append(s.dirty, v)
		}
		if v.status == viewRefilling {
			continue // its read brings the truncate in
		}
		if v.isJoin() {
			s.truncateJoin(vs)
			continue
		}
		for k := range v.result {
			v.touchKey(k)
		}
	}
}

// finish settles a transaction: every dirty view computes its net change
// and emits one delta.
func (s *state) finish(lsn change.LSN) {
	// The held row objects take their new values.
	for _, p := range s.ovList {
		h := p.tb.rows[p.key]
		if h == nil {
			h = &heldRow{}
		}
		p.h = h
		if p.after != nil {
			h.rowVals = p.tb.encode(p.after)
		}
	}
	slices.SortFunc(s.dirty, func(a, b *view) int { return cmpU64(a.id, b.id) })
	for _, v := range s.dirty {
		v.dirty = false
		if v.status != viewLive {
			clear(v.touched)
			v.touched = v.touched[:0]
			if v.status == viewRefilling {
				s.touchSubs(v, lsn)
			}
			continue
		}
		if v.isJoin() {
			s.settleJoin(v, lsn)
		} else {
			s.settle(v, lsn)
		}
	}
	s.dirty = s.dirty[:0]
	for _, p := range s.ovList {
		h := p.h
		switch {
		case p.after == nil || len(h.holders) == 0:
			if p.tb.rows[p.key] == h {
				delete(p.tb.rows, p.key)
			}
		default:
			p.tb.rows[p.key] = h
		}
	}
	clear(s.ov)
	for _, p := range s.ovList {
		*p = pend{}
		s.pendFree = append(s.pendFree, p)
	}
	clear(s.ovList)
	s.ovList = s.ovList[:0]
	s.pos = max(s.pos, lsn)
	s.applied = max(s.applied, lsn)
	if s.cur != nil && s.logging() {
		s.log = append(s.log, s.cur)
	} else if s.cur != nil {
		// Not kept: its record serves the next transaction.
		clear(s.cur.changes)
		s.cur.changes = s.cur.changes[:0]
		s.spare = s.cur
	}
	s.cur = nil
	s.inTxn = false
	// In view order, not the order rowChange found them (a map's): the
	// reads and touches that follow are outputs.
	slices.SortFunc(s.refresh, func(a, b *view) int { return cmpU64(a.id, b.id) })
	for _, v := range s.refresh {
		if v.status == viewLive {
			s.refill(v, lsn)
		}
	}
	s.refresh = s.refresh[:0]
	s.land()
}

// p0 returns the values a row had before the transaction.
func p0(s *state, tb *table, key string) rowVals {
	if p := s.ov[ovKey{tb.oid, key}]; p != nil {
		return p.before
	}
	return rowVals{}
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *state) logging() bool { return len(s.reads) > 0 }

// settle computes a single-table view's net change in the transaction.
func (s *state) settle(v *view, lsn change.LSN) {
	vs := v.srcs[0]
	tb := vs.t
	keys := append(s.keysBuf[:0], v.touched...)
	clear(v.touched)
	v.touched = v.touched[:0]
	slices.Sort(keys)
	keys = slices.Compact(keys)
	nexts := slices.Grow(s.nextsBuf[:0], len(keys))[:len(keys)]
	defer func() {
		clear(keys)
		clear(nexts)
		s.keysBuf, s.nextsBuf = keys[:0], nexts[:0]
	}()
	for i, k := range keys {
		nexts[i].key = k
		p := s.ov[ovKey{tb.oid, k}]
		if p == nil || p.after == nil {
			continue
		}
		// A plain view keeps only the projection: its query.Row is
		// scratch.
		plain := !v.ordered && !v.plan.Count
		var q query.Row
		if plain {
			q = v.rowInto(&s.qScratch, p.after)
		} else {
			q = v.row(p.after)
		}
		if !loaded(q) {
			// A value this view needs is an unchanged TOASTed value of a
			// row it did not hold: read the result again.
			s.refill(v, lsn)
			return
		}
		if v.plan.Eval(q) == query.True {
			if plain {
				nexts[i].now = v.plan.Project(q)
			}
			if v.ordered {
				nexts[i].e = &entry{key: k, row: p.h}
				nexts[i].e.setQ(q)
			} else {
				nexts[i].e = p.h.entry(k)
			}
		}
	}
	var d delta
	before := v.countN()
	for _, n := range nexts {
		old := v.remove(n.key)
		if old != nil {
			s.dropHold(vs, n.key, old.row)
		}
		kept := n.e != nil && v.insert(n.e)
		if kept {
			n.e.row.addHolder(vs)
		}
		if v.ordered || v.plan.Count {
			continue
		}
		switch {
		case old != nil && !kept:
			d.removed = append(d.removed, Key(n.key))
		case kept:
			now := n.now // the row as the transaction left it
			if old == nil || !v.sameOutput(p0(s, tb, n.key), now, &s.cmpBuf) {
				d.rows = append(d.rows, ResultRow{Key: Key(n.key), Values: now})
			}
		}
	}
	switch {
	case v.plan.Count:
		d.count = v.countN()
		d.changed = d.count != before
	case v.ordered:
		for _, e := range v.trim() {
			s.dropHold(vs, e.key, e.row)
		}
		if !v.covered() {
			s.refill(v, lsn)
			return
		}
		d = v.diffShown()
	default:
		d.changed = len(d.rows) > 0 || len(d.removed) > 0
	}
	s.emit(v, d, lsn)
}

// settleNext is a touched key of a single-table view and its entry after
// the transaction (nil: not in the result).
type settleNext struct {
	key string
	e   *entry
	now []any // a plain view's projection of e's row
}

// dropHold releases vs's hold on h during a transaction (the row table
// is cleaned up when the transaction is settled).
func (s *state) dropHold(vs *viewSource, key string, h *heldRow) {
	h.dropHolder(vs)
	if len(h.holders) == 0 {
		if _, inTxn := s.ov[ovKey{vs.t.oid, key}]; !inTxn && vs.t.rows[key] == h {
			delete(vs.t.rows, key)
		}
	}
}

// relation records a table's new shape and ends the views it breaks.
func (s *state) relation(rel *change.Relation) {
	if rel == nil {
		return
	}
	tb := s.tables[rel.OID]
	if tb == nil {
		return
	}
	tb.rel = rel
	s.endBroken(tb, rel)
	tb.relMap(rel)
}

// readDone records a read's result and lands it when it can.
func (s *state) readDone(id ReadID, snap Snapshot, rows []query.Row, held []rowVals, complete bool, err error) {
	r := s.reads[id]
	if r == nil {
		return
	}
	if err != nil {
		delete(s.reads, id)
		v := r.v
		s.endView(v, readCode(err), "read failed: "+err.Error(), readCode(err) != CodeRowLimit)
		s.trimLog()
		return
	}
	if !r.done {
		s.doneReads = append(s.doneReads, id)
	}
	r.done, r.snap, r.rows, r.held, r.complete = true, snap, rows, held, complete
	s.land()
}

// land lands every finished read whose snapshot the stream has passed.
func (s *state) land() {
	if s.inTxn {
		return
	}
	if len(s.doneReads) == 0 {
		return
	}
	// Only finished reads can land: scanning them, not every pending read,
	// keeps landing n reads of n subscriptions linear.
	var ids, rest []ReadID
	for _, id := range s.doneReads {
		r := s.reads[id]
		switch {
		case r == nil:
		case s.pos >= r.snap.LSN:
			ids = append(ids, id)
		default:
			rest = append(rest, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := s.reads[id]
		if r == nil {
			continue
		}
		if r.v.status == viewDead {
			delete(s.reads, id)
			continue
		}
		if r.v.isJoin() {
			if !slices.Contains(r.v.js.reads, r) {
				delete(s.reads, id) // a read of a round asked again since
				continue
			}
			if s.joinReadsReady(r.v) {
				s.landJoin(r.v)
			} else {
				rest = append(rest, id)
			}
			continue
		}
		delete(s.reads, id)
		s.landRead(r)
	}
	s.doneReads = rest
	s.trimLog()
}

// trimLog drops logged transactions no pending read needs.
func (s *state) trimLog() {
	if len(s.reads) == 0 {
		s.logBase += len(s.log)
		s.log = nil
		return
	}
	if len(s.log) == 0 {
		return // nothing to trim: no need to look at every pending read
	}
	first := s.logBase + len(s.log)
	for _, r := range s.reads {
		first = min(first, r.logStart)
	}
	if n := first - s.logBase; n > 0 {
		clear(s.log[:n])
		s.log = s.log[n:]
		s.logBase = first
	}
}

// replay calls fn for every change of the log since start that snap does
// not contain, in commit order.
func (s *state) replay(start int, snap Snapshot, fn func(ch *change.Change) bool) bool {
	for i := max(start-s.logBase, 0); i < len(s.log); i++ {
		lt := s.log[i]
		if snap.Visible(lt.xid) {
			continue
		}
		for _, ch := range lt.changes {
			if !fn(ch) {
				return false
			}
		}
	}
	return true
}

// landRead builds a single-table view's result from a read brought to the
// core's position, and makes it live.
func (s *state) landRead(r *read) {
	v := r.v
	vs := v.srcs[0]
	tb := vs.t
	rs := newRset(v.plan, s.opts.WindowMargin)
	n := len(r.rows) + len(r.held)
	complete := !rs.window || r.complete || r.want == 0 || int64(n) < r.want
	priv := make(map[string]rowVals, n)
	add := func(k string, rv rowVals) {
		priv[k] = rv
		rs.remove(k)
		rs.insert(rs.newEntry(k, &heldRow{rowVals: rv}, v))
	}
	for _, row := range r.rows {
		if len(row) == 0 || row[0] == nil {
			continue
		}
		vals := make([]any, len(tb.cols))
		for i := range vals {
			vals[i] = unloaded{}
		}
		for j, p := range vs.col {
			if j < len(row[0]) {
				vals[p] = row[0][j]
			}
		}
		if k, ok := tb.keyOf(vals); ok {
			add(k, tb.encode(vals))
		}
	}
	identity := vs.identityLayout()
	var at []int
	var scratch []string
	if !identity {
		at = vs.layoutSlots()
	}
	for _, rv := range r.held {
		if !identity {
			rv = relayout(rv, at, &scratch)
		}
		if k, ok := tb.keyOfHeld(rv); ok {
			add(k, rv)
		}
	}
	r.rows, r.held = nil, nil
	// The read's last row bounds what a window knows: it was cut there.
	rs.complete = complete
	if !rs.complete && len(rs.list) > 0 {
		rs.bound = rs.list[len(rs.list)-1].q()
	}
	ok := s.replay(r.logStart, r.snap, func(ch *change.Change) bool {
		switch ch.Op {
		case change.OpTruncate:
			if ch.Truncate == nil {
				return true
			}
			for _, rel := range ch.Truncate.Rels {
				if rel.OID == tb.oid {
					clear(priv)
					rs.result = make(map[string]*entry)
					rs.list = nil
					rs.complete, rs.bound = true, nil
				}
			}
			return true
		case change.OpInsert, change.OpUpdate, change.OpDelete:
		default:
			return true
		}
		if ch.Rel == nil || ch.Rel.OID != tb.oid {
			return true
		}
		oldKey, newKey, newVals, kok := s.replayRow(tb, ch, func(k string) []any { return priv[k].values() })
		if !kok {
			return false
		}
		if oldKey != "" {
			delete(priv, oldKey)
			rs.remove(oldKey)
		}
		if newVals != nil {
			q := v.row(newVals)
			if v.plan.Eval(q) == query.True || !loaded(q) {
				if !loaded(q) {
					return false
				}
				rv := tb.encode(newVals)
				priv[newKey] = rv
				rs.insert(rs.newEntry(newKey, &heldRow{rowVals: rv}, v))
			}
		}
		return true
	})
	if !ok {
		// A value the view needs was not sent (TOAST) or a key is
		// unknown: read again.
		s.askRead(v)
		return
	}
	rs.trim()
	if !rs.covered() {
		s.askRead(v)
		return
	}
	old := v.rset
	oldStatus := v.status
	s.intern(v, &rs)
	v.rset = rs
	v.read = nil
	v.status = viewLive
	if oldStatus == viewRefilling {
		var d delta
		switch {
		case v.plan.Count:
			d.count = v.countN()
			d.changed = d.count != old.countN()
		case v.ordered:
			d = v.diffShown()
		default:
			// The rows subscribers hold may have changed since (they are
			// shared): send every row again, and the removals.
			for _, e := range v.entries() {
				d.rows = append(d.rows, v.resultRow(e))
			}
			for k := range old.result {
				if v.result[k] == nil {
					d.removed = append(d.removed, Key(k))
				}
			}
			slices.Sort(d.removed)
			d.changed = len(d.rows) > 0 || len(d.removed) > 0
		}
		s.releaseRset(v, &old)
		s.emit(v, d, s.pos)
	} else if v.ordered {
		v.snapshotShown()
	}
	for _, sb := range v.subs {
		if !sb.accepted {
			sb.accepted = true
			s.out.Outputs = append(s.out.Outputs, v.accepted(sb, s.pos))
		}
	}
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
