package query

import (
	"math"
	"math/big"
	"sort"
	"strings"

	"github.com/freshetdb/freshet/change"
)

// dom is what a predicate says about one column's value in any row it
// keeps: a value set (with or without NULL), a union of ranges, or excluded
// values (NULL excluded). Values are in the column's own typed form.
type dom struct {
	kind     ConstraintKind
	vals     []any
	keys     map[string]bool
	null     bool
	ranges   []Range
	contains []Substring // ConstraintNotIn: see Constraint.Contains
}

// derived is what a predicate says about the columns of the rows it keeps.
// none: it keeps no row at all. A column missing from cols is
// unconstrained.
type derived struct {
	none bool
	cols map[[2]int]*dom
}

type deriver struct {
	c    *compiler
	oids map[[2]int]uint32
}

func colKey(r *colRef) [2]int { return [2]int{int(r.src), int(r.cat)} }

// constraints fills each source's Constraints from the filter, then
// carries IN constraints across the joins' ON equalities (propagate).
func (c *compiler) constraints(p *Plan) {
	semi := false
	for _, s := range p.Sources {
		semi = semi || s.Subquery()
	}
	if p.filter == nil && !semi {
		return
	}
	d := &deriver{c: c, oids: make(map[[2]int]uint32)}
	res := all
	if p.filter != nil {
		res = d.derive(p.filter, false)
	}
	if res.none {
		// No row is ever kept: no change can affect the result.
		p.cons = make([][]Constraint, len(p.Sources))
		for i := range p.cons {
			p.cons[i] = []Constraint{{Column: 0, Kind: ConstraintIn}}
		}
		return
	}
	cols := make(map[[2]int]*dom, len(res.cols))
	for k, dm := range res.cols {
		if p.Sources[k[0]].Nullable && dm.kind == ConstraintIn && dm.null {
			// The null-extended row passes the filter: a row of this
			// table can change the result by merely existing.
			continue
		}
		cols[k] = dm
	}
	// A subquery's WHERE holds for every row of its source that can
	// affect the result (it names that source's columns only).
	noRows := map[int]bool{}
	for i, s := range p.Sources {
		if s.filter == nil {
			continue
		}
		sr := d.derive(s.filter, false)
		if sr.none {
			noRows[i] = true
			continue
		}
		for k, dm := range sr.cols {
			cols[k] = dm
		}
	}
	d.propagate(cols)
	p.cons = make([][]Constraint, len(p.Sources))
	for i := range p.Sources {
		var keys [][2]int
		for k := range cols {
			if k[0] == i {
				keys = append(keys, k)
			}
		}
		sort.Slice(keys, func(a, b int) bool { return keys[a][1] < keys[b][1] })
		var cons []Constraint
		for _, k := range keys {
			dm := cols[k]
			idx := -1
			for _, r := range c.refs {
				if int(r.src) == k[0] && int(r.cat) == k[1] {
					idx = int(r.idx)
					break
				}
			}
			con := Constraint{Column: int32(idx), Kind: dm.kind, Null: dm.null}
			switch dm.kind {
			case ConstraintRange:
				con.Ranges = dm.ranges
			default:
				con.Values = dm.vals
				con.Contains = dm.contains
			}
			cons = append(cons, con)
		}
		if noRows[i] {
			// The subquery keeps no row: its IN is never true.
			cons = []Constraint{{Column: 0, Kind: ConstraintIn}}
		}
		p.cons[i] = cons
	}
}

