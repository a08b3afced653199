package engine

import (
	minheap "container/heap"
	"slices"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

// Views whose query compares a column with the time (query.ClockBound:
// created_at > now() - interval '1 hour', due < CURRENT_DATE) change as
// the clock moves, with no write. The clock is an input like any other:
// Core.Clock(lsn, t) says the database's now() was t at position lsn (the
// runtime passes each heartbeat's, read in the heartbeat's own
// transaction). A view's result at position P is the query's answer at P
// with now() replaced by the clock of the last Clock call at or before P.
//
// A clocked view holds the rows its filter keeps and its bounds rows
// leave by still hold: the result, and beside it the rows a bound rows
// enter by does not let in yet (pending). Per bound it keeps a min-heap of
// (the column's value, key) over those rows: as every threshold only
// rises, the rows whose bound changes are exactly the ones at the top of
// the heap up to the new threshold. Clock pops them, touches them as a
// transaction touches rows it changes (same values), and settles the
// views as at a commit: one delta per view at the Clock's position,
// windows refilled, groups re-aggregated, by the same code. An entry is
// pushed when a row enters the result or pending with a bound still to
// cross; entries of rows since changed or gone stay in the heap until
// popped or the heap is rebuilt (past twice the rows held), and touching
// a row again only re-evaluates it.

// clockView is a clocked view's time bookkeeping.
type clockView struct {
	thr     []query.TimeKey  // each bound's threshold at the core's clock
	heaps   []timeHeap       // per bound
	pending map[string]rowID // ids in the table's rows
}

type timeItem struct {
	k   query.TimeKey
	key string
}

// timeHeap is a min-heap of rows by a bound's column value.
type timeHeap []timeItem

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].k.Cmp(h[j].k) < 0 }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(timeItem)) }
func (h *timeHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// newClockView returns the bookkeeping of a clocked plan's view.
func (s *state) newClockView(plan *query.Plan) *clockView {
	return &clockView{heaps: make([]timeHeap, len(plan.Clock)), pending: make(map[string]rowID)}
}

// clockReady reports whether a clocked view's read r can land: the core
// has a clock, at or past the read's own now() (so a row the read left
// out by a bound rows leave by is out at the core's clock too), and the
// view's thresholds there could be computed (else the view ends).
func (s *state) clockReady(r *read) bool {
	v := r.v
	if v.x().clk == nil {
		return true
	}
	if !s.clockSet || s.clock.Cmp(r.snap.Now) < 0 {
		return false
	}
	if v.x().clk.thr == nil {
		thr, err := v.plan.Thresholds(nil, s.clock)
		if err != nil {
			s.endView(v, query.CodeEvalError, err.Error(), false)
			return false
		}
		v.x().clk.thr = thr
	}
	return true
}

// clockEval decides a row of a clocked view: keep (in the result) or
// hold (pending: a bound rows enter by may let it in later).
func (v *view) clockEval(q query.Row) (keep, hold bool) {
	cv := v.x().clk
	if cv.thr == nil {
		return false, false
	}
	t, err := v.plan.EvalRow(q)
	if err != nil {
		if v.x().evalErr == nil {
			v.mut().evalErr = err
		}
		return false, false
	}
	if t != query.True || !v.plan.HoldsAt(q, cv.thr) {
		return false, false
	}
	at, _ := v.plan.EvalAt(q, cv.thr)
	return at == query.True, true
}

// pushTimes records a row that entered the result or pending in the
// heaps of the bounds it has still to cross.
func (v *view) pushTimes(key string, q query.Row) {
	cv := v.x().clk
	for i := range v.plan.Clock {
		b := &v.plan.Clock[i]
		k, ok := query.TimeKeyOf(cell0(q, b.Source, b.Column))
		if !ok || (!b.Leaves() && b.HoldsKey(k, cv.thr[i])) {
			continue // NULL, or already let in for good
		}
		minheap.Push(&cv.heaps[i], timeItem{k: k, key: key})
	}
}

func cell0(q query.Row, src, col int) any {
	if src >= len(q) || q[src] == nil || col >= len(q[src]) {
		return nil
	}
	return q[src][col]
}

// holds reports whether the view holds key (in its result or pending).
func (v *view) holdsKey(key string) bool {
	if v.hasKey(&v.srcs[0].t.rows, key) {
		return true
	}
	_, ok := v.x().clk.pending[key]
	return ok
}

// rebuildTimes refills the heaps from the rows the view holds.
func (v *view) rebuildTimes() {
	cv := v.x().clk
	for i := range cv.heaps {
		cv.heaps[i] = cv.heaps[i][:0]
	}
	if cv.thr == nil {
		return
	}
	rt := &v.srcs[0].t.rows
	for id := range v.members.all() {
		v.pushTimes(rt.key(id), v.idRow(rt, id))
	}
	for e := range v.result.all() {
		v.pushTimes(e.key, v.idRow(rt, e.row))
	}
	for k, id := range cv.pending {
		v.pushTimes(k, v.idRow(rt, id))
	}
	for i := range cv.heaps {
		minheap.Init(&cv.heaps[i])
	}
}

// releasePending drops the view's holds on its pending rows.
func (s *state) releasePending(v *view, pending map[string]rowID) {
	vs := v.srcs[0]
	for k, id := range pending {
		s.release(vs.t, k, id, vs)
	}
}

// clockTo is Core.Clock.
func (s *state) clockTo(lsn change.LSN, t change.Timestamp) {
	if s.inTxn {
		return
	}
	if lsn > s.pos {
		s.pos = lsn
	}
	if s.clockSet && t.Cmp(s.clock) <= 0 {
		s.land()
		return
	}
	s.clock, s.clockSet = t, true
	if lsn > s.clockLSN {
		s.clockLSN = lsn
	}
	vs := make([]*view, 0, len(s.clocked))
	for v := range s.clocked {
		vs = append(vs, v)
	}
	slices.SortFunc(vs, func(a, b *view) int { return cmpU64(a.id, b.id) })
	for _, v := range vs {
		s.clockView(v, lsn)
	}
	s.settleClock(s.clockLSN)
	s.land()
}

// clockPassesHeld reports whether thresholds thr pass a row v held or
// kept pending when it began to re-read (the top of a bound's heap): the
// clock may have changed its result.
func (s *state) clockPassesHeld(v *view, thr []query.TimeKey) bool {
	cv := v.x().clk
	for i := range v.plan.Clock {
		b := &v.plan.Clock[i]
		if h := cv.heaps[i]; h.Len() > 0 && b.HoldsKey(h[0].k, thr[i]) != b.Leaves() {
			return true
		}
	}
	return false
}

// clockView moves a view's thresholds to the core's clock and touches the
// rows whose bounds they passed.
func (s *state) clockView(v *view, lsn change.LSN) {
	cv := v.x().clk
	first := cv.thr == nil
	thr, err := v.plan.Thresholds(nil, s.clock)
	if err != nil {
		// PostgreSQL would raise computing the threshold (now() -
		// interval '300000 years'): every read of the query fails.
		s.endView(v, query.CodeEvalError, err.Error(), false)
		return
	}
	cv.thr = thr
	if v.status == viewRefilling && !first && s.clockPassesHeld(v, thr) {
		// Its read lands at the new clock, but its touch-mode subscribers
		// are told now, at the heartbeat, as touchRefilling tells them of
		// every transaction while a view re-reads.
		s.touchSubs(v, lsn)
	}
	if v.status != viewLive || first {
		return // its read lands at the new clock
	}
	vs := v.srcs[0]
	tb := vs.t
	var keys []string
	for i := range v.plan.Clock {
		b := &v.plan.Clock[i]
		h := &cv.heaps[i]
		for h.Len() > 0 {
			top := (*h)[0]
			if b.HoldsKey(top.k, thr[i]) == b.Leaves() {
				break // still on the side it was
			}
			minheap.Pop(h)
			keys = append(keys, top.key)
		}
	}
	if len(keys) == 0 {
		return
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	for _, k := range keys {
		if !v.holdsKey(k) {
			continue // changed or gone since it was pushed
		}
		if s.overlay[rowRef{tb.oid, k}] == nil {
			s.setOverlay(tb, k, tb.rows.vals(tb.held(k)).values())
		}
		v.touchKey(k)
		if !v.dirty {
			v.dirty = true
			s.dirty = append(s.dirty, v)
		}
	}
}

// settleClock settles the views the clock touched, as finish settles a
// transaction's (no row changed its values).
func (s *state) settleClock(lsn change.LSN) {
	for _, changed := range s.overlayRows {
		changed.id = changed.tb.held(changed.key)
	}
	slices.SortFunc(s.dirty, func(a, b *view) int { return cmpU64(a.id, b.id) })
	for _, v := range s.dirty {
		v.dirty = false
		s.settle(v, lsn) // only live views were touched (clockView)
	}
	s.dirty = s.dirty[:0]
	for _, changed := range s.overlayRows {
		if id := changed.id; id != 0 && changed.tb.rows.holder(id) == 0 {
			s.dropRow(changed.tb, id)
		}
	}
	s.recycleOverlay()
	s.refreshViews(lsn)
}

// trimTimes rebuilds a view's heaps when stale entries outnumber the rows.
func (v *view) trimTimes() {
	cv := v.x().clk
	held := int(v.countN()) + len(cv.pending)
	for i := range cv.heaps {
		if len(cv.heaps[i]) > 2*held+1024 {
			v.rebuildTimes()
			return
		}
	}
}

// internPending makes a landed read's pending rows (ids of its stage st)
// the view's, shared held rows with a hold each, releases the pending
// rows it held before, and rebuilds the heaps over the new result and
// pending rows.
func (s *state) internPending(v *view, st *rowTable, pend *idSet) {
	vs := v.srcs[0]
	rt := &vs.t.rows
	old := v.x().clk.pending
	v.x().clk.pending = make(map[string]rowID, pend.len())
	for sid := range pend.all() {
		id := s.internRow(vs, st, sid)
		v.x().clk.pending[rt.key(id)] = id
	}
	s.releasePending(v, old)
	v.rebuildTimes()
}

// acceptedAt is v's Accepted for sb at the core's position, with the
// clock the result is exact at for a clocked view (byKey: view.accepted's).
func (s *state) acceptedAt(v *view, sb *sub, byKey []rowID) Output {
	o := v.accepted(sb, s.pos, byKey)
	if v.x().clk != nil {
		o.Clock = s.clock
	}
	return o
}

// landedAt is the position a landed read's delta is at: the last commit
// (nothing committed since), or for a clocked view the last clock's
// position when that is later (its result is exact at that clock).
func (s *state) landedAt(v *view) change.LSN {
	if v.x().clk != nil {
		return max(s.applied, s.clockLSN)
	}
	return s.applied
}
