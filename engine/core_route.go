package engine

import (
	"hash/maphash"
	"slices"
	"sort"
	"strings"

	"github.com/freshetdb/freshet/query"
)

// route finds the view sources of one table a changed row can affect. Each
// view source registers once, under the most selective of its source's
// constraints (all of them hold for every row that can affect the view, so
// one suffices; the view's filter decides exactly):
//
//   - IN / = : a hash index from a 64-bit hash of query.AppendKey(value)
//     to view sources, plus a list for IS NULL (eqIndex);
//   - ranges: an interval index (intervals sorted by low bound with a
//     running maximum of high bounds: a stabbing query walks back only
//     while an earlier interval can still reach the value);
//   - LIKE / ILIKE (query.Constraint.Contains: the literal runs of the
//     patterns a value must match): a hash index from a substring of 3 to
//     8 bytes of a literal run to view sources, per column and fold; a
//     value, folded as the pattern was, probes it with each of its own
//     substrings of those lengths (likeIndex);
//   - NOT IN / <>: every such view source, minus those excluding the value
//     (found through a hash index); a LIKE whose literal runs are all
//     shorter than three bytes ('a%', '%_b_%') is only NOT NULL and lands
//     here;
//   - unconstrained: a per-table set.
//
// A lookup costs a hash probe per indexed column (for a LIKE index, per
// position of the value and key length in use) plus the view sources it
// returns, whatever the number registered.
type route struct {
	all  map[*viewSource]struct{}
	eq   byCol[eqIndex]
	rng  byCol[rangeIndex]
	ne   byCol[notInIndex]
	like []*likeIndex
	buf  []byte
}

// byCol maps a layout column to its index. A table has indexes on few
// columns: a slice is looked up as fast as a map and ranged over faster
// (a map's range starts at a random place, which costs a random number
// per change).
type byCol[T any] []colIndex[T]

type colIndex[T any] struct {
	col int
	ix  *T
}

func (m byCol[T]) get(col int) *T {
	for _, e := range m {
		if e.col == col {
			return e.ix
		}
	}
	return nil
}

func (m *byCol[T]) put(col int, ix *T) { *m = append(*m, colIndex[T]{col, ix}) }

// registration is where a view source is registered (kept in the view
// source: a map from view source to registration cost about 130 bytes a
// subscription).
type registration struct {
	on   bool                 // registered
	kind query.ConstraintKind // 0: unconstrained
	like bool                 // kind is ConstraintNotIn, registered by its Contains
	fold query.Fold           // like: the index's fold
	col  int32                // layout position
	ci   int32                // index of the constraint in the plan's Constraints(idx)
	keys *keyList             // like: the key registered under
}

// eqIndex holds the view sources of one column registered by their IN
// (or =) values. It is keyed by a hash of each value's key encoding, not
// by the encoding: a key of its own and a slice per value cost about 100
// bytes a subscription of distinct binds (TestMemoryPerSubscription), a
// hash and one view source about 30. A hash that two values share routes
// a change of either to the view sources of both, which only costs the
// work of the view's filter rejecting it (route finds a superset; the
// filter decides). A hash with one view source, the common case, is in
// one; one with more (an identical bind of another view, a collision) in
// many, never in both.
type eqIndex struct {
	oid  uint32
	one  map[uint64]*viewSource
	many map[uint64][]*viewSource
	null []*viewSource
}

// hash returns the index's hash of the key encoding of x.
func (ix *eqIndex) hash(buf *[]byte, x any) uint64 {
	*buf = query.AppendKey((*buf)[:0], ix.oid, x)
	return maphash.Bytes(setSeed, *buf)
}

// add registers vs under hash h.
func (ix *eqIndex) add(h uint64, vs *viewSource) {
	if l, ok := ix.many[h]; ok {
		ix.many[h] = append(l, vs)
		return
	}
	first, ok := ix.one[h]
	if !ok {
		ix.one[h] = vs
		return
	}
	delete(ix.one, h)
	if ix.many == nil {
		ix.many = make(map[uint64][]*viewSource)
	}
	ix.many[h] = []*viewSource{first, vs}
}

// remove unregisters vs from hash h.
func (ix *eqIndex) remove(h uint64, vs *viewSource) {
	if ix.one[h] == vs {
		delete(ix.one, h)
		return
	}
	l := without(ix.many[h], vs)
	switch len(l) {
	case 0:
		delete(ix.many, h)
	case 1:
		delete(ix.many, h)
		ix.one[h] = l[0]
	default:
		ix.many[h] = l
	}
}

// each calls fn for every view source registered under hash h.
func (ix *eqIndex) each(h uint64, fn func(*viewSource)) {
	if vs := ix.one[h]; vs != nil {
		fn(vs)
		return
	}
	for _, vs := range ix.many[h] {
		fn(vs)
	}
}

