package engine

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
	"github.com/jackc/pgx/v5/pgxpool"
)

// aggBenchQueries are the grouped subscriptions the aggregate benchmarks
// keep over items grouped by cat.
var aggBenchQueries = []struct{ name, sql string }{
	{"count", "SELECT cat, count(*) FROM items GROUP BY cat"},
	{"sum", "SELECT cat, sum(price) FROM items GROUP BY cat"},
	{"avg", "SELECT cat, avg(price) FROM items GROUP BY cat"},
	{"min_max", "SELECT cat, min(price), max(price) FROM items GROUP BY cat"},
	{"count_distinct", "SELECT cat, count(DISTINCT price) FROM items GROUP BY cat"},
	{"top10", "SELECT cat, sum(price) AS total FROM items GROUP BY cat ORDER BY total DESC, cat LIMIT 10"},
	{"all", "SELECT cat, count(*), sum(price), avg(price), min(price), max(price), count(DISTINCT price) FROM items GROUP BY cat"},
}

// distinctBenchQueries are the DISTINCT and DISTINCT ON subscriptions
// the aggregate benchmarks keep too (a DISTINCT ON group keeps every row
// in its tree), with ordered_count, a GROUP BY ordered over all its
// groups as DISTINCT ON's result is: an ordered result without a LIMIT
// diffs its whole order at each change.
var distinctBenchQueries = []struct{ name, sql string }{
	{"distinct", "SELECT DISTINCT cat FROM items"},
	{"distinct_on_top10", "SELECT DISTINCT ON (cat) cat, id, price FROM items ORDER BY cat, price DESC, id LIMIT 10"},
	{"distinct_on_all", "SELECT DISTINCT ON (cat) cat, id, price FROM items ORDER BY cat, price DESC, id"},
	{"ordered_count", "SELECT cat, count(*) FROM items GROUP BY cat ORDER BY cat"},
}

// loadGroups subscribes plan on an empty items table and inserts rows
// rows in groups groups (cat "c0".."c<groups-1>", price id%1000).
func loadGroups(tb testing.TB, bc *benchCore, plan *query.Plan, rows, groups int) {
	bc.subscribe(tb, []*query.Plan{plan})
	chs := make([]change.Change, 0, 10_000)
	for i := range rows {
		chs = append(chs, change.Change{Op: change.OpInsert, Rel: bc.rel, New: bc.groupRow(i, i/groups, i%groups)})
		if len(chs) == cap(chs) || i == rows-1 {
			bc.txn(chs)
			bc.core.Ready()
			chs = chs[:0]
		}
	}
}

func (bc *benchCore) groupRow(id, price, group int) change.Row {
	return change.Row{txt(strconv.Itoa(id)), txt("n"), txt(strconv.Itoa(price)), txt("c" + strconv.Itoa(group))}
}

// BenchmarkAggChange measures a single-row change to a grouped
// subscription over 1,000,000 rows in 10,000 groups (100 rows a group):
// an update of one row's price within its group, and one moving a row to
// another group. Each changes the output of one or two groups, which the
// core sends as a delta (ns/op is the whole transaction: apply, settle,
// the delta).
func BenchmarkAggChange(b *testing.B) {
	const rows, groups = 1_000_000, 10_000
	for _, q := range append(slices.Clone(aggBenchQueries), distinctBenchQueries...) {
		for _, move := range []bool{false, true} {
			name := q.name + "/within"
			if move {
				name = q.name + "/move"
			}
			b.Run(name, func(b *testing.B) {
				bc := newBenchCore(b)
				plan := bc.compile(b, q.sql)
				loadGroups(b, bc, plan, rows, groups)
				rng := rand.New(rand.NewPCG(1, 2))
				cats := make([]int, rows)
				for i := range cats {
					cats[i] = i % groups
				}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					id := rng.IntN(rows)
					if move {
						cats[id] = rng.IntN(groups)
					}
					bc.txn([]change.Change{{Op: change.OpUpdate, Rel: bc.rel, New: bc.groupRow(id, rng.IntN(100_000), cats[id])}})
					bc.core.Ready()
				}
			})
		}
	}
}

