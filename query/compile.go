package query

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/freshetdb/freshet/change"
	pg "github.com/pganalyze/pg_query_go/v6"
)

// compiler holds the state of one Compile call.
type compiler struct {
	ctx   context.Context
	opts  Options
	sql   string
	binds []Bind

	tree    *pg.ParseResult
	sel     *pg.SelectStmt
	sources []*Source
	refs    []*colRef
	used    []map[int]bool // per source: catalog column indexes referenced

	params    []any    // decoded binds, by $n-1
	paramOIDs []uint32 // resolved types, 0 while unresolved
	paramSeen []bool
	maxParam  int
	inCount   int // bound array elements counted against MaxInValues
	lazy      int // > 0: compiling what is never evaluated (constants are not folded)

	work int // units of work done, for tick

	// subq > 0 while compiling the subquery of Sources[subq-1] (a
	// JoinSemi or JoinAnti source): names resolve to that table alone. Otherwise
	// they resolve to the FROM sources, never to a subquery's table.
	subq        int
	subInValues int64 // IN values in subqueries' WHERE clauses, counted against MaxInValues

	pendingJoins []pendingJoinKey
	outRefs      []*colRef // per output column; nil for count and expressions
	outExprs     []*scalar // per output column: its expression, or nil
	orderRefs    []*colRef // per ORDER BY key; nil for expressions
}

// Compile parses sql, decodes binds and resolves tables through
// opts.Catalog. It returns a Plan when the query is supported, a Refusal
// when it is not (or a bind is malformed), and an error only when it could
// not decide (the catalog failed, ctx ended).
func Compile(ctx context.Context, sql string, binds []Bind, opts Options) (*Plan, *Refusal, error) {
	if opts.Catalog == nil {
		return nil, nil, errors.New("compile query: Options.Catalog is nil")
	}
	if len(opts.SearchPath) == 0 {
		opts.SearchPath = []string{"public"}
	}
	c := &compiler{ctx: ctx, opts: opts, sql: sql, binds: binds,
		params: make([]any, len(binds)), paramOIDs: make([]uint32, len(binds)), paramSeen: make([]bool, len(binds))}
	p, err := c.compile()
	if err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			return nil, r, nil
		}
		return nil, nil, err
	}
	return p, nil, nil
}

// refusalAt returns a refusal positioned at a parse-tree location.
func refusalAt(loc int32, code Code, format string, args ...any) *Refusal {
	r := refuse(code, format, args...)
	if loc >= 0 {
		r.Position = int(loc) + 1
	}
	return r
}

// Parse checks sql's shape and limits without a catalog or binds: it
// returns the refusal Compile would give for the statement's text alone, or
// nil. It is cheap enough to run on every incoming query.
func Parse(sql string, opts Options) *Refusal {
	c := &compiler{opts: opts, sql: sql}
	if err := c.parse(); err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			return r
		}
		return refuse(CodeSyntax, "%v", err)
	}
	return nil
}

func (c *compiler) parse() error {
	if err := c.ctxErr(); err != nil {
		return err
	}
	if c.opts.MaxSQLLength > 0 && len(c.sql) > c.opts.MaxSQLLength {
		return refuse(CodeTooLong, "the SQL text is %d bytes, more than the limit of %d (MaxSQLLength)", len(c.sql), c.opts.MaxSQLLength)
	}
	if i := strings.IndexByte(c.sql, 0); i >= 0 {
		// PostgreSQL's parser reads a C string: it would stop at the NUL
		// and compile only the text before it, another query.
		r := refuse(CodeNulByte, "the SQL text holds a NUL byte (at byte %d); PostgreSQL's parser would read only the text before it: remove it", i+1)
		r.Position = i + 1
		return r
	}
	sc := prescreen(c.sql)
	if sc.nesting > nestingCeiling {
		return refuse(CodeTooComplex, "the query may nest more than %d levels deep (operators chained in one parenthesis level, like 1+1+...+1 or x::int8::int8..., each count as one), more than PostgreSQL's parser can read safely; write it with fewer operators in a row or fewer levels", nestingCeiling)
	}
	if sc.lexed {
		if c.opts.MaxAlternatives > 0 && sc.alternatives > int64(c.opts.MaxAlternatives) {
			return refuse(CodeTooComplex, "the WHERE clause has more than %d alternatives in disjunctive normal form (MaxAlternatives)", c.opts.MaxAlternatives)
		}
		if c.opts.MaxInValues > 0 && sc.inValues > int64(c.opts.MaxInValues) {
			return refuse(CodeTooManyInValues, "the query lists more than %d IN/NOT IN values (MaxInValues)", c.opts.MaxInValues)
		}
	}
	if err := c.ctxErr(); err != nil {
		return err
	}
	tree, err := cgoCall(c.ctx, len(c.sql), func() (*pg.ParseResult, error) { return pg.Parse(c.sql) })
	if err := c.ctxErr(); err != nil {
		return err
	}
	if err != nil {
		return refuse(CodeSyntax, "PostgreSQL cannot parse the query: %v", err)
	}
	c.tree = tree
	switch n := len(tree.Stmts); {
	case n == 0:
		return refuse(CodeSyntax, "the SQL text holds no statement")
	case n > 1:
		return refuse(CodeMultiple, "the SQL text holds %d statements; only one SELECT is supported", n)
	}
	sel := tree.Stmts[0].Stmt.GetSelectStmt()
	if sel == nil {
		return refuse(CodeNotSelect, "%s statements are not supported; only SELECT is", stmtName(tree.Stmts[0].Stmt))
	}
	c.sel = sel
	switch {
	case sel.WithClause != nil:
		return refusalAt(sel.WithClause.Location, CodeCTE, "WITH (common table expressions) is not supported")
	case sel.Op != pg.SetOperation_SETOP_NONE:
		return refuse(CodeSetOp, "%s is not supported", setOpName(sel.Op))
	case len(sel.ValuesLists) > 0:
		return refuse(CodeValues, "VALUES lists are not supported")
	case sel.IntoClause != nil:
		return refuse(CodeInto, "SELECT INTO is not supported")
	case len(sel.WindowClause) > 0:
		return refuse(CodeWindow, "WINDOW clauses are not supported")
	case len(sel.LockingClause) > 0:
		return refuse(CodeLocking, "FOR UPDATE/FOR SHARE locking clauses are not supported")
	case len(sel.FromClause) == 0:
		return refuse(CodeNoFrom, "a SELECT without FROM is not supported")
	case len(sel.FromClause) > 1:
		return refuse(CodeJoinKind, "comma-separated FROM items (an implicit CROSS JOIN) are not supported; use JOIN ... ON")
	case sel.LimitOption == pg.LimitOption_LIMIT_OPTION_WITH_TIES:
		return refuse(CodeLimit, "FETCH FIRST ... WITH TIES is not supported")
	}
	// Limits, measured on the tree before anything is planned.
	return c.whereLimits(sel.WhereClause, "the WHERE clause", 0)
}

