package query

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
	if a.Normalized != b.Normalized || a.Limit != b.Limit || a.Offset != b.Offset || a.Count != b.Count ||
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
