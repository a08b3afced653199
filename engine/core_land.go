package engine

import (
	"slices"
	"unsafe"

	"github.com/freshetdb/freshet/change"
)

// readDone records a read's result and lands it when it can.
func (s *state) readDone(id ReadID, res ReadResult) {
	r := s.reads.get(id)
	if r == nil {
		return
	}
	if f := res.Failed; f != nil {
		s.reads.remove(id)
		s.endView(r.v, f.Code, f.Reason, f.Retryable)
		s.trimLog()
		return
	}
	if !r.done {
		s.doneReads = append(s.doneReads, id)
	}
	r.done, r.snap, r.rows, r.held, r.complete = true, res.Snapshot, res.Rows, res.Encoded.rows, res.Complete
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
		r := s.reads.get(id)
		switch {
		case r == nil:
		case s.pos >= r.snap.LSN && s.clockReady(r):
			ids = append(ids, id)
		default:
			rest = append(rest, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := s.reads.get(id)
		if r == nil {
			continue
		}
		if r.v.status == viewDead {
			s.reads.remove(id)
			continue
		}
		if r.v.isJoin() {
			if !slices.Contains(r.v.x().js.reads, r) {
				s.reads.remove(id) // a read of a round asked again since
				continue
			}
			if s.joinReadsReady(r.v) {
				s.landJoin(r.v)
			} else {
				rest = append(rest, id)
			}
			continue
		}
		s.reads.remove(id)
		s.landRead(r)
	}
	s.doneReads = rest
	s.trimLog()
}

// trimLog drops logged transactions no pending read needs.
func (s *state) trimLog() {
	if s.reads.len() == 0 {
		s.txnLogBase += len(s.txnLog)
		s.txnLog = nil
		return
	}
	if len(s.txnLog) == 0 {
		return // nothing to trim: no need to look at every pending read
	}
	first := s.txnLogBase + len(s.txnLog)
	for r := range s.reads.all() {
		first = min(first, r.logStart)
	}
	if n := first - s.txnLogBase; n > 0 {
		clear(s.txnLog[:n])
		s.txnLog = s.txnLog[n:]
		s.txnLogBase = first
	}
}

// replay calls fn for every change of the log since start that snap does
// not contain, in commit order.
func (s *state) replay(start int, snap Snapshot, fn func(ch *change.Change) bool) bool {
	for i := max(start-s.txnLogBase, 0); i < len(s.txnLog); i++ {
		lt := s.txnLog[i]
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
	rs := newResultSet(v.plan, s.opts.WindowMargin)
	n := len(r.rows) + len(r.held)
	complete := !rs.window || r.complete || r.want == 0 || int64(n) < r.want
	// st, the read's stage, holds its rows as replayed so far (a row read
	// twice keeps its last values); the result names them by their ids
	// there until intern makes them held rows. A view that is neither
	// clocked nor a window keeps every row it reads: its result is all of
	// the stage.
	st := &rowTable{stage: true}
	st.reserve(n)
	plain := v.x().clk == nil && !rs.window
	if !rs.ordered && n > 0 {
		rs.members = &idSet{}
		rs.members.reserve(n)
	}
	// pend: a clocked view's rows the clock may still let in.
	var pend idSet
	take := func(id rowID) {
		if rs.ordered {
			rs.insert(rs.newEntry(st, id, v))
		} else {
			rs.addMember(id)
		}
	}
	add := func(id rowID) {
		if plain && !rs.ordered {
			rs.addMember(id)
			return
		}
		rs.removeKey(st, st.key(id))
		if v.x().clk != nil {
			pend.remove(id)
			keep, hold := v.clockEval(v.idRow(st, id))
			if !keep {
				if hold {
					pend.add(id)
				}
				return
			}
		}
		take(id)
	}
	for _, row := range r.rows {
		if len(row) == 0 || row[0] == nil {
			continue
		}
		vals := vs.layoutRow(row[0])
		if k, ok := tb.keyOf(vals); ok {
			add(st.putVals(k, vals))
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
		if b, ok := tb.keyOfHeldBuf(rv); ok {
			add(st.put(unsafe.String(unsafe.SliceData(b), len(b)), rv))
		}
	}
	r.rows, r.held = nil, nil
	// The read's last row bounds what a window knows: it was cut there.
	rs.complete = complete
	if !rs.complete && len(rs.list) > 0 {
		rs.bound = boundAt(rs.list[len(rs.list)-1])
	}
	// forget takes the staged row of k out of the stage, the result and
	// pending.
	forget := func(k string) {
		if id := st.lookup(k); id != 0 {
			rs.removeKey(st, k)
			pend.remove(id)
			st.drop(id)
		}
	}
	ok := s.replayTable(r, tb, func(k string) []any {
		if id := st.lookup(k); id != 0 {
			return st.vals(id).values()
		}
		return nil
	}, func() {
		*st = rowTable{stage: true}
		pend = idSet{}
		rs.result, rs.members = nil, nil
		rs.list = nil
		rs.complete, rs.bound = true, nil
	}, func(oldKey, newKey string, newVals []any) bool {
		if oldKey != "" {
			forget(oldKey)
		}
		if newVals == nil {
			return true
		}
		q := v.row(newVals)
		if !loaded(q) {
			return false
		}
		var keep, hold bool
		if v.x().clk != nil {
			keep, hold = v.clockEval(q)
		} else {
			keep = v.keeps(q)
		}
		if keep || hold {
			forget(newKey)
			id := st.insert(newKey, newVals)
			if keep {
				take(id)
			} else {
				pend.add(id)
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
	v.checkRows(&rs, st)
	rs.trim()
	if !rs.covered() {
		s.askRead(v)
		return
	}
	old := v.resultSet
	wasRefilling := v.status == viewRefilling
	order := s.intern(v, &rs, st)
	v.resultSet = rs
	v.dropRead()
	if v.x().clk != nil {
		s.internPending(v, st, &pend)
	}
	s.goLive(v, &old, wasRefilling, order)
}

// goLive makes a view whose read landed live: a view that was refilling
// or re-hydrating sends its subscribers what changed since the result
// they hold (old), a view hydrating for the first time records what
// they will be shown; then every subscriber not yet accepted is.
// readOrder is, for an unordered single-table view, its result's rows in
// the order its read gave them, those replayed over it after them (nil
// for other views): the start of the key order its subscribers are sent
// (inKeyOrder).
func (s *state) goLive(v *view, old *resultSet, wasRefilling bool, readOrder []rowID) {
	if s.endEvalError(v) {
		return
	}
	v.status = viewLive
	v.dropStale()
	if v.plan.Agg != nil {
		d := v.rebuildAgg()
		if s.endEvalError(v) {
			return
		}
		if wasRefilling {
			s.releaseResult(v, old)
			s.emit(v, d, s.landedAt(v))
		}
	} else if wasRefilling {
		d := v.landedDelta(old)
		s.releaseResult(v, old)
		// At the last commit: the result is exact there (nothing
		// committed since), and a delta is a commit's.
		s.emit(v, d, s.landedAt(v))
	} else if v.ordered {
		v.snapshotShown()
	}
	var byKey []rowID
	for _, sb := range v.subs {
		if !sb.accepted {
			sb.accepted = true
			if byKey == nil && readOrder != nil && sb.mode == ModeRows && !v.ordered && v.plan.Agg == nil && !v.plan.Count {
				byKey = inKeyOrder(readOrder, v.srcs[0].t.rows.key)
			}
			s.out.Outputs = append(s.out.Outputs, s.acceptedAt(v, sb, byKey))
		}
	}
}

// landedDelta is what a refilled or re-hydrated view's subscribers are
// told: how its result differs from old, the result before the read.
func (v *view) landedDelta(old *resultSet) delta {
	var d delta
	switch {
	case v.plan.Count:
		d.count = v.countN()
		d.changed = d.count != old.countN()
		return d
	case v.ordered:
		return v.diffShown()
	}
	if v.byID() {
		// A single-table view's rows are the shared held rows, which the
		// transactions since its read changed in place: every row is
		// sent again.
		rt := &v.srcs[0].t.rows
		for _, id := range v.sortedIDs(rt) {
			d.rows = append(d.rows, v.idResultRow(rt, id))
		}
		for id := range old.members.all() {
			if k := rt.key(id); !v.hasKey(rt, k) {
				d.removed = append(d.removed, Key(k))
			}
		}
		slices.Sort(d.removed)
		d.changed = len(d.rows) > 0 || len(d.removed) > 0
		return d
	}
	// A join's entries keep the row they entered the result with, so an
	// unchanged row is left out.
	for _, e := range v.entries() {
		if oe := old.result.get(e.key); v.isJoin() && oe != nil && sameValues(v.plan.Project(oe.enteredRow()), v.plan.Project(e.enteredRow())) {
			continue
		}
		d.rows = append(d.rows, v.resultRow(e))
	}
	for oe := range old.result.all() {
		if !v.result.has(oe.key) {
			d.removed = append(d.removed, Key(oe.key))
		}
	}
	slices.Sort(d.removed)
	d.changed = len(d.rows) > 0 || len(d.removed) > 0
	return d
}

// replayTable brings a read of tb to the core's position: it replays the
// logged changes of tb that the read's snapshot does not contain, calling
// truncated for a TRUNCATE of tb and changed for a row change (the old
// row's key, "" when the change carries none; the new row's key and values
// for an insert or update, newVals nil for a delete). readRow returns the
// read's row of a key as replayed so far (values the change did not send
// are filled from it). It returns false when a change's new key is
// unknown or changed returns false: the read must be asked again.
func (s *state) replayTable(r *read, tb *table, readRow func(key string) []any, truncated func(), changed func(oldKey, newKey string, newVals []any) bool) bool {
	return s.replay(r.logStart, r.snap, func(ch *change.Change) bool {
		switch ch.Op {
		case change.OpTruncate:
			if ch.Truncate == nil {
				return true
			}
			for _, rel := range ch.Truncate.Rels {
				if rel.OID == tb.oid {
					truncated()
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
		oldKey, newKey, newVals, ok := s.replayRow(tb, ch, readRow)
		if !ok {
			return false
		}
		return changed(oldKey, newKey, newVals)
	})
}

// layoutRow places a read's row of vs (values in the source's column
// order) in its table's layout, the other slots unloaded.
func (vs *viewSource) layoutRow(row []any) []any {
	vals := make([]any, len(vs.t.cols))
	for i := range vals {
		vals[i] = unloaded{}
	}
	for j, slot := range vs.col {
		if j < len(row) {
			vals[slot] = row[j]
		}
	}
	return vals
}