// propagate narrows the sources' column domains (cols: what each source's
// held rows satisfy) across the ON equalities of the joins. Each step
// leaves the join's result unchanged, so it may stop after any step:
//
//   - From the earlier (parent) column to the joined source's column, for
//     INNER and LEFT joins alike: a row of the joined source takes part in
//     a result only through rows of the parent that satisfy the ON
//     equalities, and every parent row held satisfies its domain; a joined
//     row whose column is outside it matches no parent row (and whether a
//     LEFT JOIN null-extends depends only on the rows that match).
//   - From the joined source's column back to the parent's, for an INNER
//     join only: a parent row matching no held row of the joined source is
//     dropped from every result by the inner join, and without it the
//     parent (were it null-extended instead) matches nothing either.
//     Through a LEFT join the parent row stays (null-extended), so nothing
//     goes back. A semi-join (IN (subquery)) is an inner join here: an
//     outer row matching no held row of the subquery's table is not kept.
//   - Nothing crosses an anti-join (NOT IN (subquery)): every row its
//     subquery keeps matters, whatever its value (one makes the subquery
//     non-empty, one with a NULL makes NOT IN never true), and outer rows
//     are kept by what they do not match.
//
// Only IN value sets travel, without NULL (NULL equals nothing: an IS NULL
// alone gives nothing), and only between columns of one type and of
// collations whose = agree, where the values' AppendKey encodes that =.
func (dv *deriver) propagate(cols map[[2]int]*dom) {
	joins := dv.c.pendingJoins
	step := func(from, to *colRef) bool {
		fd := cols[colKey(from)]
		if fd == nil || fd.kind != ConstraintIn || len(fd.vals) == 0 {
			return false
		}
		fc, tc := dv.c.column(from), dv.c.column(to)
		if fc.TypeOID != tc.TypeOID || fc.Collation.OID != tc.Collation.OID && !(fc.Collation.Deterministic && tc.Collation.Deterministic) {
			return false
		}
		nd := newDom(ConstraintIn)
		for _, v := range fd.vals {
			nd.add(tc.TypeOID, v)
		}
		k := colKey(to)
		prev := cols[k]
		if prev != nil {
			nd = dv.intersect(tc.TypeOID, prev, nd)
			if prev.kind == ConstraintIn && len(nd.vals) == len(prev.vals) && nd.null == prev.null {
				return false
			}
		}
		cols[k] = nd
		return true
	}
	// Parents come before the sources joined to them, so one pass forward
	// and one back carry a chain end to end; a few more settle the rest
	// (each change adds a constraint or removes values, so it ends).
	for range 2 * len(joins) {
		changed := false
		for _, j := range joins {
			if dv.c.sources[j.src].Join != JoinAnti {
				changed = step(j.other, j.mine) || changed
			}
		}
		for i := len(joins) - 1; i >= 0; i-- {
			if j := joins[i]; dv.c.sources[j.src].Join == JoinInner || dv.c.sources[j.src].Join == JoinSemi {
				changed = step(j.mine, j.other) || changed
			}
		}
		if !changed {
			return
		}
	}
}

func newDom(kind ConstraintKind) *dom { return &dom{kind: kind, keys: map[string]bool{}} }

func (d *dom) add(oid uint32, v any) {
	k := string(AppendKey(nil, oid, v))
	if !d.keys[k] {
		d.keys[k] = true
		d.vals = append(d.vals, v)
	}
}

func (d *dom) has(oid uint32, v any) bool { return d.keys[string(AppendKey(nil, oid, v))] }

func single(r *colRef, dm *dom) derived {
	return derived{cols: map[[2]int]*dom{colKey(r): dm}}
}

var all = derived{}
var none = derived{none: true}

// colValue converts a constant in comparison family fam into the column's
// own form: exact says it converted exactly; never says no value of the
// column can equal it; neither means no conversion is known.
//
// An integer outside the column's own type (9000000000 for an int4
// column) is never equal to its values: it makes no constraint value,
// which would be read back from PostgreSQL as a parameter of the column's
// type, and fail there.
func (dv *deriver) colValue(r *colRef, v any, fam family) (out any, exact, never bool) {
	out, exact, never = dv.colValueOf(r, v, fam)
	if i, ok := out.(int64); ok && exact && !intFits(i, r.oid) {
		return nil, false, true
	}
	return out, exact, never
}