// TestAggMemoryPerGroup measures the heap an aggregating view takes per
// group beyond the rows it holds, for each aggregate kind: 100,000 rows
// in 10,000 groups of 10 distinct prices each, against a COUNT(*) view
// holding the same rows. It asserts generous bounds.
func TestAggMemoryPerGroup(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("memory measurement (not under -short or -race)")
	}
	const rows, groups = 100_000, 10_000
	measure := func(sql string) float64 {
		bc := newBenchCore(t)
		plan := bc.compile(t, sql)
		before := heap()
		loadGroups(t, bc, plan, rows, groups)
		after := heap()
		runtime.KeepAlive(bc)
		return (float64(after) - float64(before)) / groups
	}
	base := measure("SELECT count(*) FROM items WHERE price >= 0")
	t.Logf("rows alone (a COUNT(*) view): %.0f bytes per group of %d rows", base, rows/groups)
	// A group of 10 distinct prices; min/max and count(DISTINCT) grow with
	// the distinct values a group holds, the others do not.
	bounds := map[string]float64{"count": 1000, "sum": 1000, "avg": 1100, "min_max": 3200, "count_distinct": 2200, "top10": 1100, "all": 5500,
		"distinct": 1000, "distinct_on_top10": 4500, "distinct_on_all": 4500, "ordered_count": 1100}
	for _, q := range append(slices.Clone(aggBenchQueries), distinctBenchQueries...) {
		per := measure(q.sql) - base
		t.Logf("%s: %.0f bytes per group beyond its rows (%s)", q.name, per, q.sql)
		if per > bounds[q.name] {
			t.Errorf("%s: %.0f bytes per group, want <= %.0f", q.name, per, bounds[q.name])
		}
	}
}

// TestBenchAggPostgres (FRESHET_AGG_BENCH=1) times on PostgreSQL the
// aggregate query a grouped subscription saves: the whole result over
// 1,000,000 rows in 10,000 groups, and one group's row by an index.
func TestBenchAggPostgres(t *testing.T) {
	if os.Getenv("FRESHET_AGG_BENCH") == "" {
		t.Skip("set FRESHET_AGG_BENCH=1 to time the aggregate queries on PostgreSQL")
	}
	pool := newPool(t)
	execAll(t, pool,
		"CREATE TABLE items (id int4 PRIMARY KEY, name text, price int4, cat text)",
		"INSERT INTO items SELECT g, 'n', g % 1000, 'c' || (g % 10000) FROM generate_series(0, 999999) g",
		"CREATE INDEX ON items (cat)",
		"VACUUM ANALYZE items")
	for _, q := range aggBenchQueries {
		for _, one := range []bool{false, true} {
			sql := q.sql
			if one {
				if q.name == "top10" {
					continue
				}
				sql = "SELECT cat, " + sql[len("SELECT cat, "):len(sql)-len(" FROM items GROUP BY cat")] + " FROM items WHERE cat = 'c4242' GROUP BY cat"
			}
			median, least := timeRead(t, pool, sql)
			t.Logf("%-14s one group=%-5v median %v (min %v): %s", q.name, one, median, least, sql)
		}
	}
}

// execAll runs each statement on the pool, failing the test on an error.
func execAll(t *testing.T, pool *pgxpool.Pool, stmts ...string) {
	t.Helper()
	for _, sql := range stmts {
		if _, err := pool.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// timeRead runs a query 7 times, reading every row, and returns the
// median and the least time.
func timeRead(t *testing.T, pool *pgxpool.Pool, sql string) (median, least time.Duration) {
	t.Helper()
	var times []time.Duration
	for range 7 {
		start := time.Now()
		rows, err := pool.Query(context.Background(), sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		for rows.Next() {
		}
		if rows.Err() != nil {
			t.Fatalf("%s: %v", sql, rows.Err())
		}
		rows.Close()
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	return times[3], times[0]
}
