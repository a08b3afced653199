// Package query reads the SELECT statements backends subscribe to and
// compiles them into plans the engine maintains.
//
// A statement is parsed with PostgreSQL's own grammar (pg_query_go), so SQL
// rendered by GORM, sqlx, sqlc, bun, ent or by hand is read exactly as the
// server reads it. Its binds, (type OID, format, bytes) triples, are decoded
// by OID into the value a literal would have been. Tables and columns are
// resolved through a Catalog (PGCatalog reads pg_catalog and caches it).
//
// Parse screens a statement's text alone (shape and limits, no catalog or
// binds). Compile returns one of three things:
//
//   - a *Plan: the query is supported and this is how to maintain it;
//   - a *Refusal: the query is valid but not supported (or a bind is
//     malformed); the caller reads PostgreSQL instead. A refusal is an
//     answer, not an error, and carries a stable Code;
//   - an error: the compilation could not be carried out (the catalog could
//     not be read, the context ended). Trying again may work.
//
// # The plan
//
// A Plan lists the tables of the join tree (Sources) in FROM order, the
// first being the root and every other one joined (INNER or LEFT) to earlier
// ones by column equalities. For each source the plan names the columns the
// engine must hold (Source.Columns): the primary key first, then every
// column the filter, the joins, the ordering and the output refer to. A
// joined row (Row) holds, per source, the values of those columns, decoded
// into change's typed forms (see change/types.go); a nil entry is a source
// null-extended by a LEFT JOIN.
//
// Over a Row the plan evaluates the WHERE clause with three-valued logic
// (Eval), orders rows as ORDER BY would (Compare, and CompareWindow which
// breaks ties by primary keys for the engine's bookkeeping), and projects the
// output columns (Plan.Output names the source column of each, or, with
// Source ExprSource, computes it: Project). WHERE, the output and ORDER BY
// may hold value expressions (arithmetic, string functions, CASE, COALESCE,
// NULLIF, GREATEST/LEAST, casts), evaluated with PostgreSQL's types and
// errors: a plan that Raises can meet a row PostgreSQL would fail on (an
// overflow, a division by zero), which EvalRow and Check report as an
// *EvalError; the engine then ends the subscription (CodeEvalError).
//
// For routing, each source has Constraints (Plan.Constraints): conditions
// on its columns that every row of that table able to affect the result
// satisfies (a value set, a union of ranges, or a set of excluded values,
// with the texts a LIKE or ILIKE pattern requires the value to hold). They
// are derived from the filter without expanding it; a source without
// constraints is unconstrained. AppendKey encodes a value so that equal keys mean equal
// under PostgreSQL's = for the column's type, for hash indexes on
// constraints and join columns; CompareValues orders values of one type.
//
// Render produces SQL the engine runs against PostgreSQL: the query itself,
// or the query selecting every needed column with ORDER BY extended by the
// primary keys and LIMIT widened by a margin, with the binds passed as
// parameters (Plan.Args). A plan keeps no parse tree: Render parses the
// template's Text again (the compiled tree as the deparser printed it),
// puts the plan's lifted literals back (below) and changes that.
//
// # Plans of one shape
//
// A Plan is a Template and the plan's values. The template is everything
// that depends only on the query's shape: its sources (each source's
// SourceShape: table, join, columns, On), filter tree, constraints,
// output, order, limits and normalized text (Text). The filter's constants
// (the values its comparisons compare with, whether they came from a bind
// or from the statement) and the constraints' values are slots of the
// template that name the plan's values: the decoded binds first
// (Plan.Params), then each other constant once. Eval, EvalRow and
// Constraints read the plan's values through the template's slots.
//
// Compile builds a plan whole, with its values in place, as before (so
// every type is inferred and every constant folded as for that statement
// alone), then moves its constants into its values and takes the template
// an earlier plan of the same shape holds when the two are the same in
// everything but the values: the same tree, operators, families and
// slots, the same constraints over the same slots, the same shared
// output, order and sources (sameTemplate, query/template.go). A plan
// whose values change what it is (a NULL bind folds its comparison to
// NULL; a value a column can never hold leaves the column no value to
// route by) has a template of its own. Expressions, IN lists, LIKE
// patterns, groupings and clock bounds keep their constants in the
// template, so plans holding them share a template only with plans of
// the same constants.
//
// A where's literal constants are lifted out of the shape where they are
// direct operands of a comparison (=, <>, <, <=, >, >=, IS [NOT] DISTINCT
// FROM, [NOT] BETWEEN; a cast of one too): `k = 5` and `k = 6` have one
// shape, the template's Text `... WHERE k = $1` (a parameter numbered
// after the binds), and the plan's key holds the literal as written. The
// statement is still compiled with every literal in place, so each is
// typed as PostgreSQL types it for that statement (an int4 literal
// against an int8 column, a string literal of unknown type read as the
// column's, a numeric literal against a float8 column) and folded as for
// that statement alone; lifting touches only the shape's text and the
// key, and sameTemplate decides sharing as for binds. Literals elsewhere
// (LIMIT and OFFSET, function arguments, inside arithmetic, IN lists,
// LIKE patterns, the select list, ORDER BY; every literal of a grouped
// query or of one with a clock condition) stay in the text. Normalized and Render put the literals back in the tree before the
// deparser prints it, so PostgreSQL reads the statement's own text.
//
// Templates are kept for plans with binds or lifted literals (by shape,
// the first of each; query/shape.go). Sharing changes nothing but memory:
// a subscription of distinct binds holds a Plan of about 100 bytes and its
// values. Within a template, plans of one shape share more: the output and
// order slices are shared by content across templates, and a source's
// columns, when they are its table's leading ones, are the catalog's own
// slice.
//
// # Semantics
//
// Evaluation follows PostgreSQL: NULLs propagate through comparisons, AND,
// OR and NOT are three-valued, numeric is exact, integers and floats are
// promoted as PostgreSQL's operator resolution promotes them, timestamptz is
// in UTC and timestamp is compared with timestamptz as with TimeZone=UTC,
// bpchar ignores trailing spaces, intervals compare by their normalized total
// (30-day months, 24-hour days). Text is compared as its collation compares
// it: only collations whose order is bytewise ("C", "POSIX", "C.UTF-8") are
// reproduced; under any other collation equality is still allowed for a
// deterministic collation, but ordering and ranges on text are refused.
// docs/queries.md lists what is supported and what is refused, and why.
//
// Unqualified table names resolve through Options.SearchPath, which defaults
// to "public" alone (PostgreSQL's default search_path resolves "$user" first;
// pass the session's search_path when it differs).
package query
