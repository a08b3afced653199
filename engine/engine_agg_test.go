package engine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/query"
)

// aggDDL is a table whose values make every aggregate's edge cases
// likely: few regions (groups empty and come back), NULLs in every
// column, int8 values near the top (their SUM overflows into numeric),
// numeric of a fixed and of varying scales, NaN among the floats.
const aggDDL = `
CREATE TABLE sales (id int PRIMARY KEY, region text COLLATE "C", amount int, small int2, big int8,
  price numeric(12,2), free numeric, ok bool, at timestamptz, ratio float8);
CREATE TABLE regions (name text COLLATE "C" PRIMARY KEY, zone int);
INSERT INTO regions VALUES ('a', 1), ('b', 1), ('c', 2), ('x', 3);
`

// aggQueries are the subscriptions TestEngineAggregates keeps, each with
// the query PostgreSQL answers for reference (ordered ones with their
// tie groups, as sameRows takes them) and whether its order is checked.
var aggQueries = []refQuery{
	{sql: `SELECT count(*), count(amount), sum(amount), sum(small), sum(big), sum(price), sum(free), avg(amount), avg(small), avg(big),
  avg(price), avg(free), min(amount), max(amount), min(price), max(price), max(at), min(region), max(region), min(ratio::numeric(20,6)), max(ratio::numeric(20,6)),
  bool_and(ok), bool_or(ok), every(ok) FROM sales WHERE id % 7 <> 0`},
	{sql: `SELECT region, count(*) AS n, sum(amount), max(price), count(DISTINCT small), count(DISTINCT free), min(at), sum(big) FROM sales GROUP BY region`},
	{sql: `SELECT region, ok, count(*), avg(amount), sum(free) FROM sales WHERE amount > 20 GROUP BY region, ok HAVING count(*) > 1`},
	{sql: `SELECT region, sum(amount) AS total FROM sales GROUP BY region ORDER BY total DESC NULLS LAST, region LIMIT 3`,
		ref: `SELECT region, sum(amount) AS total, dense_rank() OVER (ORDER BY sum(amount) DESC NULLS LAST, region) FROM sales
  GROUP BY region ORDER BY total DESC NULLS LAST, region LIMIT 3`, ordered: true},
	{sql: `SELECT lower(region) AS r, max(amount) - min(amount) AS spread, count(*) * 2 AS c2 FROM sales GROUP BY lower(region)
  HAVING max(amount) IS NOT NULL ORDER BY spread DESC, 1 LIMIT 2 OFFSET 1`,
		ref: `SELECT lower(region) AS r, max(amount) - min(amount) AS spread, count(*) * 2 AS c2,
  dense_rank() OVER (ORDER BY max(amount) - min(amount) DESC, lower(region)) FROM sales GROUP BY lower(region)
  HAVING max(amount) IS NOT NULL ORDER BY spread DESC, 1 LIMIT 2 OFFSET 1`, ordered: true},
	{sql: `SELECT count(*) AS n, max(amount) FROM sales WHERE region = 'b' HAVING count(*) > 2`},
	{sql: `SELECT date_trunc('day', at) AS day, count(*), min(amount) FROM sales WHERE at IS NOT NULL GROUP BY 1`},
	{sql: `SELECT r.zone, count(*), sum(s.amount), max(s.price), count(DISTINCT s.region) FROM sales s JOIN regions r ON r.name = s.region GROUP BY r.zone`},
	{sql: `SELECT s.region, count(r.name), min(r.zone), avg(s.small) FROM sales s LEFT JOIN regions r ON r.name = s.region GROUP BY s.region HAVING count(*) > 1`},
	{sql: `SELECT count(*), sum(r.zone), max(s.amount) FROM regions r LEFT JOIN sales s ON s.region = r.name WHERE r.zone < 3`},
}

// refQuery is a subscription a test keeps with the query PostgreSQL
// answers for reference (ref, "" for the same; an ordered one's ends
// with its tie group, as sameRows takes it) and whether its order is
// checked.
type refQuery struct {
	sql, ref string
	binds    []query.Bind
	ordered  bool
}

// checkRefs compares each of queries' results (held by recs) with
// PostgreSQL's answer once the engine has caught up.
func checkRefs(t *testing.T, r *rig, seed uint64, step string, queries []refQuery, recs []*recorder) {
	t.Helper()
	r.quiesce(30 * time.Second)
	for i, q := range queries {
		ref := q.ref
		if ref == "" {
			ref = q.sql
		}
		if st, code, reason := recs[i].ending(); st != OutputAccepted {
			t.Fatalf("%s: %s: %v %s %s", step, q.sql, st, code, reason)
		}
		got, err := recs[i].result(q.ordered, r.reader.Types())
		if err != nil {
			t.Fatalf("%s: %s: client result: %v", step, q.sql, err)
		}
		want, err := r.reference(ref, q.binds)
		if err != nil {
			t.Fatalf("reference %q: %v", ref, err)
		}
		if err := sameRows(got, want, q.ordered); err != nil {
			t.Fatalf("%s (seed %d): result of %q: %v", step, seed, q.sql, err)
		}
	}
}

