package engine

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"sort"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

// viewStatus is where a view is in its life.
type viewStatus uint8

const (
	viewHydrating viewStatus = iota // asked for its first read; no subscriber accepted
	viewRefilling                   // live, but waiting for a read (refill, re-hydration): deltas wait
	viewLive
	viewDead
)

// sub is a subscription.
type sub struct {
	id       SubID
	v        *view
	mode     Mode // beside accepted: 24 bytes, not 32
	accepted bool
}

// viewSource is one source of a view's plan bound to the table it reads.
type viewSource struct {
	v   *view
	idx int32 // in plan.Sources
	// hid is the view source's holder id: what a held row it holds
	// names it by (rowTable.addHolder; state.holderSrcs).
	hid uint32
	src *query.Source
	t   *table
	col []int // layout position of each of src.Columns
	// touchedIn is the state.changeSeq of the last change that touched
	// the view source: a change reaching it twice touches it once.
	touchedIn uint64
	reg       registration // where the route has it
	// j is what a join view's source holds; nil for single-table views
	// (they keep their rows in the view's result).
	j *joinSource
}

// joinSource is the part of a view source only join views need.
type joinSource struct {
	// rows holds every row of the table that satisfies the source's own
	// constraints, by primary key: its id in the table's rows.
	rows map[string]rowID
	// byJoin indexes rows by the encoding of the source's join columns
	// (On[k].Column for each k).
	byJoin map[string]map[string]rowID
	// nulls holds, for the table of a NOT IN (subquery), the keys of the
	// rows whose output column is NULL (they make NOT IN never true).
	nulls map[string]bool
	// byCol indexes rows by each column a later source joins on.
	byCol map[int]map[string]map[string]rowID
}

// entry is one row of an ordered or join view's result (32 bytes): its
// key, the held row (a single-table view's) and what ordered and join
// views add. An unordered single-table view holds no entries, only its
// rows' ids (resultSet.members).
type entry struct {
	key string
	row rowID // single-table views: the row in the table's rows
	ext *entryExt
}

// entryExt is the part of an entry only ordered and join views need.
type entryExt struct {
	entered query.Row  // the row as it entered the result
	join    *joinEntry // join views
}

// joinEntry is the part of an entry only join views need.
type joinEntry struct {
	rows    []rowID  // per source (0 for a null-extended one, or a subquery's)
	root    string   // the root row's key
	srcKeys []string // each source's key
}

// q returns the row an ordered or join view's entry entered the result
// with (nil for other views).
func (e *entry) enteredRow() query.Row {
	if e.ext == nil {
		return nil
	}
	return e.ext.entered
}

// newEntry returns the entry of an ordered single-table view's result
// for row id of rt (its key the row's own, in its record: one taken
// before an update would keep the row's old record alive).
func (rs *resultSet) newEntry(rt *rowTable, id rowID, v *view) *entry {
	e := &entry{key: rt.key(id), row: id}
	e.setEntered(query.Row{rt.vals(id).pick(v.srcs[0].col)})
	return e
}

// setEntered records the row an ordered view's entry entered the result with.
func (e *entry) setEntered(q query.Row) { e.ext = &entryExt{entered: q} }

// view is the maintained result of one plan, shared by its subscribers.
type view struct {
	id     uint64
	srcs   []*viewSource
	subs   []*sub
	status viewStatus
	dirty  bool // per transaction (beside status: one word for both)
	// ext is what only some views hold, or a view only at times (x,
	// mut): nil for a live single-table view, whose record is then 192
	// bytes rather than 256.
	ext *viewExt

	// shownResult's resultSet holds the view's plan (v.plan).
	shownResult

	// touched is, per transaction, the keys touched in a single-table
	// view (repeats allowed).
	touched []string
}

// viewExt is the part of a view only join, aggregating or clocked views
// hold, or a view holds only at times: while it waits for a read, while
// a row it evaluated raised, once it re-read its result or told
// touch-mode subscribers of a commit. Read through view.x (never nil),
// written through view.mut (made on first write); dropped when what it
// held for a time goes (dropRead, dropEvalErr).
type viewExt struct {
	read *read      // the read being waited for
	js   *joinState // join views
	// agg is an aggregating view's groups (query.Plan.Agg); its rows
	// are then the rows it aggregates, held like a COUNT(*) view's.
	agg *aggView
	// clk is a clocked view's time bookkeeping (core_clock.go).
	clk *clockView

	// per transaction
	evalErr   error      // a row raised: the view ends (core_evalerr.go)
	touchedAt change.LSN // the last commit touchSubs told touch-mode subscribers of
	// staleAt is, while the view re-reads its result (viewRefilling), the
	// commit that made it: what its subscribers hold is exact only before
	// it (Core.Passed).
	staleAt change.LSN
}

