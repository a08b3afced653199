package engine

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/freshetdb/freshet/query"
)

// refuse outputs a refusal of subscription id.
func (s *state) refuse(id SubID, code query.Code, reason string, retryable bool) {
	s.out.Outputs = append(s.out.Outputs, Output{Sub: id, Kind: OutputRefused, Code: code, Reason: reason, Retryable: retryable})
}

// subscribe registers a subscription, creating its view if needed.
func (s *state) subscribe(id SubID, plan *query.Plan, mode Mode) {
	if s.subs.get(id) != nil {
		s.refuse(id, CodeInternal, fmt.Sprintf("subscription %d already exists", id), false)
		return
	}
	if plan == nil || len(plan.Sources) == 0 {
		s.refuse(id, CodeInternal, "no plan", false)
		return
	}
	v := s.views.get(plan.Key)
	if v == nil {
		var reason string
		if v, reason = s.newView(plan); v == nil {
			s.refuse(id, CodeInternal, reason, false)
			return
		}
	}
	sb := &sub{id: id, mode: mode, v: v}
	s.subs.put(sb)
	v.subs = append(v.subs, sb)
	if v.status == viewLive {
		sb.accepted = true
		s.out.Outputs = append(s.out.Outputs, s.acceptedAt(v, sb, nil))
	}
}

// newView creates a view for plan and asks for its hydration.
func (s *state) newView(plan *query.Plan) (*view, string) {
	for _, src := range plan.Sources {
		if len(src.Table.RowKey()) == 0 || src.KeyN == 0 {
			return nil, fmt.Sprintf("table %s.%s has no primary key", src.Table.Schema, src.Table.Name)
		}
	}
	if plan.Clocked() && len(plan.Sources) > 1 {
		return nil, "a time condition on a join is not served"
	}
	s.nextViewID++
	v := &view{id: s.nextViewID}
	v.resultSet = newResultSet(plan, s.opts.WindowMargin)
	if plan.Clocked() {
		v.mut().clk = s.newClockView(plan)
		s.clocked[v] = struct{}{}
	}
	for i, src := range plan.Sources {
		tb := s.tables[src.Table.OID]
		if tb == nil {
			tb = newTable(src.Table)
			s.tables[src.Table.OID] = tb
		}
		col := s.colBuf[:0]
		for j := range src.Columns {
			slot := tb.columnFor(&src.Columns[j])
			col = append(col, slot)
			tb.cols[slot].need++
		}
		s.colBuf = col
		vs := &viewSource{v: v, idx: int32(i), src: src, t: tb, col: s.sharedCols(col)}
		s.newHolderID(vs)
		if v.isJoin() {
			vs.j = &joinSource{rows: make(map[string]rowID), byJoin: make(map[string]map[string]rowID), nulls: make(map[string]bool)}
		}
		tb.srcs.put(vs)
		tb.route.add(vs)
		v.srcs = append(v.srcs, vs)
	}
	if v.isJoin() {
		s.initJoin(v)
	}
	s.views.put(v)
	v.status = viewHydrating
	s.askRead(v)
	return v, ""
}

// maxColSets bounds state.colSets.
const maxColSets = 4096

// sharedCols returns a slice holding col's values (col is scratch),
// shared by every view source reading the same layout positions.
func (s *state) sharedCols(col []int) []int {
	k := s.colKey[:0]
	for _, c := range col {
		k = binary.AppendUvarint(k, uint64(c))
	}
	s.colKey = k
	if shared, ok := s.colSets[string(k)]; ok {
		return shared
	}
	if s.colSets == nil || len(s.colSets) >= maxColSets {
		s.colSets = make(map[string][]int)
	}
	shared := slices.Clip(slices.Clone(col))
	s.colSets[string(k)] = shared
	return shared
}

// askRead asks for the reads a view needs to (re)build its result.
func (s *state) askRead(v *view) {
	if v.isJoin() {
		s.askJoinReads(v)
		return
	}
	plan := v.plan
	margin := int64(s.opts.WindowMargin)
	args, oids, formats := plan.Args()
	var want int64
	if v.window {
		want = int64(v.cap)
	}
	s.nextReadID++
	r := &read{id: s.nextReadID, v: v, src: -1, logStart: s.txnLogBase + len(s.txnLog), want: want}
	s.reads.put(r)
	v.mut().read = r
	s.out.Reads = append(s.out.Reads, ReadRequest{
		ID: r.id, Plan: plan, Sources: allSources(len(plan.Sources)),
		// Rendered by the runtime (ReadSQL), not here: the core's
		// goroutine must not spend time in the size of a client's query.
		// A clocked view reads the rows its clock may still let in too.
		Render: query.RenderOptions{Columns: query.SelectNeeded, Window: v.ordered, Margin: margin, Hold: v.x().clk != nil},
		Args:   args, ArgOIDs: oids, ArgFormats: formats,
		Want: want, RowLimit: s.opts.ReadRowLimit,
	})
}