func (dv *deriver) colValueOf(r *colRef, v any, fam family) (out any, exact, never bool) {
	cf := dv.c.colFamily(dv.c.column(r))
	if cf == famFloat && fam == famFloat && r.oid == change.OIDFloat4 {
		// A real column compares as float8: only a value a real can hold
		// survives the widening CompareValues and AppendKey apply.
		f := v.(float64)
		if math.IsNaN(f) || float64(float32(f)) == f {
			return f, true, false
		}
		return nil, false, true
	}
	if cf == famText && r.oid == change.OIDBPChar {
		// CompareValues and AppendKey drop a char(n) value's trailing
		// spaces; a constant ending in spaces (compared as text) is
		// never equal to a trimmed value and has no exact bound.
		if str, ok := v.(string); ok && strings.HasSuffix(str, " ") {
			return nil, false, true
		}
	}
	if cf == fam || cf == famEnum && fam == famEnum {
		return v, true, false
	}
	switch {
	case cf == famInt && fam == famNumeric:
		n := v.(change.Numeric)
		if !n.IsFinite() {
			return nil, false, true
		}
		i, ok := numericToInt(n)
		if !ok {
			return nil, false, false
		}
		if cmpNumeric(change.Numeric{Coef: big.NewInt(i)}, n) != 0 {
			return nil, false, true
		}
		return i, true, false
	case cf == famInt && fam == famFloat:
		f := v.(float64)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, false, true
		}
		if math.Abs(f) >= 1<<53 {
			return nil, false, false
		}
		if f != math.Trunc(f) {
			return nil, false, true
		}
		return int64(f), true, false
	case cf == famDate && fam == famTimestamp:
		ts := v.(change.Timestamp)
		if ts.Inf != 0 {
			return change.Date{Inf: ts.Inf}, true, false
		}
		if ts.Micros%usecsPerDay != 0 {
			return nil, false, true
		}
		d := ts.Micros / usecsPerDay
		if d < math.MinInt32 || d > math.MaxInt32 {
			return nil, false, false
		}
		return change.Date{Days: int32(d)}, true, false
	}
	return nil, false, false
}

