package query

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/freshetdb/freshet/change"
	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// AggKind is the kind of an aggregate the engine maintains.
type AggKind uint8

// The aggregates.
const (
	AggCountStar     AggKind = iota + 1 // COUNT(*)
	AggCount                            // COUNT(x): the non-NULL x
	AggCountDistinct                    // COUNT(DISTINCT x)
	AggSum                              // SUM(x): int2/int4 as int8, int8 and numeric as numeric
	AggAvg                              // AVG(x) of integers or numeric, as numeric
	AggMin                              // MIN(x)
	AggMax                              // MAX(x)
	AggBoolAnd                          // bool_and(x), every(x)
	AggBoolOr                           // bool_or(x)
)

var aggKindNames = [...]string{"", "count(*)", "count", "count(distinct)", "sum", "avg", "min", "max", "bool_and", "bool_or"}

// String names the aggregate.
func (k AggKind) String() string {
	if int(k) < len(aggKindNames) && k != 0 {
		return aggKindNames[k]
	}
	return "unknown"
}

// Aggregate is one aggregate of a grouped query.
type Aggregate struct {
	Kind AggKind
	// ArgOID is the type of the argument's values (0 for COUNT(*)),
	// TypeOID the type of the aggregate's result.
	ArgOID  uint32
	TypeOID uint32

	arg *scalar
}

// Grouping is the aggregation of a query with GROUP BY, HAVING or
// aggregates beside each other. The engine groups the rows the WHERE
// clause keeps by the values of Keys, keeps each group's Aggregates, and
// forms a group row: one source whose values are the keys' values then the
// aggregates' results, in that order. Post is a plan over group rows: its
// filter is HAVING, and its Output, Order, Limit and Offset are the
// query's (the outer plan's Output, Order, Limit and Offset are copies of
// them, describing the result to subscribers).
type Grouping struct {
	// KeyOIDs are the types of the GROUP BY keys, in order; empty without
	// GROUP BY (then there is one group, present even when no row is).
	KeyOIDs []uint32
	Aggs    []Aggregate
	Post    *Plan
	// First is set for SELECT DISTINCT ON: each group keeps its rows
	// ordered by the query's ORDER BY and its group row continues with
	// the first one's values (see FirstRow).
	First *FirstRow

	keys []*scalar
}

// Grouped reports whether the result has one row per group (GROUP BY)
// rather than one row over all rows.
func (g *Grouping) Grouped() bool { return len(g.keys) > 0 }

// Eval evaluates a row's group keys into keys and the aggregates'
// arguments into args (nil for COUNT(*)); both must have room for
// len(KeyOIDs) and len(Aggs) values. It reports the error PostgreSQL would
// raise evaluating them.
func (g *Grouping) Eval(row Row, keys, args []any) (err error) {
	defer recoverEval(&err)
	for i, k := range g.keys {
		keys[i] = k.eval(row)
	}
	for i := range g.Aggs {
		if a := g.Aggs[i].arg; a != nil {
			args[i] = a.eval(row)
		} else {
			args[i] = nil
		}
	}
	return nil
}

// The synthetic source of group rows: its alias and column names cannot
// be written in SQL (they hold a NUL byte, which the text never does).
const (
	groupAlias  = "\x00group"
	groupKeyCol = "\x00key"
	groupAggCol = "\x00agg"
)

// aggBuild collects a grouped query's keys and aggregates while its
// clauses are rewritten over group rows.
type aggBuild struct {
	keyCanon []string
	keys     []*scalar
	aggCanon []string
	aggs     []Aggregate
	// outNames are the select list's output names (PostgreSQL's, taken
	// before rewriting), which ORDER BY may name.
	outNames map[string]bool
}

