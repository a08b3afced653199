package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

// Joins. A join view holds, for each source, every row of its table that
// satisfies that source's constraints (vs.j.rows: its own, and those the ON
// equalities carry to it, see query.Plan.Constraints), indexed by the
// source's join columns (vs.j.byJoin: the columns its ON equalities compare
// with earlier sources) and, for each column a later source joins on, by
// that column (vs.j.byCol). The result is kept as entries indexed by root row
// (byRoot) and by the rows of each source they contain (bySrc).
//
// A transaction touching rows of any source marks root rows to recompute:
// the roots of the results that contained the old version of each touched
// row, and the roots reached by walking from the old and new versions up
// the join tree (through byCol). Each marked root's results are enumerated
// again and compared with the old ones: a row moving between parents moves
// in the result, and a LEFT JOIN's null-extended row comes and goes as its
// children do.
//
// An IN (subquery) is a semi-joined source (query.JoinSemi): it holds the
// rows of its table the subquery keeps (its constraints and its WHERE,
// sourceMatch), indexed by join value in byJoin, whose per-value sets are
// the count of matching rows. Enumeration goes on past it once when the
// set for the parent's value is not empty, adding nothing to the joined
// row (its key part is empty), so duplicates in the subquery never
// duplicate a result row; a transaction marks the roots holding a value
// only when the set for that value becomes empty or not (subquerySets:
// two matching organizations becoming one moves no ticket).
//
// A NOT IN (subquery) is an anti-joined source (query.JoinAnti), held the
// same way plus the keys of its rows whose output column is NULL
// (vs.j.nulls): enumeration goes on past it when it holds no row, or when
// the parent's value is not NULL, matches none and no row is NULL
// (antiKeeps). Its emptiness and its NULLs decide every root at once, so
// a transaction that changes either recomputes them all.
//
// Memory: every row of every source table that satisfies the source's
// constraints is held (once, shared with other views), plus the result
// entries; an unconstrained source holds its whole table.

// joinState is a join view's bookkeeping.
type joinState struct {
	byRoot map[string]map[string]*entry   // root key -> result key -> entry
	bySrc  []map[string]map[string]*entry // per source: row key -> result key -> entry
	// touched rows in the transaction: per source, key -> the row's vals
	// before the transaction (nil when the view did not hold it).
	touched []map[string][]any
	reads   []*read // the reads of the current (re)hydration, by source
	// preds are the sources' constraints, compiled.
	preds [][]srcPred
	// joinCols[i] lists the columns of source i that later sources join on.
	joinCols [][]int
}

type srcPred struct {
	col  int // layout position
	oid  uint32
	c    query.Constraint
	keys map[string]bool
}

// initJoin gives a new join view its bookkeeping: the result indexes by
// root and by source row, the compiled source constraints, and for each
// source the columns later sources join on (indexed in byCol).
func (s *state) initJoin(v *view) {
	n := len(v.srcs)
	js := &joinState{
		byRoot:   make(map[string]map[string]*entry),
		bySrc:    make([]map[string]map[string]*entry, n),
		touched:  make([]map[string][]any, n),
		preds:    make([][]srcPred, n),
		joinCols: make([][]int, n),
	}
	for i, vs := range v.srcs {
		js.bySrc[i] = make(map[string]map[string]*entry)
		js.touched[i] = make(map[string][]any)
		vs.j.byCol = make(map[int]map[string]map[string]rowID)
		for _, c := range v.plan.Constraints(i) {
			pred := srcPred{col: vs.col[c.Column], oid: vs.src.Columns[c.Column].TypeOID, c: c, keys: map[string]bool{}}
			for _, x := range c.Values {
				pred.keys[string(query.AppendKey(nil, pred.oid, x))] = true
			}
			js.preds[i] = append(js.preds[i], pred)
		}
		for _, on := range vs.src.On {
			if !slices.Contains(js.joinCols[on.Other], on.OtherColumn) {
				js.joinCols[on.Other] = append(js.joinCols[on.Other], on.OtherColumn)
			}
		}
	}
	for i, vs := range v.srcs {
		for _, c := range js.joinCols[i] {
			vs.j.byCol[c] = make(map[string]map[string]rowID)
		}
	}
	v.mut().js = js
	v.resultSet.window = false // a join view holds its whole result
	v.resultSet.complete = true
}

