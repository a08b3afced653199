package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// distinctQueries are the subscriptions TestEngineDistinct keeps. An
// ordered one's ORDER BY leaves no tie between its result rows, so
// PostgreSQL's own order, numbered, is the reference (made in the test).
var distinctQueries = []refQuery{
	{sql: `SELECT DISTINCT region FROM sales WHERE amount > 10 ORDER BY region`, ordered: true},
	{sql: `SELECT DISTINCT region, ok FROM sales`},
	{sql: `SELECT DISTINCT price, small FROM sales ORDER BY price DESC NULLS LAST, small LIMIT 4 OFFSET 1`, ordered: true},
	{sql: `SELECT DISTINCT lower(region) AS r, small % 2 AS odd FROM sales WHERE id % 5 <> 0`},
	{sql: `SELECT DISTINCT r.zone, s.ok FROM sales s JOIN regions r ON r.name = s.region`},
	{sql: `SELECT DISTINCT ON (region) region, id, amount FROM sales ORDER BY region, amount DESC, id`, ordered: true},
	{sql: `SELECT DISTINCT ON (region, ok) region, ok, price, at FROM sales WHERE id % 3 <> 0 ORDER BY ok, region, at NULLS FIRST, id LIMIT 3`, ordered: true},
	{sql: `SELECT DISTINCT ON (lower(region)) lower(region) AS r, small FROM sales ORDER BY lower(region), small`, ordered: true},
	{sql: `SELECT DISTINCT ON (region) region, big, free FROM sales ORDER BY region DESC, id DESC`, ordered: true},
	{sql: `SELECT DISTINCT ON (r.zone) r.zone, s.id, s.amount FROM regions r LEFT JOIN sales s ON s.region = r.name
  ORDER BY r.zone, s.amount NULLS FIRST, s.id, r.name`, ordered: true},
	{sql: `SELECT DISTINCT ON (amount / 10) amount / 10 AS tens, id FROM sales WHERE amount IS NOT NULL ORDER BY amount / 10, id DESC`},
	{sql: `SELECT DISTINCT ON (region) region, id FROM sales WHERE region IN (SELECT name FROM regions WHERE zone < 3) ORDER BY region, id DESC`, ordered: true},
	{sql: `SELECT DISTINCT small, ok FROM sales WHERE region IN (SELECT name FROM regions WHERE zone <> 2)`},
}

// DISTINCT and DISTINCT ON subscriptions stay equal to PostgreSQL's own
// answer, compared as text, after each of many random writes: values
// that leave with their last row, the first row of a DISTINCT ON group
// deleted or moved (the next one shows), NULLs as a value, joins.
func TestEngineDistinct(t *testing.T) {
	r := newRig(t, aggDDL, Config{})
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 17))
	val := func(p float64, f func() string) string {
		if rng.Float64() < p {
			return "NULL"
		}
		return f()
	}
	regions := []string{"'a'", "'b'", "'c'", "'B'", "'d'"}
	row := func(id int) string {
		return fmt.Sprintf("(%d, %s, %s, %s, %s, %s, %s, %s, %s, NULL)", id,
			val(0.1, func() string { return regions[rng.IntN(len(regions))] }),
			val(0.15, func() string { return fmt.Sprint(rng.IntN(60) - 10) }),
			val(0.2, func() string { return fmt.Sprint(rng.IntN(5)) }),
			val(0.2, func() string { return fmt.Sprint(rng.Int64N(10) - 5) }),
			val(0.2, func() string { return fmt.Sprintf("%d.%02d", rng.IntN(6), 50*rng.IntN(2)) }),
			val(0.2, func() string { return fmt.Sprintf("%d.%s", rng.IntN(10), strings.Repeat("5", rng.IntN(3))) }),
			val(0.2, func() string { return fmt.Sprint(rng.IntN(3) > 0) }),
			val(0.2, func() string {
				return fmt.Sprintf("'2024-01-01 00:00:00+00'::timestamptz + interval '%d hours'", rng.IntN(20))
			}))
	}
	var ins []string
	for id := 1; id <= 30; id++ {
		ins = append(ins, row(id))
	}
	r.exec("INSERT INTO sales VALUES " + strings.Join(ins, ", "))
	recs := make([]*recorder, len(distinctQueries))
	for i, q := range distinctQueries {
		_, recs[i] = r.subscribe(q.sql)
	}
	waitAccepted(t, recs...)
	queries := slices.Clone(distinctQueries)
	for i, q := range queries {
		if q.ordered {
			queries[i].ref = "SELECT q.*, row_number() OVER () FROM (" + q.sql + ") q"
		}
	}
	checkAll := func(step string) {
		t.Helper()
		checkRefs(t, r, seed, step, queries, recs)
	}
	checkAll("hydrated")
	next := 100
	for step := range 120 {
		var sql string
		switch k := rng.IntN(10); {
		case k < 3:
			sql = "INSERT INTO sales VALUES " + row(next)
			next++
		case k < 5:
			sql = fmt.Sprintf("UPDATE sales SET amount = %d, region = %s WHERE id %% 9 = %d", rng.IntN(60), []string{"'a'", "'b'", "'e'"}[rng.IntN(3)], rng.IntN(9))
		case k < 6:
			// The first row of every DISTINCT ON (region) group leaves.
			sql = "DELETE FROM sales WHERE id IN (SELECT DISTINCT ON (region) id FROM sales ORDER BY region, amount DESC, id)"
		case k < 7:
			// A whole value leaves, then comes back in a later write.
			sql = fmt.Sprintf("DELETE FROM sales WHERE region = %s", []string{"'a'", "'b'", "'c'", "'B'", "'d'", "'e'"}[rng.IntN(6)])
		case k < 8:
			sql = fmt.Sprintf("BEGIN; INSERT INTO sales VALUES %s; UPDATE sales SET small = small + 1, ok = NOT ok WHERE id %% 4 = %d; DELETE FROM sales WHERE id %% 11 = %d; COMMIT",
				row(next), rng.IntN(4), rng.IntN(11))
			next++
		case k < 9:
			sql = fmt.Sprintf("UPDATE sales SET id = id + 1000, at = at + interval '3 hours' WHERE id %% 13 = %d", rng.IntN(13))
		default:
			// The joined table changes: a region moves zone, leaves, comes.
			sql = fmt.Sprintf("BEGIN; UPDATE regions SET zone = %d WHERE name = %s; DELETE FROM regions WHERE name = %s; INSERT INTO regions VALUES (%s, %d) ON CONFLICT (name) DO UPDATE SET zone = excluded.zone; COMMIT",
				rng.IntN(4), []string{"'a'", "'b'", "'c'"}[rng.IntN(3)], []string{"'a'", "'B'", "'e'"}[rng.IntN(3)], []string{"'a'", "'B'", "'d'", "'e'"}[rng.IntN(4)], rng.IntN(4))
		}
		r.exec(sql)
		checkAll(fmt.Sprintf("step %d (%s)", step, sql))
	}
}