// all calls fn for every view source registered under a value.
func (ix *eqIndex) all(fn func(*viewSource)) {
	for _, vs := range ix.one {
		fn(vs)
	}
	for _, l := range ix.many {
		for _, vs := range l {
			fn(vs)
		}
	}
}

type rangeEntry struct {
	r  query.Range
	vs *viewSource
}

type rangeIndex struct {
	oid     uint32
	entries []rangeEntry
	maxHigh []int // index of the entry with the greatest high bound among entries[:i+1]
	sorted  bool
}

type notInIndex struct {
	oid  uint32
	all  map[*viewSource]struct{}
	excl map[string][]*viewSource
}

// likeIndex holds the view sources of one column whose values must hold a
// text once folded by fold (a LIKE pattern's literal run), each under one
// key: a substring of one of its texts, of its text's length up to
// likeKeyMax bytes and at least 3. Every value such a view can keep holds
// the key, so a value is matched by looking up each of its own substrings
// of the lengths keys have. Of a view's possible keys the one with the
// fewest view sources already registered is chosen, the longer on a tie
// (the rarest among the patterns: patterns sharing a prefix, '1-%',
// '12-%', '123-%', spread out).
type likeIndex struct {
	col  int
	fold query.Fold
	keys map[string]*keyList
	lens [likeKeyMax + 1]int // view sources registered under keys of each length
	n    int                 // view sources registered
	seq  uint64              // values matched, so that a list is visited once per value
}

// likeKeyMax is the longest key: eight bytes tell 100,000 patterns of
// numbers apart, and a value is probed once per position per key length
// in use (at most six).
const likeKeyMax = 8

type keyList struct {
	key  string
	vs   []*viewSource
	seen uint64 // likeIndex.seq of the last value that visited it
}

// likeable reports whether c can be registered in a LIKE index: it holds a
// text of at least three bytes.
func likeable(c query.Constraint) bool {
	if c.Kind != query.ConstraintNotIn {
		return false
	}
	for _, sub := range c.Contains {
		if len(sub.Text) >= 3 {
			return true
		}
	}
	return false
}

// likeIx returns the LIKE index of (col, fold), or nil.
func (rt *route) likeIx(col int, fold query.Fold) *likeIndex {
	for _, ix := range rt.like {
		if ix.col == col && ix.fold == fold {
			return ix
		}
	}
	return nil
}

// addLike registers vs under the rarest key of c's texts (the first of
// the rarest: the choice depends only on the registrations before it).
func (rt *route) addLike(vs *viewSource, c query.Constraint, col int) {
	var bestFold query.Fold
	var bestKey string
	bestN := -1
	for _, sub := range c.Contains {
		if len(sub.Text) < 3 {
			continue
		}
		ix := rt.likeIx(col, sub.Fold)
		l := min(len(sub.Text), likeKeyMax)
		for i := 0; i+l <= len(sub.Text); i++ {
			k := sub.Text[i : i+l]
			n := 0
			if ix != nil {
				if kl := ix.keys[k]; kl != nil {
					n = len(kl.vs)
				}
			}
			if bestN < 0 || n < bestN || n == bestN && l > len(bestKey) {
				bestFold, bestKey, bestN = sub.Fold, k, n
			}
		}
	}
	ix := rt.likeIx(col, bestFold)
	if ix == nil {
		ix = &likeIndex{col: col, fold: bestFold, keys: make(map[string]*keyList)}
		rt.like = append(rt.like, ix)
	}
	kl := ix.keys[bestKey]
	if kl == nil {
		kl = &keyList{key: strings.Clone(bestKey)}
		ix.keys[kl.key] = kl
	}
	kl.vs = append(kl.vs, vs)
	ix.lens[len(kl.key)]++
	ix.n++
	vs.reg.like, vs.reg.fold, vs.reg.keys = true, ix.fold, kl
}

// removeLike unregisters vs, registered under reg.
func (rt *route) removeLike(vs *viewSource, reg registration) {
	ix := rt.likeIx(int(reg.col), reg.fold)
	kl := reg.keys
	if kl.vs = without(kl.vs, vs); len(kl.vs) == 0 {
		delete(ix.keys, kl.key)
	}
	ix.lens[len(kl.key)]--
	ix.n--
}

