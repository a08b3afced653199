package query

import (
	"context"

	"github.com/freshetdb/freshet/change"
)

// Format is the format of a bind's bytes, as in the extended query
// protocol's parameter format codes.
type Format int16

// The bind formats.
const (
	FormatText   Format = 0
	FormatBinary Format = 1
)

// Bind is one parameter value as a client sends it in a Bind message.
type Bind struct {
	// OID is the parameter's type; 0 lets the server infer it (here: from
	// the column the parameter is compared with, as PostgreSQL would).
	OID    uint32
	Format Format
	Data   []byte // nil is SQL NULL
}

// Options tune Compile. Start from DefaultOptions: the zero value of a limit
// means "no limit".
type Options struct {
	// Catalog resolves tables. Required.
	Catalog Catalog
	// SearchPath is the list of schemas unqualified table names are looked
	// up in, in order. Empty means {"public"}.
	SearchPath []string
	// MaxAlternatives refuses a filter whose disjunctive normal form would
	// have more alternatives (counted without expanding it). 0 lifts it.
	MaxAlternatives int
	// MaxInValues refuses a query with more IN / NOT IN / ANY / ALL values
	// in total (list items and array elements). 0 lifts it.
	MaxInValues int
	// MaxSQLLength refuses longer SQL text, in bytes, before parsing it.
	// 0 lifts it.
	MaxSQLLength int
	// MaxDepth refuses expressions nested deeper than this. 0 lifts it
	// (a fixed ceiling, which PostgreSQL's parser survives, still holds).
	MaxDepth int
	// Publication, when set, refuses tables it does not carry
	// (CodeNotPublished, retryable): their changes never reach the
	// stream, so an answer would never be updated. Nil checks nothing.
	// Tables of system schemas are refused whatever it says.
	Publication Publication
}

// Publication says which tables the change stream carries.
type Publication interface {
	// Publishes reports whether changes to t reach the stream under t's
	// own OID. An error ends the compilation with it.
	Publishes(ctx context.Context, t *Table) (bool, error)
	// Name is the publication's name, for messages.
	Name() string
}

// Default limits.
const (
	DefaultMaxAlternatives = 1024
	DefaultMaxInValues     = 10000
	DefaultMaxSQLLength    = 128 << 10
	DefaultMaxDepth        = 200
)

// DefaultOptions returns Options with the default limits and search path
// and no catalog.
func DefaultOptions() Options {
	return Options{
		SearchPath:      []string{"public"},
		MaxAlternatives: DefaultMaxAlternatives,
		MaxInValues:     DefaultMaxInValues,
		MaxSQLLength:    DefaultMaxSQLLength,
		MaxDepth:        DefaultMaxDepth,
	}
}

// Tri is a three-valued truth value: SQL's true, false and unknown (NULL).
type Tri int8

// The truth values. A WHERE clause keeps a row only when it is True.
const (
	False Tri = iota
	True
	Unknown
)

// String returns "true", "false" or "unknown".
func (t Tri) String() string {
	switch t {
	case False:
		return "false"
	case True:
		return "true"
	}
	return "unknown"
}

// Plan is a compiled, supported query with its binds. It is immutable and
// safe for concurrent use.
//
// A plan is its Template, which depends only on the query's shape and is
// shared by the plans of that shape (query/shape.go), and what its binds
// and constants make of it: the plan's values, which the template's
// operands and constraints name by slot. Evaluating a plan reads them
// from the plan; a subscription of distinct binds holds only them.
type Plan struct {
	// Template is the plan's shape: sources, filter, order, output,
	// limits. Its fields are read through the plan (p.Sources, p.Output).
	*Template
	// Key identifies the query with its binds: equal Keys mean the same
	// result at every position, so subscriptions with equal Keys can
	// share one view.
	Key PlanKey
	// Binds are the binds as given (Params their decoded values).
	Binds []Bind

	// vals are the plan's values: its decoded binds first (Params), then
	// the constants the template's slots name (operands of the filter,
	// constraint values), each once where it is the same value.
	vals []any
}

