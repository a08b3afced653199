// Package shape serves Electric's HTTP shape protocol (the "shape API"),
// so that browsers and apps written against @electric-sql/client
// (ShapeStream, Shape) and @electric-sql/react (useShape) sync from
// `freshet serve` unmodified. docs/shape-api.md says what is served and
// where it differs from Electric.
//
// A shape is a table, a where clause with its params, a column list, a
// replica mode and a log mode. Each is one rows-mode subscription of
// `SELECT <columns> FROM <table> WHERE <where>` through the engine's
// public API (Engine): the engine keeps the result exact and the shape
// turns its accepted result and deltas into the protocol's messages
// (insert, update with the changed columns, delete; under replica=full the
// whole row and the old values), keeping the current rows so it knows
// which is which.
//
// The log. Every shape has a log on disk under Config.DataDir: one or more
// generations (a snapshot of the rows, in chunks addressed by the virtual
// offsets 0_N) and the changes after them, at offsets <commit LSN>_<n>
// with n from 1. A change is written and synced before any request sees
// it, so a restart (clean or SIGKILL) keeps every handle and offset
// valid: the shape is hydrated again and the difference between its log
// and PostgreSQL is appended as ordinary changes. A fresh client reads
// the newest generation and the changes since, never the whole history:
// once the log since the newest generation holds more changes than the
// result has rows, a new generation is written, and superseded ones are
// dropped after Config.Retention (a client holding an offset into what
// was dropped gets a 409 and starts again).
//
// Concurrency. The engine calls Shape.Send on its own goroutine; Send
// only renders and queues. One writer goroutine per Server makes queued
// changes durable and wakes the requests waiting on them; a reaper drops
// old generations and idle shapes. Server.Close waits for both.
package shape