// Aggregate subscriptions stay equal to PostgreSQL's own answer, compared
// as text, after each of many random writes: groups emptied and made
// again, the current MIN and MAX deleted, NULLs, int8 sums past int8.
func TestEngineAggregates(t *testing.T) {
	r := newRig(t, aggDDL, Config{})
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	val := func(p float64, f func() string) string {
		if rng.Float64() < p {
			return "NULL"
		}
		return f()
	}
	row := func(id int) string {
		regions := []string{"'a'", "'b'", "'c'", "'B'", "'d'"}
		return fmt.Sprintf("(%d, %s, %s, %s, %s, %s, %s, %s, %s, %s)", id,
			val(0.1, func() string { return regions[rng.IntN(len(regions))] }),
			val(0.15, func() string { return fmt.Sprint(rng.IntN(100) - 20) }),
			val(0.2, func() string { return fmt.Sprint(rng.IntN(5)) }),
			val(0.2, func() string {
				if rng.IntN(3) == 0 {
					return fmt.Sprint(int64(9223372036854775807) - int64(rng.IntN(10)))
				}
				return fmt.Sprint(rng.Int64N(1000) - 500)
			}),
			val(0.2, func() string { return fmt.Sprintf("%d.%02d", rng.IntN(2000)-1000, rng.IntN(100)) }),
			val(0.2, func() string {
				if rng.IntN(20) == 0 {
					return "'NaN'"
				}
				return fmt.Sprintf("%d.%s", rng.IntN(100), strings.Repeat("5", rng.IntN(5)))
			}),
			val(0.2, func() string { return fmt.Sprint(rng.IntN(4) > 0) }),
			val(0.2, func() string {
				return fmt.Sprintf("'2024-01-01 00:00:00+00'::timestamptz + interval '%d hours'", rng.IntN(200))
			}),
			val(0.2, func() string {
				if rng.IntN(15) == 0 {
					return "'NaN'"
				}
				return fmt.Sprintf("%d.25", rng.IntN(50)-25)
			}))
	}
	var ins []string
	for id := 1; id <= 30; id++ {
		ins = append(ins, row(id))
	}
	r.exec("INSERT INTO sales VALUES " + strings.Join(ins, ", "))
	recs := make([]*recorder, len(aggQueries))
	for i, q := range aggQueries {
		_, recs[i] = r.subscribe(q.sql)
	}
	waitAccepted(t, recs...)
	checkAll := func(step string) {
		t.Helper()
		checkRefs(t, r, seed, step, aggQueries, recs)
	}
	checkAll("hydrated")
	next := 100
	for step := range 120 {
		var sql string
		switch k := rng.IntN(11); {
		case k < 3:
			sql = "INSERT INTO sales VALUES " + row(next)
			next++
		case k < 5:
			sql = fmt.Sprintf("UPDATE sales SET amount = %d, region = %s WHERE id %% 9 = %d", rng.IntN(90), []string{"'a'", "'b'", "'e'"}[rng.IntN(3)], rng.IntN(9))
		case k < 6:
			// The current extremes leave.
			sql = "DELETE FROM sales WHERE id IN ((SELECT id FROM sales ORDER BY amount DESC NULLS LAST LIMIT 1), (SELECT id FROM sales ORDER BY price NULLS LAST LIMIT 1))"
		case k < 7:
			// A whole group leaves, then comes back in a later write.
			sql = fmt.Sprintf("DELETE FROM sales WHERE region = %s", []string{"'a'", "'b'", "'c'", "'B'", "'d'", "'e'"}[rng.IntN(6)])
		case k < 8:
			sql = fmt.Sprintf("BEGIN; INSERT INTO sales VALUES %s; UPDATE sales SET big = 9223372036854775807, free = free * 1.5 WHERE id %% 4 = %d; DELETE FROM sales WHERE id %% 11 = %d; COMMIT",
				row(next), rng.IntN(4), rng.IntN(11))
			next++
		case k < 9:
			sql = fmt.Sprintf("UPDATE sales SET id = id + 1000, ok = NOT ok, at = at + interval '30 hours' WHERE id %% 13 = %d", rng.IntN(13))
		case k < 10:
			sql = fmt.Sprintf("UPDATE sales SET region = NULL, small = NULL, price = NULL WHERE id %% 6 = %d", rng.IntN(6))
		case k < 11:
			// The joined table changes: a region moves zone, leaves, comes.
			sql = fmt.Sprintf("BEGIN; UPDATE regions SET zone = %d WHERE name = %s; DELETE FROM regions WHERE name = %s; INSERT INTO regions VALUES (%s, %d) ON CONFLICT (name) DO UPDATE SET zone = excluded.zone; COMMIT",
				rng.IntN(4), []string{"'a'", "'b'", "'c'"}[rng.IntN(3)], []string{"'a'", "'B'", "'e'"}[rng.IntN(3)], []string{"'a'", "'B'", "'d'", "'e'"}[rng.IntN(4)], rng.IntN(4))
		}
		r.exec(sql)
		checkAll(fmt.Sprintf("step %d (%s)", step, sql))
	}
}

// An aggregate whose argument raises (division by zero) ends the
// subscription with eval_error, as PostgreSQL's own query fails.
func TestEngineAggregateEvalError(t *testing.T) {
	r := newRig(t, aggDDL+"INSERT INTO sales (id, region, amount) VALUES (1, 'a', 5), (2, 'b', 4);", Config{})
	_, rec := r.subscribe("SELECT region, sum(100 / (amount - 3)) FROM sales GROUP BY region")
	waitAccepted(t, rec)
	r.check(rec, "SELECT region, sum(100 / (amount - 3)) FROM sales GROUP BY region", false)
	r.exec("UPDATE sales SET amount = 3 WHERE id = 2")
	waitFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if st, code, reason := rec.ending(); st != OutputEnded || code != query.CodeEvalError {
			return fmt.Errorf("status %v %s %s", st, code, reason)
		}
		return nil
	})
}
