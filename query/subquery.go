package query

import (
	"strings"

	"github.com/freshetdb/freshet/change"
	pg "github.com/pganalyze/pg_query_go/v6"
)

// Uncorrelated IN-subqueries. `WHERE col IN (SELECT c FROM t WHERE ...)`,
// ANDed with the rest of the WHERE clause, is compiled as a semi-join: t
// becomes a source of its own (JoinSemi) after the FROM sources, joined by
// the one equality t.c = col, holding the rows the subquery's WHERE keeps
// (Source.filter). A row of the outer query is kept while at least one of
// them matches, and once however many do, which is what IN means and what
// tells it from an INNER JOIN. The engine keeps it as a join whose semi
// source counts its matching rows per join value.
//
// NOT IN (subquery) (and <> ALL (subquery)) is an anti-join (JoinAnti),
// with PostgreSQL's NULL rules: its answer also turns on a NULL anywhere
// in the subquery's output (then it is never true) and on the subquery
// being empty (then it is true even for a NULL on the left), so the
// engine keeps, besides the matching rows per value, how many rows the
// subquery keeps and how many of them have a NULL.

// whereConjuncts splits n into the conditions its top-level ANDs join.
func whereConjuncts(n *pg.Node, out []*pg.Node) []*pg.Node {
	if b := n.GetBoolExpr(); b != nil && b.Boolop == pg.BoolExprType_AND_EXPR {
		for _, a := range b.Args {
			out = whereConjuncts(a, out)
		}
		return out
	}
	return append(out, n)
}

// isInSubquery reports whether n is `x IN (SELECT ...)` (or `x = ANY
// (SELECT ...)`).
func isInSubquery(n *pg.Node) (*pg.SubLink, bool) {
	sl := n.GetSubLink()
	if sl == nil || sl.SubLinkType != pg.SubLinkType_ANY_SUBLINK {
		return nil, false
	}
	return sl, true
}

// isNotInSubquery reports whether n is `x NOT IN (SELECT ...)`, `NOT (x =
// ANY (SELECT ...))` or `x <> ALL (SELECT ...)`.
func isNotInSubquery(n *pg.Node) (*pg.SubLink, bool) {
	if sl := n.GetSubLink(); sl != nil && sl.SubLinkType == pg.SubLinkType_ALL_SUBLINK {
		if op := opName(sl.OperName); op == "<>" || op == "!=" {
			return sl, true
		}
		return nil, false
	}
	if b := n.GetBoolExpr(); b != nil && b.Boolop == pg.BoolExprType_NOT_EXPR && len(b.Args) == 1 {
		if sl, ok := isInSubquery(b.Args[0]); ok && (len(sl.OperName) == 0 || opName(sl.OperName) == "=") {
			return sl, true
		}
	}
	return nil, false
}

// semiJoins compiles the IN and NOT IN (subquery) conditions among
// where's top-level conjuncts into sources and returns the rest of the WHERE
// clause (nil when nothing is left). A subquery anywhere else is left in
// the rest, where compiling it refuses it by name.
func (c *compiler) semiJoins(where *pg.Node) (*pg.Node, error) {
	conj := whereConjuncts(where, nil)
	var rest []*pg.Node
	for _, n := range conj {
		if sl, ok := isInSubquery(n); ok {
			if err := c.semiJoin(sl, JoinSemi); err != nil {
				return nil, err
			}
			continue
		}
		if sl, ok := isNotInSubquery(n); ok {
			if err := c.semiJoin(sl, JoinAnti); err != nil {
				return nil, err
			}
			continue
		}
		rest = append(rest, n)
	}
	switch len(rest) {
	case 0:
		return nil, nil
	case 1:
		return rest[0], nil
	}
	if len(rest) == len(conj) {
		return where, nil
	}
	return &pg.Node{Node: &pg.Node_BoolExpr{BoolExpr: &pg.BoolExpr{Boolop: pg.BoolExprType_AND_EXPR, Args: rest, Location: -1}}}, nil
}