func (dv *deriver) derive(e *expr, neg bool) derived {
	switch e.op {
	case opConst:
		t := e.val
		if neg {
			t = triNot(t)
		}
		if t == True {
			return all
		}
		return none
	case opNot:
		return dv.derive(e.args[0], !neg)
	case opAnd, opOr:
		conj := (e.op == opAnd) != neg
		var res derived
		for i, a := range e.args {
			d := dv.derive(a, neg)
			if i == 0 {
				res = d
			} else if conj {
				res = dv.and(res, d)
			} else {
				res = dv.or(res, d)
			}
		}
		return res
	case opBoolTest:
		t := e.test
		if neg {
			t ^= 1 // IS TRUE <-> IS NOT TRUE, IS FALSE <-> IS NOT FALSE, ...
		}
		switch t {
		case testTrue:
			return dv.derive(e.args[0], false)
		case testFalse:
			return dv.derive(e.args[0], true)
		}
		if a := e.args[0]; a.op == opBoolCol && a.l.sx == nil {
			dm := newDom(ConstraintIn)
			switch t {
			case testNotTrue:
				dm.add(a.l.col.oid, false)
				dm.null = true
			case testNotFalse:
				dm.add(a.l.col.oid, true)
				dm.null = true
			case testUnknown:
				dm.null = true
			default:
				dm = newDom(ConstraintNotIn)
			}
			return single(a.l.col, dm)
		}
		return all
	}
	if e.l.sx != nil || e.r.sx != nil {
		// A condition on an expression (a + 1 = 5, lower(t) = 'x') says
		// nothing a column's index could use: the columns it reads are
		// left unconstrained by it.
		return all
	}
	emptyArray := (e.op == opIn && !e.null || e.op == opAnyAll) && len(e.setVals()) == 0
	if emptyArray || e.l.col == nil && (e.op != opCmp || e.r.col == nil) {
		// Constants only: decided without a row.
		t := e.eval(nil, nil)
		if neg {
			t = triNot(t)
		}
		if t == True {
			return all
		}
		return none
	}
	col := e.l.col
	oid := col.oid
	if e.l.trim {
		// A varchar compared as char(n): its stored value keeps trailing
		// spaces the comparison ignores; say only that it is not NULL
		// (IS DISTINCT FROM is true for NULL too: nothing to say).
		if e.op == opDistinct {
			return all
		}
		return single(col, newDom(ConstraintNotIn))
	}
	switch e.op {
	case opCmp:
		if e.r.col != nil {
			// Both columns must be non-NULL.
			a, b := newDom(ConstraintNotIn), newDom(ConstraintNotIn)
			return dv.and(single(col, a), single(e.r.col, b))
		}
		if e.r.val == nil {
			return none
		}
		op := e.cmp
		if neg {
			op = op.negated()
		}
		v, exact, never := dv.colValue(col, e.r.val, e.fam)
		switch op {
		case cmpEq:
			dm := newDom(ConstraintIn)
			if never {
				return single(col, dm)
			}
			if !exact {
				return single(col, newDom(ConstraintNotIn))
			}
			dm.add(oid, v)
			return single(col, dm)
		case cmpNe:
			dm := newDom(ConstraintNotIn)
			if exact {
				dm.add(oid, v)
			}
			return single(col, dm)
		}
		if !exact {
			return single(col, newDom(ConstraintNotIn))
		}
		dm := newDom(ConstraintRange)
		var r Range
		switch op {
		case cmpLt, cmpLe:
			r = Range{High: v, HighInc: op == cmpLe}
		default:
			r = Range{Low: v, LowInc: op == cmpGe}
		}
		dm.ranges = []Range{r}
		return single(col, dm)
	case opIn:
		in := e.negate == neg
		if in {
			dm := newDom(ConstraintIn)
			for _, x := range e.setVals() {
				v, exact, never := dv.colValue(col, x, e.fam)
				if never {
					continue
				}
				if !exact {
					return single(col, newDom(ConstraintNotIn))
				}
				dm.add(oid, v)
			}
			return single(col, dm)
		}
		if e.null {
			return none
		}
		dm := newDom(ConstraintNotIn)
		for _, x := range e.setVals() {
			if v, exact, _ := dv.colValue(col, x, e.fam); exact {
				dm.add(oid, v)
			}
		}
		return single(col, dm)
	case opIsNull:
		if (!e.negate) != neg {
			dm := newDom(ConstraintIn)
			dm.null = true
			return single(col, dm)
		}
		return single(col, newDom(ConstraintNotIn))
	case opDistinct:
		notDistinct := e.negate != neg
		if !notDistinct {
			if e.r.col == nil && e.r.val == nil {
				return single(col, newDom(ConstraintNotIn))
			}
			return all
		}
		if e.r.col != nil {
			return all
		}
		dm := newDom(ConstraintIn)
		if e.r.val == nil {
			dm.null = true
			return single(col, dm)
		}
		v, exact, never := dv.colValue(col, e.r.val, e.fam)
		if never {
			return single(col, dm)
		}
		if !exact {
			return single(col, newDom(ConstraintNotIn))
		}
		dm.add(oid, v)
		return single(col, dm)
	case opBoolCol:
		dm := newDom(ConstraintIn)
		dm.add(oid, !neg)
		return single(col, dm)
	case opLike:
		// Whichever way it goes, the column is not NULL; a value LIKE
		// the pattern (not NOT LIKE) holds each of its literal runs.
		dm := newDom(ConstraintNotIn)
		if e.negate == neg {
			for _, l := range e.set.like.literals() {
				dm.contains = append(dm.contains, Substring{Fold: e.set.like.folds, Text: l})
			}
		}
		return single(col, dm)
	case opAnyAll:
		// Whichever way it goes, the column is not NULL.
		return single(col, newDom(ConstraintNotIn))
	}
	return all
}