// whereLimits refuses a WHERE clause (what names it) nested deeper than
// MaxDepth or with more alternatives than MaxAlternatives, and a query
// whose IN values, those of this clause and other (counted already),
// are more than MaxInValues.
func (c *compiler) whereLimits(where *pg.Node, what string, other int64) error {
	if where != nil {
		if c.opts.MaxDepth > 0 {
			if d := depth(where, c.opts.MaxDepth+1); d > c.opts.MaxDepth {
				return refuse(CodeTooComplex, "%s is nested more than %d levels deep (MaxDepth)", what, c.opts.MaxDepth)
			}
		}
		if c.opts.MaxAlternatives > 0 {
			limit := int64(c.opts.MaxAlternatives)
			if n := alternatives(where, false, limit+1); n > limit {
				return refuse(CodeTooComplex, "%s has more than %d alternatives in disjunctive normal form (MaxAlternatives)", what, c.opts.MaxAlternatives)
			}
		}
	}
	if c.opts.MaxInValues > 0 {
		if n := other + inValues(where, int64(c.opts.MaxInValues)+1); n > int64(c.opts.MaxInValues) {
			return refuse(CodeTooManyInValues, "the query lists more than %d IN/NOT IN values (MaxInValues)", c.opts.MaxInValues)
		}
	}
	return nil
}

// depth returns how deeply the boolean and comparison structure of n is
// nested, stopping at limit.
func depth(n *pg.Node, limit int) int {
	if n == nil || limit <= 0 {
		return 0
	}
	best := 0
	for _, ch := range children(n) {
		if d := depth(ch, limit-1); d > best {
			best = d
		}
		if best >= limit {
			break
		}
	}
	return best + 1
}

// children returns the sub-expressions of n that predicates are built of.
func children(n *pg.Node) []*pg.Node {
	switch x := n.Node.(type) {
	case *pg.Node_BoolExpr:
		return x.BoolExpr.Args
	case *pg.Node_AExpr:
		return []*pg.Node{x.AExpr.Lexpr, x.AExpr.Rexpr}
	case *pg.Node_NullTest:
		return []*pg.Node{x.NullTest.Arg}
	case *pg.Node_BooleanTest:
		return []*pg.Node{x.BooleanTest.Arg}
	case *pg.Node_TypeCast:
		return []*pg.Node{x.TypeCast.Arg}
	case *pg.Node_List:
		return x.List.Items
	case *pg.Node_FuncCall:
		return x.FuncCall.Args
	case *pg.Node_AArrayExpr:
		return x.AArrayExpr.Elements
	}
	return nil
}

// satAdd and satMul add or multiply non-negative counts, saturating at
// limit (never wrapping, whatever the limit).
func satAdd(a, b, limit int64) int64 {
	if b > limit || a > limit-b {
		return limit
	}
	return a + b
}

func satMul(a, b, limit int64) int64 {
	if a != 0 && b > limit/a {
		return limit
	}
	if a*b > limit {
		return limit
	}
	return a * b
}

// alternatives counts the alternatives of n's disjunctive normal form
// (negated when neg) without building it: AND multiplies its parts' counts,
// OR adds them, NOT swaps the two. Counting stops at limit.
func alternatives(n *pg.Node, neg bool, limit int64) int64 {
	switch x := n.Node.(type) {
	case *pg.Node_BoolExpr:
		b := x.BoolExpr
		switch b.Boolop {
		case pg.BoolExprType_NOT_EXPR:
			if len(b.Args) == 1 {
				return alternatives(b.Args[0], !neg, limit)
			}
		case pg.BoolExprType_AND_EXPR, pg.BoolExprType_OR_EXPR:
			mul := (b.Boolop == pg.BoolExprType_AND_EXPR) != neg
			var total int64
			if mul {
				total = 1
			}
			for _, a := range b.Args {
				k := alternatives(a, neg, limit)
				if mul {
					total = satMul(total, k, limit)
				} else {
					total = satAdd(total, k, limit)
				}
			}
			return total
		}
	case *pg.Node_AExpr:
		switch x.AExpr.Kind {
		case pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN:
			// x BETWEEN a AND b is one conjunction; NOT BETWEEN two alternatives.
			if (x.AExpr.Kind == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN) != neg {
				return 2
			}
		case pg.A_Expr_Kind_AEXPR_BETWEEN_SYM, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM:
			return 4
		}
	case *pg.Node_BooleanTest:
		return alternatives(x.BooleanTest.Arg, neg, limit)
	}
	return 1
}

// inValues counts IN list items and ARRAY[...] elements under n.
func inValues(n *pg.Node, limit int64) int64 {
	if n == nil {
		return 0
	}
	var total int64
	var walk func(n *pg.Node, d int)
	walk = func(n *pg.Node, d int) {
		if n == nil || total >= limit || d > 10000 {
			return
		}
		switch x := n.Node.(type) {
		case *pg.Node_AExpr:
			if x.AExpr.Kind == pg.A_Expr_Kind_AEXPR_IN {
				if l := x.AExpr.Rexpr.GetList(); l != nil {
					total += int64(len(l.Items))
				}
			}
		case *pg.Node_AArrayExpr:
			total += int64(len(x.AArrayExpr.Elements))
		}
		for _, ch := range children(n) {
			walk(ch, d+1)
		}
	}
	walk(n, 0)
	return total
}

func stmtName(n *pg.Node) string {
	switch n.Node.(type) {
	case *pg.Node_InsertStmt:
		return "INSERT"
	case *pg.Node_UpdateStmt:
		return "UPDATE"
	case *pg.Node_DeleteStmt:
		return "DELETE"
	case *pg.Node_MergeStmt:
		return "MERGE"
	case *pg.Node_ExplainStmt:
		return "EXPLAIN"
	case *pg.Node_CopyStmt:
		return "COPY"
	case *pg.Node_TransactionStmt:
		return "transaction control"
	case *pg.Node_VariableSetStmt:
		return "SET"
	}
	name := fmt.Sprintf("%T", n.Node)
	name = strings.TrimPrefix(name, "*pg_query.Node_")
	return name
}

func setOpName(op pg.SetOperation) string {
	switch op {
	case pg.SetOperation_SETOP_UNION:
		return "UNION"
	case pg.SetOperation_SETOP_INTERSECT:
		return "INTERSECT"
	case pg.SetOperation_SETOP_EXCEPT:
		return "EXCEPT"
	}
	return "a set operation"
}

func (c *compiler) compile() (*Plan, error) {
	if err := c.parse(); err != nil {
		return nil, err
	}
	sel := c.sel
	if err := c.from(sel.FromClause[0]); err != nil {
		return nil, err
	}
	p := &Plan{Template: &Template{Limit: -1}, Binds: c.binds}
	grouped := len(sel.DistinctClause) > 0 || needsGrouping(sel)
	switch {
	case len(sel.DistinctClause) > 0:
		if err := c.distinct(p); err != nil {
			return nil, err
		}
	case grouped:
		if err := c.grouping(p, sel.TargetList, sel.GroupClause, "GROUP BY"); err != nil {
			return nil, err
		}
	default:
		if err := c.targets(p, sel.TargetList); err != nil {
			return nil, err
		}
	}
	if sel.WhereClause != nil {
		rest, err := c.semiJoins(sel.WhereClause)
		if err != nil {
			return nil, err
		}
		if rest, err = c.clockWhere(p, rest); err != nil {
			return nil, err
		}
		if rest != nil {
			e, err := c.pred(rest)
			if err != nil {
				return nil, err
			}
			e.markRaises()
			p.filter = e
		}
	}
	if !grouped {
		if err := c.order(p, sel.SortClause); err != nil {
			return nil, err
		}
		if err := c.limits(p); err != nil {
			return nil, err
		}
	}
	if err := c.ctxErr(); err != nil {
		return nil, err
	}
	if c.maxParam != len(c.binds) {
		if c.maxParam > len(c.binds) {
			return nil, &Refusal{Code: CodeBind, Param: c.maxParam,
				Message: fmt.Sprintf("the query uses $%d but %d binds were given", c.maxParam, len(c.binds))}
		}
		return nil, refuse(CodeBind, "%d binds were given but the query uses %d parameters", len(c.binds), c.maxParam)
	}
	for i, seen := range c.paramSeen {
		if !seen {
			return nil, &Refusal{Code: CodeBind, Param: i + 1,
				Message: fmt.Sprintf("$%d is not used by the query, so its type cannot be known", i+1)}
		}
	}
	if err := c.clockServed(p); err != nil {
		return nil, err
	}
	if err := c.finish(p); err != nil {
		return nil, err
	}
	return p, nil
}