// noExt is the rare part of every view without one: only ever read.
var noExt viewExt

// x is the view's rare part for reading: a zero one when it has none.
// Never write through it (mut).
func (v *view) x() *viewExt {
	if v.ext != nil {
		return v.ext
	}
	return &noExt
}

// mut is the view's rare part for writing, made on first use.
func (v *view) mut() *viewExt {
	if v.ext == nil {
		v.ext = &viewExt{}
	}
	return v.ext
}

// dropRead forgets the read the view waited for.
func (v *view) dropRead() {
	if v.ext != nil {
		v.ext.read = nil
		v.trimExt()
	}
}

// dropEvalErr forgets the error a row raised.
func (v *view) dropEvalErr() {
	if v.ext != nil {
		v.ext.evalErr = nil
		v.trimExt()
	}
}

// dropStale forgets the commit a refill started at (the view is live
// again).
func (v *view) dropStale() {
	if v.ext != nil {
		v.ext.staleAt = 0
		v.trimExt()
	}
}

// trimExt drops the rare part once it holds nothing.
func (v *view) trimExt() {
	if e := v.ext; e.read == nil && e.js == nil && e.agg == nil && e.clk == nil && e.evalErr == nil && e.touchedAt == 0 && e.staleAt == 0 {
		v.ext = nil
	}
}

// shownResult is a result with what ordered results' subscribers hold
// (the window's visible part), to diff against; shownTieAfter: its last
// row ties on ORDER BY with the row after the window.
type shownResult struct {
	resultSet
	shown []shownRow
}

// resultSet is a result: rows by key and, for ordered views, sorted by
// CompareWindow.
type resultSet struct {
	plan     *query.Plan
	ordered  bool // ORDER BY or LIMIT/OFFSET: list is kept sorted
	window   bool // LIMIT: list is cut at cap
	complete bool // the result holds every row the query selects (windows)
	// shownTieAfter is shownResult's: the last row shown ties on ORDER BY
	// with the row after the window (kept here beside the other flags).
	shownTieAfter bool
	cap           int       // OFFSET+LIMIT+margin, for windows
	result        *entrySet // ordered and join views: entries by key; nil until its first entry (most views of distinct binds hold few rows)
	// members is an unordered single-table view's result: the ids of the
	// rows it holds in its table's rows (during a landing, in the read's
	// stage); nil until its first row.
	members *idSet
	list    []*entry
	// bound is, for a window that is not complete, the last row it is
	// known to hold every row up to (the last row of its read, or where it
	// was last cut): a row sorting after it may have others before it.
	// nil otherwise (a pointer: most views are never cut).
	bound *query.Row
}

// boundAt is a window's bound at e (resultSet.bound); nil when e has no
// row, as the bound was when it was a query.Row.
func boundAt(e *entry) *query.Row {
	r := e.enteredRow()
	if r == nil {
		return nil
	}
	return &r
}

// newResultSet returns an empty result for plan: ordered for ORDER BY,
// LIMIT or OFFSET, a window cut at OFFSET+LIMIT+margin rows for LIMIT.
func newResultSet(plan *query.Plan, margin int) resultSet {
	rs := resultSet{plan: plan, complete: true}
	if !plan.Count && plan.Agg == nil {
		rs.ordered = len(plan.Order) > 0 || plan.Limit >= 0 || plan.Offset > 0
		rs.window = plan.Limit >= 0
		if rs.window {
			rs.cap = int(min(plan.WindowEnd(int64(margin)), 1<<40))
		}
	}
	return rs
}

type shownRow struct {
	key  string
	vals []any
	// tie: the row ties on ORDER BY with the one before it (for the
	// first visible row, the row OFFSET skips last).
	tie bool
}

