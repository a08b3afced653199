package query

import (
	"fmt"

	"github.com/freshetdb/freshet/change"
)

// EvalError is an error PostgreSQL would raise evaluating an expression
// on a row (integer out of range, division by zero, ...). Code is the
// SQLSTATE PostgreSQL reports, Message its message.
type EvalError struct {
	Code    string
	Message string
}

// Error returns the message with its SQLSTATE.
func (e *EvalError) Error() string {
	return fmt.Sprintf("%s (SQLSTATE %s)", e.Message, e.Code)
}

// raise aborts the evaluation of a row with PostgreSQL's error; the entry
// points (Plan.EvalRow, Plan.Check, ...) recover it.
func raise(code, format string, args ...any) {
	panic(&EvalError{Code: code, Message: fmt.Sprintf(format, args...)})
}

// The SQLSTATEs raised here.
const (
	stateOutOfRange      = "22003" // numeric_value_out_of_range
	stateDivisionByZero  = "22012" // division_by_zero
	stateSubstringLength = "22011" // substring_error
	stateInvalidText     = "22P02" // invalid_text_representation
	stateInvalidParam    = "22023" // invalid_parameter_value
	stateFeature         = "0A000" // feature_not_supported
	stateDatetimeRange   = "22008" // datetime_field_overflow
)

// recoverEval turns a raised EvalError back into an error; any other
// panic goes on.
func recoverEval(err *error) {
	if r := recover(); r != nil {
		if ee, ok := r.(*EvalError); ok {
			*err = ee
			return
		}
		panic(r)
	}
}

// sop is the kind of a scalar expression node.
type sop uint8

const (
	sCol      sop = iota // a column's value
	sConst               // a constant (val)
	sFunc                // fn over the evaluated args; NULL if any is NULL (strict)
	sCall                // fn over the evaluated args, NULLs passed (non-strict)
	sCase                // CASE: preds[i] → args[i], else args[len(preds)] (if present)
	sCoalesce            // the first non-NULL arg
	sPred                // a predicate's truth value as a bool
	sNullif              // args[0] unless it equals args[1] (pred compares them)
	sExtreme             // GREATEST (desc false) / LEAST of the non-NULL args
)

// scalar is a compiled value expression: its result has type oid (in
// change's typed form for that type, nil for NULL).
type scalar struct {
	op     sop
	oid    uint32
	typmod int32
	coll   Collation // the result's collation, for text
	col    *colRef
	val    any
	args   []*scalar
	preds  []*expr
	fn     func(args []any) any
	desc   bool // sExtreme: GREATEST
	raises bool // evaluating it can raise an EvalError
	cols   bool // it refers to a column
	// u is an operand whose type is not known yet (an untyped literal or
	// bind, NULL) while compiling: the context settles it.
	u *topnd
}

// eval computes the expression over row; it may raise.
func (s *scalar) eval(row Row) any {
	switch s.op {
	case sCol:
		vals := row[s.col.src]
		if vals == nil {
			return nil
		}
		return vals[s.col.idx]
	case sConst:
		return s.val
	case sFunc:
		// PostgreSQL evaluates every argument of a strict function
		// before it looks for NULLs: one that raises raises.
		var buf [4]any
		vals := buf[:0]
		null := false
		for _, a := range s.args {
			v := a.eval(row)
			if v == nil {
				if !s.raises {
					return nil
				}
				null = true
			}
			vals = append(vals, v)
		}
		if null {
			return nil
		}
		return s.fn(vals)
	case sCall:
		vals := make([]any, len(s.args))
		for i, a := range s.args {
			vals[i] = a.eval(row)
		}
		return s.fn(vals)
	case sCase:
		for i, p := range s.preds {
			if p.eval(row, nil) == True { // a scalar's predicates hold their constants: no slots
				return s.args[i].eval(row)
			}
		}
		if len(s.args) > len(s.preds) {
			return s.args[len(s.preds)].eval(row)
		}
		return nil
	case sCoalesce:
		for _, a := range s.args {
			if v := a.eval(row); v != nil {
				return v
			}
		}
		return nil
	case sPred:
		switch s.preds[0].eval(row, nil) {
		case True:
			return true
		case False:
			return false
		}
		return nil
	case sNullif:
		v := s.args[0].eval(row)
		if s.preds[0].eval(row, nil) == True {
			return nil
		}
		return v
	case sExtreme:
		var best any
		for _, a := range s.args {
			v := a.eval(row)
			if v == nil {
				continue
			}
			if best == nil {
				best = v
				continue
			}
			c := compareTyped(s.oid, v, best)
			if s.desc && c > 0 || !s.desc && c < 0 {
				best = v
			}
		}
		return best
	}
	panic("query: unknown scalar op")
}

