package query

import (
	"slices"
	"strconv"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// SELECT DISTINCT is a grouping by the output columns with no aggregate:
// the engine keeps a row count per group, and a group shows while its
// count is above 0. SELECT DISTINCT ON (e, ...) is a grouping by e, ...
// whose groups each keep their rows ordered by the query's ORDER BY
// (FirstRow) and show the first one's outputs.

// The first-row columns of a DISTINCT ON group row: its outputs, then its
// ORDER BY keys' values.
const (
	groupFirstCol = "\x00first"
	groupOrdCol   = "\x00ord"
)

// FirstRow is the row a DISTINCT ON group shows: the first of its rows
// by the query's ORDER BY (the row key breaks ties, which the compiler
// allows only where no two rows can tie or tied rows show alike). A row's
// values (EvalFirst) are the select list's outputs then the ORDER BY
// keys' values; the group row continues with the first row's.
type FirstRow struct {
	// OIDs are the types of a row's values.
	OIDs  []uint32
	vals  []*scalar
	order []firstKey
}

type firstKey struct {
	at         int // index into the values
	oid        uint32
	desc       bool
	nullsFirst bool
}

// FirstState is one DISTINCT ON group's rows, ordered as FirstRow says.
// The zero value holds no row.
type FirstState struct {
	tree multiset
}

type firstEntry struct {
	key  string
	vals []any
}

// EvalFirst evaluates a row's values into dst (room for len(OIDs)). It
// reports the error PostgreSQL would raise evaluating them.
func (f *FirstRow) EvalFirst(row Row, dst []any) (err error) {
	defer recoverEval(&err)
	for i, s := range f.vals {
		dst[i] = s.eval(row)
	}
	return nil
}

// Add adds (sign 1) or removes (sign -1) the row of key key whose values
// (EvalFirst) are vals: an added row's vals are kept (the caller must not
// change them after), a removed row's must equal those it was added with.
// Removing a row the state does not hold is a bug and panics.
func (f *FirstRow) Add(st *FirstState, key string, vals []any, sign int) {
	if st.tree.by == nil {
		st.tree.by = f.compare
	}
	e := &firstEntry{key: key, vals: vals}
	if sign > 0 {
		st.tree.add(e)
	} else {
		st.tree.remove(e)
	}
}

// First returns the values of the state's first row, nil when it holds
// none.
func (f *FirstRow) First(st *FirstState) []any {
	e, _ := st.tree.first().(*firstEntry)
	if e == nil {
		return nil
	}
	return e.vals
}

// compare orders two rows by the ORDER BY keys, then by row key.
func (f *FirstRow) compare(a, b any) int {
	x, y := a.(*firstEntry), b.(*firstEntry)
	for _, k := range f.order {
		u, v := x.vals[k.at], y.vals[k.at]
		var c int
		switch {
		case u == nil && v == nil:
			continue
		case u == nil:
			c = 1
			if k.nullsFirst {
				c = -1
			}
			return c
		case v == nil:
			c = -1
			if k.nullsFirst {
				c = 1
			}
			return c
		default:
			c = CompareValues(k.oid, u, v)
		}
		if c != 0 {
			if k.desc {
				return -c
			}
			return c
		}
	}
	return strings.Compare(x.key, y.key)
}

// distinct compiles SELECT DISTINCT and SELECT DISTINCT ON.
func (c *compiler) distinct(p *Plan) error {
	sel := c.sel
	if len(sel.GroupClause) > 0 || sel.HavingClause != nil {
		return refuse(CodeDistinct, "DISTINCT with GROUP BY or HAVING is not supported")
	}
	for _, n := range append(append([]*pg.Node{}, sel.TargetList...), sel.SortClause...) {
		if hasAggregate(n) {
			return refuse(CodeDistinct, "DISTINCT with aggregates is not supported")
		}
	}
	list, err := c.expandStar(sel.TargetList)
	if err != nil {
		return err
	}
	targets, err := resTargets(list)
	if err != nil {
		return err
	}
	for _, rt := range targets {
		if rt.Val.GetAConst() != nil || rt.Val.GetParamRef() != nil {
			return refusalAt(rt.Location, CodeDistinct, "SELECT DISTINCT of a constant is not supported")
		}
	}
	if on := !(len(sel.DistinctClause) == 1 && sel.DistinctClause[0].Node == nil); on {
		return c.distinctOn(p, list, targets)
	}
	// ORDER BY may name only what the select list shows, as PostgreSQL
	// requires (the groups have nothing else).
	outs := map[string]bool{}
	for _, rt := range targets {
		outs[c.canon(rt.Val)] = true
	}
	for _, n := range sel.SortClause {
		sb := n.GetSortBy()
		if sb == nil {
			return refuse(CodeOrderBy, "this ORDER BY item is not supported")
		}
		e, err := c.targetItem(sb.Node, targets, "ORDER BY")
		if err != nil {
			return err
		}
		if !outs[c.canon(e)] {
			return refusalAt(nodeLocation(sb.Node), CodeDistinct, "for SELECT DISTINCT, ORDER BY expressions must appear in select list")
		}
	}
	items := make([]*pg.Node, len(targets))
	for i, rt := range targets {
		items[i] = rt.Val
	}
	return c.grouping(p, list, items, "SELECT DISTINCT of")
}

// expandStar returns the select list with each * and t.* replaced by the
// columns it stands for (the sources are marked Star: a column added to
// the table changes the result).
func (c *compiler) expandStar(list []*pg.Node) ([]*pg.Node, error) {
	var out []*pg.Node
	for _, n := range list {
		rt := n.GetResTarget()
		cr := rt.GetVal().GetColumnRef()
		if cr == nil || cr.Fields[len(cr.Fields)-1].GetAStar() == nil {
			out = append(out, n)
			continue
		}
		src, _, _, err := c.resolveColumn(cr)
		if err != nil {
			return nil, err
		}
		for i, s := range c.sources {
			if src >= 0 && i != src || !c.visible(i) {
				continue
			}
			s.Star = true
			for _, col := range s.Table.Columns {
				out = append(out, &pg.Node{Node: &pg.Node_ResTarget{ResTarget: &pg.ResTarget{
					Val: colNode(s.Alias, col.Name), Location: rt.Location}}})
			}
		}
	}
	return out, nil
}

// targetItem resolves an ORDER BY or DISTINCT ON item (what) as
// PostgreSQL's findTargetlistEntrySQL92 does: a position names a select
// list item, a bare name an output's name first, and anything else is an
// expression over the sources.
func (c *compiler) targetItem(n *pg.Node, targets []*pg.ResTarget, what string) (*pg.Node, error) {
	code := CodeDistinct
	if what == "ORDER BY" {
		code = CodeOrderBy
	}
	if ac := n.GetAConst(); ac != nil {
		iv := ac.GetIval()
		if iv == nil {
			return nil, refusalAt(ac.Location, code, "%s a constant is not supported", what)
		}
		if iv.Ival < 1 || int(iv.Ival) > len(targets) {
			return nil, refusalAt(ac.Location, code, "%s position %d is not in select list", what, iv.Ival)
		}
		return targets[iv.Ival-1].Val, nil
	}
	if cr := n.GetColumnRef(); cr != nil && len(cr.Fields) == 1 {
		if name, ok := strVal(cr.Fields[0]); ok {
			var found *pg.Node
			for _, rt := range targets {
				out := rt.Name
				if out == "" {
					out = figureColname(rt.Val)
				}
				if out != name {
					continue
				}
				if found != nil && c.canon(found) != c.canon(rt.Val) {
					return nil, refusalAt(cr.Location, code, "%s %q is ambiguous", what, name)
				}
				found = rt.Val
			}
			if found != nil {
				return found, nil
			}
		}
	}
	return n, nil
}

// distinctOn compiles SELECT DISTINCT ON (keys) list ... ORDER BY ...:
// a grouping by the keys whose group rows hold the first row's outputs
// and ORDER BY values (FirstRow).
func (c *compiler) distinctOn(p *Plan, list []*pg.Node, targets []*pg.ResTarget) error {
	sel := c.sel
	// The keys.
	var keys []*scalar
	var keyCanon []string
	onCanon := map[string]bool{}
	for _, n := range sel.DistinctClause {
		e, err := c.targetItem(n, targets, "DISTINCT ON")
		if err != nil {
			return err
		}
		canon := c.canon(e)
		if onCanon[canon] {
			continue
		}
		s, err := c.sexpr(e)
		if err != nil {
			return err
		}
		if s.u != nil {
			return refusalAt(nodeLocation(n), CodeDistinct, "DISTINCT ON a constant is not supported")
		}
		if err := c.groupKeyType(s, "DISTINCT ON"); err != nil {
			return err
		}
		onCanon[canon] = true
		keyCanon = append(keyCanon, canon)
		keys = append(keys, s)
	}
	// The ORDER BY keys, over the sources.
	type sortItem struct {
		canon string
		s     *scalar
		sb    *pg.SortBy
	}
	var sorts []sortItem
	for _, n := range sel.SortClause {
		sb := n.GetSortBy()
		if sb == nil {
			return refuse(CodeOrderBy, "this ORDER BY item is not supported")
		}
		if sb.SortbyDir == pg.SortByDir_SORTBY_USING {
			return refusalAt(sb.Location, CodeOrderBy, "ORDER BY ... USING is not supported")
		}
		e, err := c.targetItem(sb.Node, targets, "ORDER BY")
		if err != nil {
			return err
		}
		s, err := c.sexpr(e)
		if err != nil {
			return err
		}
		if s.u != nil {
			return refusalAt(sb.Location, CodeOrderBy, "ORDER BY a constant is not supported")
		}
		if err := c.orderType(s, sb.Location); err != nil {
			return err
		}
		// An item that repeats an earlier one is dropped, whatever its
		// direction, as PostgreSQL drops it (verified: ORDER BY a, b, a
		// DESC under DISTINCT ON (a) is accepted); it could not change
		// the order anyway.
		it := sortItem{canon: c.canon(e), s: s, sb: sb}
		if !slices.ContainsFunc(sorts, func(x sortItem) bool { return x.canon == it.canon }) {
			sorts = append(sorts, it)
		}
	}
	// PostgreSQL's transformDistinctOnClause: the ORDER BY items that are
	// DISTINCT ON items come first, and when some DISTINCT ON item is not
	// in the ORDER BY, every ORDER BY item is one.
	skipped, inOrder := false, map[string]bool{}
	for _, it := range sorts {
		if !onCanon[it.canon] {
			skipped = true
			continue
		}
		if skipped {
			return refusalAt(nodeLocation(it.sb.Node), CodeDistinct, "SELECT DISTINCT ON expressions must match initial ORDER BY expressions")
		}
		inOrder[it.canon] = true
	}
	for i, k := range keyCanon {
		if !inOrder[k] && skipped {
			return refusalAt(nodeLocation(sel.DistinctClause[min(i, len(sel.DistinctClause)-1)]), CodeDistinct, "SELECT DISTINCT ON expressions must match initial ORDER BY expressions")
		}
	}
	// The outputs, over the sources.
	f := &FirstRow{}
	var extra []Column
	var postTargets []*pg.Node
	var outCanon []string
	addVal := func(s *scalar, name string) {
		f.vals = append(f.vals, s)
		f.OIDs = append(f.OIDs, s.oid)
		extra = append(extra, Column{Name: name, TypeOID: s.oid, DeclaredOID: s.oid, TypeMod: s.typmod,
			Type: builtinType(s.oid), Collation: s.coll})
	}
	for i, rt := range targets {
		s, err := c.outputScalar(rt)
		if err != nil {
			return err
		}
		col := groupFirstCol + strconv.Itoa(i)
		addVal(s, col)
		name := rt.Name
		if name == "" {
			name = figureColname(rt.Val)
		}
		postTargets = append(postTargets, &pg.Node{Node: &pg.Node_ResTarget{ResTarget: &pg.ResTarget{Name: name,
			Val: colNode(groupAlias, col), Location: rt.Location}}})
		outCanon = append(outCanon, c.canon(rt.Val))
	}
	var postSorts []*pg.Node
	sortCanon := map[string]bool{}
	for i, it := range sorts {
		col := groupOrdCol + strconv.Itoa(i)
		desc := it.sb.SortbyDir == pg.SortByDir_SORTBY_DESC
		nf := nullsFirst(it.sb, desc)
		f.order = append(f.order, firstKey{at: len(f.vals), oid: it.s.oid, desc: desc, nullsFirst: nf})
		addVal(it.s, col)
		nulls := pg.SortByNulls_SORTBY_NULLS_LAST
		if nf {
			nulls = pg.SortByNulls_SORTBY_NULLS_FIRST
		}
		postSorts = append(postSorts, pg.MakeSortByNode(colNode(groupAlias, col), it.sb.SortbyDir, nulls, it.sb.Location))
		sortCanon[it.canon] = true
	}
	if err := c.firstDetermined(targets, outCanon, onCanon, sortCanon, f); err != nil {
		return err
	}
	g := &Grouping{keys: keys, First: f}
	return c.groupPost(p, g, extra, postTargets, nil, postSorts)
}

// firstDetermined refuses a DISTINCT ON whose shown row PostgreSQL picks
// by its scan order: rows of a group that tie on the whole ORDER BY are
// returned in whatever order the sort met them, and the first is shown.
// It is determined when the ORDER BY names every column of each table's
// row key (no two rows tie), or when every output is a DISTINCT ON or
// ORDER BY expression of a type whose equal values print alike (tied
// rows show the same values).
func (c *compiler) firstDetermined(targets []*pg.ResTarget, outCanon []string, onCanon, sortCanon map[string]bool, f *FirstRow) error {
	keyed := true
	var missing []string
	for i, s := range c.sources {
		if s.Join == JoinSemi {
			continue // an IN (subquery) never repeats a row
		}
		for _, name := range s.Table.RowKey() {
			_, ci := s.Table.Column(name)
			if !sortCanon["col:"+strconv.Itoa(i)+":"+strconv.Itoa(ci)] {
				keyed = false
				missing = append(missing, s.Alias+"."+name)
			}
		}
	}
	if keyed {
		return nil
	}
	alike := true
	for i, canon := range outCanon {
		if !onCanon[canon] && !sortCanon[canon] || c.groupKeyType(f.vals[i], "DISTINCT ON") != nil {
			alike = false
			break
		}
	}
	if alike {
		return nil
	}
	return refusalAt(targets[0].Location, CodeDistinct, "DISTINCT ON whose ORDER BY can tie is not supported: PostgreSQL shows whichever tied row its scan reads first; end the ORDER BY with the table's key (%s)", strings.Join(missing, ", "))
}