// needsGrouping reports whether the statement aggregates in any way other
// than the lone COUNT(*) the plain count path serves.
func needsGrouping(sel *pg.SelectStmt) bool {
	if len(sel.GroupClause) > 0 || sel.HavingClause != nil {
		return true
	}
	lone := len(sel.TargetList) == 1 && len(sel.SortClause) == 0
	found := false
	for _, n := range sel.TargetList {
		rt := n.GetResTarget()
		if rt == nil {
			continue
		}
		if f := rt.Val.GetFuncCall(); f != nil && lone && isCountStar(f) {
			return false
		}
		if hasAggregate(rt.Val) {
			found = true
		}
	}
	for _, n := range sel.SortClause {
		if hasAggregate(n) {
			found = true
		}
	}
	return found
}

// hasAggregate reports whether n holds an aggregate call (not a window
// function, which stays refused as such).
func hasAggregate(n *pg.Node) bool {
	found := false
	walkNodes(n, func(x *pg.Node) bool {
		if x.GetSubLink() != nil {
			// A subquery's aggregates are its own (refused with it).
			return false
		}
		if f := x.GetFuncCall(); f != nil && f.Over == nil && aggregates[strings.ToLower(funcName(f))] {
			found = true
		}
		return !found
	})
	return found
}

func funcName(f *pg.FuncCall) string {
	if len(f.Funcname) == 0 {
		return ""
	}
	s, _ := strVal(f.Funcname[len(f.Funcname)-1])
	return s
}

// walkNodes calls fn on n and every node under it while fn returns true.
func walkNodes(n *pg.Node, fn func(*pg.Node) bool) {
	if n == nil {
		return
	}
	if !fn(n) {
		return
	}
	walkMsg(n.ProtoReflect(), func(c *pg.Node) *pg.Node {
		walkNodes(c, fn)
		return nil
	})
}

var nodeDesc = (&pg.Node{}).ProtoReflect().Descriptor()

// walkMsg calls fn on every pg.Node directly under m (looking through
// other messages); a non-nil result replaces that node.
func walkMsg(m protoreflect.Message, fn func(*pg.Node) *pg.Node) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind {
			return true
		}
		isNode := fd.Message().FullName() == nodeDesc.FullName()
		if fd.IsList() {
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				e := l.Get(i).Message()
				if isNode {
					if r := fn(e.Interface().(*pg.Node)); r != nil {
						l.Set(i, protoreflect.ValueOfMessage(r.ProtoReflect()))
					}
				} else {
					walkMsg(e, fn)
				}
			}
			return true
		}
		if fd.IsMap() {
			return true
		}
		if isNode {
			if r := fn(v.Message().Interface().(*pg.Node)); r != nil {
				m.Set(fd, protoreflect.ValueOfMessage(r.ProtoReflect()))
			}
			return true
		}
		walkMsg(v.Message(), fn)
		return true
	})
}

// canon is a node's structure without its text locations: two
// occurrences of one expression have the same canon.
func (c *compiler) canon(n *pg.Node) string {
	if cr := n.GetColumnRef(); cr != nil {
		if src, cat, star, err := c.resolveColumn(cr); err == nil && !star {
			return "col:" + strconv.Itoa(src) + ":" + strconv.Itoa(cat)
		}
	}
	cl := proto.Clone(n).(*pg.Node)
	clearLocations(cl.ProtoReflect())
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(cl)
	if err != nil {
		return ""
	}
	return string(b)
}

func clearLocations(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Name() == "location" && fd.Kind() == protoreflect.Int32Kind:
			m.Clear(fd)
		case fd.Kind() == protoreflect.MessageKind && fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				clearLocations(l.Get(i).Message())
			}
		case fd.Kind() == protoreflect.MessageKind && !fd.IsMap():
			clearLocations(v.Message())
		}
		return true
	})
}

