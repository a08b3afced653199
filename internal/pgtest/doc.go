// Package pgtest starts throwaway PostgreSQL clusters for tests and the demo.
//
// A test package starts one cluster in TestMain and takes a fresh database
// per test:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		db := pgtest.NewDB(t) // dropped when the test ends
//		conn, err := pgx.Connect(ctx, db.DSN)
//		...
//	}
//
// The cluster is made by initdb in a temporary directory, listens on a free
// loopback port, runs with wal_level=logical, plenty of replication slots and
// WAL senders, fsync off and TimeZone UTC. When the process runs as root the
// server runs as the "postgres" OS user, since PostgreSQL refuses root. The
// binaries are found on PATH, through pg_config --bindir, or under
// /usr/lib/postgresql/*/bin (newest version first).
//
// The postmaster is started directly (not through pg_ctl) with the parent's
// death signal set, so a test binary that panics or is killed takes its
// server with it; the directories such a crash leaves behind are swept by the
// next Start.
//
// Setting FRESHET_TEST_DSN points every test at an existing server instead;
// its role must be allowed to create databases (and, for replication tests,
// have REPLICATION and a logical wal_level). Tests that need a cluster of
// their own (other server settings) skip under it, saying why.
//
// Under go test -fuzz (the fuzzer and its workers) Main starts no server:
// fuzz targets need none. LazyMain never starts one before a test asks for
// a database: a package whose tests mostly run without PostgreSQL (the
// engine's core tests) passes them on a machine that has none.
package pgtest
