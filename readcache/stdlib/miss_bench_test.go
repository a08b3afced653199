package stdlib_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/internal/rctest"
	"github.com/freshetdb/freshet/readcache/pgxcache"
	"github.com/freshetdb/freshet/readcache/stdlib"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // "pgx", the reads straight from PostgreSQL
)

// TestBenchMisses reads 10,000 distinct keys once each (a point lookup of
// rctest.BenchSchema's accounts; FRESHET_MISS_BENCH_KEYS changes the
// count), one reader, through each adapter and straight from PostgreSQL:
// every read of the cache is a first read of its key. "cache" is the
// default (VerdictTimeout 0: a miss reads PostgreSQL while the
// subscription hydrates); "cache, waiting" has VerdictTimeout 5 s, how
// every miss behaved before (it waits for the engine's first answer).
// Each way reads its own keys, so no way finds another's subscriptions
// already hydrated, in turns of 500 reads, so all see the same load. Not
// a test: it runs only with FRESHET_MISS_BENCH=1 (docs/benchmarks.md).
func TestBenchMisses(t *testing.T) {
	if os.Getenv("FRESHET_MISS_BENCH") == "" {
		t.Skip("set FRESHET_MISS_BENCH=1 to run the miss benchmark")
	}
	keys := 10_000
	if n, err := strconv.Atoi(os.Getenv("FRESHET_MISS_BENCH_KEYS")); err == nil && n > 0 {
		keys = n
	}
	const q = "SELECT id, name, balance, updated FROM accounts WHERE id = $1"
	ctx := context.Background()
	db := pgtest.NewDB(t)
	admin, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	ways := []string{"postgres (database/sql)", "cache (database/sql)", "cache, waiting (database/sql)",
		"postgres (pgx pool)", "cache (pgx wrapper)", "cache, waiting (pgx wrapper)"}
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE TABLE accounts (id int PRIMARY KEY, name text NOT NULL, balance numeric(12,2) NOT NULL, updated timestamptz NOT NULL);
INSERT INTO accounts SELECT i, 'account ' || i, i * 10.5, '2024-01-01 00:00:00+00'::timestamptz + i * interval '1 minute' FROM generate_series(1, %d) i;
ANALYZE accounts; SELECT count(*) FROM accounts`, keys*len(ways))); err != nil {
		t.Fatal(err)
	}
	// Every key subscribes: lift the per-connection cap (1,000).
	srv := rctest.Start(t, db.DSN, db.Name, "FRESHET_MAX_SUBSCRIPTIONS=0")
	config := func(wait time.Duration) readcache.Config {
		cfg := readcache.DefaultConfig()
		cfg.URL, cfg.Logger, cfg.VerdictTimeout, cfg.MaxSubscriptions = srv.URL, quiet(), wait, 2*keys
		return cfg
	}
	sqlDB := func(wait time.Duration) (*sql.DB, *readcache.Cache) {
		pcfg, err := pgx.ParseConfig(db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		c, err := stdlib.NewConnectorConfig(pcfg, config(wait))
		if err != nil {
			t.Fatal(err)
		}
		d := sql.OpenDB(c)
		t.Cleanup(func() { d.Close() })
		return d, c.Cache()
	}
	pgxPool := func() *pgxpool.Pool {
		p, err := pgxpool.New(ctx, db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	wrapper := func(wait time.Duration) (*pgxcache.Pool, *readcache.Cache) {
		p, err := pgxcache.New(pgxPool(), config(wait))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p, p.Cache()
	}
	plain, err := sql.Open("pgx", db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	cached, cachedC := sqlDB(0)
	waiting, waitingC := sqlDB(5 * time.Second)
	pool := pgxPool()
	wrapped, wrappedC := wrapper(0)
	wrappedW, wrappedWC := wrapper(5 * time.Second)
	caches := map[string]*readcache.Cache{ways[1]: cachedC, ways[2]: waitingC, ways[4]: wrappedC, ways[5]: wrappedWC}

	viaSQL := func(d *sql.DB) func(int) error {
		return func(id int) error {
			var (
				gid        int
				name, bal  string
				updated    time.Time
				rows, err0 = d.QueryContext(ctx, q, id)
			)
			if err0 != nil {
				return err0
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				if err := rows.Scan(&gid, &name, &bal, &updated); err != nil {
					return err
				}
				n++
			}
			if n != 1 || gid != id {
				return fmt.Errorf("account %d: %d rows (id %d)", id, n, gid)
			}
			return rows.Err()
		}
	}
	viaPgx := func(query func(context.Context, string, ...any) (pgx.Rows, error)) func(int) error {
		return func(id int) error {
			rows, err := query(ctx, q, int32(id))
			if err != nil {
				return err
			}
			defer rows.Close()
			var gid int32
			var name string
			var bal pgtype.Numeric
			var updated time.Time
			n := 0
			for rows.Next() {
				if err := rows.Scan(&gid, &name, &bal, &updated); err != nil {
					return err
				}
				n++
			}
			if n != 1 || int(gid) != id {
				return fmt.Errorf("account %d: %d rows (id %d)", id, n, gid)
			}
			return rows.Err()
		}
	}
	read := map[string]func(int) error{ways[0]: viaSQL(plain), ways[1]: viaSQL(cached), ways[2]: viaSQL(waiting),
		ways[3]: viaPgx(pool.Query), ways[4]: viaPgx(wrapped.Query), ways[5]: viaPgx(wrappedW.Query)}

	// The caches' sockets are up and their identity checked before the
	// run: warm each on a key of its own, beyond the keys read below.
	for i, w := range ways {
		if c := caches[w]; c != nil {
			id := keys*len(ways) - i
			rctest.WarmHit(t, c, func() error { return read[w](id) })
		}
	}
	before := map[string]readcache.Stats{}
	for w, c := range caches {
		before[w] = c.Stats()
	}
	lat := map[string][]time.Duration{}
	took := map[string]time.Duration{}
	const turn = 500
	for start := 0; start < keys; start += turn {
		for i, w := range ways {
			t0 := time.Now()
			for k := start; k < min(start+turn, keys); k++ {
				id := 1 + i*keys + k
				r0 := time.Now()
				if err := read[w](id); err != nil {
					t.Fatalf("%s: %v", w, err)
				}
				lat[w] = append(lat[w], time.Since(r0))
			}
			took[w] += time.Since(t0)
		}
	}
	us := func(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/1e3) }
	var b strings.Builder
	fmt.Fprintf(&b, "%d distinct point lookups read once each, one reader, µs\n", keys)
	b.WriteString("| way | reads/s | p50 | p90 | p99 | max | answered by |\n| --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, w := range ways {
		l := lat[w]
		slices.Sort(l)
		by := "PostgreSQL"
		if c := caches[w]; c != nil {
			st, st0 := c.Stats(), before[w]
			var pg []string
			for r, n := range st.Postgres {
				if d := n - st0.Postgres[r]; d > 0 {
					pg = append(pg, fmt.Sprintf("%s %d", r, d))
				}
			}
			slices.Sort(pg)
			by = fmt.Sprintf("memory: %d hits, %d first answers; PostgreSQL: %s", st.Hits-st0.Hits, st.Misses-st0.Misses, strings.Join(pg, ", "))
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s | %s | %s |\n", w, float64(len(l))/took[w].Seconds(),
			us(l[len(l)/2]), us(l[len(l)*9/10]), us(l[len(l)*99/100]), us(l[len(l)-1]), by)
	}
	t.Log("\n" + b.String())
}