// grouping compiles a query that aggregates: its GROUP BY keys and
// aggregates over the sources, then its select list, HAVING and ORDER BY
// over group rows (plan Post), with LIMIT and OFFSET applied to groups.
// The select list is list (the statement's, or SELECT DISTINCT's with *
// expanded), the keys are items (GROUP BY's, or DISTINCT's outputs), and
// what names the construct in refusals (GROUP BY or DISTINCT).
func (c *compiler) grouping(p *Plan, list, items []*pg.Node, what string) error {
	sel := c.sel
	b := &aggBuild{outNames: map[string]bool{}}
	targets, err := resTargets(list)
	if err != nil {
		return err
	}
	for _, rt := range targets {
		if cr := rt.Val.GetColumnRef(); cr != nil {
			if last := cr.Fields[len(cr.Fields)-1]; last.GetAStar() != nil {
				return refusalAt(cr.Location, CodeGroupBy, "%s in a grouped query is not supported: name the grouped columns", c.snippet(rt.Val))
			}
		}
		name := rt.Name
		if name == "" {
			name = figureColname(rt.Val)
		}
		b.outNames[name] = true
	}
	// GROUP BY: a column, an expression, an output's position or an
	// output's name (input columns first, as PostgreSQL resolves them).
	for _, n := range items {
		switch n.Node.(type) {
		case *pg.Node_GroupingSet:
			return refuse(CodeGroupBy, "GROUPING SETS, ROLLUP and CUBE are not supported")
		}
		item := n
		if ac := n.GetAConst(); ac != nil {
			iv := ac.GetIval()
			if iv == nil {
				return refusalAt(ac.Location, CodeGroupBy, "GROUP BY a constant is not supported")
			}
			if iv.Ival < 1 || int(iv.Ival) > len(targets) {
				return refusalAt(ac.Location, CodeGroupBy, "GROUP BY position %d is not in the select list", iv.Ival)
			}
			item = targets[iv.Ival-1].Val
		} else if cr := n.GetColumnRef(); cr != nil && len(cr.Fields) == 1 {
			if _, _, _, err := c.resolveColumn(cr); err != nil {
				name, _ := strVal(cr.Fields[0])
				for _, rt := range targets {
					if rt.Name == name {
						item = rt.Val
						break
					}
				}
			}
		}
		if hasAggregate(item) {
			return refuse(CodeGroupBy, "aggregate functions are not allowed in GROUP BY")
		}
		canon := c.canon(item)
		dup := false
		for _, k := range b.keyCanon {
			dup = dup || k == canon
		}
		if dup {
			continue
		}
		s, err := c.sexpr(item)
		if err != nil {
			return err
		}
		if s.u != nil {
			if what != "GROUP BY" {
				return refusalAt(nodeLocation(item), CodeDistinct, "%s a constant is not supported", what)
			}
			return refuse(CodeGroupBy, "GROUP BY a constant is not supported")
		}
		if err := c.groupKeyType(s, what); err != nil {
			return err
		}
		b.keyCanon = append(b.keyCanon, canon)
		b.keys = append(b.keys, s)
	}
	// The clauses over group rows.
	var postTargets []*pg.Node
	for _, rt := range targets {
		v, err := c.rewriteAgg(b, rt.Val, false)
		if err != nil {
			return err
		}
		name := rt.Name
		if name == "" {
			name = figureColname(rt.Val)
		}
		postTargets = append(postTargets, &pg.Node{Node: &pg.Node_ResTarget{ResTarget: &pg.ResTarget{Name: name, Val: v, Location: rt.Location}}})
	}
	var having *pg.Node
	if sel.HavingClause != nil {
		h, err := c.rewriteAgg(b, sel.HavingClause, false)
		if err != nil {
			return err
		}
		having = h
	}
	var sorts []*pg.Node
	for _, n := range sel.SortClause {
		sb := n.GetSortBy()
		if sb == nil {
			return refuse(CodeOrderBy, "this ORDER BY item is not supported")
		}
		k, err := c.rewriteAgg(b, sb.Node, true)
		if err != nil {
			return err
		}
		sorts = append(sorts, &pg.Node{Node: &pg.Node_SortBy{SortBy: &pg.SortBy{Node: k, SortbyDir: sb.SortbyDir,
			SortbyNulls: sb.SortbyNulls, UseOp: sb.UseOp, Location: sb.Location}}})
	}
	g := &Grouping{Aggs: b.aggs, keys: b.keys}
	return c.groupPost(p, g, nil, postTargets, having, sorts)
}

