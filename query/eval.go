package query

import "math"

// Eval evaluates the WHERE clause over a joined row: True when PostgreSQL
// keeps the row, False or Unknown when it does not. A query without WHERE
// is True for every row. Join conditions are not part of it: the engine
// forms joined rows with Source.On.
//
// For a plan that Raises, a row whose evaluation would raise an error is
// Unknown here; use EvalRow to learn of it.
func (p *Plan) Eval(row Row) Tri {
	if p.filter == nil {
		return True
	}
	if p.raises {
		t, err := p.evalFilter(row)
		if err != nil {
			return Unknown
		}
		return t
	}
	return p.filter.eval(row, p.vals)
}

// EvalSource evaluates the subquery's WHERE of a semi-joined source
// (Sources[i].Join is JoinSemi or JoinAnti) over one row of its table, vals in the
// source's Columns order: True when the subquery keeps the row. It is
// True for a source without a WHERE of its own. Such a WHERE never
// raises (Compile refuses one that could).
func (p *Plan) EvalSource(i int, vals []any) Tri {
	if i < 0 || i >= len(p.Sources) || p.Sources[i].filter == nil {
		return True
	}
	row := make(Row, len(p.Sources))
	row[i] = vals
	return p.Sources[i].filter.eval(row, p.vals)
}

// Compare orders two rows by the ORDER BY keys as PostgreSQL would: it
// returns a negative number when a sorts first, positive when b does, and 0
// when they tie on every key. PostgreSQL returns tied rows in an unspecified
// order, so results must be compared as multisets within each tie group
// (and a LIMIT cutting through a tie group may keep any of its rows).
func (p *Plan) Compare(a, b Row) int {
	if p.Agg != nil {
		return p.Agg.Post.Compare(a, b)
	}
	for _, k := range p.Order {
		var oid uint32
		var x, y any
		if k.expr != nil {
			oid = k.expr.oid
			x, y = evalQuiet(k.expr, a), evalQuiet(k.expr, b)
		} else {
			oid = p.Sources[k.Source].Columns[k.Column].TypeOID
			x, y = cell(a, k.Source, k.Column), cell(b, k.Source, k.Column)
		}
		var c int
		switch {
		case x == nil && y == nil:
			continue
		case x == nil:
			if k.NullsFirst {
				return -1
			}
			return 1
		case y == nil:
			if k.NullsFirst {
				return 1
			}
			return -1
		default:
			c = CompareValues(oid, x, y)
		}
		if c != 0 {
			if k.Desc {
				return -c
			}
			return c
		}
	}
	return 0
}

// CompareWindow is Compare with ties broken by each source's primary key in
// source order, ascending, a null-extended source sorting after any row: a
// total order for the engine's window bookkeeping, the order Render's
// Window option asks PostgreSQL for.
func (p *Plan) CompareWindow(a, b Row) int {
	if p.Agg != nil {
		return p.Agg.Post.CompareWindow(a, b)
	}
	if c := p.Compare(a, b); c != 0 {
		return c
	}
	for i, s := range p.Sources {
		for j := 0; j < s.KeyN; j++ {
			x, y := cell(a, i, j), cell(b, i, j)
			switch {
			case x == nil && y == nil:
				continue
			case x == nil:
				return 1
			case y == nil:
				return -1
			}
			if c := CompareValues(s.Columns[j].TypeOID, x, y); c != 0 {
				return c
			}
		}
	}
	return 0
}

func cell(r Row, src, col int) any {
	if r[src] == nil {
		return nil
	}
	return r[src][col]
}

// Project returns the output values of a joined row, in Output order (not
// for COUNT plans; for a plan with Agg, of a group row, as Compare and
// CompareWindow compare group rows), computed columns evaluated (a value that would raise
// is nil here: check rows with EvalRow or Check first).
func (p *Plan) Project(row Row) []any {
	if p.Agg != nil {
		return p.Agg.Post.Project(row)
	}
	return p.ProjectTo(make([]any, len(p.Output)), row)
}

// ProjectTo is Project into out, which must have len(p.Output) slots (not
// for plans with Agg or COUNT); it returns out.
func (p *Plan) ProjectTo(out []any, row Row) []any {
	for i, o := range p.Output {
		switch {
		case o.Source >= 0:
			out[i] = cell(row, o.Source, o.Column)
		case o.expr != nil:
			out[i] = evalQuiet(o.expr, row)
		default:
			out[i] = nil
		}
	}
	return out
}

// Args returns the binds in the form pgconn's ExecParams takes them:
// values, type OIDs (where the client left a type to be inferred, the type
// Compile inferred) and format codes.
func (p *Plan) Args() (values [][]byte, oids []uint32, formats []int16) {
	values = make([][]byte, len(p.Binds))
	oids = make([]uint32, len(p.Binds))
	formats = make([]int16, len(p.Binds))
	for i, b := range p.Binds {
		values[i] = b.Data
		oids[i] = b.OID
		if oids[i] == 0 && i < len(p.ParamOIDs) {
			oids[i] = p.ParamOIDs[i]
		}
		formats[i] = int16(b.Format)
	}
	return values, oids, formats
}

// WindowEnd is OFFSET+LIMIT+margin: how many rows, in window order, a
// window reaches to, with margin rows held past it. The sum saturates at
// math.MaxInt64 rather than wrapping (OFFSET and LIMIT each go up to
// 2^63-1, and an application's LIMIT $1 is the user's page size). Without
// a LIMIT it is math.MaxInt64. A negative margin counts as 0.
func (p *Plan) WindowEnd(margin int64) int64 {
	if p.Limit < 0 {
		return math.MaxInt64
	}
	return satAdd(satAdd(p.Offset, p.Limit, math.MaxInt64), max(margin, 0), math.MaxInt64)
}

// OrderOutput returns the index of the output column ORDER BY key i sorts
// by, or -1 when the query sorts by something it does not output (a
// column not selected, or an expression other than an output's).
func (p *Plan) OrderOutput(i int) int {
	k := p.Order[i]
	for j, out := range p.Output {
		switch {
		case k.expr != nil:
			if out.expr != nil && k.target >= 0 && out.target == k.target {
				return j
			}
		case out.Source >= 0 && out.Source == k.Source && out.Column == k.Column:
			return j
		}
	}
	return -1
}
