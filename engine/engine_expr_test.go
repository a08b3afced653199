package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/freshetdb/freshet/query"
)

// Subscriptions with computed outputs, conditions and ORDER BY keys stay
// equal to PostgreSQL's answer under writes: single-table, a window and a
// join.
func TestEngineExpressions(t *testing.T) {
	r := newRig(t, itemsDDL+`
CREATE TABLE tags (id int PRIMARY KEY, item int, label text);
INSERT INTO tags SELECT g, g % 7, 'Tag' || g FROM generate_series(1, 12) g;
CREATE TABLE events (id int PRIMARY KEY, at timestamptz, d date, tags text[], meta jsonb);
INSERT INTO events SELECT g, '2024-01-01 00:00:00+00'::timestamptz + g * interval '37 hours', '2024-01-01'::date + g * 3,
  CASE g % 4 WHEN 0 THEN '{x}'::text[] WHEN 1 THEN '{x,y}' WHEN 2 THEN '{}' END,
  CASE g % 3 WHEN 0 THEN jsonb_build_object('k', g, 'a', jsonb_build_array(g, 'v')) WHEN 1 THEN '{"n": 1, "z": null}' END
  FROM generate_series(1, 30) g;`, Config{})
	const (
		plain = `SELECT id, qty * 2 + 1 AS q2, upper(name) AS n, CASE WHEN qty > 5 THEN 'big' ELSE 'small' END AS size,
  COALESCE(name, '-') || ':' || qty AS label, qty::numeric / 3 AS third, substr(name, 2, 3) AS mid
  FROM items WHERE qty % 2 = 0 OR length(name) > 6`
		window = `SELECT id, name, qty - id AS d FROM items WHERE lower(name) LIKE 'item%' ORDER BY qty * -1, name DESC LIMIT 4 OFFSET 1`
		join   = `SELECT t.id, i.name || '/' || t.label AS full, NULLIF(i.qty, 0) AS q FROM items i JOIN tags t ON t.item = i.id WHERE i.qty + t.id > 6`
	)
	const dates = `SELECT id, extract(year from at) AS y, date_trunc('week', d) AS w, date_part('epoch', at) AS e, extract(dow from d) AS dow
  FROM events WHERE date_trunc('month', at) = '2024-01-01'`
	_, p := r.subscribe(plain)
	_, w := r.subscribe(window)
	_, j := r.subscribe(join)
	_, dt := r.subscribe(dates)
	const arrays = `SELECT id, cardinality(tags) AS n, array_length(tags, 1) AS l FROM events WHERE tags @> '{x}' OR 'y' = ANY(tags) OR tags && ARRAY['z']`
	_, ar := r.subscribe(arrays)
	const jsons = `SELECT id, meta -> 'a' AS a, meta ->> 'k' AS k, meta #>> '{a,1}' AS v FROM events WHERE meta ? 'k' OR meta @> '{"n": 1}'`
	_, js := r.subscribe(jsons)
	waitAccepted(t, p, w, j, dt, ar, js)
	r.check(dt, dates, false)
	r.check(p, plain, false)

	r.exec("INSERT INTO items VALUES (100, 'a longer name', 9), (101, NULL, 4), (102, 'Item102', 12)")
	r.exec("UPDATE items SET qty = qty + 1 WHERE id IN (2, 3, 5)")
	r.exec("UPDATE items SET name = 'renamed' WHERE id = 4")
	r.exec("UPDATE items SET name = NULL WHERE id = 6")
	r.exec("DELETE FROM items WHERE id = 8")
	r.exec("INSERT INTO tags VALUES (50, 100, 'x'), (51, 3, 'y')")
	r.exec("UPDATE tags SET label = 'z' WHERE id = 2")
	r.exec("BEGIN; UPDATE items SET qty = 20 WHERE id = 1; UPDATE items SET qty = 0 WHERE id = 1; COMMIT")
	r.exec("UPDATE events SET at = at + interval '20 days' WHERE id % 4 = 0")
	r.exec("UPDATE events SET d = NULL, at = '2024-01-31 23:59:59.999999+00' WHERE id = 25")
	r.exec("INSERT INTO events VALUES (100, 'infinity', 'infinity', '{z,NULL}'), (101, '2024-01-15 12:00:00+00', '0044-03-15 BC', '{y,y}')")
	r.exec("UPDATE events SET tags = '{}' WHERE id IN (1, 5)")
	r.exec("UPDATE events SET tags = '{{x,q},{r,s}}' WHERE id = 2")
	r.exec(`UPDATE events SET meta = '{"n": 1.0, "k": "text", "a": {"b": [1]}}' WHERE id IN (4, 5)`)
	r.exec(`UPDATE events SET meta = '{"n": 2}' WHERE id = 1`)
	r.quiesce(30 * time.Second)

	r.check(p, plain, false)
	r.check(w, `SELECT id, name, qty - id AS d, dense_rank() OVER (ORDER BY qty * -1, name DESC) FROM items WHERE lower(name) LIKE 'item%'
  ORDER BY qty * -1, name DESC LIMIT 4 OFFSET 1`, true)
	r.check(j, join, false)
	r.check(dt, dates, false)
	r.check(ar, arrays, false)
	r.check(js, jsons, false)
}

// A row that makes PostgreSQL raise an error (division by zero, integer
// overflow) ends the subscription with eval_error instead of serving a
// value; at hydration the read fails as PostgreSQL's own does.
func TestEngineEvalError(t *testing.T) {
	r := newRig(t, itemsDDL, Config{})
	_, div := r.subscribe("SELECT id FROM items WHERE id BETWEEN 11 AND 19 AND 100 / qty > 5")
	_, over := r.subscribe("SELECT id FROM items WHERE qty * 200000000 > 0 ORDER BY id LIMIT 3")
	_, win := r.subscribe("SELECT id, 1000 / (qty - 9) AS x FROM items ORDER BY id LIMIT 2")
	_, ok := r.subscribe("SELECT id, 100 / NULLIF(qty, 0) AS share FROM items")
	waitFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if st, _ := win.state(); st == 0 {
			return fmt.Errorf("no answer yet")
		}
		return nil
	})
	// qty 9 rows exist (id 9, 19): the window's output raises on a row
	// outside the window too, so the read fails as PostgreSQL's would.
	if st, code, reason := win.ending(); st != OutputRefused || code != query.CodeEvalError {
		t.Fatalf("window over a raising row: %v %s %q, want refused %s", st, code, reason, query.CodeEvalError)
	}
	waitAccepted(t, div, over, ok)

	r.exec("UPDATE items SET qty = 0 WHERE id = 12")
	r.quiesce(30 * time.Second)
	if st, code, reason := div.ending(); st != OutputEnded || code != query.CodeEvalError {
		t.Fatalf("after a row with qty 0: %v %s %q, want ended %s", st, code, reason, query.CodeEvalError)
	}
	if st, _ := over.state(); st != OutputAccepted {
		t.Fatalf("overflow subscription: %v before any overflow", st)
	}
	r.exec("UPDATE items SET qty = 11 WHERE id = 15") // 2.2e9 overflows int4
	r.quiesce(30 * time.Second)
	if st, code, reason := over.ending(); st != OutputEnded || code != query.CodeEvalError {
		t.Fatalf("after an overflowing row: %v %s %q, want ended %s", st, code, reason, query.CodeEvalError)
	}
	r.check(ok, "SELECT id, 100 / NULLIF(qty, 0) AS share FROM items", false)
}