// groupPost compiles the clauses over a grouping's group rows (plan
// Post): the group row's source holds g's keys, then its aggregates, then
// extra (DISTINCT ON's first-row values); targets, having and sorts are
// written over its columns.
func (c *compiler) groupPost(p *Plan, g *Grouping, extra []Column, postTargets []*pg.Node, having *pg.Node, sorts []*pg.Node) error {
	b := &aggBuild{keys: g.keys, aggs: g.Aggs}
	// The group row's source.
	gt := &Table{Name: groupAlias, DefaultCollation: c.sources[0].Table.DefaultCollation}
	for i, k := range b.keys {
		gt.Columns = append(gt.Columns, Column{Name: groupKeyCol + strconv.Itoa(i), TypeOID: k.oid, DeclaredOID: k.oid,
			TypeMod: k.typmod, AttNum: int16(i + 1), Type: builtinType(k.oid), Collation: k.coll})
		gt.PrimaryKey = append(gt.PrimaryKey, gt.Columns[i].Name)
	}
	for i, a := range b.aggs {
		col := Column{Name: groupAggCol + strconv.Itoa(i), TypeOID: a.TypeOID, DeclaredOID: a.TypeOID, TypeMod: -1,
			AttNum: int16(len(b.keys) + i + 1), Type: builtinType(a.TypeOID)}
		if (a.Kind == AggMin || a.Kind == AggMax) && a.arg != nil {
			col.Collation = a.arg.coll
		}
		gt.Columns = append(gt.Columns, col)
	}
	for _, col := range extra {
		col.AttNum = int16(len(gt.Columns) + 1)
		gt.Columns = append(gt.Columns, col)
	}
	gs := &Source{SourceShape: &SourceShape{Alias: groupAlias, Table: gt, Columns: gt.Columns, KeyN: len(b.keys), Join: JoinRoot}}
	post := &Plan{Template: &Template{Limit: -1}}
	// Compile the rewritten clauses against the group rows, with the
	// compiler's parameters shared.
	saved := struct {
		sources                  []*Source
		used                     []map[int]bool
		refs, outRefs, orderRefs []*colRef
		outExprs                 []*scalar
		pendingJoins             []pendingJoinKey
	}{c.sources, c.used, c.refs, c.outRefs, c.orderRefs, c.outExprs, c.pendingJoins}
	c.sources = []*Source{gs}
	c.used = []map[int]bool{{}}
	c.refs, c.outRefs, c.outExprs, c.orderRefs, c.pendingJoins = nil, nil, nil, nil, nil
	err := func() error {
		if err := c.targets(post, postTargets); err != nil {
			return err
		}
		if having != nil {
			e, err := c.pred(having)
			if err != nil {
				return err
			}
			e.markRaises()
			post.filter = e
		}
		if err := c.order(post, sorts); err != nil {
			return err
		}
		for _, r := range c.refs {
			r.idx = r.cat
		}
		c.fixOutputs(post)
		return nil
	}()
	c.sources, c.used, c.refs = saved.sources, saved.used, saved.refs
	c.outRefs, c.outExprs, c.orderRefs, c.pendingJoins = saved.outRefs, saved.outExprs, saved.orderRefs, saved.pendingJoins
	if err != nil {
		return err
	}
	if err := c.limits(post); err != nil {
		return err
	}
	post.Sources = []*Source{gs}
	post.raises = post.filter != nil && post.filter.raises
	for _, o := range post.Output {
		post.raises = post.raises || o.expr != nil && o.expr.raises
	}
	for _, k := range post.Order {
		post.raises = post.raises || k.expr != nil && k.expr.raises
	}
	g.Post = post
	for _, k := range b.keys {
		g.KeyOIDs = append(g.KeyOIDs, k.oid)
	}
	p.Agg = g
	p.Output, p.Order, p.Limit, p.Offset = post.Output, post.Order, post.Limit, post.Offset
	return nil
}