// and intersects what two predicates say.
func (dv *deriver) and(a, b derived) derived {
	if a.none || b.none {
		return none
	}
	out := derived{cols: make(map[[2]int]*dom, len(a.cols)+len(b.cols))}
	for k, d := range a.cols {
		out.cols[k] = d
	}
	for k, d := range b.cols {
		if prev, ok := out.cols[k]; ok {
			out.cols[k] = dv.intersect(dv.oidOf(k), prev, d)
		} else {
			out.cols[k] = d
		}
	}
	return out
}

// or unites what two predicates say; a column constrained by only one of
// them is unconstrained.
func (dv *deriver) or(a, b derived) derived {
	if a.none {
		return b
	}
	if b.none {
		return a
	}
	out := derived{cols: make(map[[2]int]*dom)}
	for k, da := range a.cols {
		if db, ok := b.cols[k]; ok {
			if u := dv.union(dv.oidOf(k), da, db); u != nil {
				out.cols[k] = u
			}
		}
	}
	return out
}

func (dv *deriver) oidOf(k [2]int) uint32 {
	return dv.c.sources[k[0]].Table.Columns[k[1]].TypeOID
}

func (dv *deriver) intersect(oid uint32, a, b *dom) *dom {
	if a.kind > b.kind {
		a, b = b, a
	}
	switch {
	case a.kind == ConstraintIn && b.kind == ConstraintIn:
		out := newDom(ConstraintIn)
		for _, v := range a.vals {
			if b.has(oid, v) {
				out.add(oid, v)
			}
		}
		out.null = a.null && b.null
		return out
	case a.kind == ConstraintIn && b.kind == ConstraintRange:
		out := newDom(ConstraintIn)
		for _, v := range a.vals {
			if inRanges(oid, b.ranges, v) {
				out.add(oid, v)
			}
		}
		return out
	case a.kind == ConstraintIn && b.kind == ConstraintNotIn:
		out := newDom(ConstraintIn)
		for _, v := range a.vals {
			if !b.has(oid, v) {
				out.add(oid, v)
			}
		}
		return out
	case a.kind == ConstraintRange && b.kind == ConstraintRange:
		out := newDom(ConstraintRange)
		for _, x := range a.ranges {
			for _, y := range b.ranges {
				if r, ok := intersectRange(oid, x, y); ok {
					out.ranges = append(out.ranges, r)
				}
			}
		}
		out.ranges = normalizeRanges(oid, out.ranges)
		if len(out.ranges) == 0 {
			return newDom(ConstraintIn)
		}
		return out
	case a.kind == ConstraintRange && b.kind == ConstraintNotIn:
		return a
	}
	out := newDom(ConstraintNotIn)
	for _, v := range a.vals {
		out.add(oid, v)
	}
	for _, v := range b.vals {
		out.add(oid, v)
	}
	// Both hold: the value contains the texts of each (a union of what
	// either says only ever drops them, see union).
	out.contains = append(append([]Substring(nil), a.contains...), b.contains...)
	return out
}