// predMatch reports whether a row satisfies a source's own constraints;
// known is false when a value it needs is unknown.
func predMatch(preds []srcPred, vals []any) (match, known bool) {
	for _, pred := range preds {
		x := valAt(vals, pred.col)
		if isUnloaded(x) {
			return false, false
		}
		switch pred.c.Kind {
		case query.ConstraintIn:
			if x == nil {
				if !pred.c.Null {
					return false, true
				}
				continue
			}
			if !pred.keys[string(query.AppendKey(nil, pred.oid, x))] {
				return false, true
			}
		case query.ConstraintNotIn:
			if x == nil || pred.keys[string(query.AppendKey(nil, pred.oid, x))] {
				return false, true
			}
		case query.ConstraintRange:
			if x == nil {
				return false, true
			}
			in := false
			ix := rangeIndex{oid: pred.oid}
			for _, r := range pred.c.Ranges {
				if ix.startsBy(r, x) && ix.endsAfter(r, x) {
					in = true
					break
				}
			}
			if !in {
				return false, true
			}
		}
	}
	return true, true
}

// sourceMatch reports whether a row of source i's table belongs to the
// source: it satisfies the source's constraints and, for the table of an
// IN or NOT IN (subquery) (query.JoinSemi, JoinAnti), the subquery's
// WHERE; known is false
// when a value it needs is unknown.
func (v *view) sourceMatch(i int, vals []any) (match, known bool) {
	match, known = predMatch(v.x().js.preds[i], vals)
	vs := v.srcs[i]
	if !match || !known || !vs.src.Subquery() {
		return match, known
	}
	sv := srcVals(vs, vals)
	if !loaded(query.Row{sv}) {
		return false, false
	}
	return v.plan.EvalSource(i, sv) == query.True, true
}

// srcVals returns a source's values (in its Columns order) of a layout row.
func srcVals(vs *viewSource, vals []any) []any {
	out := make([]any, len(vs.col))
	for i, slot := range vs.col {
		out[i] = valAt(vals, slot)
	}
	return out
}

// joinKey encodes a source row's ON columns (ok false if one is NULL).
func joinKey(vs *viewSource, vals []any) (string, bool) {
	var b []byte
	for _, on := range vs.src.On {
		x := valAt(vals, vs.col[on.Column])
		if x == nil || isUnloaded(x) {
			return "", false
		}
		b = query.AppendKey(b, vs.src.Columns[on.Column].TypeOID, x)
	}
	return string(b), true
}

// parentKey encodes, for source vs, the values of the earlier sources its
// ON equalities compare with, in a partial joined row.
func parentKey(v *view, vs *viewSource, q query.Row) (string, bool) {
	var b []byte
	for _, on := range vs.src.On {
		if q[on.Other] == nil {
			return "", false
		}
		x := q[on.Other][on.OtherColumn]
		if x == nil {
			return "", false
		}
		b = query.AppendKey(b, v.srcs[on.Other].src.Columns[on.OtherColumn].TypeOID, x)
	}
	return string(b), true
}

// colKey encodes a source row's value of column c (of its Columns) for
// the byCol index (ok false if NULL or unknown).
func colKey(vs *viewSource, c int, vals []any) (string, bool) {
	x := valAt(vals, vs.col[c])
	if x == nil || isUnloaded(x) {
		return "", false
	}
	return string(query.AppendKey(nil, vs.src.Columns[c].TypeOID, x)), true
}

// addIdx files row id (key pk) under k in a two-level row index.
func addIdx(m map[string]map[string]rowID, k, pk string, id rowID) {
	inner := m[k]
	if inner == nil {
		inner = make(map[string]rowID)
		m[k] = inner
	}
	inner[pk] = id
}