// resTargets returns a select list's items, refusing what no select list
// here holds.
func resTargets(list []*pg.Node) ([]*pg.ResTarget, error) {
	targets := make([]*pg.ResTarget, 0, len(list))
	for _, n := range list {
		rt := n.GetResTarget()
		if rt == nil {
			return nil, refuse(CodeTargetList, "this output item is not supported")
		}
		if len(rt.Indirection) > 0 {
			return nil, refusalAt(rt.Location, CodeTargetList, "subscripts and field selection in the output are not supported")
		}
		targets = append(targets, rt)
	}
	return targets, nil
}

// builtinType describes a built-in type (the zero Type when unknown).
func builtinType(oid uint32) change.Type {
	t, _ := change.BuiltinType(oid)
	return t
}

// groupKeyType refuses a grouping key (what: "GROUP BY", "SELECT
// DISTINCT of" or "DISTINCT ON") whose equal values can print differently
// (which of them PostgreSQL shows for the group depends on the order it
// met the rows in) or whose equality is not reproduced.
func (c *compiler) groupKeyType(s *scalar, what string) error {
	code := CodeGroupBy
	if what != "GROUP BY" {
		code = CodeDistinct
	}
	switch f := familyOf(s.oid); f {
	case famInt, famBool, famUUID, famBytea, famDate, famTime, famTimestamp, famEnum:
		return nil
	case famText:
		if s.oid == change.OIDBPChar && s.typmod < 0 {
			return refuse(code, "%s a bpchar value without a length is not supported: equal values ('a' and 'a ') print differently, and which one PostgreSQL shows depends on row order", what)
		}
		if coll := c.textColl(s.oid, s.coll); !coll.Deterministic {
			return refuse(CodeCollation, "%s text under the nondeterministic collation %q is not supported", what, coll.Name)
		}
		return nil
	case famNumeric:
		if s.typmod >= 0 {
			return nil
		}
		return refuse(code, "%s a numeric value without a declared scale is not supported: equal values (1.5 and 1.50) print differently, and which one PostgreSQL shows depends on row order; use a numeric(p,s) column or cast to one", what)
	case famFloat:
		return refuse(code, "%s a %s value is not supported: equal values (0 and -0) print differently, and which one PostgreSQL shows depends on row order; cast to numeric(p,s)", what, typeName(s.oid))
	case famInterval:
		return refuse(code, "%s an interval value is not supported: equal values ('1 mon' and '30 days') print differently, and which one PostgreSQL shows depends on row order", what)
	}
	return refuse(code, "%s a %s value is not supported", what, typeName(s.oid))
}

// rewriteAgg returns a copy of n with every aggregate call and every
// occurrence of a GROUP BY key replaced by a reference to the group row's
// column for it; a column left outside both is refused, as PostgreSQL
// rejects it. For ORDER BY (sortKey), a bare name of an output and a
// position stay as they are.
func (c *compiler) rewriteAgg(b *aggBuild, n *pg.Node, sortKey bool) (*pg.Node, error) {
	if sortKey {
		if n.GetAConst() != nil {
			return n, nil
		}
		if cr := n.GetColumnRef(); cr != nil && len(cr.Fields) == 1 {
			if name, ok := strVal(cr.Fields[0]); ok && b.outNames[name] {
				return n, nil
			}
		}
	}
	var failed error
	var rw func(x *pg.Node) *pg.Node
	rw = func(x *pg.Node) *pg.Node {
		if failed != nil {
			return nil
		}
		if len(b.keys) > 0 {
			canon := c.canon(x)
			for i, k := range b.keyCanon {
				if k == canon {
					return colNode(groupAlias, groupKeyCol+strconv.Itoa(i))
				}
			}
		}
		switch y := x.Node.(type) {
		case *pg.Node_FuncCall:
			if y.FuncCall.Over == nil && aggregates[strings.ToLower(funcName(y.FuncCall))] {
				i, err := c.aggregate(b, x, y.FuncCall)
				if err != nil {
					failed = err
					return nil
				}
				return colNode(groupAlias, groupAggCol+strconv.Itoa(i))
			}
		case *pg.Node_ColumnRef:
			if y.ColumnRef.Fields[len(y.ColumnRef.Fields)-1].GetAStar() != nil {
				failed = refusalAt(y.ColumnRef.Location, CodeGroupBy, "%s in a grouped query is not supported", c.snippet(x))
				return nil
			}
			if _, _, _, err := c.resolveColumn(y.ColumnRef); err != nil {
				failed = err
				return nil
			}
			failed = refusalAt(y.ColumnRef.Location, CodeGroupBy, "column %s must appear in the GROUP BY clause or be used in an aggregate function", c.snippet(x))
			return nil
		case *pg.Node_SubLink:
			failed = c.unsupported(x, "in a grouped query")
			return nil
		}
		walkMsg(x.ProtoReflect(), rw)
		return nil
	}
	cl := proto.Clone(n).(*pg.Node)
	if r := rw(cl); r != nil {
		cl = r
	}
	if failed != nil {
		return nil, failed
	}
	return cl, nil
}