// semiJoin compiles one `x IN (SELECT c FROM t [WHERE ...])` into a
// JoinSemi source, or one `x NOT IN (...)` into a JoinAnti source.
func (c *compiler) semiJoin(sl *pg.SubLink, kind JoinKind) error {
	if err := c.tick(); err != nil {
		return err
	}
	if kind == JoinSemi && len(sl.OperName) > 0 && opName(sl.OperName) != "=" {
		return refusalAt(sl.Location, CodeSubquery, "%s ANY (subquery) is not supported; only IN (subquery) and = ANY (subquery) are", opName(sl.OperName))
	}
	if sl.Testexpr.GetRowExpr() != nil {
		return refusalAt(sl.Location, CodeSubquery, "a row compared with IN (subquery) is not supported; compare one column")
	}
	left := sl.Testexpr.GetColumnRef()
	if left == nil {
		return refusalAt(sl.Location, CodeSubquery, "IN (subquery) is supported on a column of the outer query only, not on %s", c.snippet(sl.Testexpr))
	}
	outerSrc, outerCat, star, err := c.resolveColumn(left)
	if err != nil {
		return err
	}
	if star {
		return refusalAt(left.Location, CodeSubquery, "* IN (subquery) is not supported")
	}
	sub := sl.Subselect.GetSelectStmt()
	if sub == nil {
		return refusalAt(sl.Location, CodeSubquery, "this subquery is not supported")
	}
	if err := c.subqueryShape(sl, sub); err != nil {
		return err
	}
	rv := sub.FromClause[0].GetRangeVar()
	if err := c.addTable(rv, kind, false); err != nil {
		return err
	}
	k := len(c.sources) - 1
	c.subq = k + 1
	defer func() { c.subq = 0 }()
	rt := sub.TargetList[0].GetResTarget()
	out := rt.Val.GetColumnRef()
	if out == nil {
		return refusalAt(rt.Location, CodeSubquery, "a subquery's output must be a column of its table, not %s", c.snippet(rt.Val))
	}
	innerSrc, innerCat, star, err := c.resolveColumn(out)
	if err != nil {
		return err
	}
	if star {
		return refusalAt(rt.Location, CodeSubquery, "SELECT * in an IN (subquery) is not supported; name its one column")
	}
	if sub.WhereClause != nil {
		e, err := c.pred(sub.WhereClause)
		if err != nil {
			return err
		}
		if e.markRaises() {
			return refusalAt(nodeLocation(sub.WhereClause), CodeSubquery, "a subquery whose WHERE can raise an error (an overflow, a division by zero) is not supported: PostgreSQL may evaluate it on rows the engine never reads")
		}
		c.sources[k].filter = e
	}
	mine, other := c.ref(innerSrc, innerCat), c.ref(outerSrc, outerCat)
	if err := c.semiTypes(mine, other, sl.Location); err != nil {
		return err
	}
	c.sources[k].On = []JoinKey{{}}
	c.pendingJoins = append(c.pendingJoins, pendingJoinKey{src: k, k: 0, mine: mine, other: other})
	return nil
}

// subqueryShape refuses what a kept IN (subquery) cannot be: anything but
// one table, one output column and a WHERE.
func (c *compiler) subqueryShape(sl *pg.SubLink, sub *pg.SelectStmt) error {
	loc := sl.Location
	switch {
	case sub.WithClause != nil:
		return refusalAt(loc, CodeSubquery, "WITH inside a subquery is not supported")
	case sub.Op != pg.SetOperation_SETOP_NONE:
		return refusalAt(loc, CodeSubquery, "%s inside a subquery is not supported", setOpName(sub.Op))
	case len(sub.ValuesLists) > 0:
		return refusalAt(loc, CodeSubquery, "IN (VALUES ...) is not supported; write IN (list)")
	case len(sub.DistinctClause) > 0 && sub.DistinctClause[0] != nil && sub.DistinctClause[0].Node != nil:
		return refusalAt(loc, CodeSubquery, "DISTINCT ON inside a subquery is not supported")
	case len(sub.GroupClause) > 0:
		return refusalAt(loc, CodeSubquery, "GROUP BY inside a subquery is not supported")
	case sub.HavingClause != nil:
		return refusalAt(loc, CodeSubquery, "HAVING inside a subquery is not supported")
	case len(sub.WindowClause) > 0:
		return refusalAt(loc, CodeSubquery, "WINDOW inside a subquery is not supported")
	case len(sub.SortClause) > 0:
		return refusalAt(loc, CodeSubquery, "ORDER BY inside a subquery is not supported")
	case sub.LimitCount != nil || sub.LimitOffset != nil || sub.LimitOption == pg.LimitOption_LIMIT_OPTION_WITH_TIES:
		return refusalAt(loc, CodeSubquery, "LIMIT/OFFSET inside a subquery is not supported")
	case len(sub.LockingClause) > 0:
		return refusalAt(loc, CodeSubquery, "FOR UPDATE/FOR SHARE inside a subquery is not supported")
	case sub.IntoClause != nil:
		return refusalAt(loc, CodeSubquery, "SELECT INTO inside a subquery is not supported")
	case len(sub.FromClause) == 0:
		return refusalAt(loc, CodeSubquery, "a subquery without FROM is not supported")
	case len(sub.FromClause) > 1 || sub.FromClause[0].GetRangeVar() == nil:
		if sub.FromClause[0].GetJoinExpr() != nil || len(sub.FromClause) > 1 {
			return refusalAt(loc, CodeSubquery, "a join inside a subquery is not supported: a subquery reads one table")
		}
		return refusalAt(loc, CodeSubquery, "a subquery reads one table; this FROM item is not supported")
	case len(sub.TargetList) != 1:
		return refusalAt(loc, CodeSubquery, "an IN (subquery) returns one column; this one returns %d", len(sub.TargetList))
	}
	rt := sub.TargetList[0].GetResTarget()
	if rt == nil || rt.Val == nil {
		return refusalAt(loc, CodeSubquery, "this subquery output is not supported")
	}
	if f := rt.Val.GetFuncCall(); f != nil && len(f.Funcname) > 0 {
		if name, _ := strVal(f.Funcname[len(f.Funcname)-1]); aggregates[strings.ToLower(name)] {
			return refusalAt(f.Location, CodeSubquery, "an aggregate (%s) inside a subquery is not supported", name)
		}
	}
	if sub.WhereClause == nil {
		return nil
	}
	// The IN values of the outer WHERE, and of every subquery's so far.
	other := c.subInValues + inValues(c.sel.WhereClause, int64(c.opts.MaxInValues)+1)
	c.subInValues += inValues(sub.WhereClause, int64(c.opts.MaxInValues)+1)
	return c.whereLimits(sub.WhereClause, "the subquery's WHERE clause", other)
}