// delIdx removes row pk from under k in a two-level row index.
func delIdx(m map[string]map[string]rowID, k, pk string) {
	if inner := m[k]; inner != nil {
		delete(inner, pk)
		if len(inner) == 0 {
			delete(m, k)
		}
	}
}

// hold makes row id (key pk) of vs's table a row of source vs, indexed.
func (v *view) hold(vs *viewSource, pk string, id rowID) {
	vs.j.rows[pk] = id
	vals := vs.t.rows.vals(id).values()
	if len(vs.src.On) > 0 {
		if k, ok := joinKey(vs, vals); ok {
			addIdx(vs.j.byJoin, k, pk, id)
		} else if vs.src.Join == query.JoinAnti {
			vs.j.nulls[pk] = true
		}
	}
	for c, m := range vs.j.byCol {
		if k, ok := colKey(vs, c, vals); ok {
			addIdx(m, k, pk, id)
		}
	}
}

// unhold removes row pk (whose indexed values were vals) from source vs.
func (v *view) unhold(vs *viewSource, pk string, vals []any) {
	delete(vs.j.rows, pk)
	if len(vs.src.On) > 0 {
		if k, ok := joinKey(vs, vals); ok {
			delIdx(vs.j.byJoin, k, pk)
		} else if vs.src.Join == query.JoinAnti {
			delete(vs.j.nulls, pk)
		}
	}
	for c, m := range vs.j.byCol {
		if k, ok := colKey(vs, c, vals); ok {
			delIdx(m, k, pk)
		}
	}
}

// nullKey is the key part of a source a LEFT JOIN null-extends: NULL for
// each of its key columns.
func nullKey(vs *viewSource) string {
	return strings.Repeat(string(query.AppendKey(nil, 0, nil)), vs.src.KeyN)
}

// enumerate returns the result rows of one root row.
// budget, when not nil, counts down the joined rows examined (each
// partial row of the walk, and each whole one): past 0 the walk stops and
// ok is false.
func (v *view) enumerate(rootKey string, root rowID, budget *int) (_ []*entry, ok bool) {
	n := len(v.srcs)
	rows := make([]rowID, n)
	q := make(query.Row, n)
	keys := make([]string, n)
	rows[0], q[0], keys[0] = root, srcVals(v.srcs[0], v.srcs[0].t.rows.vals(root).values()), rootKey
	var out []*entry
	over := false
	var rec func(i int)
	rec = func(i int) {
		if budget != nil {
			if *budget--; *budget < 0 {
				over = true
			}
		}
		if over {
			return
		}
		if i == n {
			if v.keeps(q) {
				out = append(out, &entry{key: strings.Join(keys, ""), ext: &entryExt{entered: slices.Clone(q),
					join: &joinEntry{root: rootKey, rows: slices.Clone(rows), srcKeys: slices.Clone(keys)}}})
			}
			return
		}
		vs := v.srcs[i]
		if vs.src.Join == query.JoinSemi {
			// IN (subquery): the row goes on, once, while at least one
			// held row of the subquery's table matches (byJoin holds
			// them per join value: their count is the set's size).
			if k, ok := parentKey(v, vs, q); ok && len(vs.j.byJoin[k]) > 0 {
				rows[i], q[i], keys[i] = 0, nil, ""
				rec(i + 1)
			}
			return
		}
		if vs.src.Join == query.JoinAnti {
			if antiKeeps(v, vs, q) {
				rows[i], q[i], keys[i] = 0, nil, ""
				rec(i + 1)
			}
			return
		}
		found := false
		if k, ok := parentKey(v, vs, q); ok {
			m := vs.j.byJoin[k]
			pks := slices.Sorted(maps.Keys(m))
			for _, pk := range pks {
				id := m[pk]
				rows[i], q[i], keys[i] = id, srcVals(vs, vs.t.rows.vals(id).values()), pk
				found = true
				rec(i + 1)
			}
		}
		if !found && vs.src.Join == query.JoinLeft {
			rows[i], q[i], keys[i] = 0, nil, nullKey(vs)
			rec(i + 1)
		}
		rows[i], q[i], keys[i] = 0, nil, ""
	}
	rec(1)
	return out, !over
}