// finish lays out each source's needed columns, fills in column indexes,
// derives routing constraints and the normalized form. It fails only when
// the context ends.
func (c *compiler) finish(p *Plan) error {
	orders := make([][]int, len(c.sources)) // each source's Columns as catalog indexes
	for i, s := range c.sources {
		used := c.used[i]
		pos := make(map[int]int)
		var order []int // catalog indexes, in Columns order
		for _, name := range s.Table.RowKey() {
			_, ci := s.Table.Column(name)
			pos[ci] = len(order)
			order = append(order, ci)
		}
		s.KeyN = len(order)
		for ci := range s.Table.Columns {
			if used[ci] {
				if _, ok := pos[ci]; !ok {
					pos[ci] = len(order)
					order = append(order, ci)
				}
			}
		}
		s.Columns = layout(s.Table, order)
		orders[i] = order
		for _, r := range c.refs {
			if int(r.src) == i {
				r.idx = int32(pos[int(r.cat)])
			}
		}
	}
	c.fixJoinKeys()
	p.fixClock()
	c.fixOutputs(p)
	p.raises = p.filter != nil && p.filter.raises
	if g := p.Agg; g != nil {
		for _, k := range g.keys {
			p.raises = p.raises || k.raises
		}
		for _, a := range g.Aggs {
			p.raises = p.raises || a.arg != nil && a.arg.raises
		}
		if g.First != nil {
			for _, s := range g.First.vals {
				p.raises = p.raises || s.raises
			}
		}
	} else {
		for _, o := range p.Output {
			p.raises = p.raises || o.expr != nil && o.expr.raises
		}
		for _, k := range p.Order {
			p.raises = p.raises || k.expr != nil && k.expr.raises
		}
	}
	p.Output = shareOutput(p.Output)
	p.Order = shareOrder(p.Order)
	p.Sources = c.sources
	p.ParamOIDs = c.paramOIDs
	c.constraints(p)
	if err := c.ctxErr(); err != nil {
		return err
	}
	for i, s := range c.sources {
		s.SourceShape = shareSource(s.SourceShape, orders[i])
	}
	lits, kinds := c.lift(p)
	normalized, err := cgoCall(c.ctx, len(c.sql), func() (string, error) { return pg.Deparse(c.tree) })
	if err := c.ctxErr(); err != nil {
		return err
	}
	if err != nil {
		// The deparser prints every tree the parser builds; failing to is
		// a bug in it, and the plan could not be rendered.
		return fmt.Errorf("compile query: deparse: %w", err)
	}
	// The shape: the statement, then the tables by OID and shape as
	// compiled: a table dropped and made again under the same name, or
	// whose columns changed, is another query (a view of the old one must
	// not serve it), then the kinds of the lifted literals. Plans of one
	// shape share its interned text; what a plan holds alone is its
	// literals' texts and its binds' encoding.
	kb := []byte(normalized)
	for _, s := range c.sources {
		kb = append(kb, 0)
		kb = strconv.AppendUint(kb, uint64(s.Table.OID), 10)
		for j, col := range s.Columns {
			kb = append(kb, ',')
			if j < s.KeyN {
				kb = append(kb, col.Name...) // the row key's columns
				kb = append(kb, ':')
			}
			kb = strconv.AppendUint(kb, uint64(col.DeclaredOID), 10)
			kb = append(kb, '/')
			kb = strconv.AppendInt(kb, int64(col.TypeMod), 10)
			kb = append(kb, '@')
			kb = strconv.AppendInt(kb, int64(col.AttNum), 10)
		}
	}
	if len(lits) > 0 {
		kb = append(kb, 0, 'L')
		kb = append(kb, kinds...)
	}
	shape := string(kb)
	shared := len(c.params) > 0 || len(lits) > 0
	if shared {
		shape = shareText(shape) // the same for every bind and literal
	}
	kb = kb[:0]
	for _, a := range lits {
		kb = appendLiteral(kb, a)
	}
	for i, v := range c.params {
		kb = append(kb, 0)
		kb = strconv.AppendUint(kb, uint64(c.paramOIDs[i]), 10)
		kb = append(kb, ':')
		kb = AppendKey(kb, c.paramOIDs[i], v)
	}
	p.Key = PlanKey{shape: shape, binds: string(kb)}
	// Text shares the shape's bytes (the shape begins with it).
	p.Text, p.lits = shape[:len(normalized)], string(kinds)
	c.slots(p)
	if shared {
		p.Template = shareTemplate(shape, p.Template)
	}
	return nil
}

// layout returns the columns of t at the catalog indexes order. When
// they are the table's first columns in table order (SELECT * of a table
// whose key leads, and many narrower queries), it is the catalog's own
// slice, capped, shared by every plan of the table instead of copied: a
// Column is over a hundred bytes. Neither is ever written to.
func layout(t *Table, order []int) []Column {
	prefix := true
	for j, ci := range order {
		if ci != j {
			prefix = false
			break
		}
	}
	if prefix {
		return t.Columns[:len(order):len(order)]
	}
	cols := make([]Column, len(order))
	for j, ci := range order {
		cols[j] = t.Columns[ci]
	}
	return cols
}

// joinRefs and outRefs remember colRefs whose final index is copied into
// the public structures once known.
type pendingJoinKey struct {
	src, k      int
	mine, other *colRef
}

func (c *compiler) fixJoinKeys() {
	for _, pj := range c.pendingJoins {
		c.sources[pj.src].On[pj.k] = JoinKey{Column: int(pj.mine.idx), Other: int(pj.other.src), OtherColumn: int(pj.other.idx)}
	}
}

func (c *compiler) fixOutputs(p *Plan) {
	for i, r := range c.outRefs {
		if r != nil {
			p.Output[i].Column = int(r.idx)
		}
	}
	for i, r := range c.orderRefs {
		if r != nil {
			p.Order[i].Column = int(r.idx)
		}
	}
}

// ref records a reference to column cat of source src.
func (c *compiler) ref(src, cat int) *colRef {
	c.used[src][cat] = true
	r := &colRef{src: int32(src), cat: int32(cat), oid: c.sources[src].Table.Columns[cat].TypeOID}
	c.refs = append(c.refs, r)
	return r
}

// column returns the catalog column a colRef points at.
func (c *compiler) column(r *colRef) *Column {
	return &c.sources[r.src].Table.Columns[r.cat]
}

func strVal(n *pg.Node) (string, bool) {
	if s := n.GetString_(); s != nil {
		return s.Sval, true
	}
	return "", false
}

