// Package desktest is what tests of the ticket desk need (the desk's own
// and the demo's): a `freshet serve` following a test database (through
// internal/servetest), and read-cache pools whose statements to
// PostgreSQL are counted and whose refusals are recorded by code.
package desktest

import (
	"database/sql"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/internal/servetest"
	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/stdlib"
	"github.com/freshetdb/freshet/ticketdesk"
	"github.com/jackc/pgx/v5"
)

// Server is a running `freshet serve` (see internal/servetest).
type Server = servetest.Server

// Serve starts `freshet serve` following dsn (whose database is dbName)
// with 100 ms heartbeats and lag frames, its slot and publication named
// after the database, and extra flags appended (the desk's tests pass
// "--row-limit" ticketdesk.RowLimit). It is stopped when the test ends.
func Serve(t testing.TB, dsn, dbName string, extra ...string) *Server {
	t.Helper()
	return servetest.Start(t, servetest.Options{DSN: dsn, Slot: servetest.SlotFor("desk_", dbName), Args: extra})
}

// Pool is a *sql.DB reading through the cache, with the statements it
// sends to PostgreSQL counted and the engine's refusals recorded.
type Pool struct {
	DB    *sql.DB
	Cache *readcache.Cache
	// Refusals records the refusal code the engine gave each SQL text.
	Refusals *ticketdesk.RefusalLog
	stmts    pgtest.StatementCounter
}

// Statements returns how many statements the pool has sent to PostgreSQL.
func (p *Pool) Statements() int64 { return p.stmts.Count() }

// Open opens a pool on dsn reading through the engine at url, with a read
// cache configured for tests (fast reconnects; tweak may change more). It
// is closed when the test ends.
func Open(t testing.TB, dsn, url string, tweak func(*readcache.Config)) *Pool {
	t.Helper()
	var next slog.Handler
	if os.Getenv("FRESHET_TEST_LOG") != "" {
		next = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	}
	p := &Pool{Refusals: ticketdesk.NewRefusalLog(next)}
	cfg := readcache.DefaultConfig()
	cfg.URL = url
	cfg.Logger = slog.New(p.Refusals)
	cfg.MinBackoff, cfg.MaxBackoff = 20*time.Millisecond, 200*time.Millisecond
	if tweak != nil {
		tweak(&cfg)
	}
	pcfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.Tracer = &p.stmts
	c, err := stdlib.NewConnectorConfig(pcfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.DB, p.Cache = sql.OpenDB(c), c.Cache()
	t.Cleanup(func() { p.DB.Close() })
	return p
}