// setKey is a join value of a subquery's source.
type setKey struct {
	src int
	key string
}

func cmpSetKey(a, b setKey) int {
	if a.src != b.src {
		return a.src - b.src
	}
	return cmpStr(a.key, b.key)
}

// subquerySets returns, for every join value a transaction's touched rows
// of an IN or NOT IN (subquery) source had or will have, whether the set
// of held rows with that value is not empty before the transaction.
func (v *view) subquerySets(s *state, js *joinState) map[setKey]bool {
	var sets map[setKey]bool
	for i, vs := range v.srcs {
		if !vs.src.Subquery() || len(js.touched[i]) == 0 {
			continue
		}
		if sets == nil {
			sets = make(map[setKey]bool)
		}
		note := func(vals []any) {
			if k, ok := joinKey(vs, vals); ok {
				sk := setKey{i, k}
				if _, seen := sets[sk]; !seen {
					sets[sk] = len(vs.j.byJoin[k]) > 0
				}
			}
		}
		for k, old := range js.touched[i] {
			if old != nil {
				note(old)
			}
			if changed := s.overlay[rowRef{vs.t.oid, k}]; changed != nil && changed.after != nil {
				note(changed.after)
			}
		}
	}
	return sets
}

// antiKeeps reports whether NOT IN (subquery) holds for a partial joined
// row, as PostgreSQL decides it: true when the subquery keeps no row (a
// NULL on the left included); otherwise false for a NULL on the left, a
// matching row, or any row with a NULL output (NULL or false: never true).
func antiKeeps(v *view, vs *viewSource, q query.Row) bool {
	if len(vs.j.rows) == 0 {
		return true
	}
	if len(vs.j.nulls) > 0 {
		return false
	}
	k, ok := parentKey(v, vs, q)
	return ok && len(vs.j.byJoin[k]) == 0
}

// antiState is what every row of the outer query depends on in a NOT IN
// (subquery): whether it keeps any row, and any with a NULL output.
type antiState struct{ empty, nulls bool }

func antiStates(v *view) []antiState {
	var out []antiState
	for _, vs := range v.srcs {
		if vs.src.Join == query.JoinAnti {
			out = append(out, antiState{len(vs.j.rows) == 0, len(vs.j.nulls) > 0})
		}
	}
	return out
}

// joinBudget is the joined rows one view may examine in one landing or one
// transaction, and hold: the read row limit (0: no limit). A join's
// result is not read from PostgreSQL but enumerated by the core from its
// sources, each read under the row limit, and can be their product (four
// sources of 2,000 rows sharing a few values make 128 million): bounding
// it by the limit keeps one view from holding the core goroutine, and so
// every other view, for seconds, and its memory from growing past what a
// read of that many rows would take.
func (s *state) joinBudget() *int {
	if s.opts.ReadRowLimit <= 0 {
		return nil
	}
	b := s.opts.ReadRowLimit
	return &b
}

// overJoinBudget ends a join view that examined more joined rows than its
// budget allows, or holds more than the row limit: row_limit, not
// retryable (the same query over the same rows would again).
func (s *state) overJoinBudget(v *view) {
	s.endView(v, CodeRowLimit, fmt.Sprintf("the join's result takes more than the row limit of %d joined rows to build or hold (each source's read was within it): narrow the query, or raise the row limit", s.opts.ReadRowLimit), false)
}

// overJoinLimit reports whether a join view holds more rows than the row
// limit.
func (s *state) overJoinLimit(v *view) bool {
	return s.opts.ReadRowLimit > 0 && v.countN() > int64(s.opts.ReadRowLimit)
}