// visible reports whether source i's names can be used where the
// compiler is: inside a subquery only its own table, elsewhere every
// FROM source.
func (c *compiler) visible(i int) bool {
	if c.subq > 0 {
		return i == c.subq-1
	}
	return !c.sources[i].Subquery()
}

// resolveColumn finds the column a ColumnRef's fields name. It returns
// src -1 for a star (with the qualifying source, or -1 for a bare *).
// Inside a subquery, a name that only the outer query's tables have is
// refused as a correlated reference.
func (c *compiler) resolveColumn(cr *pg.ColumnRef) (src, cat int, star bool, err error) {
	src, cat, star, err = c.resolveVisible(cr)
	if err == nil || c.subq == 0 {
		return src, cat, star, err
	}
	inner := c.subq
	c.subq = 0
	_, _, _, outerErr := c.resolveVisible(cr)
	c.subq = inner
	if outerErr == nil {
		return 0, 0, false, refusalAt(cr.Location, CodeSubquery, "correlated subqueries are not supported: %s in the subquery names a column of the outer query", c.snippet(&pg.Node{Node: &pg.Node_ColumnRef{ColumnRef: cr}}))
	}
	return src, cat, star, err
}

func (c *compiler) resolveVisible(cr *pg.ColumnRef) (src, cat int, star bool, err error) {
	var names []string
	for i, f := range cr.Fields {
		if f.GetAStar() != nil {
			if i != len(cr.Fields)-1 {
				return 0, 0, false, refusalAt(cr.Location, CodeExpression, "a * in the middle of a column reference is not supported")
			}
			star = true
			continue
		}
		s, ok := strVal(f)
		if !ok {
			return 0, 0, false, refusalAt(cr.Location, CodeExpression, "this column reference is not supported")
		}
		names = append(names, s)
	}
	full := strings.Join(names, ".")
	if star {
		if len(names) == 0 {
			return -1, 0, true, nil
		}
		s, err := c.sourceByName(names, cr.Location)
		if err != nil {
			return 0, 0, false, err
		}
		return s, 0, true, nil
	}
	switch len(names) {
	case 1:
		found := -1
		for i, s := range c.sources {
			if !c.visible(i) {
				continue
			}
			if _, ci := s.Table.Column(names[0]); ci >= 0 {
				if found >= 0 {
					return 0, 0, false, refusalAt(cr.Location, CodeUnknownColumn, "column reference %q is ambiguous", names[0])
				}
				found, cat = i, ci
			}
		}
		if found < 0 {
			r := refusalAt(cr.Location, CodeUnknownColumn, "column %q does not exist", names[0])
			r.Retryable = true
			return 0, 0, false, r
		}
		return found, cat, false, nil
	case 2, 3:
		s, err := c.sourceByName(names[:len(names)-1], cr.Location)
		if err != nil {
			return 0, 0, false, err
		}
		col := names[len(names)-1]
		if _, ci := c.sources[s].Table.Column(col); ci >= 0 {
			return s, ci, false, nil
		}
		r := refusalAt(cr.Location, CodeUnknownColumn, "column %s does not exist", full)
		r.Retryable = true
		return 0, 0, false, r
	}
	return 0, 0, false, refusalAt(cr.Location, CodeUnknownColumn, "column reference %s has too many dotted names", full)
}

// sourceByName finds the source a qualifier (alias, or schema and table)
// names.
func (c *compiler) sourceByName(q []string, loc int32) (int, error) {
	found := -1
	for i, s := range c.sources {
		if !c.visible(i) {
			continue
		}
		var match bool
		if len(q) == 1 {
			match = s.Alias == q[0]
		} else {
			match = s.Alias == s.Table.Name && s.Table.Schema == q[0] && s.Table.Name == q[1]
		}
		if match {
			if found >= 0 {
				return 0, refusalAt(loc, CodeUnknownColumn, "table reference %q is ambiguous", strings.Join(q, "."))
			}
			found = i
		}
	}
	if found < 0 {
		return 0, refusalAt(loc, CodeUnknownColumn, "missing FROM-clause entry for table %q", strings.Join(q, "."))
	}
	return found, nil
}

// from reads the FROM item: a table, or a left-deep tree of INNER and LEFT
// joins.
func (c *compiler) from(n *pg.Node) error {
	switch x := n.Node.(type) {
	case *pg.Node_RangeVar:
		return c.addTable(x.RangeVar, JoinRoot, false)
	case *pg.Node_JoinExpr:
		j := x.JoinExpr
		if j.Alias != nil || j.JoinUsingAlias != nil {
			return refuse(CodeJoinShape, "an alias on a join is not supported")
		}
		if j.IsNatural {
			return refuse(CodeJoinKind, "NATURAL JOIN is not supported; use JOIN ... ON")
		}
		if len(j.UsingClause) > 0 {
			return refuse(CodeJoinKind, "JOIN ... USING is not supported; use JOIN ... ON")
		}
		var kind JoinKind
		switch j.Jointype {
		case pg.JoinType_JOIN_INNER:
			if j.Quals == nil {
				return refuse(CodeJoinKind, "CROSS JOIN is not supported")
			}
			kind = JoinInner
		case pg.JoinType_JOIN_LEFT:
			kind = JoinLeft
		case pg.JoinType_JOIN_RIGHT:
			return refuse(CodeJoinKind, "RIGHT JOIN is not supported")
		case pg.JoinType_JOIN_FULL:
			return refuse(CodeJoinKind, "FULL JOIN is not supported")
		default:
			return refuse(CodeJoinKind, "this kind of join is not supported")
		}
		if err := c.from(j.Larg); err != nil {
			return err
		}
		rv := j.Rarg.GetRangeVar()
		if rv == nil {
			if j.Rarg.GetJoinExpr() != nil {
				return refuse(CodeJoinShape, "a parenthesized join on the right side of a join is not supported; write the joins left to right")
			}
			return c.fromItem(j.Rarg)
		}
		nullable := kind == JoinLeft
		if err := c.addTable(rv, kind, nullable); err != nil {
			return err
		}
		return c.joinOn(len(c.sources)-1, j.Quals)
	}
	return c.fromItem(n)
}

func (c *compiler) fromItem(n *pg.Node) error {
	switch n.Node.(type) {
	case *pg.Node_RangeSubselect:
		return refuse(CodeSubquery, "a subquery in FROM is not supported")
	case *pg.Node_RangeFunction:
		return refuse(CodeFromItem, "a function in FROM is not supported")
	}
	return refuse(CodeFromItem, "this FROM item is not supported; name a table")
}

// isSystemSchema reports whether schema is one of PostgreSQL's own:
// pg_catalog, pg_toast, the temporary schemas (pg_temp_N, pg_toast_temp_N,
// and pg_temp, which names the session's), every name beginning with pg_
// (which PostgreSQL reserves for system schemas), and information_schema.
func isSystemSchema(schema string) bool {
	return strings.HasPrefix(schema, "pg_") || schema == "information_schema"
}

