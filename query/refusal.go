package query

import "fmt"

// Code names why a query was refused. Codes are stable: clients may match
// on them. docs/queries.md explains each.
type Code string

// The refusal codes.
const (
	CodeSyntax          Code = "syntax"          // PostgreSQL's parser rejects the text
	CodeTooLong         Code = "too_long"        // the SQL text is longer than MaxSQLLength
	CodeNulByte         Code = "nul_byte"        // the SQL text holds a NUL byte
	CodeMultiple        Code = "multiple"        // more than one statement
	CodeNotSelect       Code = "not_select"      // INSERT, UPDATE, DDL, ...
	CodeCTE             Code = "cte"             // WITH
	CodeSetOp           Code = "set_operation"   // UNION, INTERSECT, EXCEPT
	CodeValues          Code = "values"          // VALUES lists
	CodeDistinct        Code = "distinct"        // DISTINCT, DISTINCT ON
	CodeGroupBy         Code = "group_by"        // GROUP BY
	CodeHaving          Code = "having"          // HAVING
	CodeAggregate       Code = "aggregate"       // an aggregate other than a lone COUNT(*)
	CodeWindow          Code = "window_function" // OVER (...), WINDOW
	CodeSubquery        Code = "subquery"        // a subquery anywhere
	CodeLocking         Code = "locking"         // FOR UPDATE / SHARE
	CodeInto            Code = "into"            // SELECT INTO
	CodeNoFrom          Code = "no_from"         // SELECT without FROM
	CodeFromItem        Code = "from_item"       // a FROM item that is not a plain table (function, LATERAL, ...)
	CodeJoinKind        Code = "join_kind"       // RIGHT, FULL, CROSS, NATURAL, USING, comma joins
	CodeJoinCondition   Code = "join_condition"  // an ON that is not a conjunction of column equalities
	CodeJoinShape       Code = "join_shape"      // a parenthesized join on the right of a join
	CodeUnknownTable    Code = "unknown_table"   // no such table on the search path
	CodeSystemTable     Code = "system_table"    // a table of a system schema (pg_catalog, information_schema, pg_toast, temporary schemas)
	CodeNotPublished    Code = "not_published"   // a table the publication does not carry (Options.Publication)
	CodeUnknownColumn   Code = "unknown_column"  // no such column, or an ambiguous one
	CodeNoPrimaryKey    Code = "no_primary_key"  // a table without a primary key
	CodeDuplicateAlias  Code = "duplicate_alias" // the same name used for two FROM items
	CodeFunction        Code = "function"        // a function call that is not supported
	CodeVolatile        Code = "volatile"        // a volatile function (random(), clock_timestamp(), CURRENT_TIME, ...)
	CodeClock           Code = "time_condition"  // now(), CURRENT_TIMESTAMP, CURRENT_DATE, ... outside a served range condition (query/clock.go)
	CodeExpression      Code = "expression"      // an expression that is not supported (arithmetic, CASE, ...)
	CodeOperator        Code = "operator"        // an operator that is not supported (~, @>, ||, ...)
	CodeType            Code = "type"            // a type that cannot be compared or evaluated here
	CodeCollation       Code = "collation"       // text ordering or ranges under a collation that cannot be reproduced
	CodeOrderBy         Code = "order_by"        // ORDER BY something other than a column
	CodeLimit           Code = "limit"           // a LIMIT/OFFSET that is not a constant or a bind, or negative
	CodeTargetList      Code = "target_list"     // an output item that is not a column, *, t.* or COUNT(*)
	CodeBind            Code = "bind"            // a bind that is missing, of an unknown type, or malformed
	CodeTooComplex      Code = "too_complex"     // more filter alternatives than MaxAlternatives, or nested too deep
	CodeTooManyInValues Code = "too_many_in_values"
	CodeEvalError       Code = "eval_error" // PostgreSQL would raise an error evaluating the query (division by zero, overflow, ...)
)

// Refusal says why a query is not supported. It is an answer, not an
// error: the caller reads PostgreSQL instead.
type Refusal struct {
	Code    Code
	Message string // names the construct, e.g. "DISTINCT is not supported"
	// Retryable is set when the same SQL and binds could be accepted later
	// without change, because the refusal depends on the database's current
	// schema (a missing table or column, a table without a primary key, a
	// collation); it is clear for refusals of the query's text or binds.
	Retryable bool
	// Position is the 1-based byte offset in the SQL text of the refused
	// construct, 0 when not known.
	Position int
	// Param is the 1-based number of the refused bind ($n), 0 when the
	// refusal is not about a bind.
	Param int
}

// Error lets a Refusal be returned where an error is expected. Compile
// never does that itself.
func (r *Refusal) Error() string {
	return fmt.Sprintf("query refused (%s): %s", r.Code, r.Message)
}

func refuse(code Code, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Message: fmt.Sprintf(format, args...)}
}