// compareTyped orders two non-NULL values of type oid.
func compareTyped(oid uint32, a, b any) int {
	fam := familyOf(oid)
	x, _ := toFamily(a, oid, fam)
	y, _ := toFamily(b, oid, fam)
	return compareValues(x, y)
}

// walk calls fn on s and every node under it.
func (s *scalar) walk(fn func(*scalar)) {
	fn(s)
	for _, a := range s.args {
		a.walk(fn)
	}
}

// Computed outputs and order keys. An Output or OrderKey whose Source is
// ExprSource is computed by an expression over the row (Plan.Project,
// Plan.Compare evaluate it).
const ExprSource = -2

// Raises reports whether evaluating the plan on some row can raise an
// error PostgreSQL would raise (integer overflow, division by zero, a
// failed cast): the engine must then evaluate rows with EvalRow and
// Check, and end a subscription whose row raises (see docs/queries.md,
// "Expressions").
func (p *Plan) Raises() bool { return p.raises }

// EvalRow is Eval that also reports an error PostgreSQL would raise for
// the row: in the WHERE clause (every condition is evaluated when one of
// them can raise: PostgreSQL does not define their order), and, for a row
// the filter keeps, in the output and ORDER BY expressions.
func (p *Plan) EvalRow(row Row) (t Tri, err error) {
	if !p.raises {
		return p.Eval(row), nil
	}
	defer recoverEval(&err)
	t = True
	if p.filter != nil {
		t = p.filter.eval(row, p.vals)
	}
	if t == True {
		p.check(row)
	}
	return t, nil
}

// evalFilter evaluates the WHERE clause alone, reporting a raise.
func (p *Plan) evalFilter(row Row) (t Tri, err error) {
	defer recoverEval(&err)
	return p.filter.eval(row, p.vals), nil
}

// Check evaluates the output and ORDER BY expressions of a row the filter
// keeps and returns the error PostgreSQL would raise for it, if any.
func (p *Plan) Check(row Row) (err error) {
	if !p.raises {
		return nil
	}
	defer recoverEval(&err)
	p.check(row)
	return nil
}

func (p *Plan) check(row Row) {
	if g := p.Agg; g != nil {
		for _, k := range g.keys {
			if k.raises {
				k.eval(row)
			}
		}
		for i := range g.Aggs {
			if a := g.Aggs[i].arg; a != nil && a.raises {
				a.eval(row)
			}
		}
		return
	}
	for i := range p.Output {
		if sx := p.Output[i].expr; sx != nil && sx.raises {
			sx.eval(row)
		}
	}
	for i := range p.Order {
		if sx := p.Order[i].expr; sx != nil && sx.raises {
			sx.eval(row)
		}
	}
}

// evalQuiet evaluates s for Project and Compare, which cannot fail: a
// raising value is NULL there (EvalRow and Check report it).
func evalQuiet(s *scalar, row Row) (v any) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(*EvalError); !ok {
				panic(r)
			}
			v = nil
		}
	}()
	return s.eval(row)
}

// typedConst returns a constant node of type oid.
func typedConst(oid uint32, v any) *scalar {
	return &scalar{op: sConst, oid: oid, typmod: -1, val: v}
}

// isConst reports whether s is a settled constant.
func (s *scalar) isConst() bool { return s.op == sConst && s.u == nil }

// formatText is a value's text form as PostgreSQL's output function
// writes it.
func formatText(oid uint32, v any) string {
	s, err := change.FormatOID(oid, v, nil)
	if err != nil {
		panic(fmt.Sprintf("query: format %T as %s: %v", v, typeName(oid), err))
	}
	return s
}