// checkPublished refuses t when Options.Publication does not carry it.
func (c *compiler) checkPublished(rv *pg.RangeVar, t *Table) error {
	pub := c.opts.Publication
	if pub == nil {
		return nil
	}
	ok, err := pub.Publishes(c.ctx, t)
	if err != nil {
		return fmt.Errorf("resolve table %s.%s: %w", t.Schema, t.Name, err)
	}
	if ok {
		return nil
	}
	r := refusalAt(rv.Location, CodeNotPublished, "table %s.%s is not in publication %q, so its changes never reach Freshet and its answers would never be updated; add it (ALTER PUBLICATION %s ADD TABLE %s.%s; a partitioned table needs publish_via_partition_root = true, a partition of one published via its root is read through the root)",
		t.Schema, t.Name, pub.Name(), change.QuoteIdent(pub.Name()), change.QuoteIdent(t.Schema), change.QuoteIdent(t.Name))
	r.Retryable = true
	return r
}

// addTable resolves a table and adds it as a source.
func (c *compiler) addTable(rv *pg.RangeVar, kind JoinKind, nullable bool) error {
	if rv.Catalogname != "" {
		return refusalAt(rv.Location, CodeUnknownTable, "a database-qualified table name (%s.%s.%s) is not supported", rv.Catalogname, rv.Schemaname, rv.Relname)
	}
	if isSystemSchema(rv.Schemaname) {
		return refusalAt(rv.Location, CodeSystemTable, "%s.%s is in a system schema: system catalogs hold what no subscriber may read (password hashes, sampled values of every table) and are not in the change stream", rv.Schemaname, rv.Relname)
	}
	if rv.Schemaname == "" && strings.HasPrefix(rv.Relname, "pg_") && !slices.Contains(c.opts.SearchPath, "pg_catalog") {
		// PostgreSQL looks in pg_catalog before the search path (unless
		// the path names it), so an application's FROM pg_authid reads
		// the system catalog, whatever a schema on the path holds.
		return refusalAt(rv.Location, CodeSystemTable, "%q unqualified names a system catalog (PostgreSQL looks in pg_catalog first); system catalogs cannot be subscribed to. If you mean a table of your own, qualify it (public.%s)", rv.Relname, rv.Relname)
	}
	var t *Table
	qualified := rv.Schemaname != ""
	if qualified {
		var err error
		t, err = c.opts.Catalog.Table(c.ctx, rv.Schemaname, rv.Relname)
		if err != nil && !errors.Is(err, ErrNoTable) {
			return fmt.Errorf("resolve table %s.%s: %w", rv.Schemaname, rv.Relname, err)
		}
	} else {
		for _, schema := range c.opts.SearchPath {
			tt, err := c.opts.Catalog.Table(c.ctx, schema, rv.Relname)
			if err == nil {
				t = tt
				break
			}
			if !errors.Is(err, ErrNoTable) {
				return fmt.Errorf("resolve table %s.%s: %w", schema, rv.Relname, err)
			}
		}
	}
	if t == nil {
		name := rv.Relname
		if rv.Schemaname != "" {
			name = rv.Schemaname + "." + name
		}
		r := refusalAt(rv.Location, CodeUnknownTable, "relation %q does not exist (search path %s)", name, strings.Join(c.opts.SearchPath, ", "))
		r.Retryable = true
		return r
	}
	if isSystemSchema(t.Schema) {
		// Found on a search path that names a system schema.
		return refusalAt(rv.Location, CodeSystemTable, "%s.%s is in a system schema: system catalogs cannot be subscribed to", t.Schema, t.Name)
	}
	if err := c.checkPublished(rv, t); err != nil {
		return err
	}
	if len(t.RowKey()) == 0 {
		r := refusalAt(rv.Location, CodeNoPrimaryKey, "table %s.%s has no primary key; add one to subscribe to it", t.Schema, t.Name)
		r.Retryable = true
		return r
	}
	rv.Schemaname = t.Schema // normalized: always qualified
	alias := t.Name
	if rv.Alias != nil {
		if len(rv.Alias.Colnames) > 0 {
			return refusalAt(rv.Location, CodeFromItem, "column aliases on a table (%s(...)) are not supported", rv.Alias.Aliasname)
		}
		alias = rv.Alias.Aliasname
	}
	for _, s := range c.sources {
		// A subquery's table is alone in its scope: it may repeat an
		// outer name (tickets WHERE id IN (SELECT ... FROM tickets)).
		if s.Alias == alias && kind != JoinSemi && kind != JoinAnti && !s.Subquery() {
			return refusalAt(rv.Location, CodeDuplicateAlias, "table name %q specified more than once", alias)
		}
	}
	c.sources = append(c.sources, &Source{SourceShape: &SourceShape{Alias: alias, Table: t, Qualified: qualified, Join: kind, Nullable: nullable}})
	c.used = append(c.used, make(map[int]bool))
	return nil
}

// joinOn reads the ON condition of source s: a conjunction of equalities
// between a column of s and a column of an earlier source.
func (c *compiler) joinOn(s int, quals *pg.Node) error {
	var eqs []*pg.Node
	var flatten func(n *pg.Node) error
	flatten = func(n *pg.Node) error {
		if b := n.GetBoolExpr(); b != nil && b.Boolop == pg.BoolExprType_AND_EXPR {
			for _, a := range b.Args {
				if err := flatten(a); err != nil {
					return err
				}
			}
			return nil
		}
		eqs = append(eqs, n)
		return nil
	}
	if err := flatten(quals); err != nil {
		return err
	}
	for _, n := range eqs {
		a := n.GetAExpr()
		if a == nil || a.Kind != pg.A_Expr_Kind_AEXPR_OP || opName(a.Name) != "=" {
			return refuse(CodeJoinCondition, "join conditions must be equalities between columns joined by AND; %s is not supported", c.snippet(n))
		}
		lc, rc := a.Lexpr.GetColumnRef(), a.Rexpr.GetColumnRef()
		if lc == nil || rc == nil {
			return refusalAt(a.Location, CodeJoinCondition, "join conditions must compare two columns; %s is not supported", c.snippet(n))
		}
		ls, lcat, lstar, err := c.resolveColumn(lc)
		if err != nil {
			return err
		}
		rs, rcat, rstar, err := c.resolveColumn(rc)
		if err != nil {
			return err
		}
		if lstar || rstar {
			return refusalAt(a.Location, CodeJoinCondition, "* in a join condition is not supported")
		}
		if rs != s {
			ls, lcat, rs, rcat = rs, rcat, ls, lcat
		}
		if rs != s || ls >= s {
			return refusalAt(a.Location, CodeJoinCondition, "each join equality must link a column of %q to a column of an earlier table: %s", c.sources[s].Alias, c.snippet(n))
		}
		mine, other := c.ref(rs, rcat), c.ref(ls, lcat)
		mc, oc := c.column(mine), c.column(other)
		mf, of := c.colFamily(mc), c.colFamily(oc)
		if mf != of || mf == famNone || mf == famJSON || mf == famArray || mf == famUnknown {
			return refusalAt(a.Location, CodeJoinCondition, "joining %s (%s) with %s (%s) is not supported: join columns must be of one family of types",
				mc.Name, mf, oc.Name, of)
		}
		if mf == famEnum && mc.TypeOID != oc.TypeOID {
			return refusalAt(a.Location, CodeJoinCondition, "joining columns of two different enum types is not supported")
		}
		if bpcharVarchar(mc, oc) {
			return refusalAt(a.Location, CodeJoinCondition, "joining %s (%s) with %s (%s) is not supported: PostgreSQL compares them as char(n), ignoring trailing spaces on both sides, which a join's key lookups do not reproduce",
				mc.Name, typeName(mc.TypeOID), oc.Name, typeName(oc.TypeOID))
		}
		if mf == famText && (!mc.Collation.Deterministic && mc.Collation.OID != 0 || !oc.Collation.Deterministic && oc.Collation.OID != 0) {
			return refusalAt(a.Location, CodeCollation, "joining on text under a nondeterministic collation is not supported")
		}
		c.sources[s].On = append(c.sources[s].On, JoinKey{})
		c.pendingJoins = append(c.pendingJoins, pendingJoinKey{src: s, k: len(c.sources[s].On) - 1, mine: mine, other: other})
	}
	return nil
}