// Template is what a compiled plan is whatever its binds: plans of one
// shape (the same statement over the same tables, their binds of the same
// types, compiled to the same filter and constraints but for the values
// the filter compares with) share one. It is never written to once
// compiled.
type Template struct {
	// Text is the statement as PostgreSQL's deparser prints it (see
	// Plan.Normalized) with each of the where's lifted literals replaced
	// by a parameter numbered after the binds ($n+1, ...):
	// query/template.go.
	Text string
	// lits are the kinds of the lifted literals, one byte each ('i', 'f',
	// 's', 'b'), in their parameters' order; the plan's key holds their
	// texts.
	lits string

	// ParamOIDs are the binds' types: each as given, or as Compile
	// resolved it when the given OID was 0.
	ParamOIDs []uint32

	// Sources are the tables of the join tree in FROM order. Sources[0] is
	// the root; each later one is joined to earlier ones. The tables of
	// IN and NOT IN (subquery) conditions follow, one each (JoinSemi,
	// JoinAnti).
	Sources []*Source

	// Output are the columns of the result, in order. For a COUNT(*)
	// query it is one column, "count" (int8), with Source -1.
	Output []Output

	// Order are the ORDER BY keys, in order; empty when there is none.
	Order []OrderKey

	// Limit is the LIMIT, -1 when there is none (no LIMIT, LIMIT ALL or
	// LIMIT NULL). Offset is the OFFSET, 0 when there is none.
	Limit  int64
	Offset int64

	// Count is set for SELECT COUNT(*): the result is one row holding the
	// number of joined rows the filter keeps. Order, Limit and Offset do
	// not apply to what is counted (PostgreSQL applies them to the single
	// aggregate row; LIMIT 0 or OFFSET >= 1 make the result empty, which
	// Limit and Offset still say).
	Count  bool
	raises bool // some expression can raise (Raises); beside Count: one word for both

	// Agg is set for a query that aggregates otherwise (GROUP BY,
	// HAVING, aggregates beside each other or with arguments): the rows
	// the filter keeps are grouped and aggregated as Agg says, and
	// Output, Order, Limit and Offset (copies of Agg.Post's) describe the
	// group rows, not the sources' rows.
	Agg *Grouping

	// Clock are the conjuncts of WHERE that compare a column with the
	// time (now(), CURRENT_DATE, ...): the result depends on the clock
	// (query/clock.go). Eval and EvalRow evaluate the rest of WHERE;
	// EvalAt evaluates both.
	Clock []ClockBound

	filter *expr // nil: no WHERE
	// cons are each source's constraints (Plan.Constraints), their values
	// slots of the plan's values where slotted is set.
	cons    [][]Constraint
	slotted bool
}

// Params are the binds' decoded values, in order (nil for NULL), each of
// its type in ParamOIDs.
func (p *Plan) Params() []any { return p.vals[:len(p.ParamOIDs):len(p.ParamOIDs)] }

// PlanKey identifies a query with its binds (Plan.Key); compare keys
// with ==. It is the shape (Normalized followed by the tables' OIDs and
// column shapes as compiled) and a canonical encoding of each decoded
// bind. Plans of one shape with binds share the shape's text (query/shape.go),
// so what such a plan holds alone is its binds' encoding. The zero PlanKey
// is no plan's.
type PlanKey struct {
	shape string
	binds string
}

// String is the key's text: the shape, then the binds' encoding (not
// printable: it separates values by zero bytes).
func (k PlanKey) String() string { return k.shape + k.binds }

// JoinKind says how a source is joined.
type JoinKind uint8

// The kinds of join.
const (
	JoinRoot  JoinKind = iota // Sources[0]: not joined
	JoinInner                 // INNER JOIN (or JOIN)
	JoinLeft                  // LEFT [OUTER] JOIN: null-extended when no row matches
	// JoinSemi is the table of an uncorrelated IN (subquery) in WHERE: a
	// row of the sources before it is kept while at least one row of this
	// table passes the subquery's WHERE and matches On (its one equality:
	// the subquery's output column = the IN's left column). It adds no
	// values to a joined row (its entry in a Row is nil) and however many
	// of its rows match, the joined row is there once. Semi-joined
	// sources come after every FROM source.
	JoinSemi
	// JoinAnti is the table of an uncorrelated NOT IN (subquery) (or <>
	// ALL (subquery)), with PostgreSQL's NULL rules: a row of the sources
	// before it is kept when the subquery keeps no row at all (even if
	// the left column is NULL), or when the left column is not NULL, no
	// row the subquery keeps matches On, and none of them has a NULL in
	// the output column. Like JoinSemi it adds nothing to a joined row.
	JoinAnti
)