// match calls fn for every view source of the index a row whose value at
// the index's column is v can affect.
func (ix *likeIndex) match(v any, fn func(*viewSource)) {
	if v == nil || ix.n == 0 {
		return // LIKE is never true of NULL
	}
	s, ok := v.(string)
	probes := 0
	if ok {
		s = ix.fold.Apply(s)
		for l := 3; l <= likeKeyMax; l++ {
			if ix.lens[l] > 0 && len(s) >= l {
				probes += len(s) - l + 1
			}
		}
	}
	// A value unknown here (unloaded), or one with more substrings to
	// look up than there are views, visits every view source.
	if !ok || probes > 2*ix.n+64 {
		for _, kl := range ix.keys {
			for _, vs := range kl.vs {
				fn(vs)
			}
		}
		return
	}
	ix.seq++
	for l := 3; l <= likeKeyMax; l++ {
		if ix.lens[l] == 0 {
			continue
		}
		for i := 0; i+l <= len(s); i++ {
			kl := ix.keys[s[i:i+l]]
			if kl == nil || kl.seen == ix.seq {
				continue
			}
			kl.seen = ix.seq
			for _, vs := range kl.vs {
				fn(vs)
			}
		}
	}
}

func (rt *route) init() {
	rt.all = make(map[*viewSource]struct{})
}

// choose picks the constraint a view source registers under: IN with the
// fewest values, else a LIKE with a literal run of three bytes or more,
// else a range, else NOT IN, else none; it returns its index, or -1. A
// LIKE comes before a range because a range is most often one-sided
// (created_at > $1) and holds much of the table, where a trigram of a
// literal holds few of its values.
func choose(cs []query.Constraint) int {
	best, found, bi := query.Constraint{}, false, -1
	rank := func(c query.Constraint) int {
		switch {
		case c.Kind == query.ConstraintIn:
			return 0
		case likeable(c):
			return 1
		case c.Kind == query.ConstraintRange:
			return 2
		}
		return 3
	}
	for i, c := range cs {
		if c.Kind != query.ConstraintIn && c.Kind != query.ConstraintRange && c.Kind != query.ConstraintNotIn {
			continue
		}
		if !found || rank(c) < rank(best) || (c.Kind == query.ConstraintIn && best.Kind == c.Kind && len(c.Values) < len(best.Values)) {
			best, found, bi = c, true, i
		}
	}
	return bi
}

// add registers vs under its source's constraints.
func (rt *route) add(vs *viewSource) {
	cs := vs.v.plan.Constraints(int(vs.idx))
	ci := choose(cs)
	if ci < 0 {
		rt.all[vs] = struct{}{}
		vs.reg = registration{on: true}
		return
	}
	c := cs[ci]
	col := vs.col[c.Column]
	oid := vs.src.Columns[c.Column].TypeOID
	vs.reg = registration{on: true, kind: c.Kind, col: int32(col), ci: int32(ci)}
	switch c.Kind {
	case query.ConstraintIn:
		ix := rt.eq.get(col)
		if ix == nil {
			ix = &eqIndex{oid: oid, one: make(map[uint64]*viewSource)}
			rt.eq.put(col, ix)
		}
		for _, x := range c.Values {
			ix.add(ix.hash(&rt.buf, x), vs)
		}
		if c.Null {
			ix.null = append(ix.null, vs)
		}
	case query.ConstraintRange:
		ix := rt.rng.get(col)
		if ix == nil {
			ix = &rangeIndex{oid: oid}
			rt.rng.put(col, ix)
		}
		for _, r := range c.Ranges {
			ix.entries = append(ix.entries, rangeEntry{r, vs})
		}
		ix.sorted = false
	case query.ConstraintNotIn:
		if likeable(c) {
			rt.addLike(vs, c, col)
			return
		}
		ix := rt.ne.get(col)
		if ix == nil {
			ix = &notInIndex{oid: oid, all: make(map[*viewSource]struct{}), excl: make(map[string][]*viewSource)}
			rt.ne.put(col, ix)
		}
		ix.all[vs] = struct{}{}
		for _, x := range c.Values {
			k := string(query.AppendKey(nil, ix.oid, x))
			ix.excl[k] = append(ix.excl[k], vs)
		}
	}
}

func without(list []*viewSource, vs *viewSource) []*viewSource {
	for i, x := range list {
		if x == vs {
			return slices.Delete(list, i, i+1)
		}
	}
	return list
}

// remove unregisters vs.
func (rt *route) remove(vs *viewSource) {
	reg := vs.reg
	if !reg.on {
		return
	}
	vs.reg = registration{}
	var c query.Constraint
	if reg.kind != 0 {
		c = vs.v.plan.Constraints(int(vs.idx))[reg.ci]
	}
	switch reg.kind {
	case 0:
		delete(rt.all, vs)
	case query.ConstraintIn:
		ix := rt.eq.get(int(reg.col))
		for _, x := range c.Values {
			ix.remove(ix.hash(&rt.buf, x), vs)
		}
		if c.Null {
			ix.null = without(ix.null, vs)
		}
	case query.ConstraintRange:
		ix := rt.rng.get(int(reg.col))
		ix.entries = slices.DeleteFunc(ix.entries, func(e rangeEntry) bool { return e.vs == vs })
		ix.sorted = false
	case query.ConstraintNotIn:
		if reg.like {
			rt.removeLike(vs, reg)
			return
		}
		ix := rt.ne.get(int(reg.col))
		delete(ix.all, vs)
		for _, x := range c.Values {
			k := string(query.AppendKey(nil, ix.oid, x))
			if l := without(ix.excl[k], vs); len(l) == 0 {
				delete(ix.excl, k)
			} else {
				ix.excl[k] = l
			}
		}
	}
}

