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
// For routing, each Source carries Constraints: conditions on its columns
// that every row of that table able to affect the result satisfies (a value
// set, a union of ranges, or a set of excluded values, with the texts a
// LIKE or ILIKE pattern requires the value to hold). They are derived
// from the filter without expanding it; a source without constraints is
// unconstrained. AppendKey encodes a value so that equal keys mean equal
// under PostgreSQL's = for the column's type, for hash indexes on
// constraints and join columns; CompareValues orders values of one type.
//
// Render produces SQL the engine runs against PostgreSQL: the query itself,
// or the query selecting every needed column with ORDER BY extended by the
// primary keys and LIMIT widened by a margin, with the binds passed as
// parameters (Plan.Args). A plan keeps no parse tree: Render parses
// Plan.Normalized again (the compiled tree as the deparser printed it) and
// changes that. What depends only on a query's shape is shared between
// plans of that shape: the output and order slices, each source's
// SourceShape (its table, join, columns and On; a Source adds only its
// Constraints and a subquery's filter, which depend on the binds), and a
// source's columns when they are its table's leading ones (the catalog's
// own slice).
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
