package stdlib_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/internal/rctest"
	"github.com/freshetdb/freshet/readcache/stdlib"
	"github.com/jackc/pgx/v5"
)

const smallSchema = `CREATE TABLE kv (k int PRIMARY KEY, v text); INSERT INTO kv VALUES (1, 'one'), (2, 'two');`

func (e *env) value(ctx context.Context, k int) (string, error) {
	var v string
	err := e.sqlDB.QueryRowContext(ctx, "SELECT v FROM kv WHERE k = $1", k).Scan(&v)
	return v, err
}

func TestRoutes(t *testing.T) {
	e := newEnv(t, smallSchema, nil)
	ctx := context.Background()
	read := func(ctx context.Context) func() error {
		return func() error { _, err := e.value(ctx, 1); return err }
	}
	e.warm(read(ctx))
	pgReads := func() int64 { return e.stmts.Count() }

	before := pgReads()
	if _, err := e.value(readcache.ViaPostgres(ctx), 1); err != nil {
		t.Fatal(err)
	}
	if pgReads() != before+1 {
		t.Fatalf("ViaPostgres: statements to PostgreSQL = %d, want 1", pgReads()-before)
	}
	// The flagged and unflagged reads share one entry.
	e.hit(read(readcache.ViaCache(ctx)))
	if n := e.conn.Cache().Stats().Entries; n != 1 {
		t.Fatalf("entries = %d, want 1", n)
	}

	// Pool route: PostgreSQL, unless the query says ViaCache.
	e.conn.SetRoute(readcache.RoutePostgres)
	before = pgReads()
	if _, err := e.value(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if pgReads() != before+1 {
		t.Fatal("pool route postgres: the read did not go to PostgreSQL")
	}
	e.hit(read(readcache.ViaCache(ctx)))

	// Connection route wins over the pool's.
	c, err := e.sqlDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := stdlib.SetConnRoute(c, readcache.RouteCache); err != nil {
		t.Fatal(err)
	}
	e.hit(func() error {
		var v string
		return c.QueryRowContext(ctx, "SELECT v FROM kv WHERE k = $1", 1).Scan(&v)
	})
	e.conn.SetRoute(readcache.RouteDefault)

	// Process default.
	readcache.SetDefaultRoute(readcache.RoutePostgres)
	before = pgReads()
	_, err = e.value(ctx, 1)
	readcache.SetDefaultRoute(readcache.RouteDefault)
	if err != nil || pgReads() != before+1 {
		t.Fatalf("process route postgres: err %v, statements %d, want 1", err, pgReads()-before)
	}
	if got := e.conn.Cache().Stats().Postgres["route"]; got != 3 {
		t.Fatalf("reads routed to PostgreSQL = %d, want 3", got)
	}
}

// TestEngineKilled: reads go to PostgreSQL while the engine is gone and
// come back to the cache, fresh, when it returns.
func TestEngineKilled(t *testing.T) {
	e := newEnv(t, smallSchema, nil)
	ctx := context.Background()
	e.warm(func() error { _, err := e.value(ctx, 2); return err })
	e.srv.Kill()
	rctest.Eventually(t, 10*time.Second, func() string {
		st := e.conn.Cache().Stats()
		if st.Connected != 0 {
			return fmt.Sprintf("sockets connected = %d, want 0", st.Connected)
		}
		return ""
	})
	e.exec("UPDATE kv SET v = 'two while down' WHERE k = 2")
	d0 := e.conn.Cache().Stats().Postgres["disconnected"]
	if v, err := e.value(ctx, 2); err != nil || v != "two while down" {
		t.Fatalf("read while the engine is down = %q, %v; want the new value from PostgreSQL", v, err)
	}
	if got := e.conn.Cache().Stats().Postgres["disconnected"]; got != d0+1 {
		t.Fatalf("reads to PostgreSQL while disconnected = %d, want %d", got, d0+1)
	}
	e.srv.Restart()
	e.warm(func() error { _, err := e.value(ctx, 2); return err })
	e.hit(func() error {
		v, err := e.value(ctx, 2)
		if err == nil && v != "two while down" {
			err = fmt.Errorf("cached value after reconnect = %q, want %q", v, "two while down")
		}
		return err
	})
}

// TestFrozenEngine: a stopped engine (SIGSTOP) sends no lag frames; reads go
// to PostgreSQL once the silence passes MaxLag, and back when it resumes.
func TestFrozenEngine(t *testing.T) {
	e := newEnv(t, smallSchema, func(c *readcache.Config) { c.MaxLag = 500 * time.Millisecond })
	ctx := context.Background()
	e.warm(func() error { _, err := e.value(ctx, 1); return err })
	e.srv.Freeze()
	rctest.Eventually(t, 10*time.Second, func() string {
		l0 := e.conn.Cache().Stats().Postgres["lag"]
		if _, err := e.value(ctx, 1); err != nil {
			return err.Error()
		}
		if e.conn.Cache().Stats().Postgres["lag"] == l0 {
			return "a read was served from the cache of a frozen engine"
		}
		return ""
	})
	e.srv.Thaw()
	e.warm(func() error { _, err := e.value(ctx, 1); return err })
}

// TestWrongDatabase: an engine following another database is never used.
func TestWrongDatabase(t *testing.T) {
	e := newEnv(t, smallSchema, nil)
	other := pgtest.NewDB(t)
	ctx := rctest.Ctx(t)
	oc, err := pgx.Connect(ctx, other.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close(ctx)
	if _, err := oc.Exec(ctx, smallSchema+"UPDATE kv SET v = 'other'"); err != nil {
		t.Fatal(err)
	}
	// A pool on the other database, pointed at the engine of e's.
	wrong := &env{t: t, db: other, stmts: &pgtest.StatementCounter{}}
	db, conn := wrong.open(e.srv.URL, nil)
	rctest.Eventually(t, 20*time.Second, func() string {
		var v string
		if err := db.QueryRowContext(ctx, "SELECT v FROM kv WHERE k = 1").Scan(&v); err != nil {
			return err.Error()
		}
		if v != "other" {
			t.Fatalf("read = %q: served from an engine following another database", v)
		}
		if !errors.Is(conn.Cache().Err(), readcache.ErrMismatch) {
			return fmt.Sprintf("cache error = %v, want ErrMismatch", conn.Cache().Err())
		}
		return ""
	})
	if st := conn.Cache().Stats(); st.Hits+st.Misses != 0 {
		t.Fatalf("stats %+v: want no read served from the cache", st)
	}
}

// TestWrongToken: the failure to connect says the token was refused.
func TestWrongToken(t *testing.T) {
	db := pgtest.NewDB(t)
	e := &env{t: t, db: db, stmts: &pgtest.StatementCounter{}}
	ctx := rctest.Ctx(t)
	admin, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	admin.Exec(ctx, smallSchema)
	srv := rctest.Start(t, db.DSN, db.Name, "FRESHET_S2S_TOKEN=right")
	sdb, conn := e.open(srv.URL, func(c *readcache.Config) { c.Token = "wrong" })
	rctest.Eventually(t, 20*time.Second, func() string {
		var v string
		if err := sdb.QueryRowContext(ctx, "SELECT v FROM kv WHERE k = 1").Scan(&v); err != nil {
			return err.Error()
		}
		if err := conn.Cache().Err(); err == nil || !strings.Contains(err.Error(), "401") {
			return fmt.Sprintf("cache error = %v, want one saying 401", err)
		}
		return ""
	})
	// The right token works.
	e2 := &env{t: t, db: db, stmts: &pgtest.StatementCounter{}}
	e2.sqlDB, e2.conn = e2.open(srv.URL, func(c *readcache.Config) { c.Token = "right" })
	e2.warm(func() error { _, err := e2.value(ctx, 1); return err })
}

// TestRefused: a query the engine refuses is read from PostgreSQL, and
// remembered: the next read does not ask again.
func TestRefused(t *testing.T) {
	e := newEnv(t, smallSchema, nil)
	ctx := context.Background()
	e.warm(func() error { _, err := e.value(ctx, 1); return err })
	const q = "SELECT v FROM kv UNION SELECT v FROM kv ORDER BY v"
	read := func() ([]string, error) {
		rows, err := e.sqlDB.QueryContext(ctx, q)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, rows.Err()
	}
	// The first read goes to PostgreSQL before the engine's verdict
	// (hydrating), the ones after it because of the verdict (refused).
	pg0 := e.conn.Cache().Stats().Postgres
	for i := 1; i <= 3; i++ {
		got, err := read()
		if err != nil || strings.Join(got, ",") != "one,two" {
			t.Fatalf("read %d = %v, %v; want [one two]", i, got, err)
		}
		pg := e.conn.Cache().Stats().Postgres
		if refused, hydrating := pg["refused"]-pg0["refused"], pg["hydrating"]-pg0["hydrating"]; refused+hydrating != int64(i) {
			t.Fatalf("reads sent to PostgreSQL refused %d, hydrating %d; want %d in all", refused, hydrating, i)
		}
	}
	rctest.Eventually(t, 10*time.Second, func() string {
		if got, err := read(); err != nil || strings.Join(got, ",") != "one,two" {
			return fmt.Sprintf("read = %v, %v; want [one two]", got, err)
		}
		if e.conn.Cache().Stats().Postgres["refused"] == 0 {
			return "no read was sent to PostgreSQL as refused"
		}
		return ""
	})
	if st := e.conn.Cache().Stats(); st.Subscriptions != 1 || e.serverSubs() != 1 {
		t.Fatalf("subscriptions: cache %d, engine %d; want 1 (the refused query holds none)", st.Subscriptions, e.serverSubs())
	}
}

// TestEngineRestartedGracefully: SIGTERM closes the sockets (1001); reads go
// to PostgreSQL meanwhile and come back to the cache after the restart.
func TestEngineRestartedGracefully(t *testing.T) {
	e := newEnv(t, smallSchema, nil)
	ctx := context.Background()
	e.warm(func() error { _, err := e.value(ctx, 1); return err })
	e.srv.Stop()
	rctest.Eventually(t, 10*time.Second, func() string {
		if _, err := e.value(ctx, 1); err != nil {
			return err.Error()
		}
		if n := e.conn.Cache().Stats().Postgres["disconnected"]; n == 0 {
			return "no read went to PostgreSQL while the engine was stopped"
		}
		return ""
	})
	e.exec("UPDATE kv SET v = 'after restart' WHERE k = 1")
	e.srv.RestartGracefully()
	e.warm(func() error { _, err := e.value(ctx, 1); return err })
	if v, err := e.value(ctx, 1); err != nil || v != "after restart" {
		t.Fatalf("cached value after the restart = %q, %v; want %q", v, err, "after restart")
	}
}