// touchKey marks key touched in the transaction. The keys are a list,
// sorted and deduplicated when the view settles: a view is touched by a
// few keys a transaction, and a list costs less than a set to fill and
// read.
func (v *view) touchKey(k string) { v.touched = append(v.touched, k) }

func (v *view) isJoin() bool { return len(v.plan.Sources) > 1 }

// row builds the query.Row of a single-table view for a layout row.
func (v *view) row(vals []any) query.Row {
	vs := v.srcs[0]
	r := make([]any, len(vs.col))
	for i, slot := range vs.col {
		if slot < len(vals) {
			r[i] = vals[slot]
		} else {
			r[i] = unloaded{}
		}
	}
	return query.Row{r}
}

// rowScratch holds a query.Row that is rebuilt for every row.
type rowScratch struct {
	vals []any
	row  query.Row
}

// rowInto is row, built in sc: valid until sc's next use.
func (v *view) rowInto(sc *rowScratch, vals []any) query.Row {
	col := v.srcs[0].col
	r := slices.Grow(sc.vals[:0], len(col))[:len(col)]
	for i, slot := range col {
		r[i] = valAt(vals, slot)
	}
	sc.vals = r
	if sc.row == nil {
		sc.row = make(query.Row, 1)
	}
	sc.row[0] = r
	return sc.row
}

// loaded reports whether every value of a query.Row is known.
func loaded(q query.Row) bool {
	for _, s := range q {
		for _, x := range s {
			if isUnloaded(x) {
				return false
			}
		}
	}
	return true
}

// visible returns the part of an ordered result subscribers see: after
// OFFSET, up to LIMIT rows (nil for an unordered result).
func (rs *resultSet) visible() []*entry {
	if !rs.ordered {
		return nil
	}
	n := int64(len(rs.list))
	lo, hi := min(rs.plan.Offset, n), n
	if rs.plan.Limit >= 0 {
		hi = min(rs.plan.WindowEnd(0), n)
	}
	return rs.list[lo:hi]
}

// covered reports whether a window's held rows still cover OFFSET+LIMIT.
func (rs *resultSet) covered() bool {
	if !rs.window || rs.complete {
		return true
	}
	return int64(len(rs.list)) >= rs.plan.WindowEnd(0)
}

// insert adds e to the result (the key must not be in it). In a window that
// is not complete, a row sorting after the last held one is not known to be
// within the first cap rows and is dropped; it returns whether e was kept.
func (rs *resultSet) insert(e *entry) bool {
	if !rs.ordered {
		rs.results().put(e)
		return true
	}
	if rs.window && !rs.complete && (rs.bound == nil || rs.plan.CompareWindow(e.enteredRow(), *rs.bound) > 0) {
		return false
	}
	i := sort.Search(len(rs.list), func(i int) bool { return rs.plan.CompareWindow(rs.list[i].enteredRow(), e.enteredRow()) > 0 })
	rs.list = slices.Insert(rs.list, i, e)
	rs.results().put(e)
	return true
}

// remove takes key out of the result and returns its entry.
func (rs *resultSet) remove(key string) *entry {
	e := rs.result.remove(key)
	if e == nil {
		return nil
	}
	if rs.ordered {
		i := sort.Search(len(rs.list), func(i int) bool { return rs.plan.CompareWindow(rs.list[i].enteredRow(), e.enteredRow()) >= 0 })
		for ; i < len(rs.list); i++ {
			if rs.list[i] == e {
				rs.list = slices.Delete(rs.list, i, i+1)
				break
			}
		}
	}
	return e
}

// trim cuts a window back to its cap, returning the entries dropped.
func (rs *resultSet) trim() []*entry {
	if !rs.window || len(rs.list) <= rs.cap {
		return nil
	}
	cut := slices.Clone(rs.list[rs.cap:])
	for i := rs.cap; i < len(rs.list); i++ {
		rs.result.remove(rs.list[i].key)
		rs.list[i] = nil
	}
	rs.list = rs.list[:rs.cap]
	rs.complete = false
	if rs.cap > 0 {
		rs.bound = boundAt(rs.list[rs.cap-1])
	}
	return cut
}

// entries returns the result in output order: sorted for ordered views,
// by key otherwise.
func (rs *resultSet) entries() []*entry {
	if rs.ordered {
		return rs.visible()
	}
	return sortedByKey(rs.result)
}

