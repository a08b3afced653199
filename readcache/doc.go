// Package readcache serves a Go backend's SQL reads from Freshet: results
// held in memory, kept fresh by `freshet serve` over the s2s protocol
// (docs/s2s-protocol.md, package wire), with PostgreSQL as the fallback
// whenever the cache cannot be trusted. A backend changes how it opens its
// database and nothing else.
//
// # Adapters
//
// Programs use the cache through an adapter:
//
//   - readcache/stdlib is a database/sql driver wrapping pgx's stdlib
//     driver, so GORM, sqlx, sqlc's database/sql output, bun and ent work
//     unchanged: stdlib.Open(dsn, cfg), stdlib.OpenFromEnv(dsn), or
//     sql.Open("freshet", dsn) with FRESHET_URL and FRESHET_TOKEN set;
//   - readcache/pgxcache wraps a *pgxpool.Pool with the same Query,
//     QueryRow and Exec methods (sqlc's pgx DBTX), so swapping the pool
//     type is the whole change.
//
// Cached rows are decoded by pgx's own codecs from PostgreSQL's text form,
// into the same values a live read gives, so every Scan target behaves
// the same (tested type by type against live reads).
//
// # How a read is served
//
// A read is a single SELECT (IsSelect) outside a transaction. Its key is
// the SQL and the bytes of its binds (Key, Params). On a miss the cache
// subscribes in rows mode and, by default, sends the read to PostgreSQL
// at once (ReasonHydrating), as it does every read of the key until the
// engine has answered: a miss costs the PostgreSQL read plus the
// subscribe (a frame queued for the socket; the engine's hydration then
// runs beside the application, on the engine and on PostgreSQL), never a
// wait for the engine. Once the subscription is accepted, the result
// serves every read from memory, and each delta updates the entry in
// place (a new immutable Result is published, so readers never lock).
// With a positive VerdictTimeout a miss waits up to that long for the
// engine's answer instead and is served from it (counted in
// Stats.Misses): the next read is then a hit for certain, which tests of
// the cache want, at the cost of the engine's first answer (its own read
// of PostgreSQL, then the stream passing the read's position). Either
// way a read served from PostgreSQL is as fresh as PostgreSQL, so the
// read-your-writes window and the staleness bound below are unchanged. A refused query is read from
// PostgreSQL and remembered as refused for RefusedFor (RetryRefusedFor
// when the engine says a retry may succeed). Everything else goes to
// PostgreSQL: writes, reads in a transaction, anything that is not a
// SELECT, reads with a pgx query option, binds the cache cannot encode.
// Stats counts every read sent to PostgreSQL by its Reason.
//
// Routing, most specific first: the query's context (ViaPostgres,
// ViaCache), the connection (stdlib.SetConnRoute), the pool
// (Config.Route, SetRoute on the adapters), the process (SetDefaultRoute).
// A flagged and an unflagged read share one entry.
//
// # Read-your-writes: a window, not an LSN
//
// After a write through a pool commits (Exec, a statement that is not a
// SELECT, a transaction's Commit), that pool's reads go to PostgreSQL for
// Config.ReadYourWrites (default 1 s, FRESHET_READ_YOUR_WRITES_MS). The
// exact rule (until the engine has applied the write's commit LSN) needs
// the commit LSN, and PostgreSQL does not return it with a commit: getting
// it costs a pg_current_wal_insert_lsn() round trip after every write,
// which this package will not add to every write of every program. The
// window is per pool rather than per connection because database/sql and
// pgxpool hand the next read to any idle connection: a per-connection rule
// would let an ORM read its own write from the cache before the engine
// has it. Set ReadYourWrites to 0 to turn it off, or use ViaPostgres for
// a read that must see a write made elsewhere.
//
// # The engine side
//
// Keys are spread by hash over Config.Sockets WebSockets (default 2) per
// engine. Each
// socket checks the engine's hello against the database the reads go to:
// its system_identifier and database name must equal what IdentityQuery
// returns on the reads' own connection (checked once; a failed check is
// retried, never taken as a match). A mismatch disables the cache for
// good: every read goes to PostgreSQL, the reason is logged and returned
// by Err (wrapping ErrMismatch). A socket that drops reconnects with
// backoff and resubscribes what it held; meanwhile only its own keys go to
// PostgreSQL. Why the last connection failed (401 wrong token, 503, bad
// URL, connection lost) is kept: LastConnectError.
//
// Lag: each socket tracks the engine's lag frames. While the reported lag
// plus the time since the last lag frame is over MaxLag (default 2 s), or
// no lag is known yet, that socket's reads go to PostgreSQL; a frozen or
// partitioned engine is thus noticed within MaxLag. Lag frames also carry
// when the heartbeat they name was written; the time since then is taken
// when it is larger, so the time a frame spent queued and in flight
// counts (clocks kept in step). Staleness returns the bound as it stands.
//
// # Several engines
//
// Config.URL may list several engines following one database (replicas
// fed by one `freshet relay`, docs/scale-out.md), each with its own
// Sockets. A key goes to the engine with the highest rendezvous score of
// (engine URL, key) among those alive, the same choice in every process,
// so identical queries share one view. An engine is alive while one of
// its sockets has had a hello or a lag frame within DeadAfter; when the
// set of alive engines changes, the keys not on their home move there
// (only a dead engine's keys, or the new engine's share; reads of a moving
// key go to PostgreSQL until it is accepted again). Every subscribe
// carries min_lsn, the newest position any engine has reported to this
// cache, so an answer is never older than one seen before (EngineOf and
// Moved show where keys are). A key an engine refuses
// too_many_subscriptions goes to its next choice among the alive engines
// that have not refused it, and stays off those for as long as the entry
// lives (bounded load; Spilt counts them); only when every alive engine
// has refused it does the refusal stand.
//
// # Memory
//
// Entries live in an otter cache (W-TinyLFU: a key read again and again
// is kept over a run of keys read once) bounded by MaxBytes (an estimate
// of each result's size), IdleTimeout and TTL. Evicting an entry
// unsubscribes it. A fill that raced with an eviction is dropped: the
// entry is dead, its accepted frame is ignored, and the read that waited
// goes to PostgreSQL (ReasonEvicted). Subscriptions are capped per process
// by MaxSubscriptions.
//
// # The cost of a hit
//
// A hit allocates nothing in this package or the adapters' database/sql
// path: the key is appended into a buffer the connection reuses
// (AppendKey, AppendArg) and looked up in place (ReadKey); each published
// Result keeps, per adapter, its values already decoded (Result.Memo), so
// a hit copies them instead of parsing text, until a delta publishes the
// next Result, whose first read decodes only the rows the delta changed;
// the time is read from a clock ticking every millisecond (Now) rather
// than the system clock. What remains of a database/sql hit is
// database/sql's own work (docs/benchmarks.md measures it).
//
// # Not done yet
//
// Result sets are rebuilt (copy on write) on each delta, which costs
// O(rows) per change of a large result (the first read after a delta
// decodes only the rows it changed, but copies the others' references).
package readcache
