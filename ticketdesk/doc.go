// Package ticketdesk is the backend of Freshet's demo: a small ticket desk
// written the way a Go team would write one (GORM over database/sql, HTTP
// JSON handlers), reading through the read cache (readcache/stdlib), with
// a writer that keeps changing its data and a verifier that compares every
// cached answer with PostgreSQL's. `freshet demo` and the scenario tests
// run it; docs/demo.md lists every lookup with its SQL and expectation.
//
// # The desk
//
// CreateSchema makes organizations, users, tickets (status, priority, a
// nullable assignee, timestamps, a text[] of tags and a 2-8 KB body that
// PostgreSQL stores out of line), comments, labels keyed by (org_id, name)
// and ticket_labels; a ticket's delete cascades to its comments and
// labels. Seed fills it deterministically (scale 1: 10 organizations and
// an empty eleventh, 200 users, 3,000 tickets, about 6,000 comments) in a
// couple of seconds. LoadWorld reads the id ranges and keys the lookups
// and the writer draw from.
//
// # Lookups
//
// Lookups returns the reads the desk makes (26): point lookups by key and
// by the two-column key, IS NULL, OR, <> and NOT IN, = ANY of an array, a
// time range, a 100-id IN list, results that must stay empty, the largest
// result under the per-entry cap, ORDER BY ... LIMIT pages, counts, inner
// joins, left joins with an empty side, DISTINCT, GROUP BY, MAX, the
// array operator @>, and one the engine refuses (a result over the cap).
// Each says what it expects: Cached (served from rows the engine keeps
// fresh) or Refused (read from PostgreSQL, with the engine's refusal
// Code). The expectations assume `freshet serve --row-limit 2000`
// (RowLimit) and hold for scales 1 to 9. SQLOf renders a lookup's SQL
// without a database. Results marshal to JSON deterministically (every
// multi-row lookup orders by a unique key).
//
// # Writer
//
// A Writer (NewWriter, Run, Stats) draws each transaction from a weighted
// mix of kinds (Kinds, DefaultMix): status, priority, comment, new_ticket,
// delete (cascading), move (between organizations), rename (a user, seen
// through a join), assignee (NULL and back), batch (a multi-row
// transaction), rollback, touch (the title changes, the TOASTed body does
// not) and label. Rate (transactions per second, 0 as fast as possible),
// Workers and Mix are settings; a failed transaction is counted and the
// next one starts. It never touches the empty organization and never
// commits StatusNever, which keeps the "must stay empty" lookups empty.
//
// # Verifier
//
// Verify reads lookups through the cache and through PostgreSQL and
// compares the JSON of the answers; a differing pair is re-read until the
// cached answer equals one PostgreSQL gave meanwhile, or the settle time
// (DefaultSettle, 2 s) runs out, which makes a Mismatch holding both
// answers. It also checks each lookup's Expect against how the cached read
// was routed. The read cache exposes counters, not a per-read route, so
// Verify takes the difference of the pool's readcache.Stats around each
// read: exact when the verifier has the pool to itself, "unobserved" when
// other reads moved the counters too. A RefusalLog installed as the pool's
// logger records the engine's refusal code per query; given as
// VerifyConfig.RefusalCode it lets Verify check a refusal's code.
//
// # HTTP
//
// NewHandler serves GET /lookups, GET /lookups/{name}?seed=N (the lookup
// with arguments drawn by seed N), GET /tickets/{id}, GET
// /tickets/{id}/comments, GET /orgs/{id}/tickets?offset=N and POST
// /tickets/{id}/comments.
package ticketdesk