// sortedByKey returns m's entries in key order.
func sortedByKey(m *entrySet) []*entry {
	es := make([]*entry, 0, m.len())
	for e := range m.all() {
		es = append(es, e)
	}
	return sortByKey(es, entryKey)
}

// entryKey is an entry's key (for sortByKey).
func entryKey(e *entry) string { return e.key }

// sortedIDs returns the ids of an unordered single-table result in the
// order of their rows' keys (rt: the rows they are ids of).
func (rs *resultSet) sortedIDs(rt *rowTable) []rowID {
	return sortByKey(rs.members.ids(), rt.key)
}

// inKeyOrder sorts xs, a result's rows in the order a read gave them
// (most reads come in key order, an index's or the table's) with the
// rows replayed over it after them, by key, and returns it: the sorted
// run it starts with is kept, the rest sorted and merged into it, so a
// read in key order costs a pass, not a sort.
func inKeyOrder[T any](xs []T, key func(T) string) []T {
	i := 1
	for i < len(xs) && key(xs[i-1]) < key(xs[i]) {
		i++
	}
	if i >= len(xs) {
		return xs
	}
	head, tail := xs[:i], sortByKey(slices.Clone(xs[i:]), key)
	out := make([]T, 0, len(xs))
	for len(head) > 0 && len(tail) > 0 {
		if key(tail[0]) < key(head[0]) {
			out, tail = append(out, tail[0]), tail[1:]
		} else {
			out, head = append(out, head[0]), head[1:]
		}
	}
	out = append(out, head...)
	return append(out, tail...)
}