// String names the join kind.
func (k JoinKind) String() string {
	switch k {
	case JoinInner:
		return "inner"
	case JoinLeft:
		return "left"
	case JoinSemi:
		return "semi"
	case JoinAnti:
		return "anti"
	}
	return "root"
}

// Source is one table of the join tree: its shape, shared by the plans
// of one shape, and a subquery's filter. Its constraints are the plan's
// (Plan.Constraints).
type Source struct {
	// SourceShape is the part of the source that depends only on the
	// query's shape (the statement and the tables as compiled), not on its
	// binds: plans of one shape with distinct binds share one
	// (query/shape.go). It is never written to once compiled.
	*SourceShape

	filter *expr // JoinSemi, JoinAnti: the subquery's WHERE over this source alone; nil: none
}

// SourceShape is what a Source is whatever the binds: the table, how it is
// joined, and the columns the engine holds of it.
type SourceShape struct {
	// Alias is the name the query uses for the table (its alias, or the
	// table's own name).
	Alias string
	// Table is the table as the catalog described it.
	Table *Table
	// Qualified is set when the query named the table's schema
	// (schema.table); otherwise the name was resolved through
	// Options.SearchPath, and a table of that name made since in a schema
	// earlier on the path is what the name means now.
	Qualified bool
	// Join is how this source is joined to earlier sources (On, below,
	// the column equalities that join it).
	Join JoinKind
	// Nullable is set when this source can be null-extended in a result
	// row: it is LEFT JOINed. (An INNER JOIN on a column of a nullable
	// source drops the rows where that source is null-extended, since NULL
	// equals nothing.)
	Nullable bool
	// Star is set when the output lists this source's columns through *
	// or alias.*: a column added to the table changes the result's shape
	// (PostgreSQL expands * when it plans), so the query must be compiled
	// again. Otherwise a column not in Columns does not matter to the plan.
	Star bool
	// (The four fields above share one word of the struct.)

	// Columns are the columns the engine must hold for this source: the
	// primary key's columns first (KeyN of them, in key order), then every
	// other column the query refers to (filter, joins, order, output), in
	// table order. A Row holds this source's values in this order.
	Columns []Column
	KeyN    int
	// On are the column equalities that join this source (Join): all
	// must hold; each links a column of this source to a column of an
	// earlier one.
	On []JoinKey
}

// Subquery reports whether the source is the table of an IN or NOT IN
// (subquery) (JoinSemi or JoinAnti): its names are the subquery's own, and
// a Row holds nothing of it.
func (s *Source) Subquery() bool { return s.Join == JoinSemi || s.Join == JoinAnti }

// JoinKey is one equality of a join condition: Sources[Source].Columns[Column]
// of the joined source equals Sources[Other].Columns[OtherColumn] of an
// earlier source. Both columns have types whose AppendKey encodings agree
// exactly when PostgreSQL's = holds (otherwise Compile refuses the join).
type JoinKey struct {
	Column      int // in the joined source's Columns
	Other       int // index of the earlier source
	OtherColumn int // in Sources[Other].Columns
}

// Output is one column of the result.
type Output struct {
	Name    string // the column's name in the result (its alias, or the column's name)
	TypeOID uint32
	TypeMod int32
	Source  int // index into Plan.Sources; -1 for count; ExprSource for a computed column
	Column  int // index into Sources[Source].Columns

	expr   *scalar // Source ExprSource: the expression
	target int     // Source ExprSource: its index in the select list
}

// OrderKey is one ORDER BY key: a column of a source, ascending unless Desc,
// with NULLs first when NullsFirst (PostgreSQL's default is NULLS LAST for
// ASC and NULLS FIRST for DESC; Compile fills it in).
type OrderKey struct {
	Source     int // ExprSource: an expression (Column unused)
	Column     int
	Desc       bool
	NullsFirst bool

	expr *scalar // Source ExprSource: the expression
	// where Render finds the expression in the statement: the select
	// list item target when the key names an output, else sort item item.
	target, item int
}

// ConstraintKind is what a Constraint says about a column.
type ConstraintKind uint8

