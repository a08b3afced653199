package query

import (
	"encoding/binary"
	"fmt"
	"strconv"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// A compiled plan is a Template shared by the plans of its shape and the
// plan's own values (Plan.vals): Compile builds the whole plan with its
// values in place, derives its constraints from them, then moves every
// constant of the filter and every constraint value into the plan's values
// (slots), leaving the template with slots in their place. A template
// already held for the shape is taken instead when it is the same as this
// one in everything but the values (sameTemplate), so the plans that share
// it evaluate exactly as each would with its own.

// slotRef is a constraint value of a template: the plan's value vals[slotRef].
type slotRef int32

// Constraints are the constraints of source i (see Constraint): they hold
// for every row of that table that can affect the result (all of them at
// once); none means unconstrained. They are derived from the WHERE clause
// only where that is safe: a column constrained in every alternative of
// the filter. For a Nullable source they are given only when the filter
// rejects the null-extended row (otherwise a row of this table can change
// the result by merely existing). IN value sets are also carried across
// the ON equalities between columns of one type: from a source to the
// sources joined to it (INNER or LEFT), and back from an INNER-joined
// source to the one it joins, so `t.id = $1` and `c.ticket_id = t.id`
// constrain c.ticket_id to $1; a LEFT-joined source's constraints never
// narrow the sources it is joined to.
//
// The template holds the constraints of its shape with the plan's values
// in slots: Constraints returns them with the plan's values in place, in a
// slice of its own (read it once where it is needed, not per row).
func (p *Plan) Constraints(i int) []Constraint {
	if i >= len(p.cons) {
		return nil
	}
	cs := p.cons[i]
	if !p.slotted || len(cs) == 0 {
		return cs
	}
	out := make([]Constraint, len(cs))
	for j, c := range cs {
		out[j] = c
		if c.Values != nil {
			vs := make([]any, len(c.Values))
			for k, x := range c.Values {
				vs[k] = p.vals[x.(slotRef)]
			}
			out[j].Values = vs
		}
		if c.Ranges != nil {
			rs := make([]Range, len(c.Ranges))
			for k, r := range c.Ranges {
				rs[k] = r
				if r.Low != nil {
					rs[k].Low = p.vals[r.Low.(slotRef)]
				}
				if r.High != nil {
					rs[k].High = p.vals[r.High.(slotRef)]
				}
			}
			out[j].Ranges = rs
		}
	}
	return out
}

// slotter moves a plan's constants into its values.
type slotter struct {
	vals []any
	// at is the slot of each value of a type compared exactly by == (an
	// integer, a string, a bool) already held: a constant equal to a bind
	// (price = $1, its constraint) takes the bind's slot.
	at map[any]int32
}

// slot returns the 0-based slot holding v, adding it when none does.
func (s *slotter) slot(v any) int32 {
	if exact(v) {
		if i, ok := s.at[v]; ok {
			return i
		}
	}
	s.vals = append(s.vals, v)
	s.remember(v, int32(len(s.vals)-1))
	return int32(len(s.vals) - 1)
}

// remember notes that slot i holds v, when v is compared by == exactly
// and no slot holds it yet.
func (s *slotter) remember(v any, i int32) {
	if !exact(v) {
		return
	}
	if _, ok := s.at[v]; ok {
		return
	}
	if s.at == nil {
		s.at = make(map[any]int32)
	}
	s.at[v] = i
}

// exact reports whether v is of a type whose == is equality of values
// (not a float, where -0 == 0, nor a value holding pointers).
func exact(v any) bool {
	switch v.(type) {
	case int64, string, bool:
		return true
	}
	return false
}

// operand moves a constant operand's value into a slot.
func (s *slotter) operand(o *operand) {
	if o.col != nil || o.sx != nil || o.slot > 0 {
		return
	}
	o.slot = s.slot(o.val) + 1
	o.val = nil
}

// expr moves the constants of e's comparisons (not those inside
// expressions, IN lists or patterns, which stay in the template) into
// slots.
func (s *slotter) expr(e *expr) {
	if e == nil {
		return
	}
	for _, a := range e.args {
		s.expr(a)
	}
	switch e.op {
	case opCmp, opDistinct:
		s.operand(&e.l)
		s.operand(&e.r)
	case opIsNull, opIn, opAnyAll, opAnyArray:
		s.operand(&e.l)
	}
}

// constraints returns cs with its values moved into slots.
func (s *slotter) constraints(cs []Constraint) []Constraint {
	if len(cs) == 0 {
		return cs
	}
	out := make([]Constraint, len(cs))
	for j, c := range cs {
		out[j] = c
		if c.Values != nil {
			vs := make([]any, len(c.Values))
			for k, x := range c.Values {
				vs[k] = slotRef(s.slot(x))
			}
			out[j].Values = vs
		}
		if c.Ranges != nil {
			rs := make([]Range, len(c.Ranges))
			for k, r := range c.Ranges {
				rs[k] = r
				if r.Low != nil {
					rs[k].Low = slotRef(s.slot(r.Low))
				}
				if r.High != nil {
					rs[k].High = slotRef(s.slot(r.High))
				}
			}
			out[j].Ranges = rs
		}
	}
	return out
}

// slots moves p's constants into p's values, the decoded binds first.
func (c *compiler) slots(p *Plan) {
	// Each bind has its slot, in order (Params), even when two are equal.
	s := &slotter{vals: make([]any, 0, len(c.params)+2)}
	for i, v := range c.params {
		s.vals = append(s.vals, v)
		s.remember(v, int32(i))
	}
	s.expr(p.filter)
	for _, src := range p.Sources {
		s.expr(src.filter)
	}
	for i, cs := range p.cons {
		p.cons[i] = s.constraints(cs)
	}
	p.slotted = true
	p.vals = append([]any(nil), s.vals...)
}

// sameTemplate reports whether plans of templates a and b, each with its
// own values, are the same plan but for those values: every field is
// equal, the filters are the same tree with the same slots, and the
// constraints the same with the same slots. Parts a template holds by
// pointer (expressions, IN lists and patterns, a grouping, clock bounds)
// are the same only when shared.
func sameTemplate(a, b *Template) bool {
	if a == b {
		return true
	}
	if !a.slotted || !b.slotted {
		return false
	}
	if a.Text != b.Text || a.lits != b.lits || a.Limit != b.Limit || a.Offset != b.Offset || a.Count != b.Count ||
		a.raises != b.raises || a.Agg != b.Agg ||
		len(a.Clock) != len(b.Clock) || len(a.Clock) > 0 && &a.Clock[0] != &b.Clock[0] ||
		!equalSlices(a.ParamOIDs, b.ParamOIDs) || !equalSlices(a.Output, b.Output) || !equalSlices(a.Order, b.Order) ||
		len(a.Sources) != len(b.Sources) || len(a.cons) != len(b.cons) || !sameExpr(a.filter, b.filter) {
		return false
	}
	for i, s := range a.Sources {
		if s.SourceShape != b.Sources[i].SourceShape || !sameExpr(s.filter, b.Sources[i].filter) {
			return false
		}
	}
	for i, cs := range a.cons {
		if !sameConstraints(cs, b.cons[i]) {
			return false
		}
	}
	return true
}

func equalSlices[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sameExpr reports whether two filters are the same tree, comparing
// constants by slot (a constant left in place, by pointer: never equal
// unless shared).
func sameExpr(a, b *expr) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.op != b.op || a.fam != b.fam || a.cmp != b.cmp || a.negate != b.negate || a.any != b.any ||
		a.test != b.test || a.val != b.val || a.null != b.null || a.raises != b.raises ||
		a.arr != b.arr || a.elemOID != b.elemOID || a.set != b.set ||
		!sameOperand(&a.l, &b.l) || !sameOperand(&a.r, &b.r) || len(a.args) != len(b.args) {
		return false
	}
	for i, x := range a.args {
		if !sameExpr(x, b.args[i]) {
			return false
		}
	}
	return true
}

func sameOperand(a, b *operand) bool {
	if a.sx != b.sx || a.trim != b.trim || a.slot != b.slot || a.val != nil || b.val != nil {
		return false
	}
	if a.col == nil || b.col == nil {
		return a.col == b.col
	}
	return *a.col == *b.col
}

func sameConstraints(a, b []Constraint) bool {
	if len(a) != len(b) {
		return false
	}
	for i, x := range a {
		y := b[i]
		if x.Column != y.Column || x.Kind != y.Kind || x.Null != y.Null ||
			!equalSlices(x.Values, y.Values) || !equalSlices(x.Contains, y.Contains) || !equalSlices(x.Ranges, y.Ranges) {
			return false
		}
	}
	return true
}

// A where's literal constants are slots too. Compile compiles the
// statement as written, every literal in place (so each is typed and
// folded as PostgreSQL would for that statement alone), then, for the
// normalized text and the key only, lifts the literals that are direct
// operands of a comparison in WHERE (=, <>, <, <=, >, >=, IS [NOT]
// DISTINCT FROM, [NOT] BETWEEN, each maybe cast) out of the statement:
// the template's Text holds a parameter numbered after the binds in each
// one's place, and the plan's key holds each literal as written (its kind
// in the key's shape, its text in its binds part). Two statements that
// differ only in those literals thus have one shape; their plans share a
// template when sameTemplate finds them the same but for their values, as
// plans of distinct binds do. Normalized and Render put each literal back
// in the tree in its parameter's place before the deparser prints it, so
// the text PostgreSQL reads is the statement's own.

// liftLiterals is off in tests that compare plans with their literals in
// place against lifted ones.
var liftLiterals = true

// lift replaces the liftable literals of WHERE in the parse tree by
// parameters numbered after the binds and returns them in order, with
// their kinds (one byte each: 'i', 'f', 's', 'b').
func (c *compiler) lift(p *Plan) (lits []*pg.A_Const, kinds []byte) {
	if !liftLiterals || c.sel.WhereClause == nil || p.Agg != nil || len(p.Clock) > 0 {
		return nil, nil
	}
	var at []*pg.Node
	var walk func(n *pg.Node, d int)
	operand := func(n *pg.Node) {
		if n == nil {
			return
		}
		if tc := n.GetTypeCast(); tc != nil {
			n = tc.Arg
		}
		if a := n.GetAConst(); a != nil && !a.Isnull {
			switch a.Val.(type) {
			case *pg.A_Const_Ival, *pg.A_Const_Fval, *pg.A_Const_Sval, *pg.A_Const_Boolval:
				at = append(at, n)
			}
		}
	}
	walk = func(n *pg.Node, d int) {
		if n == nil || int64(d) > nestingCeiling {
			return
		}
		switch x := n.Node.(type) {
		case *pg.Node_BoolExpr:
			for _, a := range x.BoolExpr.Args {
				walk(a, d+1)
			}
		case *pg.Node_BooleanTest:
			walk(x.BooleanTest.Arg, d+1)
		case *pg.Node_AExpr:
			a := x.AExpr
			switch a.Kind {
			case pg.A_Expr_Kind_AEXPR_OP:
				if _, ok := cmpOps[opName(a.Name)]; !ok {
					return
				}
			case pg.A_Expr_Kind_AEXPR_DISTINCT, pg.A_Expr_Kind_AEXPR_NOT_DISTINCT:
			case pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN:
				operand(a.Lexpr)
				if l := a.Rexpr.GetList(); l != nil {
					for _, it := range l.Items {
						operand(it)
					}
				}
				return
			default:
				return
			}
			operand(a.Lexpr)
			operand(a.Rexpr)
		}
	}
	walk(c.sel.WhereClause, 0)
	for i, n := range at {
		a := n.GetAConst()
		lits = append(lits, a)
		switch a.Val.(type) {
		case *pg.A_Const_Ival:
			kinds = append(kinds, 'i')
		case *pg.A_Const_Fval:
			kinds = append(kinds, 'f')
		case *pg.A_Const_Sval:
			kinds = append(kinds, 's')
		default:
			kinds = append(kinds, 'b')
		}
		n.Node = &pg.Node_ParamRef{ParamRef: &pg.ParamRef{Number: int32(len(c.binds) + i + 1), Location: a.Location}}
	}
	return lits, kinds
}

// appendLiteral appends a lifted literal to a key: its text's length, then
// its text (an integer's or a number's digits as written, a string's
// value, t or f).
func appendLiteral(b []byte, a *pg.A_Const) []byte {
	var s string
	switch v := a.Val.(type) {
	case *pg.A_Const_Ival:
		s = strconv.FormatInt(int64(v.Ival.Ival), 10)
	case *pg.A_Const_Fval:
		s = v.Fval.Fval
	case *pg.A_Const_Sval:
		s = v.Sval.Sval
	case *pg.A_Const_Boolval:
		s = "f"
		if v.Boolval.Boolval {
			s = "t"
		}
	}
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// literals returns the plan's lifted literals, read from its key.
func (p *Plan) literals() []*pg.A_Const {
	out := make([]*pg.A_Const, len(p.lits))
	b := p.Key.binds
	for i, kind := range []byte(p.lits) {
		n, w := binary.Uvarint([]byte(b[:min(len(b), binary.MaxVarintLen64)]))
		s := b[w : w+int(n)]
		b = b[w+int(n):]
		a := &pg.A_Const{Location: -1}
		switch kind {
		case 'i':
			v, _ := strconv.ParseInt(s, 10, 32)
			a.Val = &pg.A_Const_Ival{Ival: &pg.Integer{Ival: int32(v)}}
		case 'f':
			a.Val = &pg.A_Const_Fval{Fval: &pg.Float{Fval: s}}
		case 's':
			a.Val = &pg.A_Const_Sval{Sval: &pg.String{Sval: s}}
		default:
			a.Val = &pg.A_Const_Boolval{Boolval: &pg.Boolean{Boolval: s == "t"}}
		}
		out[i] = a
	}
	return out
}

// restore puts the plan's lifted literals back in a parse of its Text, in
// their parameters' places.
func (p *Plan) restore(tree *pg.ParseResult) {
	if len(p.lits) == 0 {
		return
	}
	lits := p.literals()
	nb := int32(len(p.ParamOIDs))
	var visit func(m protoreflect.Message)
	visit = func(m protoreflect.Message) {
		if n, ok := m.Interface().(*pg.Node); ok {
			if pr := n.GetParamRef(); pr != nil && pr.Number > nb && int(pr.Number-nb) <= len(lits) {
				n.Node = &pg.Node_AConst{AConst: lits[pr.Number-nb-1]}
				return
			}
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.Message() == nil || fd.IsMap():
			case fd.IsList():
				l := v.List()
				for i := 0; i < l.Len(); i++ {
					visit(l.Get(i).Message())
				}
			default:
				visit(v.Message())
			}
			return true
		})
	}
	visit(tree.ProtoReflect())
}

// Normalized is the statement as PostgreSQL's deparser prints it, with
// table names schema-qualified: the same query written differently
// (spacing, case of keywords, quoting) normalizes the same. It is the
// template's Text with the plan's lifted literals back in place (parsed
// and printed again: meant for messages and tests, not for every read).
func (p *Plan) Normalized() string {
	if len(p.lits) == 0 {
		return p.Text
	}
	tree := p.parseText()
	s, err := pg.Deparse(tree)
	if err != nil {
		panic(fmt.Sprintf("query: deparse normalized %q: %v", p.Text, err))
	}
	return s
}

// parseText parses the template's Text and puts the plan's literals back.
func (p *Plan) parseText() *pg.ParseResult {
	tree, err := pg.Parse(p.Text)
	if err != nil || len(tree.Stmts) != 1 || tree.Stmts[0].Stmt.GetSelectStmt() == nil {
		// Text is the deparser's own output of a single SELECT; a failure
		// to read it back is a bug.
		panic(fmt.Sprintf("query: parse normalized %q: %v", p.Text, err))
	}
	p.restore(tree)
	return tree
}
