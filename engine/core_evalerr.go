package engine

import "github.com/freshetdb/freshet/query"

// A query whose expressions can raise (query.Plan.Raises: integer
// overflow, division by zero, a failed cast) is one PostgreSQL's own read
// fails on as soon as a row it evaluates raises. The view evaluates every
// row it is given with EvalRow; the first that raises ends its
// subscriptions with query.CodeEvalError (retryable: the data may change)
// before anything of that transaction is emitted, rather than serving a
// result PostgreSQL would not give. A hydration or refill read fails the
// same way, by PostgreSQL's own error (readCode) or, for the values only
// Freshet computes, by Check on each row read.

// keeps reports whether the plan's filter keeps q; a row PostgreSQL would
// raise an error for is not kept and marks the view to be ended.
func (v *view) keeps(q query.Row) bool {
	if v.x().clk != nil {
		keep, _ := v.clockEval(q)
		return keep
	}
	t, err := v.plan.EvalRow(q)
	if err != nil {
		if v.x().evalErr == nil {
			v.mut().evalErr = err
		}
		return false
	}
	return t == query.True
}

// checkRows runs Check on every row of rs (rows a read returned, which
// PostgreSQL filtered but whose computed columns only Freshet computes;
// st: where rs's ids are).
func (v *view) checkRows(rs *resultSet, st *rowTable) {
	if !v.plan.Raises() || v.x().evalErr != nil {
		return
	}
	for id := range rs.members.all() {
		if err := v.plan.Check(v.idRow(st, id)); err != nil {
			v.mut().evalErr = err
			return
		}
	}
	for e := range rs.result.all() {
		if err := v.plan.Check(v.queryRow(e)); err != nil {
			v.mut().evalErr = err
			return
		}
	}
}

// endEvalError ends v's subscriptions if one of its rows raised; it
// reports whether it did.
func (s *state) endEvalError(v *view) bool {
	if v.x().evalErr == nil || v.status == viewDead {
		return false
	}
	err := v.x().evalErr
	v.dropEvalErr()
	s.endView(v, query.CodeEvalError, "PostgreSQL would fail this query: "+err.Error(), true)
	return true
}
