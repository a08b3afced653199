package engine

import (
	"slices"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

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
			s.cur = &loggedTxn{xid: t.XID, lsn: t.CommitLSN}
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
	if changed := s.overlay[rowRef{tb.oid, key}]; changed != nil {
		return changed.after
	}
	if id := tb.held(key); id != 0 {
		return tb.rows.vals(id).values()
	}
	return nil
}

// setOverlay records in the overlay that the transaction left row key of
// tb as after (nil: deleted), remembering on its first change the row as
// held before the transaction; overlay rows are reused across
// transactions (freeOverlayRows).
func (s *state) setOverlay(tb *table, key string, after []any) {
	k := rowRef{tb.oid, key}
	changed := s.overlay[k]
	if changed == nil {
		if n := len(s.freeOverlayRows); n > 0 {
			changed = s.freeOverlayRows[n-1]
			s.freeOverlayRows = s.freeOverlayRows[:n-1]
			*changed = overlayRow{tb: tb, key: key}
		} else {
			changed = &overlayRow{tb: tb, key: key}
		}
		if id := tb.held(key); id != 0 {
			changed.before = tb.rows.vals(id)
		}
		s.overlay[k] = changed
		s.overlayRows = append(s.overlayRows, changed)
	}
	changed.after = after
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
	oldKey, oldVals := s.oldRow(tb, ch, &s.mem)
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
		newVals, _ = tb.decodeRow(ch.Rel, ch.New, fill, s.opts.Types, &s.mem)
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
	s.changeSeq++
	s.routedKeys = [2]string{oldKey, newKey}
	visit := s.touchFn
	for _, k := range s.routedKeys {
		if k == "" {
			continue
		}
		if id := tb.held(k); id != 0 {
			first, more := tb.rows.holders(id)
			if first != 0 {
				visit(s.holderSrc(first))
			}
			for _, hid := range more {
				visit(s.holderSrc(hid))
			}
		}
	}
	if newVals != nil {
		tb.route.match(newVals, visit)
	}
	if len(s.refilling) > 0 {
		s.touchRefilling(tb)
	}
	// An update that changes the key carries the row's old key (Old): the
	// row keeps its identity under the new key, back to the key it had
	// before the transaction however many times it changed.
	from := ""
	if ch.Op == change.OpUpdate && oldKey != "" && newKey != "" && oldKey != newKey {
		from = oldKey
		if prev := s.overlay[rowRef{tb.oid, oldKey}]; prev != nil && prev.from != "" {
			from = prev.from
		}
		if from == newKey {
			from = "" // back to its own key: an update
		}
	}
	if oldKey != "" && (ch.Op == change.OpDelete || oldKey != newKey) {
		s.setOverlay(tb, oldKey, nil)
		s.overlay[rowRef{tb.oid, oldKey}].from = ""
	}
	if newKey != "" {
		s.setOverlay(tb, newKey, newVals)
		if ch.Op != change.OpUpdate || oldKey != "" && oldKey != newKey {
			s.overlay[rowRef{tb.oid, newKey}].from = from
		}
	} else if ch.Op != change.OpDelete {
		// The new row's key is unknown: every view of the table must
		// re-read.
		for vs := range tb.srcs.all() {
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
func (s *state) oldRow(tb *table, ch *change.Change, mem *applyMem) (string, []any) {
	if ch.Old == nil {
		return "", nil
	}
	oldVals, _ := tb.decodeRow(ch.Rel, ch.Old, nil, s.opts.Types, mem)
	k, _ := tb.keyOf(oldVals)
	return k, oldVals
}

// replayRow decodes a logged change of tb for a read being brought to the
// core's position, against readRow (the read's rows so far, by key): the old
// row's key and, for an insert or an update, the new row's key and values
// (values the change did not send filled from readRow's row). ok is false
// when the new row's key is unknown.
func (s *state) replayRow(tb *table, ch *change.Change, readRow func(key string) []any) (oldKey, newKey string, newVals []any, ok bool) {
	oldKey, _ = s.oldRow(tb, ch, nil)
	if ch.Op == change.OpDelete {
		return oldKey, "", nil, true
	}
	if oldKey == "" {
		nv, _ := tb.decodeRow(ch.Rel, ch.New, nil, s.opts.Types, nil)
		oldKey, _ = tb.keyOf(nv)
	}
	var fill []any
	if missing(ch.New) {
		fill = readRow(oldKey)
	}
	newVals, _ = tb.decodeRow(ch.Rel, ch.New, fill, s.opts.Types, nil)
	newKey, ok = tb.keyOf(newVals)
	return oldKey, newKey, newVals, ok
}

// touchOnce touches vs for the change being routed, once per change
// (s.changeSeq numbers the changes).
func (s *state) touchOnce(vs *viewSource) {
	if vs.touchedIn == s.changeSeq {
		return
	}
	vs.touchedIn = s.changeSeq
	s.touch(vs, s.routedKeys[0], s.routedKeys[1])
}

// fillUnchanged fills the values a change did not send (unchanged TOAST)
// from cur, the row as held.
func fillUnchanged(vals []any, ch *change.Change, m []int, cur []any) {
	for i, v := range ch.New {
		if v.Kind != change.Unchanged && v.Kind != change.Absent || i >= len(m) {
			continue
		}
		if slot := m[i]; slot < len(cur) && !isUnloaded(cur[slot]) {
			vals[slot] = cur[slot]
		}
	}
}

// truncate empties a table within the transaction.
func (s *state) truncate(tb *table) {
	for id := range tb.rows.all() {
		s.setOverlay(tb, tb.rows.key(id), nil)
	}
	for _, changed := range s.overlayRows {
		if changed.tb == tb {
			changed.after, changed.from = nil, ""
		}
	}
	for vs := range tb.srcs.all() {
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
		for id := range v.members.all() {
			v.touchKey(tb.rows.key(id))
		}
		for e := range v.result.all() {
			v.touchKey(e.key)
		}
		if v.x().clk != nil {
			// Rows a bound has not let in yet go too: left pending,
			// they would be held without a row in the table, and the
			// clock passing them would find none
			// (testdata/core/clock_truncate.txt).
			for k := range v.x().clk.pending {
				v.touchKey(k)
			}
		}
	}
}

// finish settles a transaction: every dirty view computes its net change
// and emits one delta.
func (s *state) finish(lsn change.LSN) {
	// The held rows take their new values; a new row gets an id (what
	// views settling take in) and joins the key set below if one holds
	// it.
	for _, changed := range s.overlayRows {
		rt := &changed.tb.rows
		id := rt.lookup(changed.key)
		if changed.after != nil {
			if id == 0 {
				id, changed.fresh = rt.newRow(changed.key, changed.after), true
			} else {
				rt.setVals(id, changed.after)
			}
		}
		changed.id = id
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
	for _, changed := range s.overlayRows {
		id := changed.id
		if id == 0 {
			continue
		}
		tb := changed.tb
		held := tb.rows.holder(id) != 0
		switch {
		case changed.fresh && held:
			tb.rows.keys.put(&tb.rows, id)
		case changed.fresh:
			s.freeRow(tb, id)
		case changed.after == nil || !held:
			// A deleted row leaves the key set (a view re-reading its
			// result may hold it still: it is freed when that view lets
			// it go), and so does a row no view holds.
			s.dropRow(tb, id)
		}
	}
	s.recycleOverlay()
	s.pos = max(s.pos, lsn)
	s.applied = max(s.applied, lsn)
	if s.cur != nil && s.keepingLog() {
		s.txnLog = append(s.txnLog, s.cur)
	} else if s.cur != nil {
		// Not kept: its record serves the next transaction.
		clear(s.cur.changes)
		s.cur.changes = s.cur.changes[:0]
		s.spare = s.cur
	}
	s.cur = nil
	s.inTxn = false
	s.refreshViews(lsn)
	s.land()
}

// recycleOverlay empties the overlay once its transaction is settled; its
// rows serve the next (freeOverlayRows).
func (s *state) recycleOverlay() {
	clear(s.overlay)
	for _, changed := range s.overlayRows {
		*changed = overlayRow{}
		s.freeOverlayRows = append(s.freeOverlayRows, changed)
	}
	clear(s.overlayRows)
	s.overlayRows = s.overlayRows[:0]
	s.mem.slots.reset() // the overlay's rows were its slices
}

// refreshViews re-reads the views a settled change left needing rows
// they do not hold.
func (s *state) refreshViews(lsn change.LSN) {
	// In view order, not the order rowChange found them (a map's): the
	// reads and touches that follow are outputs.
	slices.SortFunc(s.refresh, func(a, b *view) int { return cmpU64(a.id, b.id) })
	for _, v := range s.refresh {
		if v.status == viewLive {
			s.refill(v, lsn)
		}
	}
	s.refresh = s.refresh[:0]
}

// rowBefore returns the values a row had before the transaction (zero:
// the core did not hold it).
func rowBefore(s *state, tb *table, key string) rowVals {
	if changed := s.overlay[rowRef{tb.oid, key}]; changed != nil {
		return changed.before
	}
	return rowVals{}
}

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
		changed := s.overlay[rowRef{tb.oid, k}]
		if changed == nil || changed.after == nil {
			continue
		}
		// The row's own copy of the key, in its record, the same bytes:
		// one taken before the row's new values would keep the old
		// record alive in the entries made here.
		k = tb.rows.key(changed.id)
		nexts[i].key = k
		// A plain view keeps only the projection: its query.Row is
		// scratch.
		plain := !v.ordered && !v.plan.Count && v.x().agg == nil
		var q query.Row
		if plain {
			q = v.rowInto(&s.scratchRow, changed.after)
		} else {
			q = v.ownedRow(changed.after)
		}
		if !loaded(q) {
			// A value this view needs is an unchanged TOASTed value of a
			// row it did not hold: read the result again.
			s.refill(v, lsn)
			return
		}
		keep := false
		if v.x().clk != nil {
			var hold bool
			keep, hold = v.clockEval(q)
			if hold {
				v.pushTimes(k, q)
				nexts[i].hold = !keep
			}
		} else {
			keep = v.keeps(q)
		}
		if keep {
			if plain {
				// Cut from shared chunks: the delta's receivers keep it.
				nexts[i].now = v.plan.ProjectTo(s.mem.vals.alloc(len(v.plan.Output)), q)
			}
			nexts[i].id = changed.id
			if v.ordered {
				nexts[i].e = &entry{key: k, row: changed.id}
				nexts[i].e.setEntered(q)
			}
		}
	}
	var d delta
	d.rows = s.rowsBuf[:0]
	defer func() {
		clear(s.rowsBuf[:cap(s.rowsBuf)])
		s.rowsBuf = s.rowsBuf[:0]
	}()
	before := v.countN()
	for _, n := range nexts {
		old := v.removeKey(&tb.rows, n.key)
		if old != 0 {
			s.dropHold(vs, n.key, old)
		}
		if v.x().clk != nil {
			if p := v.x().clk.pending[n.key]; p != 0 {
				delete(v.x().clk.pending, n.key)
				s.dropHold(vs, n.key, p)
			}
			if n.hold {
				id := s.overlay[rowRef{tb.oid, n.key}].id
				v.x().clk.pending[n.key] = id
				tb.rows.addHolder(id, vs)
			}
		}
		kept := false
		switch {
		case n.e != nil:
			kept = v.insert(n.e)
		case n.id != 0:
			v.addMember(n.id)
			kept = true
		}
		if kept {
			tb.rows.addHolder(n.id, vs)
		}
		if v.x().agg != nil {
			// The row leaves its group as it was before the
			// transaction and enters its group as it is now.
			if old != 0 {
				v.aggRow(n.key, query.Row{rowBefore(s, tb, n.key).pick(vs.col)}, -1)
			}
			if kept {
				v.aggRow(n.key, v.ownedRow(s.overlay[rowRef{tb.oid, n.key}].after), 1)
			}
			continue
		}
		if v.ordered || v.plan.Count {
			continue
		}
		switch {
		case old != 0 && !kept:
			d.removed = append(d.removed, Key(n.key))
		case kept:
			now := n.now // the row as the transaction left it
			if old == 0 || !v.sameOutput(rowBefore(s, tb, n.key), now, &s.cmpBuf) {
				d.rows = append(d.rows, ResultRow{Key: Key(n.key), Values: now})
			}
			if old == 0 {
				if ov := s.overlay[rowRef{tb.oid, n.key}]; ov != nil && ov.from != "" {
					d.keyChanges = append(d.keyChanges, KeyChange{From: Key(ov.from), To: Key(n.key)})
				}
			}
		}
	}
	switch {
	case v.x().agg != nil:
		d = v.flushAgg()
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
		d.keyChanges = pairedKeyChanges(d.keyChanges, d.removed)
		s.rowsBuf = d.rows // grown: kept as scratch
		d.rows = nil
		if n := len(s.rowsBuf); n > 0 {
			// The delta's rows, cut from shared chunks: its receivers
			// keep them.
			d.rows = s.mem.rows.alloc(n)
			copy(d.rows, s.rowsBuf)
		}
	}
	if v.x().clk != nil {
		v.trimTimes()
	}
	v.members.fit()
	s.emit(v, d, lsn)
}

// settleNext is a touched key of a single-table view and its row after
// the transaction (id 0: not in the result), with its entry in an ordered
// view.
type settleNext struct {
	key string
	id  rowID
	e   *entry
	now []any // a plain view's projection of the row
	// hold: a clocked view holds the row pending (not in the result yet).
	hold bool
}

// dropHold releases vs's hold on row id (of key) while a transaction
// settles: a row of the transaction's overlay is left to finish, which
// sees it after every view has settled.
func (s *state) dropHold(vs *viewSource, key string, id rowID) {
	s.release(vs.t, key, id, vs)
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

// pairedKeyChanges keeps the key changes whose old key left the result in
// the same delta (removed is sorted): a row that entered under its new
// key while its old one was not in the result is a plain insert.
func pairedKeyChanges(kc []KeyChange, removed []Key) []KeyChange {
	if len(kc) == 0 {
		return nil
	}
	out := kc[:0]
	for _, c := range kc {
		if _, ok := slices.BinarySearch(removed, c.From); ok {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