// rootsOf adds to roots the root keys a row of source i with these
// values can join to, walking up the join tree through each source's first
// ON equality.
func (v *view) rootsOf(i int, pk string, vals []any, roots map[string]struct{}, depth int) {
	if i == 0 {
		roots[pk] = struct{}{}
		return
	}
	if depth > len(v.srcs) {
		return
	}
	vs := v.srcs[i]
	on := vs.src.On[0]
	x := valAt(vals, vs.col[on.Column])
	if x == nil || isUnloaded(x) {
		return
	}
	parent := v.srcs[on.Other]
	k := string(query.AppendKey(nil, parent.src.Columns[on.OtherColumn].TypeOID, x))
	for ppk, id := range parent.j.byCol[on.OtherColumn][k] {
		v.rootsOf(on.Other, ppk, parent.t.rows.vals(id).values(), roots, depth+1)
	}
}

// addEntry adds a joined result row of root rootKey to the result and its
// indexes (by root, and by each source row it contains).
func (v *view) addEntry(rootKey string, e *entry) {
	js := v.x().js
	m := js.byRoot[rootKey]
	if m == nil {
		m = make(map[string]*entry)
		js.byRoot[rootKey] = m
	}
	m[e.key] = e
	for i, id := range e.ext.join.rows {
		if id == 0 {
			continue
		}
		pk := e.ext.join.srcKeys[i]
		bm := js.bySrc[i][pk]
		if bm == nil {
			bm = make(map[string]*entry)
			js.bySrc[i][pk] = bm
		}
		bm[e.key] = e
	}
	v.insert(e)
}

// dropEntry removes a joined result row from the result and its indexes.
func (v *view) dropEntry(rootKey string, e *entry) {
	js := v.x().js
	if m := js.byRoot[rootKey]; m != nil {
		delete(m, e.key)
		if len(m) == 0 {
			delete(js.byRoot, rootKey)
		}
	}
	for i, id := range e.ext.join.rows {
		if id == 0 {
			continue
		}
		pk := e.ext.join.srcKeys[i]
		if bm := js.bySrc[i][pk]; bm != nil {
			delete(bm, e.key)
			if len(bm) == 0 {
				delete(js.bySrc[i], pk)
			}
		}
	}
	v.remove(e.key)
}

// touchJoin records touched rows of a join view's source, keeping their
// values from before the transaction.
func (s *state) touchJoin(vs *viewSource, keys ...string) {
	t := vs.v.x().js.touched[int(vs.idx)]
	for _, k := range keys {
		if k == "" {
			continue
		}
		if _, ok := t[k]; ok {
			continue
		}
		var old []any
		if id := vs.j.rows[k]; id != 0 {
			old = vs.t.rows.vals(id).values()
		}
		t[k] = old
	}
}

// truncateJoin touches every row a join source holds: a TRUNCATE of its
// table deletes them all.
func (s *state) truncateJoin(vs *viewSource) {
	for k := range vs.j.rows {
		s.touchJoin(vs, k)
	}
}