// sortByKey sorts xs by key, in place, and returns it. Each is sorted
// with the first sixteen bytes of its key beside it (an integer key is
// 9), compared before the keys: most comparisons of a large result read
// no key, and the rest a key found by a pointer in the slice rather than
// through the row.
func sortByKey[T any](xs []T, key func(T) string) []T {
	type keyed struct {
		hi, lo uint64
		key    string
		x      T
	}
	word := func(k string, at int) uint64 {
		var p uint64
		for i := at; i < at+8; i++ {
			p <<= 8
			if i < len(k) {
				p |= uint64(k[i])
			}
		}
		return p
	}
	ks := make([]keyed, 0, len(xs))
	for _, x := range xs {
		k := key(x)
		ks = append(ks, keyed{word(k, 0), word(k, 8), k, x})
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		switch {
		case a.hi != b.hi:
			return cmpU64(a.hi, b.hi)
		case a.lo != b.lo:
			return cmpU64(a.lo, b.lo)
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	for i := range ks {
		xs[i] = ks[i].x
	}
	return xs
}

// countN is the count of a COUNT(*) view (the rows a result holds).
func (rs *resultSet) countN() int64 { return int64(rs.result.len() + rs.members.len()) }

// addMember adds row id to an unordered single-table result.
func (rs *resultSet) addMember(id rowID) {
	if rs.members == nil {
		rs.members = &idSet{}
	}
	rs.members.add(id)
}

// removeKey takes the row of key out of a single-table result (its ids
// rt's) and returns its id (0: it was not held).
func (rs *resultSet) removeKey(rt *rowTable, key string) rowID {
	if rs.ordered {
		if e := rs.remove(key); e != nil {
			return e.row
		}
		return 0
	}
	if rs.members == nil {
		return 0
	}
	if id := rt.lookup(key); id != 0 && rs.members.remove(id) {
		return id
	}
	return 0
}

// hasKey reports whether the result holds the row of key (rt: where a
// single-table result's ids are).
func (rs *resultSet) hasKey(rt *rowTable, key string) bool {
	if rs.members != nil {
		return rs.members.has(rt.lookup(key))
	}
	return rs.result.has(key)
}

// keys returns the keys of the rows a result holds (in no particular
// order).
func (rs *resultSet) keys(rt *rowTable) []string {
	if rs.members == nil {
		return rs.result.keys()
	}
	ks := make([]string, 0, rs.members.len())
	for id := range rs.members.all() {
		ks = append(ks, rt.key(id))
	}
	return ks
}

// results returns rs's entry set, made on first use.
func (rs *resultSet) results() *entrySet {
	if rs.result == nil {
		rs.result = &entrySet{}
	}
	return rs.result
}

// countRows is the result of a COUNT(*) query: one row unless LIMIT 0 or
// an OFFSET skips it.
func (rs *resultSet) countRows() []ResultRow {
	if rs.plan.Offset >= 1 || rs.plan.Limit == 0 {
		return nil
	}
	return []ResultRow{{Values: []any{rs.countN()}}}
}

// queryRow returns an entry's query.Row.
func (v *view) queryRow(e *entry) query.Row { return e.enteredRow() }

// idRow returns the query.Row of a single-table view's row id of rt.
func (v *view) idRow(rt *rowTable, id rowID) query.Row {
	return query.Row{rt.vals(id).pick(v.srcs[0].col)}
}

// resultRow projects an entry to the row subscribers are sent.
func (v *view) resultRow(e *entry) ResultRow {
	return ResultRow{Key: Key(e.key), Values: v.plan.Project(v.queryRow(e))}
}

// idResultRow projects a single-table view's row id of rt to the row
// subscribers are sent.
func (v *view) idResultRow(rt *rowTable, id rowID) ResultRow {
	return ResultRow{Key: Key(rt.key(id)), Values: v.plan.Project(v.idRow(rt, id))}
}

// snapshotShown records what an ordered view's subscribers now hold.
func (v *shownResult) snapshotShown() {
	lo, vis := v.visibleAt()
	v.shown = v.shown[:0]
	for i, e := range vis {
		v.shown = append(v.shown, shownRow{e.key, v.plan.Project(e.enteredRow()), v.tiesBefore(lo + i)})
	}
	v.shownTieAfter = len(vis) > 0 && v.tiesBefore(lo+len(vis))
}

// visibleAt is visible with the index in list of its first entry.
func (rs *resultSet) visibleAt() (int, []*entry) {
	vis := rs.visible()
	if len(vis) == 0 {
		return 0, vis
	}
	return int(min(rs.plan.Offset, int64(len(rs.list)))), vis
}

// tiesBefore reports whether list[i] ties on ORDER BY with list[i-1]
// (false when either is not held). Which rows tie decides which orders
// (and, at a window's edges, which rows) PostgreSQL may answer with: a
// change of it changes the result a touch-mode subscriber caches, even
// when the engine's own order (ties broken by key) stays the same.
func (rs *resultSet) tiesBefore(i int) bool {
	if i <= 0 || i >= len(rs.list) || len(rs.plan.Order) == 0 {
		return false
	}
	return rs.plan.Compare(rs.list[i-1].enteredRow(), rs.list[i].enteredRow()) == 0
}

// accepted builds a subscriber's Accepted output. byKey, when not nil,
// is an unordered single-table result's ids in key order (inKeyOrder),
// so that the subscribers of a landing share one sort.
func (v *view) accepted(s *sub, pos change.LSN, byKey []rowID) Output {
	o := Output{Sub: s.id, Kind: OutputAccepted, LSN: pos, Plan: v.plan}
	if s.mode == ModeTouch {
		return o
	}
	o.Columns = v.plan.Output
	if v.x().agg != nil {
		o.Rows = v.aggAccepted()
		return o
	}
	if v.plan.Count {
		o.Count = v.countN()
		o.Rows = v.countRows()
		return o
	}
	unordered := s.mode == ModeRowsUnordered && !v.ordered
	if v.byID() {
		return v.acceptedIDs(o, unordered, byKey)
	}
	var es []*entry
	if unordered {
		// No key sort: the subscriber needs no order.
		es = slices.Collect(v.result.all())
	} else {
		es = v.entries()
	}
	o.Rows = make([]ResultRow, 0, len(es)) // a million-row result is not grown by copying
	for _, e := range es {
		o.Rows = append(o.Rows, v.resultRow(e))
	}
	return o
}

// acceptedIDs is accepted for an unordered single-table view.
func (v *view) acceptedIDs(o Output, unordered bool, byKey []rowID) Output {
	rt := &v.srcs[0].t.rows
	slots := v.plainSlots()
	if unordered && slots != nil {
		o.Held = v.heldAccepted(slots)
		return o
	}
	var ids []rowID
	switch {
	case unordered:
		// No key sort: the subscriber needs no order.
		ids = v.members.ids()
	case byKey != nil:
		ids = byKey
	default:
		ids = v.sortedIDs(rt)
	}
	o.Rows = make([]ResultRow, 0, len(ids)) // a million-row result is not grown by copying
	if slots == nil {
		for _, id := range ids {
			o.Rows = append(o.Rows, v.idResultRow(rt, id))
		}
		return o
	}
	// Each row's values decoded straight from the held row into arrays
	// shared by acceptedChunk rows, not a source row and a projection of
	// it per row.
	var free []any
	var sl slabs
	for i, id := range ids {
		if len(free) == 0 {
			free = make([]any, min(acceptedChunk, len(ids)-i)*len(slots))
		}
		vals := free[:len(slots):len(slots)]
		free = free[len(slots):]
		key, rv := rt.row(id)
		rv.pickInto(vals, slots, &sl)
		o.Rows = append(o.Rows, ResultRow{Key: Key(key), Values: vals})
	}
	return o
}

// byID reports whether the view's result is its rows' ids (members): a
// single-table view without ORDER BY or LIMIT.
func (v *view) byID() bool { return !v.ordered && !v.isJoin() }

// acceptedChunk is how many rows' values share one array in an Accepted
// output: a row a subscriber keeps keeps its array alive, so it stays
// small.
const acceptedChunk = 256

// plainSlots returns, for a single-table view whose every output is a
// column of its source (no aggregate, no computed column), the layout
// slot of each output in Output order; nil otherwise.
func (v *view) plainSlots() []int {
	if v.isJoin() || v.plan.Agg != nil || v.plan.Count {
		return nil
	}
	col := v.srcs[0].col
	slots := make([]int, len(v.plan.Output))
	for i, o := range v.plan.Output {
		if o.Source != 0 || o.Column < 0 || o.Column >= len(col) {
			return nil
		}
		slots[i] = col[o.Column]
	}
	return slots
}

// delta is a change of a view's result, before it is sent to subscribers.
type delta struct {
	rows    []ResultRow
	removed []Key
	// keyChanges: rows of removed and rows that are one row an update
	// gave a new key (a plain single-table view's delta only).
	keyChanges []KeyChange
	order      []Key
	moves      []Move
	count      int64
	changed    bool
	// ties: an ordered result kept its rows and order but not which of
	// them tie on ORDER BY; touch-mode subscribers are told (what they
	// cached may no longer be an order PostgreSQL would answer with),
	// rows-mode ones hold an order that is still right.
	ties bool
}

// diffShown compares an ordered view's visible rows with what subscribers
// hold, and records the visible rows as shown.
func (v *shownResult) diffShown() delta {
	var d delta
	vis := v.visible()
	old := make(map[string]int, len(v.shown))
	for i, s := range v.shown {
		old[s.key] = i
	}
	now := make(map[string]bool, len(vis))
	same := len(vis) == len(v.shown)
	for i, e := range vis {
		now[e.key] = true
		vals := v.plan.Project(e.enteredRow())
		oi, ok := old[e.key]
		if !ok || !sameValues(v.shown[oi].vals, vals) {
			d.rows = append(d.rows, ResultRow{Key: Key(e.key), Values: vals})
		}
		if same && v.shown[i].key != e.key {
			same = false
		}
		d.order = append(d.order, Key(e.key))
	}
	for _, s := range v.shown {
		if !now[s.key] {
			d.removed = append(d.removed, Key(s.key))
		}
	}
	if same {
		d.moves = []Move{}
	} else {
		d.moves = v.moves(vis, old, now)
	}
	d.changed = len(d.rows) > 0 || len(d.removed) > 0 || !same
	if d.order == nil {
		d.order = []Key{}
	}
	if !d.changed {
		// The same rows in the same order: did the ties among them
		// change?
		lo, _ := v.visibleAt()
		d.ties = v.shownTieAfter != (len(vis) > 0 && v.tiesBefore(lo+len(vis)))
		for i := 0; i < len(vis) && !d.ties; i++ {
			d.ties = v.shown[i].tie != v.tiesBefore(lo+i)
		}
	}
	v.snapshotShown()
	return d
}

// moves tells how the visible rows vis differ in order from the shown
// ones: a set of rows whose removal from both leaves the same sequence
// (the rows that kept their relative order), each with the row before
// it in vis. old maps a shown key to its index, now says which shown
// keys are still visible. It walks both in step, so one row that moved
// (however far) costs one Move; when the two disagree it takes the shown
// row as moved if the row after it is the one vis has, else the visible
// one. Any choice leaves a common subsequence, so the Moves are always
// right, if not always the fewest.
func (v *shownResult) moves(vis []*entry, old map[string]int, now map[string]bool) []Move {
	ms := []Move{}
	var moved map[string]bool
	// next returns the index of the first shown row at or after i that
	// is still visible and not moved.
	next := func(i int) int {
		for i < len(v.shown) && (!now[v.shown[i].key] || moved[v.shown[i].key]) {
			i++
		}
		return i
	}
	i, la := 0, 0 // la: next(i+1), known while la > i
	for j, e := range vis {
		k := e.key
		_, held := old[k]
		move := !held || moved[k]
		if !move {
			if n := next(i); n != i {
				i, la = n, 0
			}
			// k is held, not moved and not yet matched, so it is at or
			// after i.
			if v.shown[i].key == k {
				i++
			} else {
				la = next(max(la, i+1))
				if moved == nil {
					moved = map[string]bool{}
				}
				if la < len(v.shown) && v.shown[la].key == k {
					moved[v.shown[i].key] = true
					i = la + 1
				} else {
					moved[k] = true
					move = true
				}
			}
		}
		if move {
			m := Move{Key: Key(k), Head: j == 0}
			if j > 0 {
				m.After = Key(vis[j-1].key)
			}
			ms = append(ms, m)
		}
	}
	return ms
}

// sameOutput reports whether a single-table view's projection of the
// held row rv equals the projected values out (as sameValues), comparing
// encodings without decoding rv.
func (v *view) sameOutput(rv rowVals, out []any, scratch *[]byte) bool {
	col := v.srcs[0].col
	if len(out) != len(v.plan.Output) {
		return false
	}
	for i, o := range v.plan.Output {
		if o.Source == query.ExprSource {
			// Computed: compare what the held row computes to.
			old := v.plan.Project(query.Row{rv.pick(col)})
			if !sameValues(old[i:i+1], out[i:i+1]) {
				return false
			}
			continue
		}
		if o.Source < 0 {
			if out[i] != nil {
				return false
			}
			continue
		}
		if !rv.sameAt(col[o.Column], out[i], scratch) {
			return false
		}
	}
	return true
}

// sameValues reports whether two projected rows are identical (same
// values, compared by their encodings and text-exact forms).
func sameValues(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameValue(a[i], b[i]) {
			return false
		}
	}
	return true
}

// sameValue reports whether a client holding a would hold b unchanged: the
// two print the same text in PostgreSQL. Values that are '=' but print
// differently (float8 0 and -0, numeric 1.5 and 1.50, interval '1 mon' and
// '30 days') are different; values that are not '=' but print the same
// (NaN) are the same. A typed form's fields determine its text, so equal
// fields (floats compared bit for bit) mean equal text; the converse holds
// but for NaN payloads and numeric coefficients scaled differently, which
// are handled here.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && (math.Float64bits(x) == math.Float64bits(y) || x != x && y != y)
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case change.JSON:
		y, ok := b.(change.JSON)
		return ok && bytes.Equal(x, y)
	case change.Numeric:
		y, ok := b.(change.Numeric)
		if !ok || x.NaN != y.NaN || x.Inf != y.Inf || x.Scale != y.Scale {
			return false
		}
		if x.Coef == nil || y.Coef == nil {
			return x.Coef == nil && y.Coef == nil
		}
		if x.Exp == y.Exp {
			return x.Coef.Cmp(y.Coef) == 0
		}
		return bytes.Equal(x.Append(nil), y.Append(nil))
	case change.Timestamp:
		y, ok := b.(change.Timestamp)
		return ok && x == y
	case change.Date:
		y, ok := b.(change.Date)
		return ok && x == y
	case change.Interval:
		y, ok := b.(change.Interval)
		return ok && x == y
	case change.UUID:
		y, ok := b.(change.UUID)
		return ok && x == y
	case change.Array:
		y, ok := b.(change.Array)
		if !ok || !slices.Equal(x.Dims, y.Dims) || len(x.Elems) != len(y.Elems) {
			return false
		}
		for i := range x.Elems {
			if !sameValue(x.Elems[i], y.Elems[i]) {
				return false
			}
		}
		return true
	}
	// The remaining typed forms (TimeOfDay, TimeTZ, ...) hold only
	// integers and strings: exact comparison is text identity.
	return reflect.DeepEqual(a, b)
}