// union returns a domain holding both, or nil when the result is
// unconstrained.
func (dv *deriver) union(oid uint32, a, b *dom) *dom {
	if a.kind > b.kind {
		a, b = b, a
	}
	switch {
	case a.kind == ConstraintIn && b.kind == ConstraintIn:
		// Every dom belongs to one derivation only: a grows in place, so
		// a long OR of equalities costs linear time.
		if len(a.vals) < len(b.vals) {
			a, b = b, a
		}
		for _, v := range b.vals {
			a.add(oid, v)
		}
		a.null = a.null || b.null
		return a
	case a.kind == ConstraintIn && b.kind == ConstraintRange:
		if a.null {
			return nil
		}
		out := newDom(ConstraintRange)
		out.ranges = append(out.ranges, b.ranges...)
		for _, v := range a.vals {
			out.ranges = append(out.ranges, Range{Low: v, High: v, LowInc: true, HighInc: true})
		}
		out.ranges = normalizeRanges(oid, out.ranges)
		return out
	case a.kind == ConstraintIn && b.kind == ConstraintNotIn:
		if a.null {
			return nil
		}
		out := newDom(ConstraintNotIn)
		for _, v := range b.vals {
			if !a.has(oid, v) {
				out.add(oid, v)
			}
		}
		return out
	case a.kind == ConstraintRange && b.kind == ConstraintRange:
		out := newDom(ConstraintRange)
		out.ranges = normalizeRanges(oid, append(append([]Range(nil), a.ranges...), b.ranges...))
		return out
	case a.kind == ConstraintRange && b.kind == ConstraintNotIn:
		out := newDom(ConstraintNotIn)
		for _, v := range b.vals {
			if !inRanges(oid, a.ranges, v) {
				out.add(oid, v)
			}
		}
		return out
	}
	out := newDom(ConstraintNotIn)
	for _, v := range a.vals {
		if b.has(oid, v) {
			out.add(oid, v)
		}
	}
	return out
}

// lowCmp orders two low bounds (nil = -infinity; exclusive after inclusive).
func lowCmp(oid uint32, a Range, b Range) int {
	switch {
	case a.Low == nil && b.Low == nil:
		return 0
	case a.Low == nil:
		return -1
	case b.Low == nil:
		return 1
	}
	if c := CompareValues(oid, a.Low, b.Low); c != 0 {
		return c
	}
	switch {
	case a.LowInc == b.LowInc:
		return 0
	case a.LowInc:
		return -1
	}
	return 1
}

// highCmp orders two high bounds (nil = +infinity; exclusive before inclusive).
func highCmp(oid uint32, a Range, b Range) int {
	switch {
	case a.High == nil && b.High == nil:
		return 0
	case a.High == nil:
		return 1
	case b.High == nil:
		return -1
	}
	if c := CompareValues(oid, a.High, b.High); c != 0 {
		return c
	}
	switch {
	case a.HighInc == b.HighInc:
		return 0
	case a.HighInc:
		return 1
	}
	return -1
}

func emptyRange(oid uint32, r Range) bool {
	if r.Low == nil || r.High == nil {
		return false
	}
	c := CompareValues(oid, r.Low, r.High)
	return c > 0 || c == 0 && !(r.LowInc && r.HighInc)
}

func intersectRange(oid uint32, a, b Range) (Range, bool) {
	r := a
	if lowCmp(oid, b, a) > 0 {
		r.Low, r.LowInc = b.Low, b.LowInc
	}
	if highCmp(oid, b, a) < 0 {
		r.High, r.HighInc = b.High, b.HighInc
	}
	return r, !emptyRange(oid, r)
}

func inRanges(oid uint32, rs []Range, v any) bool {
	for _, r := range rs {
		if _, ok := intersectRange(oid, r, Range{Low: v, High: v, LowInc: true, HighInc: true}); ok {
			return true
		}
	}
	return false
}

// normalizeRanges sorts ranges and merges those that overlap or touch.
func normalizeRanges(oid uint32, rs []Range) []Range {
	var out []Range
	for _, r := range rs {
		if !emptyRange(oid, r) {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return lowCmp(oid, out[i], out[j]) < 0 })
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 {
			last := &merged[n-1]
			if touches(oid, *last, r) {
				if highCmp(oid, r, *last) > 0 {
					last.High, last.HighInc = r.High, r.HighInc
				}
				continue
			}
		}
		merged = append(merged, r)
	}
	return merged
}

// touches reports whether b (starting no earlier than a) overlaps a or
// meets it with no gap.
func touches(oid uint32, a, b Range) bool {
	if a.High == nil || b.Low == nil {
		return true
	}
	c := CompareValues(oid, b.Low, a.High)
	return c < 0 || c == 0 && (a.HighInc || b.LowInc)
}
