package stdlib_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/internal/rctest"
	"github.com/freshetdb/freshet/readcache/stdlib"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is a real database, a real freshet serve following it, a plain pgx
// connection for writes and reference reads, and a *sql.DB of the driver
// whose statements to PostgreSQL are counted.
type env struct {
	t     testing.TB
	db    *pgtest.DB
	srv   *rctest.Server
	admin *pgx.Conn
	sqlDB *sql.DB
	conn  *stdlib.Connector
	stmts *pgtest.StatementCounter
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newEnv(t testing.TB, setup string, tweak func(*readcache.Config)) *env {
	t.Helper()
	ctx := rctest.Ctx(t)
	db := pgtest.NewDB(t)
	admin, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	if _, err := admin.Exec(ctx, setup); err != nil {
		t.Fatalf("setup: %v", err)
	}
	srv := rctest.Start(t, db.DSN, db.Name)
	e := &env{t: t, db: db, srv: srv, admin: admin, stmts: &pgtest.StatementCounter{}}
	e.sqlDB, e.conn = e.open(srv.URL, tweak)
	return e
}

// open opens a driver pool on the env's database reading through url.
func (e *env) open(url string, tweak func(*readcache.Config)) (*sql.DB, *stdlib.Connector) {
	e.t.Helper()
	cfg := readcache.DefaultConfig()
	cfg.URL, cfg.Logger = url, quiet()
	if os.Getenv("FRESHET_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg.MinBackoff, cfg.MaxBackoff = 20*time.Millisecond, 200*time.Millisecond
	if tweak != nil {
		tweak(&cfg)
	}
	pcfg, err := pgx.ParseConfig(e.db.DSN)
	if err != nil {
		e.t.Fatal(err)
	}
	pcfg.Tracer = e.stmts
	c, err := stdlib.NewConnectorConfig(pcfg, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	db := sql.OpenDB(c)
	e.t.Cleanup(func() { db.Close() })
	return db, c
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.admin.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("exec %q: %v", sql, err)
	}
}

// warm reads until read is served from the cache.
func (e *env) warm(read func() error) {
	e.t.Helper()
	rctest.WarmHit(e.t, e.conn.Cache(), read)
}

// hit runs read and fails unless it was a cache hit with no statement
// sent to PostgreSQL.
func (e *env) hit(read func() error) {
	e.t.Helper()
	hits, stmts := e.conn.Cache().Stats().Hits, e.stmts.Count()
	if err := read(); err != nil {
		e.t.Fatal(err)
	}
	if got := e.conn.Cache().Stats().Hits; got != hits+1 {
		e.t.Fatalf("hits = %d, want %d (stats %+v)", got, hits+1, e.conn.Cache().Stats())
	}
	if got := e.stmts.Count(); got != stmts {
		e.t.Fatalf("statements sent to PostgreSQL = %d, want %d (a hit sends none)", got, stmts)
	}
}

// fresh waits until read (through the cache) satisfies ok after a change,
// and checks PostgreSQL received no statement from the pool meanwhile.
func (e *env) fresh(read func() (string, error), want string) {
	e.t.Helper()
	stmts := e.stmts.Count()
	rctest.Eventually(e.t, 20*time.Second, func() string {
		got, err := read()
		if err != nil {
			return err.Error()
		}
		if got != want {
			return fmt.Sprintf("cached read = %q, want %q", got, want)
		}
		return ""
	})
	if got := e.stmts.Count(); got != stmts {
		e.t.Fatalf("statements sent to PostgreSQL while waiting for the change = %d, want 0", got-stmts)
	}
}