// refill makes a live view re-read its result: the transaction committed
// at lsn left it needing rows it does not hold. Until the read lands, every
// transaction changing a row of its tables touches its touch-mode
// subscribers (touchRefilling): the view cannot tell which change its
// result.
func (s *state) refill(v *view, lsn change.LSN) {
	v.status = viewRefilling
	v.mut().staleAt = lsn
	s.touchSubs(v, lsn)
	s.refilling = append(s.refilling, v)
	s.askRead(v)
}

// passed is the position every subscriber's result is exact at (Passed).
func (s *state) passed() change.LSN {
	p := s.pos
	for _, v := range s.refilling {
		if v.status == viewRefilling && v.x().staleAt-1 < p {
			p = v.x().staleAt - 1
		}
	}
	return p
}

// touchRefilling marks dirty, for the transaction being applied, every
// view re-reading its result that reads tb (finish touches them). A row
// such a view does not hold yet may be in its result: a delete of it
// carries only its key, and nothing else would route it to the view.
func (s *state) touchRefilling(tb *table) {
	live := s.refilling[:0]
	for _, v := range s.refilling {
		if v.status != viewRefilling {
			continue
		}
		live = append(live, v)
		if v.dirty {
			continue
		}
		for _, vs := range v.srcs {
			if vs.t == tb {
				v.dirty = true
				s.dirty = append(s.dirty, v)
				break
			}
		}
	}
	clear(s.refilling[len(live):])
	s.refilling = live
}

