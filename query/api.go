package query

import (
	"context"
	"errors"
)

// errNotYet marks the parts of the API still being written.
var errNotYet = errors.New("query: not implemented yet")

type expr struct{}
type selectStmt struct{}

// Compile parses sql, decodes binds and resolves tables through
// opts.Catalog. It returns a Plan when the query is supported, a Refusal
// when it is not (or a bind is malformed), and an error only when it could
// not decide (the catalog failed, ctx ended).
func Compile(ctx context.Context, sql string, binds []Bind, opts Options) (*Plan, *Refusal, error) {
	return nil, nil, errNotYet
}

// Eval evaluates the WHERE clause over a joined row: True when PostgreSQL
// keeps the row, False or Unknown when it does not. A query without WHERE
// is True for every row. Join conditions are not part of it: the engine
// forms joined rows with Source.On.
func (p *Plan) Eval(row Row) Tri {
	return Unknown
}

// Compare orders two rows by the ORDER BY keys as PostgreSQL would: it
// returns a negative number when a sorts first, positive when b does, and 0
// when they tie on every key. PostgreSQL returns tied rows in an unspecified
// order, so results must be compared as multisets within each tie group
// (and a LIMIT cutting through a tie group may keep any of its rows).
func (p *Plan) Compare(a, b Row) int {
	return 0
}

// CompareWindow is Compare with ties broken by each source's primary key in
// source order (a null-extended source sorting after any row): a total
// order for the engine's window bookkeeping, the order Render's Window
// option asks PostgreSQL for.
func (p *Plan) CompareWindow(a, b Row) int {
	return 0
}

// Project returns the output values of a joined row, in Output order (not
// for COUNT plans).
func (p *Plan) Project(row Row) []any {
	return nil
}

// Render returns SQL the engine runs against PostgreSQL to read this
// query's rows (see RenderOptions), with $n parameters to pass with Args.
func (p *Plan) Render(o RenderOptions) string {
	return ""
}

// Args returns the binds in the form pgconn's ExecParams takes them:
// values, type OIDs (0 where the client left the type to be inferred is
// replaced by the resolved one) and format codes.
func (p *Plan) Args() (values [][]byte, oids []uint32, formats []int16) {
	return nil, nil, nil
}

// AppendKey appends to dst an encoding of v, a value of type typeOID in
// change's typed form, such that two values of types in the same family
// (integers; text types, bpchar with trailing spaces dropped; ...) have
// equal encodings exactly when PostgreSQL's = says they are equal under a
// deterministic collation: 1.0 and 1.00 as numeric, 0 and -0 as float8,
// '1 mon' and '30 days' as interval. NULL (nil) has its own encoding.
func AppendKey(dst []byte, typeOID uint32, v any) []byte {
	return dst
}

// CompareValues orders two non-NULL values of type typeOID as PostgreSQL's
// btree operators do (bytewise for text: it is only meaningful under a
// bytewise collation).
func CompareValues(typeOID uint32, a, b any) int {
	return 0
}
