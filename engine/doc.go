// Package engine keeps SQL query results fresh from PostgreSQL's change
// stream.
//
// The Core is a deterministic state machine in the style of etcd's raft:
// method calls in (Subscribe, Unsubscribe, Apply a transaction fragment,
// Advance, ReadDone), a Ready out (reads to run against PostgreSQL and
// outputs for subscribers). It has no goroutines, no I/O and no clock, so
// it is tested by driving it directly.
//
// Views. Subscriptions whose plans have the same query.Plan.Key share one
// view. A view holds the rows of its result (a window holds
// OFFSET+LIMIT+WindowMargin rows, a join every row of each source that
// satisfies that source's own constraints). Rows are stored once per
// (table, primary key) however many views hold them, each encoded in one
// string (a tag and an exact payload per column: no interface or box per
// value) and decoded into change's typed forms when a result is built;
// encodings compare by text identity, as the engine compares values.
//
// Routing. Each view registers under one constraint of its root source
// (equality/IN by value in a hash index, ranges in an interval index,
// NOT IN by exclusion) or in its table's unconstrained list; a changed row
// is matched by its new values through those indexes and by the views
// already holding its old version, so the cost of a change grows with the
// views it can affect, not with the views registered.
//
// Transactions. Changes are accumulated per transaction; on its Last
// fragment every affected view compares its rows with the state before the
// transaction and emits one delta: primary key changes, rows moving in and
// out of a filter and rows touched many times come out as their net
// effect.
//
// Hydration. A new view asks for a read. From that moment the core buffers
// the transactions touching the view's tables; when the read lands and the
// stream has passed the read's snapshot LSN, the buffered transactions not
// visible in the snapshot are applied to the read's rows and the view goes
// live.
//
// Schema changes. A view is compiled against one shape of each table (its
// OID, the columns it names with their types and attnums, its row key). The
// stream's Relation messages, every read (which locks its tables before its
// snapshot and checks its result's description against the plan) and a
// periodic catalog check by OID (Engine.CheckCatalog: the only way to see
// a DROP TABLE) end the views a change breaks, with a Code
// (CodeTableDropped, CodeSchemaChanged) and a reason. Rows are keyed by the
// table's replica identity (query.Table.RowKey): the primary key, or the
// index of REPLICA IDENTITY USING INDEX.
//
// Touch mode. Every committed transaction that changes a result is
// touched at its own commit LSN (for an ordered result, which rows tie on
// ORDER BY is part of it: what PostgreSQL may answer changes with it); a view waiting for a read touches for
// every transaction that changes a row of its tables, so a touch may come
// for a transaction that changed nothing, never late.
package engine