// bpcharVarchar reports whether one column is char(n) and the other
// varchar: PostgreSQL compares them as char(n), ignoring trailing spaces
// on both sides, while AppendKey trims only the char(n) side.
func bpcharVarchar(a, b *Column) bool {
	return a.TypeOID == change.OIDBPChar && b.TypeOID == change.OIDVarchar || a.TypeOID == change.OIDVarchar && b.TypeOID == change.OIDBPChar
}

// semiTypes refuses an IN (subquery) whose two columns PostgreSQL would
// compare in a way their key encodings do not reproduce. The rules are a
// join's (PostgreSQL resolves `x IN (SELECT c ...)` as it resolves
// x = c), narrowed where a join's are loose: varchar against char(n)
// compares as char(n), ignoring trailing spaces on both sides, and two
// text columns of different collations are an error in PostgreSQL.
func (c *compiler) semiTypes(mine, other *colRef, loc int32) error {
	mc, oc := c.column(mine), c.column(other)
	mf, of := c.colFamily(mc), c.colFamily(oc)
	if mf != of || mf == famNone || mf == famJSON || mf == famArray || mf == famUnknown {
		return refusalAt(loc, CodeType, "%s (%s) IN (SELECT %s (%s) ...) is not supported: the two columns must be of one family of types (integers, text, timestamps, ...)",
			oc.Name, typeName(oc.TypeOID), mc.Name, typeName(mc.TypeOID))
	}
	if mf == famEnum && mc.TypeOID != oc.TypeOID {
		return refusalAt(loc, CodeType, "%s IN (SELECT %s ...) compares two different enum types, which PostgreSQL cannot", oc.Name, mc.Name)
	}
	if mf == famText {
		if bpcharVarchar(mc, oc) {
			return refusalAt(loc, CodeType, "%s (%s) IN (SELECT %s (%s) ...) compares as char(n), ignoring trailing spaces on both sides, which the key lookups do not reproduce",
				oc.Name, typeName(oc.TypeOID), mc.Name, typeName(mc.TypeOID))
		}
		if !mc.Collation.Deterministic && mc.Collation.OID != 0 || !oc.Collation.Deterministic && oc.Collation.OID != 0 {
			return refusalAt(loc, CodeCollation, "IN (subquery) on text under a nondeterministic collation is not supported")
		}
		if mc.Collation.OID != 0 && oc.Collation.OID != 0 && mc.Collation.OID != oc.Collation.OID {
			return refusalAt(loc, CodeCollation, "%s (collation %q) IN (SELECT %s (collation %q) ...): PostgreSQL cannot decide which collation compares them",
				oc.Name, oc.Collation.Name, mc.Name, mc.Collation.Name)
		}
	}
	return nil
}