// settleJoin applies a transaction to a join view and emits its delta.
func (s *state) settleJoin(v *view, lsn change.LSN) {
	js := v.x().js
	roots := make(map[string]struct{})
	antiBefore := antiStates(v)
	sets := v.subquerySets(s, js)
	// Source rows first: which rows each source now holds.
	for i, vs := range v.srcs {
		t := js.touched[i]
		keys := slices.Sorted(maps.Keys(t))
		sub := vs.src.Subquery()
		for _, k := range keys {
			old := t[k]
			for _, e := range js.bySrc[i][k] {
				roots[e.ext.join.root] = struct{}{}
			}
			if old != nil && !sub {
				v.rootsOf(i, k, old, roots, 0)
			}
			var after []any
			var id rowID
			if changed := s.overlay[rowRef{vs.t.oid, k}]; changed != nil && changed.after != nil {
				after, id = changed.after, changed.id
			}
			if after != nil {
				if m, known := v.sourceMatch(i, after); !known || !loaded(query.Row{srcVals(vs, after)}) {
					clearTouched(js)
					s.refill(v, lsn)
					return
				} else if !m {
					after = nil
				}
			}
			if held := vs.j.rows[k]; held != 0 {
				v.unhold(vs, k, old)
				if old == nil {
					v.unhold(vs, k, vs.t.rows.vals(held).values())
				}
				s.dropHold(vs, k, held)
			}
			if after != nil {
				vs.t.rows.addHolder(id, vs)
				v.hold(vs, k, id)
				if !sub {
					v.rootsOf(i, k, after, roots, 0)
				}
			}
		}
		clear(t)
	}
	// A subquery's row changes an outer row only by making the set of
	// its value empty or not (2 matching organizations becoming 1 moves
	// no ticket).
	for _, sk := range slices.SortedFunc(maps.Keys(sets), cmpSetKey) {
		vs := v.srcs[sk.src]
		if len(vs.j.byJoin[sk.key]) > 0 != sets[sk] {
			on := vs.src.On[0]
			parent := v.srcs[on.Other]
			for ppk, id := range parent.j.byCol[on.OtherColumn][sk.key] {
				v.rootsOf(on.Other, ppk, parent.t.rows.vals(id).values(), roots, 1)
			}
		}
	}
	if !slices.Equal(antiBefore, antiStates(v)) {
		// A NOT IN (subquery) became empty or not, or got or lost its
		// NULLs: every row of the outer query may come or go.
		for rk := range v.srcs[0].j.rows {
			roots[rk] = struct{}{}
		}
		for rk := range js.byRoot {
			roots[rk] = struct{}{}
		}
	}
	// Then the results of every root they can reach.
	before := v.countN()
	var d delta
	budget := s.joinBudget()
	for _, rk := range slices.Sorted(maps.Keys(roots)) {
		olds := js.byRoot[rk]
		oldByKey := make(map[string]*entry, len(olds))
		for k, e := range olds {
			oldByKey[k] = e
			v.dropEntry(rk, e)
		}
		if v.x().agg != nil {
			// Each joined row leaves its group as it entered it (in key
			// order: the groups' states do not depend on it, but keep
			// the core's work deterministic).
			for _, k := range slices.Sorted(maps.Keys(oldByKey)) {
				v.aggRow(k, oldByKey[k].enteredRow(), -1)
			}
		}
		var news []*entry
		if root := v.srcs[0].j.rows[rk]; root != 0 {
			var ok bool
			if news, ok = v.enumerate(rk, root, budget); !ok {
				s.overJoinBudget(v)
				return
			}
		}
		newKeys := make(map[string]bool, len(news))
		for _, e := range news {
			newKeys[e.key] = true
			v.addEntry(rk, e)
			if v.x().agg != nil {
				v.aggRow(e.key, e.enteredRow(), 1)
				continue
			}
			if v.ordered || v.plan.Count {
				continue
			}
			if oe := oldByKey[e.key]; oe == nil || !sameValues(v.plan.Project(oe.enteredRow()), v.plan.Project(e.enteredRow())) {
				d.rows = append(d.rows, v.resultRow(e))
			}
		}
		if !v.ordered && !v.plan.Count && v.x().agg == nil {
			for k := range oldByKey {
				if !newKeys[k] {
					d.removed = append(d.removed, Key(k))
				}
			}
		}
	}
	if s.overJoinLimit(v) {
		s.overJoinBudget(v)
		return
	}
	switch {
	case v.x().agg != nil:
		d = v.flushAgg()
	case v.plan.Count:
		d.count = v.countN()
		d.changed = d.count != before
	case v.ordered:
		d = v.diffShown()
	default:
		slices.SortFunc(d.rows, func(a, b ResultRow) int { return cmpStr(string(a.Key), string(b.Key)) })
		slices.Sort(d.removed)
		d.changed = len(d.rows) > 0 || len(d.removed) > 0
	}
	s.emit(v, d, lsn)
}

// clearTouched forgets the rows a transaction touched (the view is
// re-reading instead of settling them).
func clearTouched(js *joinState) {
	for _, t := range js.touched {
		clear(t)
	}
}