// match calls fn for every view source a row with these layout values
// can affect (possibly more than once for one view source).
func (rt *route) match(vals []any, fn func(*viewSource)) {
	if len(rt.all) > 0 {
		for vs := range rt.all {
			fn(vs)
		}
	}
	for _, e := range rt.eq {
		col, ix := e.col, e.ix
		v := valAt(vals, col)
		if isUnloaded(v) {
			ix.all(fn)
			for _, vs := range ix.null {
				fn(vs)
			}
			continue
		}
		if v == nil {
			for _, vs := range ix.null {
				fn(vs)
			}
			continue
		}
		ix.each(ix.hash(&rt.buf, v), fn)
	}
	for _, e := range rt.rng {
		e.ix.stab(valAt(vals, e.col), fn)
	}
	for _, ix := range rt.like {
		ix.match(valAt(vals, ix.col), fn)
	}
	for _, e := range rt.ne {
		col, ix := e.col, e.ix
		v := valAt(vals, col)
		if v == nil {
			continue
		}
		var excl []*viewSource
		if !isUnloaded(v) {
			rt.buf = query.AppendKey(rt.buf[:0], ix.oid, v)
			excl = ix.excl[string(rt.buf)]
		}
		for vs := range ix.all {
			if !slices.Contains(excl, vs) {
				fn(vs)
			}
		}
	}
}

func valAt(vals []any, i int) any {
	if i < len(vals) {
		return vals[i]
	}
	return unloaded{}
}

// lowBefore orders ranges by low bound (unbounded first).
func (ix *rangeIndex) lowCmp(a, b query.Range) int {
	switch {
	case a.Low == nil && b.Low == nil:
		return 0
	case a.Low == nil:
		return -1
	case b.Low == nil:
		return 1
	}
	if c := query.CompareValues(ix.oid, a.Low, b.Low); c != 0 {
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

// highCmp orders ranges by high bound (unbounded last).
func (ix *rangeIndex) highCmp(a, b query.Range) int {
	switch {
	case a.High == nil && b.High == nil:
		return 0
	case a.High == nil:
		return 1
	case b.High == nil:
		return -1
	}
	if c := query.CompareValues(ix.oid, a.High, b.High); c != 0 {
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

func (ix *rangeIndex) build() {
	slices.SortStableFunc(ix.entries, func(a, b rangeEntry) int { return ix.lowCmp(a.r, b.r) })
	ix.maxHigh = ix.maxHigh[:0]
	for i, e := range ix.entries {
		m := i
		if i > 0 && ix.highCmp(ix.entries[ix.maxHigh[i-1]].r, e.r) > 0 {
			m = ix.maxHigh[i-1]
		}
		ix.maxHigh = append(ix.maxHigh, m)
	}
	ix.sorted = true
}

// startsBy reports whether r's low bound admits v.
func (ix *rangeIndex) startsBy(r query.Range, v any) bool {
	if r.Low == nil {
		return true
	}
	c := query.CompareValues(ix.oid, r.Low, v)
	return c < 0 || c == 0 && r.LowInc
}

// endsAfter reports whether r's high bound admits v.
func (ix *rangeIndex) endsAfter(r query.Range, v any) bool {
	if r.High == nil {
		return true
	}
	c := query.CompareValues(ix.oid, v, r.High)
	return c < 0 || c == 0 && r.HighInc
}

// stab calls fn for every entry whose range contains v (all of them when v
// is unknown; none for NULL).
func (ix *rangeIndex) stab(v any, fn func(*viewSource)) {
	if v == nil {
		return
	}
	if isUnloaded(v) {
		for _, e := range ix.entries {
			fn(e.vs)
		}
		return
	}
	if !ix.sorted {
		ix.build()
	}
	// Entries [0, n) start at or before v.
	n := sort.Search(len(ix.entries), func(i int) bool { return !ix.startsBy(ix.entries[i].r, v) })
	for i := n - 1; i >= 0; i-- {
		if !ix.endsAfter(ix.entries[ix.maxHigh[i]].r, v) {
			break
		}
		if ix.endsAfter(ix.entries[i].r, v) {
			fn(ix.entries[i].vs)
		}
	}
}