// The kinds of constraint.
const (
	// ConstraintIn: the column equals one of Values, or is NULL when Null
	// is set.
	ConstraintIn ConstraintKind = iota + 1
	// ConstraintRange: the column (not NULL) lies in one of Ranges.
	ConstraintRange
	// ConstraintNotIn: the column is not NULL and equals none of Values.
	ConstraintNotIn
)

// String names the constraint kind.
func (k ConstraintKind) String() string {
	switch k {
	case ConstraintIn:
		return "in"
	case ConstraintRange:
		return "range"
	case ConstraintNotIn:
		return "not-in"
	}
	return "unknown"
}

// Constraint is a condition on one column of a source that every row able
// to affect the result satisfies. Values and range bounds are in the
// column's own typed form (converted exactly from the query's constants and
// binds; where no exact conversion exists the column is left unconstrained),
// so AppendKey and CompareValues with the column's TypeOID apply to them.
type Constraint struct {
	// Column, Kind and Null share one word: a plan of distinct binds holds
	// its own constraints, 80 bytes each.
	Column int32 // index into the source's Columns (a table has at most 1,600)
	Kind   ConstraintKind
	Null   bool    // ConstraintIn: NULL matches too (IS NULL)
	Values []any   // ConstraintIn, ConstraintNotIn: distinct values
	Ranges []Range // ConstraintRange: sorted, disjoint
	// Contains (ConstraintNotIn only): texts the column's value holds as
	// substrings, each once folded by its Fold: the literal runs of the
	// LIKE/ILIKE patterns the filter requires the value to match. The
	// value is the column's decoded string (a bpchar with its padding).
	Contains []Substring
}

// Substring is a text a column's value holds once folded (Constraint.Contains).
type Substring struct {
	Fold Fold
	Text string // already folded
}

// Fold is the case folding ILIKE applies to both sides under a collation
// the query layer reproduces (see compiler.like); LIKE folds nothing.
type Fold uint8

// The folds.
const (
	// FoldNone is LIKE's: the value as it is.
	FoldNone Fold = iota
	// FoldASCII is lower() under the C and POSIX collations: A-Z only.
	FoldASCII
	// FoldUnicode is lower() under C.UTF-8: each code point's simple
	// lowercase (invalid bytes become U+FFFD).
	FoldUnicode
)

// Apply folds s as ILIKE folds a value.
func (f Fold) Apply(s string) string {
	if fn := f.fn(); fn != nil {
		return fn(s)
	}
	return s
}

func (f Fold) fn() func(string) string {
	switch f {
	case FoldASCII:
		return asciiLower
	case FoldUnicode:
		return unicodeLower
	}
	return nil
}

// Range is an interval of column values. A nil bound is unbounded.
type Range struct {
	Low, High       any
	LowInc, HighInc bool
}

// Row is a joined row: for each source (in Plan.Sources order) the values
// of its Columns in decoded form, nil for NULL. A nil entry is a source that
// a LEFT JOIN null-extended: all its columns are NULL.
type Row [][]any

// RenderColumns chooses what a rendered query selects.
type RenderColumns uint8

// What Render selects.
const (
	// SelectOutput selects the query's own column list.
	SelectOutput RenderColumns = iota
	// SelectNeeded selects, for each source in order, every column of its
	// Columns (NULLs for a null-extended source), so that a result row
	// read left to right fills a Row; a subquery's source (JoinSemi,
	// JoinAnti) selects nothing, its entry in the Row staying nil.
	SelectNeeded
)

// RenderOptions shape the SQL Render produces.
type RenderOptions struct {
	Columns RenderColumns
	// Window, for a query with ORDER BY and LIMIT, replaces LIMIT n OFFSET m
	// by LIMIT m+n+Margin OFFSET 0, and extends ORDER BY by each source's
	// primary key (so ties are broken as CompareWindow breaks them): the
	// rows before the window, the window and Margin rows past it. Without
	// a LIMIT it drops OFFSET and selects all rows.
	Window bool
	Margin int64
	// At, for a plan with Clock bounds, replaces now() (and the other
	// time functions) by this clock's value as a constant, so the read
	// answers as of that clock and not of its own transaction's start.
	At *change.Timestamp
	// Hold reads the rows the clock may still bring in too: a bound rows
	// enter by (column < now() + ...) is left out of WHERE.
	Hold bool
}