// askJoinReads asks for one read per source of a join view: the source's
// needed columns under its IN and range constraints (its own, and those the
// joins' equalities carry to it from the sources it joins: see
// query.Plan.Constraints).
func (s *state) askJoinReads(v *view) {
	js := v.x().js
	// Reads of an earlier round (a landing whose replay failed asks
	// again) must not land later: only the round asked here does.
	for _, r := range js.reads {
		s.reads.remove(r.id)
	}
	js.reads = js.reads[:0]
	for i, vs := range v.srcs {
		sql, args, oids := s.sourceSQL(vs)
		s.nextReadID++
		r := &read{id: s.nextReadID, v: v, src: i, logStart: s.txnLogBase + len(s.txnLog)}
		s.reads.put(r)
		js.reads = append(js.reads, r)
		formats := make([]int16, len(args))
		s.out.Reads = append(s.out.Reads, ReadRequest{
			ID: r.id, Plan: v.plan, Sources: []int{i},
			SQL: sql, Args: args, ArgOIDs: oids, ArgFormats: formats,
			RowLimit: s.opts.ReadRowLimit,
		})
	}
	v.mut().read = js.reads[0]
}

// sourceSQL renders the read of one source: its needed columns, filtered
// by its IN and range constraints (NOT IN is left to the core's own
// check), with text parameters.
func (s *state) sourceSQL(vs *viewSource) (string, [][]byte, []uint32) {
	var b strings.Builder
	b.WriteString("SELECT ")
	for j, c := range vs.src.Columns {
		if j > 0 {
			b.WriteString(", ")
		}
		b.WriteString(change.QuoteIdent(c.Name))
	}
	t := vs.src.Table
	b.WriteString(" FROM " + change.QuoteIdent(t.Schema) + "." + change.QuoteIdent(t.Name))
	var args [][]byte
	var oids []uint32
	param := func(col query.Column, x any) (string, bool) {
		txt, err := change.FormatOID(col.TypeOID, x, s.opts.Types)
		if err != nil {
			return "", false
		}
		args = append(args, []byte(txt))
		oids = append(oids, col.TypeOID)
		return fmt.Sprintf("$%d", len(args)), true
	}
	var conds []string
	for _, c := range vs.v.plan.Constraints(int(vs.idx)) {
		col := vs.src.Columns[c.Column]
		name := change.QuoteIdent(col.Name)
		n0 := len(args)
		var alts []string
		ok := true
		switch c.Kind {
		case query.ConstraintIn:
			var ps []string
			for _, x := range c.Values {
				placeholder, good := param(col, x)
				ok = ok && good
				ps = append(ps, placeholder)
			}
			if len(ps) > 0 {
				alts = append(alts, name+" IN ("+strings.Join(ps, ", ")+")")
			}
			if c.Null {
				alts = append(alts, name+" IS NULL")
			}
			if len(alts) == 0 {
				// No value at all (the filter, or the joins' equalities,
				// keep no row of this table): read nothing.
				alts = append(alts, "false")
			}
		case query.ConstraintRange:
			for _, r := range c.Ranges {
				var parts []string
				if r.Low != nil {
					placeholder, good := param(col, r.Low)
					ok = ok && good
					op := " > "
					if r.LowInc {
						op = " >= "
					}
					parts = append(parts, name+op+placeholder)
				}
				if r.High != nil {
					placeholder, good := param(col, r.High)
					ok = ok && good
					op := " < "
					if r.HighInc {
						op = " <= "
					}
					parts = append(parts, name+op+placeholder)
				}
				if len(parts) == 0 {
					parts = append(parts, name+" IS NOT NULL")
				}
				alts = append(alts, "("+strings.Join(parts, " AND ")+")")
			}
		default:
			continue
		}
		if !ok || len(alts) == 0 {
			args, oids = args[:n0], oids[:n0]
			continue
		}
		conds = append(conds, "("+strings.Join(alts, " OR ")+")")
	}
	if len(conds) > 0 {
		b.WriteString(" WHERE " + strings.Join(conds, " AND "))
	}
	return b.String(), args, oids
}

