// Package engine keeps SQL query results fresh from PostgreSQL's change
// stream.
//
// # Glossary
//
// The engine's words, each with the file that holds it:
//
//   - view: the maintained result of one compiled plan, shared by every
//     subscription whose plan has the same query.Plan.Key (core_view.go;
//     made and ended in core_subscribe.go).
//   - view source: one source (FROM item) of a view's plan bound to the
//     core's table for it: its layout slots, its routing registration and,
//     for a join, the rows it holds (viewSource, core_view.go).
//   - held row: one row of a table the core keeps, once per (table, row
//     key) however many views hold it: a record (its key and its row
//     values in one allocation) under a row id in the table's rowTable,
//     with the holder id of the view source holding it, or the index of
//     its holder list when several do: the list of their holder ids,
//     kept once for all the rows held by the same view sources
//     (holderLists, core_rowtable.go). There is no Go object per row:
//     views name a row by its id.
//   - holder id: a view source's 4-byte name in the rows it holds
//     (viewSource.hid; state.holderSrcs finds the view source), freed when
//     its view ends and reused from the core's next call on.
//   - row id: a held row's index in its table's rowTable (rowID), stable
//     while the row is held (an update gives it a new record, not a new
//     id); freed when no view holds it, reused only after the core call
//     that freed it.
//   - key set: a table's row ids by their rows' keys, an open-addressing
//     table of 4-byte slots, each an id with a tag from its key's hash in
//     the bits the ids do not need, keys compared in the records (keySet,
//     core_rowtable.go).
//   - members: the result of a single-table view without ORDER BY or
//     LIMIT (a plain, COUNT(*) or aggregate view's rows): a set of row ids,
//     open addressing while it holds few of its table's ids and a bitmap
//     over them once it holds one in 32 (idSet, core_rowtable.go).
//   - entry set: an ordered or join view's result, by key: an
//     open-addressing table of entry pointers (entrySet, core_rowset.go);
//     an entry names its row by id.
//   - index: the same kind of table for the core's records by a key each
//     holds: views by plan key, subscriptions by id, pending reads by id,
//     a table's view sources (index, core_index.go); about 10-20 bytes a
//     record where a Go map's slot costs 30-80.
//   - layout: the columns of a table as the core stores them, the union of
//     every column any view of it names; columns are only appended
//     (layoutCol, core_rows.go).
//   - slot: a column's position in its table's layout; a held row has one
//     value per slot, unloaded when no view asked for it.
//   - row values: a held row's values encoded in one immutable string, a
//     tag and an exact payload per slot (rowVals, core_rowvals.go),
//     sharing the row's record with its key; an update makes a new
//     record, so row values taken before describe the row as it was.
//   - overlay: the rows the transaction being applied has changed so far,
//     as it left them, over the held rows; they become the held rows when
//     the transaction settles (overlayRow, core_apply.go).
//   - land: a finished read becomes a view's result, once the stream has
//     passed its snapshot: the logged transactions its snapshot does not
//     contain are replayed onto its rows and its subscribers are accepted
//     (core_land.go; joins in core_join.go).
//   - settle: at a transaction's last fragment, every view it touched
//     compares its result with the one before and emits one delta
//     (finish, settle and settleJoin in core_apply.go and core_join.go).
//   - refill: a window that no longer holds OFFSET+LIMIT rows (its margin
//     ran out) reads its result again (refill, core_view.go).
//   - window: the result of a query with LIMIT: the core holds its first
//     OFFSET+LIMIT+margin rows in order (resultSet, core_view.go).
//   - margin: the rows a window holds beyond OFFSET+LIMIT
//     (CoreOptions.WindowMargin), so that a row leaving the window is
//     replaced without a read.
//   - bound: the last row a window that is not complete is known to hold
//     every row up to; a row sorting after it is not taken in.
//   - covered: a window still holds OFFSET+LIMIT rows (or every row the
//     query selects), so what its subscribers see is exact.
//   - touch: to mark a row key of a view changed by the transaction being
//     applied (touch, core_apply.go); and, in touch mode, the Touched
//     output that tells a subscriber its result changed at a commit.
//   - re-hydrate: a live view reads its result again because a
//     transaction left it needing rows or values it does not hold (an
//     unchanged TOASTed value, a row whose key is unknown); like a refill
//     it waits as viewRefilling, touching its touch-mode subscribers,
//     until the read lands.
//
// # The core and the runtime
//
// The Core is a deterministic state machine in the style of etcd's raft
// RawNode: method calls in (Subscribe, Unsubscribe, Apply a transaction
// fragment, Advance, Clock, ReadDone, CheckCatalog), a Ready out (reads to run
// against PostgreSQL and outputs for subscribers). Its methods are its only
// inputs: a read's rows come back through ReadDone in a ReadResult, and a
// failed read arrives already classified (ReadFailure: a code, a reason and
// a retryable flag), so the core decides nothing about errors. It has no
// goroutines, no I/O and no clock (TestCoreImports fails on a core file
// that imports context, time, sync, net, os, io, log, database or pgx), so
// it is tested by driving it directly: ExampleCore shows the calls.
//
// The Engine is the runtime around it: one goroutine owns the Core, feeds
// it the change stream, runs its reads on a pool of their own (a
// REPEATABLE READ transaction per read, decoded by engine_hydrate.go and
// engine_slab.go), classifies a failed read by its error's type and
// SQLSTATE (engine_codes.go), and hands outputs to each subscription's
// Sink. Files say which side they are on: core*.go are the core (core.go
// its API, core_subscribe.go views and subscriptions, core_apply.go
// applying transactions, core_land.go landing reads), engine*.go the
// runtime; tests follow the same prefixes.
//
// # Views
//
// Subscriptions whose plans have the same query.Plan.Key share one view.
// Views of one shape (other binds, other literals in the where) share
// their plans' query.Template and each holds its plan's values, which the
// route registers it by (query.Plan.Constraints).
// A view holds the rows of its result (a window holds
// OFFSET+LIMIT+WindowMargin rows, a join every row of each source that
// satisfies that source's own constraints). Rows are stored once per
// (table, row key) however many views hold them, each encoded in one
// string (a tag and an exact payload per column: no interface or box per
// value) and decoded into change's typed forms when a result is built;
// encodings compare by text identity, as the engine compares values.
//
// # Routing
//
// Each view source registers under one constraint of its source
// (equality/IN by a hash of the value in a hash index, ranges in an interval index,
// LIKE/ILIKE by a substring of a pattern's literal run in a hash index the
// changed value probes with its own substrings, NOT IN by exclusion) or
// in its table's unconstrained list (core_route.go; a
// join's sources each register, under their own constraints and those the
// ON equalities carry to them); a changed row is matched by its new values
// through those indexes and by the views already holding its old version,
// so the cost of a change grows with the views it can affect, not with
// the views registered.
//
// # Transactions
//
// The changes of a transaction go into the overlay as they come; on its
// Last fragment every view it touched settles: it compares its rows with
// the state before the transaction and emits one delta, so primary key
// changes, rows moving in and out of a filter and rows touched many times
// come out as their net effect (core_apply.go). An update that changes
// the key carries the old key; the overlay remembers, for a row an update
// gave its key, the key it had before the transaction, and a plain
// single-table view's delta names such a row, removed under its old key
// and upserted under its new one, in Output.KeyChanges (the shape API
// renders it as Electric's key_change_to/key_change_from split).
//
// # Hydration
//
// A new view asks for a read. From that moment the core logs the
// transactions it applies; when the read is done and the stream has
// passed its snapshot's LSN, the read lands: the logged transactions not
// visible in the snapshot are replayed onto the read's rows and the view
// goes live (core_land.go). A window whose margin runs out refills, and a
// view that lacks a value it needs re-hydrates, the same way.
//
// # Joins
//
// A join view holds each source's rows, indexed by its join columns, and
// its result by root row; a transaction recomputes the results of the
// root rows it can reach (core_join.go). A join view holds at most the
// row limit of joined rows. An IN (subquery) is a semi-joined source of
// such a view: its rows the subquery keeps, per join value; a row of the
// outer query is in the result, once, while that value's set is not
// empty. A NOT IN (subquery) is an anti-joined source, which also keeps
// the keys of its rows whose output is NULL (PostgreSQL's NULL rules).
//
// # Aggregates
//
// A view of a plan with query.Plan.Agg (GROUP BY, HAVING, aggregates)
// holds the rows (or joined rows) its filter keeps, as a COUNT(*) view
// does, and groups them (core_agg.go): per group one query.AggState per
// aggregate, so a row entering or leaving costs O(log n) in its group's
// size. At settle each changed group computes its group row, HAVING
// decides whether it shows, and its subscribers get the groups whose
// output changed (an ordered or cut result: its visible groups, diffed
// as a window's rows are). A landed read groups its rows afresh.
// SELECT DISTINCT is such a view with no aggregate (a group shows while
// it counts rows); SELECT DISTINCT ON's groups each keep their rows in a
// balanced tree by the ORDER BY (query.FirstState) and show the first.
//
// # The clock
//
// A query comparing a column with now() or CURRENT_DATE
// (query.Plan.Clock) moves with the database's clock, which comes in
// through Core.Clock (the runtime passes each heartbeat's now(), read by
// PostgreSQL in the heartbeat's transaction) and nowhere else. A clocked
// view keeps, per condition, a min-heap of its rows by the column's value
// (its result, and the rows a condition rows enter by has not let in yet,
// held pending); Clock pops the rows the new thresholds passed and settles
// them as a transaction would, in one delta at the heartbeat's position
// carrying the clock (Output.Clock). A read lands once the clock is at or
// past the read's own now() (Snapshot.Now). See core_clock.go.
//
// # Schema changes
//
// A view is compiled against one shape of each table (its OID, the
// columns it names with their types and attnums, its row key). The
// stream's Relation messages, every read (which locks its tables before
// its snapshot and checks its result's description against the plan) and
// a periodic catalog check by OID (Engine.CheckCatalog: the only way to
// see a DROP TABLE) end the views a change breaks, with a Code
// (CodeTableDropped, CodeSchemaChanged) and a reason (core_schema.go,
// engine_catalog.go). Because a plan compiled from the catalog's cached,
// older shape (a table dropped and made again, renamed, a column dropped
// and added again, none of which the stream shows before a write) has the
// old table's key and would join its live view without a read, every
// Subscribe first checks its plan against PostgreSQL now (one catalog
// query, engine_current.go): names resolved to OIDs through the search
// path, the columns' attnums and types; on a difference the query is
// compiled again from a refreshed catalog and a catalog check ends the old
// views. Rows are keyed by the table's replica identity
// (query.Table.RowKey): the primary key, or the index of REPLICA IDENTITY
// USING INDEX.
//
// A plan whose expressions can raise (query.Plan.Raises: an overflow, a
// division by zero) is evaluated with EvalRow and Check on every row a
// view is given or reads; the first that raises ends the view's
// subscriptions with query.CodeEvalError before that transaction's
// outputs, as PostgreSQL's own read of the query would fail
// (core_evalerr.go).
//
// # Touch mode
//
// Every committed transaction that changes a result is touched at its own
// commit LSN (for an ordered result, which rows tie on ORDER BY is part of
// it: what PostgreSQL may answer changes with it); a view waiting for a
// read touches for every transaction that changes a row of its tables, so
// a touch may come for a transaction that changed nothing, never late.
//
// # Positions
//
// Core.Position is the last commit applied (or Advance); Core.Passed is
// the position every subscriber's result is exact at, what the engine
// acknowledges to the slot and what lag frames vouch for: a view
// re-reading its result holds it back to just before the commit that made
// it re-read, until the read's delta is out.
//
// # When the core panics
//
// The runtime runs every core call under recover (engine_recover.go): a
// panic ends every subscription (internal, retryable), discards the core
// and starts an empty one at the engine's position; the query whose call
// panicked is refused from then on.
//
// # Testing the core
//
// The core's tests (core_*_test.go) need no PostgreSQL: go test -run Core
// passes on a machine without it. Its behaviour scripts under
// testdata/core/ hold commands and their expected outputs together, in
// the style of raft's datadriven tests (TestCoreScripts; regenerate with
// -rewrite); a harness keeps its own model of the tables and checks every
// output against it. The runtime's tests (engine_*_test.go) run against a
// throwaway PostgreSQL cluster, and TestDifferential compares every
// result with PostgreSQL's own answer.
package engine
