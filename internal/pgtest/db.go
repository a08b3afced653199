package pgtest

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names the environment variable that points tests at an existing
// server instead of a throwaway cluster.
const EnvDSN = "FRESHET_TEST_DSN"

var (
	mu      sync.Mutex
	shared  *Cluster
	baseDSN string // DSN of the maintenance database of the server in use
	dbSeq   atomic.Int64
	lazy    bool // fuzzing: the server starts at the first NewDB
)

// server returns the DSN of the server in use, starting the shared
// cluster first when a fuzz run asks for its first database.
func server() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if baseDSN != "" || !lazy {
		return baseDSN, nil
	}
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		baseDSN = dsn
		return baseDSN, nil
	}
	c, err := Start(Options{})
	if err != nil {
		return "", err
	}
	shared, baseDSN = c, c.DSN("postgres")
	return baseDSN, nil
}

// Main runs a test package's tests against one cluster: a throwaway one, or
// the server FRESHET_TEST_DSN names. Call it from TestMain.
func Main(m *testing.M) {
	os.Exit(run(m, false))
}

// LazyMain is Main for a package whose tests mostly need no server: the
// cluster starts when a test first asks for a database (NewDB), so the
// others run, and pass, on a machine without PostgreSQL.
func LazyMain(m *testing.M) {
	os.Exit(run(m, true))
}

func run(m *testing.M, lazily bool) int {
	if lazily || fuzzing() {
		// A fuzz run (go test -fuzz, and each of its worker processes)
		// runs fuzz targets only, and most need no server: one is started
		// when a target first asks for a database (NewDB), not for every
		// worker of every target.
		mu.Lock()
		lazy = true
		mu.Unlock()
		code := m.Run()
		mu.Lock()
		defer mu.Unlock()
		if shared != nil {
			shared.Stop()
		}
		return code
	}
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		baseDSN = dsn
		return m.Run()
	}
	c, err := Start(Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		return 1
	}
	mu.Lock()
	shared = c
	baseDSN = c.DSN("postgres")
	mu.Unlock()
	defer c.Stop()
	return m.Run()
}

// fuzzing reports whether the test binary runs as a fuzzer or one of its
// workers (flags -test.fuzz and -test.fuzzworker).
func fuzzing() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	f, w := flag.Lookup("test.fuzz"), flag.Lookup("test.fuzzworker")
	return f != nil && f.Value.String() != "" || w != nil && w.Value.String() == "true"
}

// Shared returns the package's throwaway cluster, or nil when the tests run
// against FRESHET_TEST_DSN.
func Shared() *Cluster {
	mu.Lock()
	defer mu.Unlock()
	return shared
}

// DB is a database made for one test.
type DB struct {
	Name string
	DSN  string
}

// NewDB creates a fresh, empty database for the test and drops it (with any
// replication slots in it) when the test ends.
func NewDB(t testing.TB) *DB {
	t.Helper()
	base, err := server()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if base == "" {
		t.Fatal("pgtest: no server; call pgtest.Main(m) from TestMain")
	}
	name := fmt.Sprintf("t%d_%d_%s", os.Getpid(), dbSeq.Add(1), sanitize(t.Name()))
	if len(name) > 63 {
		name = name[:63]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: connect %s: %v", redact(base), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	db := &DB{Name: name, DSN: withDatabase(base, name)}
	t.Cleanup(func() { dropDB(t, name) })
	return db
}

// Exec connects to the database, runs sql (statements separated by
// semicolons) and closes the connection; the test fails on an error.
func (d *DB) Exec(t testing.TB, sql string) {
	t.Helper()
	ctx, conn, done := d.connect(t)
	defer done()
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
}

// connect opens a connection for a short statement; done closes it.
func (d *DB) connect(t testing.TB) (context.Context, *pgx.Conn, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	conn, err := pgx.Connect(ctx, d.DSN)
	if err != nil {
		cancel()
		t.Fatalf("pgtest: connect to %s: %v", d.Name, err)
	}
	return ctx, conn, func() { conn.Close(ctx); cancel() }
}

// SystemID returns the cluster's system identifier (what names a bus
// stream and what a read cache verifies).
func (d *DB) SystemID(t testing.TB) string {
	t.Helper()
	ctx, conn, done := d.connect(t)
	defer done()
	var id string
	if err := conn.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&id); err != nil {
		t.Fatalf("pgtest: system identifier: %v", err)
	}
	return id
}

func dropDB(t testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base, _ := server()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Logf("pgtest: drop %s: %v", name, err)
		return
	}
	defer admin.Close(ctx)
	// Slots pin the database: end their walsenders, then drop them.
	for i := 0; i < 50; i++ {
		_, _ = admin.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL`, name)
		_, err = admin.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, name)
		var left int
		_ = admin.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = $1`, name).Scan(&left)
		if left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Logf("pgtest: drop database %s: %v", name, err)
	}
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// withDatabase returns dsn with its database replaced by db. It accepts URL
// and keyword/value DSNs.
func withDatabase(dsn, db string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + db
		return u.String()
	}
	var out []string
	for _, f := range strings.Fields(dsn) {
		if !strings.HasPrefix(f, "dbname=") {
			out = append(out, f)
		}
	}
	return strings.Join(append(out, "dbname="+db), " ")
}

func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		return u.String()
	}
	return dsn
}