// touchSubs tells the view's touch-mode subscribers that the transaction
// committed at lsn may have changed the result: the view is re-reading it,
// and the delta it will send when the read lands comes later than lsn.
// Touching now keeps the rule that every transaction changing a result
// is touched at its own commit (this touch may be one that changed
// nothing).
func (s *state) touchSubs(v *view, lsn change.LSN) {
	if v.x().touchedAt == lsn {
		return
	}
	v.mut().touchedAt = lsn
	for _, sb := range v.subs {
		if sb.accepted && sb.mode == ModeTouch {
			s.out.Outputs = append(s.out.Outputs, Output{Sub: sb.id, Kind: OutputTouched, LSN: lsn})
		}
	}
}

// txnXID is the xid of the transaction being finished when it committed
// at lsn, else 0 (a delta a landed read caused).
func (s *state) txnXID(lsn change.LSN) uint32 {
	if s.inTxn && s.cur != nil && s.cur.lsn == lsn {
		return s.cur.xid
	}
	return 0
}

// emit sends a delta to the view's subscribers.
func (s *state) emit(v *view, d delta, lsn change.LSN) {
	if s.endEvalError(v) {
		return
	}
	if !d.changed && !d.ties {
		return
	}
	for _, sb := range v.subs {
		if !sb.accepted {
			continue
		}
		if sb.mode == ModeTouch {
			if v.x().touchedAt != lsn {
				s.out.Outputs = append(s.out.Outputs, Output{Sub: sb.id, Kind: OutputTouched, LSN: lsn})
			}
			continue
		}
		if !d.changed {
			continue
		}
		o := Output{Sub: sb.id, Kind: OutputDelta, LSN: lsn, XID: s.txnXID(lsn)}
		if v.x().clk != nil {
			o.Clock = s.clock
		}
		if v.plan.Count {
			o.Count = d.count
		} else {
			o.Rows, o.Removed, o.Order, o.Moves, o.KeyChanges = d.rows, d.removed, d.order, d.moves, d.keyChanges
		}
		s.out.Outputs = append(s.out.Outputs, o)
	}
}

// indexKey is a view's key in state.views.
func (v *view) indexKey() query.PlanKey { return v.plan.Key }

// indexKey is a subscription's key in state.subs.
func (s *sub) indexKey() SubID { return s.id }

// indexKey is a read's key in state.reads.
func (r *read) indexKey() ReadID { return r.id }

// indexKey is a view source's key in table.srcs: itself.
func (vs *viewSource) indexKey() *viewSource { return vs }