// allSources lists the source indexes 0..n-1 (a read of the whole query).
func allSources(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// unsubscribe removes a subscription; its view dies with its last one.
func (s *state) unsubscribe(id SubID) {
	sb := s.subs.remove(id)
	if sb == nil {
		return
	}
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
		s.subs.remove(sb.id)
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
	if s.views.get(v.plan.Key) == v {
		s.views.remove(v.plan.Key)
	}
	if v.x().read != nil {
		s.reads.remove(v.x().read.id)
		v.dropRead()
	}
	for r := range s.reads.all() {
		if r.v == v {
			s.reads.remove(r.id)
		}
	}
	if !s.soleReader(v) {
		// (A sole reader's rows are all the table holds, and the table
		// goes with the view below: they are dropped with it rather than
		// released one by one, a lookup and a removal each, 0.3 s of
		// CPU for a million rows.)
		s.releaseResult(v, &v.resultSet)
	}
	if v.x().clk != nil {
		s.releasePending(v, v.x().clk.pending)
		v.x().clk.pending = nil
		delete(s.clocked, v)
	}
	for _, vs := range v.srcs {
		tb := vs.t
		tb.route.remove(vs)
		tb.srcs.remove(vs)
		for _, slot := range vs.col {
			tb.cols[slot].need--
		}
		if vs.j != nil {
			for k, h := range vs.j.rows {
				s.release(tb, k, h, vs)
			}
			vs.j.rows, vs.j.byJoin, vs.j.nulls = nil, nil, nil
		}
		if tb.srcs.len() == 0 {
			delete(s.tables, tb.oid)
		}
		// Every row it held was let go above (or went with its table).
		s.freeHolderID(vs)
	}
	s.trimLog()
}

// soleReader reports whether v is a single-table view whose source is
// the only one reading its table, outside a transaction (the overlay
// refers to held rows until the transaction settles).
func (s *state) soleReader(v *view) bool {
	if v.isJoin() || len(v.srcs) != 1 || len(s.overlay) > 0 {
		return false
	}
	vs := v.srcs[0]
	return vs.t.srcs.get(vs) == vs && vs.t.srcs.len() == 1
}

// release drops vs's hold on row id (key k) of tb; a row nothing holds
// leaves the table, unless the transaction settling has it in its
// overlay (finish decides, once every view has settled).
func (s *state) release(tb *table, k string, id rowID, vs *viewSource) {
	rt := &tb.rows
	rt.dropHolder(id, vs)
	if rt.holder(id) != 0 {
		return
	}
	if changed := s.overlay[rowRef{tb.oid, k}]; changed != nil && changed.id == id {
		return
	}
	s.dropRow(tb, id)
}

// releaseResult drops a single-table view's holds on the rows of rs (a
// join view holds its rows per source, released by killView and
// landJoin).
func (s *state) releaseResult(v *view, rs *resultSet) {
	if v.isJoin() {
		return
	}
	vs := v.srcs[0]
	rt := &vs.t.rows
	for id := range rs.members.all() {
		s.release(vs.t, rt.key(id), id, vs)
	}
	for e := range rs.result.all() {
		s.release(vs.t, e.key, e.row, vs)
	}
}

// intern makes the rows of a freshly built single-table result, ids of
// the read's stage st, the table's held rows, taking a hold on each: a
// row the table holds already takes the read's values of the columns it
// lacks (mergeHeld), a new one the stage's record. For an unordered
// result it returns the table's ids in the stage's order, the order the
// read gave them in with the rows replayed after them (goLive).
func (s *state) intern(v *view, rs *resultSet, st *rowTable) []rowID {
	vs := v.srcs[0]
	tb := vs.t
	rt := &tb.rows
	if n := int(rs.countN()); rt.len() == 0 {
		// The table's first rows: sized once, not grown by rehashing.
		rt.reserve(n)
	}
	if rs.members == nil {
		for e := range rs.result.all() {
			e.row = s.internRow(vs, st, e.row)
			// The table's copy of the key: the stage's record may be
			// left for the collector.
			e.key = rt.key(e.row)
		}
		return nil
	}
	members := &idSet{}
	members.reserve(rs.members.len())
	order := make([]rowID, 0, rs.members.len())
	for sid := range st.inOrder() {
		if rs.members.has(sid) {
			id := s.internRow(vs, st, sid)
			members.add(id)
			order = append(order, id)
		}
	}
	members.fit()
	rs.members = members
	return order
}

// internRow makes row sid of stage st a held row of vs's table with a
// hold of vs, and returns its id there.
func (s *state) internRow(vs *viewSource, st *rowTable, sid rowID) rowID {
	rt := &vs.t.rows
	id, added := rt.adopt(st, sid)
	if !added {
		vs.t.mergeHeld(id, st.vals(sid))
	}
	rt.addHolder(id, vs)
	return id
}