// joinReadsReady reports whether every read of a join view's current
// hydration is done and passed by the stream.
func (s *state) joinReadsReady(v *view) bool {
	for _, r := range v.x().js.reads {
		if !r.done || s.pos < r.snap.LSN {
			return false
		}
	}
	return true
}

// landJoin builds a join view's sources from its reads brought to the
// core's position, then its result, and makes it live.
func (s *state) landJoin(v *view) {
	js := v.x().js
	reads := js.reads
	js.reads = nil
	v.dropRead()
	// All of this round's reads leave the pending set now, not one by one
	// in the loop: a replay that fails below asks a new round, and a read
	// of this one left pending would later find js.reads empty (every
	// read "ready") and land a round that does not exist.
	for _, r := range reads {
		s.reads.remove(r.id)
	}
	readRows := make([]map[string][]any, len(v.srcs))
	for i, vs := range v.srcs {
		r := reads[i]
		tb := vs.t
		m := make(map[string][]any, len(r.rows))
		for _, row := range r.rows {
			if i >= len(row) || row[i] == nil {
				continue
			}
			vals := vs.layoutRow(row[i])
			if k, ok := tb.keyOf(vals); ok {
				if match, _ := v.sourceMatch(i, vals); match {
					m[k] = vals
				}
			}
		}
		ok := s.replayTable(r, tb, func(k string) []any { return m[k] }, func() { clear(m) }, func(oldKey, newKey string, newVals []any) bool {
			return replaySource(v, i, m, oldKey, newKey, newVals)
		})
		if !ok {
			s.askRead(v)
			return
		}
		readRows[i] = m
	}
	// Swap in: release the old rows and result.
	old := v.resultSet
	wasRefilling := v.status == viewRefilling
	for i, vs := range v.srcs {
		for k, id := range vs.j.rows {
			s.release(vs.t, k, id, vs)
		}
		vs.j.rows = make(map[string]rowID)
		vs.j.byJoin = make(map[string]map[string]rowID)
		vs.j.nulls = make(map[string]bool)
		for c := range vs.j.byCol {
			vs.j.byCol[c] = make(map[string]map[string]rowID)
		}
		js.bySrc[i] = make(map[string]map[string]*entry)
	}
	js.byRoot = make(map[string]map[string]*entry)
	v.resultSet = newResultSet(v.plan, s.opts.WindowMargin)
	v.resultSet.window, v.resultSet.complete = false, true
	for i, vs := range v.srcs {
		tb := vs.t
		for _, k := range slices.Sorted(maps.Keys(readRows[i])) {
			vals := readRows[i][k]
			id := tb.held(k)
			if id == 0 {
				id = tb.rows.insert(k, vals)
			} else {
				tb.mergeHeld(id, tb.encode(vals))
			}
			tb.rows.addHolder(id, vs)
			v.hold(vs, k, id)
		}
	}
	budget := s.joinBudget()
	for _, rk := range slices.Sorted(maps.Keys(v.srcs[0].j.rows)) {
		es, ok := v.enumerate(rk, v.srcs[0].j.rows[rk], budget)
		if !ok {
			s.overJoinBudget(v)
			return
		}
		for _, e := range es {
			v.addEntry(rk, e)
		}
	}
	if s.overJoinLimit(v) {
		s.overJoinBudget(v)
		return
	}
	s.goLive(v, &old, wasRefilling, nil)
}

// replaySource applies a replayed row change (replayTable) to a join
// source's read rows m; false when a needed value is unknown.
func replaySource(v *view, i int, m map[string][]any, oldKey, newKey string, newVals []any) bool {
	vs := v.srcs[i]
	delete(m, oldKey)
	if newVals == nil {
		return true
	}
	match, known := v.sourceMatch(i, newVals)
	if !known {
		return false
	}
	if match {
		if !loaded(query.Row{srcVals(vs, newVals)}) {
			return false
		}
		m[newKey] = newVals
	}
	return true
}