// aggregate compiles one aggregate call and returns its index among the
// query's aggregates (one written twice is kept once).
func (c *compiler) aggregate(b *aggBuild, n *pg.Node, f *pg.FuncCall) (int, error) {
	name := strings.ToLower(funcName(f))
	switch {
	case f.AggFilter != nil:
		return 0, refusalAt(f.Location, CodeAggregate, "FILTER (WHERE ...) on an aggregate is not supported")
	case len(f.AggOrder) > 0 || f.AggWithinGroup:
		return 0, refusalAt(f.Location, CodeAggregate, "ORDER BY or WITHIN GROUP inside an aggregate is not supported")
	case f.FuncVariadic:
		return 0, refusalAt(f.Location, CodeAggregate, "VARIADIC in an aggregate is not supported")
	}
	for _, a := range f.Args {
		if hasAggregate(a) {
			return 0, refusalAt(f.Location, CodeAggregate, "aggregate function calls cannot be nested")
		}
	}
	canon := c.canon(n)
	for i, k := range b.aggCanon {
		if k == canon {
			return i, nil
		}
	}
	a := Aggregate{}
	one := func() (*scalar, error) {
		if len(f.Args) != 1 || f.AggStar {
			return nil, refusalAt(f.Location, CodeAggregate, "%s() takes one argument here", name)
		}
		s, err := c.sexpr(f.Args[0])
		if err != nil {
			return nil, err
		}
		if s.u != nil {
			if err := c.settleScalar(s, change.OIDText); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
	noDistinct := func() error {
		if f.AggDistinct {
			return refusalAt(f.Location, CodeAggregate, "%s(DISTINCT ...) is not supported; only count(DISTINCT ...) is", name)
		}
		return nil
	}
	switch name {
	case "count":
		a.TypeOID = change.OIDInt8
		if f.AggStar {
			a.Kind = AggCountStar
			break
		}
		s, err := one()
		if err != nil {
			return 0, err
		}
		a.arg, a.ArgOID, a.Kind = s, s.oid, AggCount
		if f.AggDistinct {
			a.Kind = AggCountDistinct
			switch familyOf(s.oid) {
			case famNone, famJSON, famArray, famUnknown:
				return 0, refusalAt(f.Location, CodeType, "count(DISTINCT ...) of a %s value is not supported", typeName(s.oid))
			case famText:
				if coll := c.textColl(s.oid, s.coll); !coll.Deterministic {
					return 0, refusalAt(f.Location, CodeCollation, "count(DISTINCT ...) of text under the nondeterministic collation %q is not supported", coll.Name)
				}
			}
		}
	case "sum", "avg":
		if err := noDistinct(); err != nil {
			return 0, err
		}
		s, err := one()
		if err != nil {
			return 0, err
		}
		a.arg, a.ArgOID = s, s.oid
		a.Kind, a.TypeOID = AggSum, change.OIDNumeric
		if name == "avg" {
			a.Kind = AggAvg
		}
		switch s.oid {
		case change.OIDInt2, change.OIDInt4:
			if a.Kind == AggSum {
				a.TypeOID = change.OIDInt8
			}
		case change.OIDInt8, change.OIDNumeric:
		case change.OIDFloat4, change.OIDFloat8:
			return 0, refusalAt(f.Location, CodeAggregate, "%s() of a %s value is not supported: PostgreSQL adds floats in the order it reads the rows, and the result's last digits depend on that order; cast the argument to numeric", name, typeName(s.oid))
		default:
			return 0, refusalAt(f.Location, CodeType, "%s() of a %s value is not supported", name, typeName(s.oid))
		}
	case "min", "max":
		// DISTINCT changes nothing for min and max.
		s, err := one()
		if err != nil {
			return 0, err
		}
		a.arg, a.ArgOID, a.TypeOID = s, s.oid, s.oid
		a.Kind = AggMin
		if name == "max" {
			a.Kind = AggMax
		}
		// PostgreSQL's min and max keep the later of two equal values
		// (numeric_smaller, interval_larger, float8larger: "if a < b then
		// a else b"), so where equal values print differently (1.5 and
		// 1.50, '1 mon' and '30 days', 0 and -0, 'a' and 'a ') the one
		// shown depends on the order PostgreSQL read the rows in: refused.
		tie := func(what, fix string) (int, error) {
			return 0, refusalAt(f.Location, CodeAggregate, "%s() of %s values is not supported: equal values (%s) print differently and PostgreSQL shows whichever of them it read last; %s", name, typeName(s.oid), what, fix)
		}
		switch familyOf(s.oid) {
		case famInt, famDate, famTime, famTimestamp:
		case famNumeric:
			if s.typmod < 0 {
				return tie("1.5 and 1.50", "use a numeric(p,s) column or cast the argument to one")
			}
		case famFloat:
			return tie("0 and -0", "cast the argument to numeric(p,s)")
		case famInterval:
			return tie("'1 mon' and '30 days'", "compare an extract(epoch FROM ...) of it instead")
		case famText:
			switch s.oid {
			case change.OIDText, change.OIDVarchar:
				a.TypeOID = change.OIDText
			case change.OIDBPChar:
				if s.typmod < 0 {
					return tie("'a' and 'a '", "use a char(n) column or cast the argument to text")
				}
			default:
				return 0, refusalAt(f.Location, CodeType, "%s() of a %s value is not supported", name, typeName(s.oid))
			}
			if coll := c.textColl(s.oid, s.coll); !coll.Bytewise() {
				return 0, refusalAt(f.Location, CodeCollation, "%s() of text under collation %q (%s) is not supported: only bytewise collations (C, POSIX, C.UTF-8) are reproduced", name, coll.Name, coll.Collate)
			}
		default:
			return 0, refusalAt(f.Location, CodeType, "%s() of a %s value is not supported", name, typeName(s.oid))
		}
	case "bool_and", "every", "bool_or":
		if err := noDistinct(); err != nil {
			return 0, err
		}
		s, err := one()
		if err != nil {
			return 0, err
		}
		if s.oid != change.OIDBool {
			return 0, refusalAt(f.Location, CodeType, "%s() of a %s value does not exist", name, typeName(s.oid))
		}
		a.arg, a.ArgOID, a.TypeOID = s, s.oid, change.OIDBool
		a.Kind = AggBoolAnd
		if name == "bool_or" {
			a.Kind = AggBoolOr
		}
	default:
		return 0, refusalAt(f.Location, CodeAggregate, "aggregate %s() is not supported (supported: count, sum, avg, min, max, bool_and, bool_or, every)", name)
	}
	b.aggCanon = append(b.aggCanon, canon)
	b.aggs = append(b.aggs, a)
	return len(b.aggs) - 1, nil
}

// describeAgg is a short form of a grouping for tests and messages.
func (g *Grouping) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "group by %d key(s):", len(g.keys))
	for _, a := range g.Aggs {
		fmt.Fprintf(&sb, " %s", a.Kind)
	}
	return sb.String()
}