// colFamily returns the family of a catalog column's values.
func (c *compiler) colFamily(col *Column) family {
	switch col.Type.Kind {
	case change.KindEnum:
		return famEnum
	case change.KindArray:
		return famArray
	}
	return familyOf(col.TypeOID)
}

// snippet returns the SQL text around a node, for messages.
func (c *compiler) snippet(n *pg.Node) string {
	var version int32
	if c.tree != nil {
		version = c.tree.Version
	}
	tree := &pg.ParseResult{Version: version, Stmts: []*pg.RawStmt{{Stmt: &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: &pg.SelectStmt{
		TargetList: []*pg.Node{{Node: &pg.Node_ResTarget{ResTarget: &pg.ResTarget{Val: n}}}},
		Op:         pg.SetOperation_SETOP_NONE, LimitOption: pg.LimitOption_LIMIT_OPTION_DEFAULT}}}}}}
	s, err := pg.Deparse(tree)
	if err != nil {
		return "this expression"
	}
	s = strings.TrimPrefix(s, "SELECT ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// opName returns an operator's name ("=", "~~", ...), "" if qualified
// oddly.
func opName(name []*pg.Node) string {
	if len(name) == 0 {
		return ""
	}
	switch len(name) {
	case 1:
	case 2:
		if s, _ := strVal(name[0]); s != "pg_catalog" {
			return ""
		}
	default:
		// OPERATOR(db.schema.+): a cross-database reference PostgreSQL
		// rejects (found by FuzzCompile: it was read as +).
		return ""
	}
	s, _ := strVal(name[len(name)-1])
	return s
}

// targets reads the output list.
func (c *compiler) targets(p *Plan, list []*pg.Node) error {
	for ti, n := range list {
		rt := n.GetResTarget()
		if rt == nil {
			return refuse(CodeTargetList, "this output item is not supported")
		}
		if len(rt.Indirection) > 0 {
			return refusalAt(rt.Location, CodeTargetList, "subscripts and field selection in the output are not supported")
		}
		switch v := rt.Val.Node.(type) {
		case *pg.Node_ColumnRef:
			src, cat, star, err := c.resolveColumn(v.ColumnRef)
			if err != nil {
				return err
			}
			if star {
				for i, s := range c.sources {
					if src >= 0 && i != src || !c.visible(i) {
						continue
					}
					s.Star = true
					for ci, col := range s.Table.Columns {
						c.addOutput(p, c.ref(i, ci), col.Name)
					}
				}
				continue
			}
			r := c.ref(src, cat)
			name := rt.Name
			if name == "" {
				name = c.column(r).Name
			}
			c.addOutput(p, r, name)
		case *pg.Node_FuncCall:
			f := v.FuncCall
			if isCountStar(f) {
				if len(list) != 1 {
					return refusalAt(f.Location, CodeAggregate, "COUNT(*) with other output columns is not supported (it would need GROUP BY)")
				}
				name := rt.Name
				if name == "" {
					name = "count"
				}
				p.Count = true
				p.Output = append(p.Output, Output{Name: name, TypeOID: change.OIDInt8, TypeMod: -1, Source: -1, Column: -1})
				c.outRefs = append(c.outRefs, nil)
				continue
			}
			if err := c.exprOutput(p, rt, ti); err != nil {
				return err
			}
		default:
			if err := c.exprOutput(p, rt, ti); err != nil {
				return err
			}
		}
	}
	if len(p.Output) == 0 {
		return refuse(CodeTargetList, "a SELECT without output columns is not supported")
	}
	return nil
}

// exprOutput compiles a computed output column.
func (c *compiler) exprOutput(p *Plan, rt *pg.ResTarget, ti int) error {
	s, err := c.outputScalar(rt)
	if err != nil {
		return err
	}
	name := rt.Name
	if name == "" {
		name = figureColname(rt.Val)
	}
	p.Output = append(p.Output, Output{Name: name, TypeOID: s.oid, TypeMod: s.typmod, Source: ExprSource, Column: -1, expr: s, target: ti})
	c.outRefs = append(c.outRefs, nil)
	c.outExprs = append(c.outExprs, s)
	return nil
}

// outputScalar compiles a select list item's expression.
func (c *compiler) outputScalar(rt *pg.ResTarget) (*scalar, error) {
	s, err := c.sexpr(rt.Val)
	if err != nil {
		var rf *Refusal
		if errors.As(err, &rf) && rf.Code == CodeExpression && strings.Contains(rf.Message, "in an expression") {
			rf.Code = CodeTargetList
		}
		return nil, err
	}
	if s.u != nil {
		// An untyped literal or bind in the select list is text.
		if err := c.settleScalar(s, change.OIDText); err != nil {
			return nil, err
		}
	}
	if err := c.outputType(s, rt.Location); err != nil {
		return nil, err
	}
	return s, nil
}

// outputType refuses a computed value whose type the result cannot carry.
func (c *compiler) outputType(s *scalar, loc int32) error {
	if _, ok := change.BuiltinType(s.oid); !ok || familyOf(s.oid) == famNone {
		return refusalAt(loc, CodeType, "a computed %s value is not supported", typeName(s.oid))
	}
	return nil
}

// figureColname is PostgreSQL's FigureColname: the name an output
// without an alias gets.
func figureColname(n *pg.Node) string {
	switch x := n.Node.(type) {
	case *pg.Node_ColumnRef:
		f := x.ColumnRef.Fields
		if len(f) > 0 {
			if s, ok := strVal(f[len(f)-1]); ok {
				return s
			}
		}
	case *pg.Node_FuncCall:
		f := x.FuncCall.Funcname
		if len(f) > 0 {
			if s, ok := strVal(f[len(f)-1]); ok {
				return s
			}
		}
	case *pg.Node_AExpr:
		if x.AExpr.Kind == pg.A_Expr_Kind_AEXPR_NULLIF {
			return "nullif"
		}
	case *pg.Node_TypeCast:
		if name := figureColname(x.TypeCast.Arg); name != "?column?" {
			return name
		}
		if tn := x.TypeCast.TypeName; tn != nil && len(tn.Names) > 0 {
			if s, ok := strVal(tn.Names[len(tn.Names)-1]); ok {
				return s
			}
		}
	case *pg.Node_CaseExpr:
		return "case"
	case *pg.Node_CoalesceExpr:
		return "coalesce"
	case *pg.Node_MinMaxExpr:
		if x.MinMaxExpr.Op == pg.MinMaxOp_IS_GREATEST {
			return "greatest"
		}
		return "least"
	}
	return "?column?"
}

func (c *compiler) addOutput(p *Plan, r *colRef, name string) {
	col := c.column(r)
	p.Output = append(p.Output, Output{Name: name, TypeOID: col.TypeOID, TypeMod: col.TypeMod, Source: int(r.src)})
	c.outRefs = append(c.outRefs, r)
	c.outExprs = append(c.outExprs, nil)
}

func isCountStar(f *pg.FuncCall) bool {
	if len(f.Funcname) == 0 {
		return false
	}
	name, _ := strVal(f.Funcname[len(f.Funcname)-1])
	return strings.EqualFold(name, "count") && f.AggStar && !f.AggDistinct && f.AggFilter == nil && f.Over == nil &&
		len(f.AggOrder) == 0 && !f.AggWithinGroup && len(f.Args) == 0
}

var aggregates = map[string]bool{"count": true, "sum": true, "avg": true, "min": true, "max": true, "array_agg": true,
	"string_agg": true, "bool_and": true, "bool_or": true, "every": true, "json_agg": true, "jsonb_agg": true,
	"json_object_agg": true, "jsonb_object_agg": true, "bit_and": true, "bit_or": true, "bit_xor": true,
	"stddev": true, "stddev_pop": true, "stddev_samp": true, "variance": true, "var_pop": true, "var_samp": true,
	"percentile_cont": true, "percentile_disc": true, "mode": true, "xmlagg": true, "range_agg": true, "range_intersect_agg": true,
	"corr": true, "covar_pop": true, "covar_samp": true, "regr_avgx": true, "regr_avgy": true, "regr_count": true,
	"regr_intercept": true, "regr_r2": true, "regr_slope": true, "regr_sxx": true, "regr_sxy": true, "regr_syy": true}

var volatiles = map[string]bool{"now": true, "random": true, "clock_timestamp": true, "statement_timestamp": true,
	"transaction_timestamp": true, "timeofday": true, "gen_random_uuid": true, "uuid_generate_v1": true,
	"uuid_generate_v4": true, "nextval": true, "currval": true, "lastval": true, "setval": true, "txid_current": true,
	"pg_current_xact_id": true, "pg_backend_pid": true, "random_normal": true, "setseed": true, "age": true,
	"current_setting": true, "pg_sleep": true, "inet_client_addr": true, "pg_postmaster_start_time": true}

// unsupported returns the refusal for an expression node that is not
// supported where it stands.
func (c *compiler) unsupported(n *pg.Node, where string) error {
	loc := int32(-1)
	switch x := n.Node.(type) {
	case *pg.Node_SubLink:
		sl := x.SubLink
		switch {
		case c.subq > 0:
			return refusalAt(sl.Location, CodeSubquery, "a subquery inside a subquery is not supported (%s)", c.snippet(n))
		case sl.SubLinkType == pg.SubLinkType_ANY_SUBLINK || sl.SubLinkType == pg.SubLinkType_ALL_SUBLINK && (opName(sl.OperName) == "<>" || opName(sl.OperName) == "!="):
			nor := ""
			if where != "in WHERE" {
				nor = ", nor " + where
			}
			return refusalAt(sl.Location, CodeSubquery, "IN and NOT IN (subquery) are supported only as conditions ANDed with the rest of WHERE (not under OR or NOT%s): %s", nor, c.snippet(n))
		case sl.SubLinkType == pg.SubLinkType_EXISTS_SUBLINK:
			return refusalAt(sl.Location, CodeSubquery, "EXISTS (subquery) is not supported; write column IN (SELECT ...) (%s)", c.snippet(n))
		case sl.SubLinkType == pg.SubLinkType_EXPR_SUBLINK:
			return refusalAt(sl.Location, CodeSubquery, "a scalar subquery (a SELECT used as a value) is not supported (%s)", c.snippet(n))
		case sl.SubLinkType == pg.SubLinkType_ALL_SUBLINK:
			return refusalAt(sl.Location, CodeSubquery, "%s ALL (subquery) is not supported; only <> ALL (subquery), which is NOT IN (%s)", opName(sl.OperName), c.snippet(n))
		case sl.SubLinkType == pg.SubLinkType_ARRAY_SUBLINK:
			return refusalAt(sl.Location, CodeSubquery, "ARRAY(subquery) is not supported (%s)", c.snippet(n))
		}
		return refusalAt(sl.Location, CodeSubquery, "subqueries are not supported (%s: %s)", where, c.snippet(n))
	case *pg.Node_FuncCall:
		f := x.FuncCall
		name := ""
		if len(f.Funcname) > 0 {
			name, _ = strVal(f.Funcname[len(f.Funcname)-1])
		}
		lname := strings.ToLower(name)
		switch {
		case f.Over != nil:
			return refusalAt(f.Location, CodeWindow, "window functions are not supported (%s(...) OVER ...)", name)
		case aggregates[lname]:
			return refusalAt(f.Location, CodeAggregate, "aggregate %s() is not supported %s (aggregates go in the select list, HAVING and ORDER BY)", name, where)
		case lname == "now" || lname == "transaction_timestamp":
			return refusalAt(f.Location, CodeClock, "%s() is served only in a WHERE condition of the form column > now() - interval '...' (also <, <=, >=, BETWEEN), ANDed with the rest; not %s", name, where)
		case volatiles[lname]:
			return refusalAt(f.Location, CodeVolatile, "%s() is volatile or depends on the time; its result cannot be kept fresh", name)
		}
		return refusalAt(f.Location, CodeFunction, "function %s() is not supported", name)
	case *pg.Node_SqlvalueFunction:
		switch x.SqlvalueFunction.Op {
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_DATE, pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP, pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP:
			return refusalAt(x.SqlvalueFunction.Location, CodeClock, "%s is served only in a WHERE condition of the form column > %s - interval '...' (also <, <=, >=, BETWEEN), ANDed with the rest; not %s", c.snippet(n), c.snippet(n), where)
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_TIME, pg.SQLValueFunctionOp_SVFOP_CURRENT_TIME_N,
			pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP_N,
			pg.SQLValueFunctionOp_SVFOP_LOCALTIME, pg.SQLValueFunctionOp_SVFOP_LOCALTIME_N,
			pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP_N:
			return refusalAt(x.SqlvalueFunction.Location, CodeVolatile, "%s depends on the time; its result cannot be kept fresh", c.snippet(n))
		}
		return refusalAt(x.SqlvalueFunction.Location, CodeFunction, "%s is not supported", c.snippet(n))
	case *pg.Node_CollateClause:
		return refusalAt(x.CollateClause.Location, CodeCollation, "COLLATE is not supported")
	case *pg.Node_ColumnRef:
		return refusalAt(x.ColumnRef.Location, CodeExpression, "column %s is not supported %s", c.snippet(n), where)
	case *pg.Node_TypeCast:
		loc = x.TypeCast.Location
	case *pg.Node_CaseExpr:
		return refusalAt(x.CaseExpr.Location, CodeExpression, "CASE is not supported")
	case *pg.Node_CoalesceExpr:
		return refusalAt(x.CoalesceExpr.Location, CodeFunction, "COALESCE is not supported")
	case *pg.Node_MinMaxExpr:
		return refusalAt(x.MinMaxExpr.Location, CodeFunction, "GREATEST/LEAST are not supported")
	case *pg.Node_RowExpr:
		return refusalAt(x.RowExpr.Location, CodeExpression, "row constructors are not supported")
	case *pg.Node_AExpr:
		loc = x.AExpr.Location
		switch x.AExpr.Kind {
		case pg.A_Expr_Kind_AEXPR_OP:
			return refusalAt(loc, CodeOperator, "operator %s is not supported (%s: %s)", opName(x.AExpr.Name), where, c.snippet(n))
		case pg.A_Expr_Kind_AEXPR_NULLIF:
			return refusalAt(loc, CodeFunction, "NULLIF is not supported")
		}
	case *pg.Node_AIndirection:
		return refuse(CodeExpression, "subscripts and field selection are not supported")
	}
	return refusalAt(loc, CodeExpression, "%s is not supported %s", c.snippet(n), where)
}

// order reads ORDER BY: columns (or output names or positions) only.
func (c *compiler) order(p *Plan, list []*pg.Node) error {
	if len(list) > 0 && p.Count {
		return refuse(CodeOrderBy, "ORDER BY with COUNT(*) is not supported")
	}
	for item, n := range list {
		sb := n.GetSortBy()
		if sb == nil {
			return refuse(CodeOrderBy, "this ORDER BY item is not supported")
		}
		if sb.SortbyDir == pg.SortByDir_SORTBY_USING {
			return refusalAt(sb.Location, CodeOrderBy, "ORDER BY ... USING is not supported")
		}
		var r *colRef
		var sx *scalar // an expression key
		target := -1
		switch x := sb.Node.Node.(type) {
		case *pg.Node_AConst:
			iv := x.AConst.GetIval()
			if iv == nil {
				return refusalAt(x.AConst.Location, CodeOrderBy, "ORDER BY a constant is not supported")
			}
			k := int(iv.Ival)
			if k < 1 || k > len(p.Output) || c.outRefs[k-1] == nil && c.outExprs[k-1] == nil {
				return refusalAt(x.AConst.Location, CodeOrderBy, "ORDER BY position %d is not in the select list", k)
			}
			r, sx = c.outRefs[k-1], c.outExprs[k-1]
			if sx != nil {
				target = p.Output[k-1].target
			}
		case *pg.Node_ColumnRef:
			// A bare name matches an output column's name first, as
			// PostgreSQL does.
			if len(x.ColumnRef.Fields) == 1 {
				if name, ok := strVal(x.ColumnRef.Fields[0]); ok {
					matched := -1
					for i, o := range p.Output {
						if o.Name != name || c.outRefs[i] == nil && c.outExprs[i] == nil {
							continue
						}
						if matched >= 0 {
							a, b := c.outRefs[matched], c.outRefs[i]
							if a == nil || b == nil || a.src != b.src || a.cat != b.cat {
								return refusalAt(x.ColumnRef.Location, CodeOrderBy, "ORDER BY %q is ambiguous", name)
							}
						}
						matched = i
					}
					if matched >= 0 {
						r, sx = c.outRefs[matched], c.outExprs[matched]
						if sx != nil {
							target = p.Output[matched].target
						}
					}
				}
			}
			if r == nil && sx == nil {
				src, cat, star, err := c.resolveColumn(x.ColumnRef)
				if err != nil {
					return err
				}
				if star {
					return refusalAt(x.ColumnRef.Location, CodeOrderBy, "ORDER BY * is not supported")
				}
				r = c.ref(src, cat)
			}
		default:
			var err error
			if sx, err = c.sexpr(sb.Node); err != nil {
				var rf *Refusal
				if errors.As(err, &rf) && rf.Code == CodeExpression {
					rf.Code = CodeOrderBy
					rf.Message = fmt.Sprintf("ORDER BY %s is not supported: %s", c.snippet(sb.Node), rf.Message)
				}
				return err
			}
			if sx.u != nil {
				return refusalAt(sb.Location, CodeOrderBy, "ORDER BY a constant is not supported")
			}
		}
		if sx != nil {
			if err := c.orderType(sx, sb.Location); err != nil {
				return err
			}
			k := OrderKey{Source: ExprSource, Column: -1, Desc: sb.SortbyDir == pg.SortByDir_SORTBY_DESC, expr: sx, target: target, item: item}
			k.NullsFirst = nullsFirst(sb, k.Desc)
			p.Order = append(p.Order, k)
			c.orderRefs = append(c.orderRefs, nil)
			continue
		}
		col := c.column(r)
		f := c.colFamily(col)
		switch f {
		case famNone, famJSON, famArray, famUnknown:
			return refusalAt(sb.Location, CodeType, "ORDER BY a %s column (%s) is not supported", col.Type.Name, col.Name)
		case famEnum:
			return refusalAt(sb.Location, CodeType, "ORDER BY an enum column (%s) is not supported", col.Name)
		case famText:
			if col.Collation.OID != 0 && !col.Collation.Bytewise() {
				return refusalAt(sb.Location, CodeCollation, "ORDER BY %s under collation %q (%s) is not supported: only bytewise collations (C, POSIX, C.UTF-8) are reproduced",
					col.Name, col.Collation.Name, col.Collation.Collate)
			}
		}
		k := OrderKey{Source: int(r.src), Desc: sb.SortbyDir == pg.SortByDir_SORTBY_DESC, target: -1, item: item}
		k.NullsFirst = nullsFirst(sb, k.Desc)
		p.Order = append(p.Order, k)
		c.orderRefs = append(c.orderRefs, r)
	}
	return nil
}

// nullsFirst is where a key's NULLs go: as written, else first for DESC
// and last for ASC.
func nullsFirst(sb *pg.SortBy, desc bool) bool {
	switch sb.SortbyNulls {
	case pg.SortByNulls_SORTBY_NULLS_FIRST:
		return true
	case pg.SortByNulls_SORTBY_NULLS_LAST:
		return false
	}
	return desc
}

// orderType refuses ordering by an expression whose type or collation
// has no order reproduced here.
func (c *compiler) orderType(s *scalar, loc int32) error {
	switch f := familyOf(s.oid); f {
	case famNone, famJSON, famArray, famUnknown, famEnum:
		return refusalAt(loc, CodeType, "ORDER BY a %s expression is not supported", typeName(s.oid))
	case famText:
		if coll := c.textColl(s.oid, s.coll); !coll.Bytewise() {
			return refusalAt(loc, CodeCollation, "ORDER BY a text expression under collation %q (%s) is not supported: only bytewise collations (C, POSIX, C.UTF-8) are reproduced",
				coll.Name, coll.Collate)
		}
	}
	return nil
}

// limits reads LIMIT and OFFSET: constants, binds, or casts of them.
func (c *compiler) limits(p *Plan) error {
	get := func(n *pg.Node, what string) (int64, bool, error) {
		if n == nil {
			return 0, false, nil
		}
		o, err := c.constant(n)
		if err != nil {
			return 0, false, err
		}
		if err := c.settle(&o, change.OIDInt8); err != nil {
			return 0, false, err
		}
		if o.val == nil {
			return 0, false, nil
		}
		if familyOf(o.oid) != famInt {
			return 0, false, refuse(CodeLimit, "%s must be an integer, not %s", what, typeName(o.oid))
		}
		v := o.val.(int64)
		if v < 0 {
			return 0, false, refuse(CodeLimit, "%s must not be negative", what)
		}
		return v, true, nil
	}
	lim, ok, err := get(c.sel.LimitCount, "LIMIT")
	if err != nil {
		return err
	}
	if ok {
		p.Limit = lim
	}
	off, _, err := get(c.sel.LimitOffset, "OFFSET")
	if err != nil {
		return err
	}
	p.Offset = off
	return nil
}
