package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/query"
)

// waitEnded waits until rec has ended (or been refused) and checks its
// code.
func waitEnded(t *testing.T, rec *recorder, sql string, code query.Code) {
	t.Helper()
	waitFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		st, _, _ := rec.ending()
		if st == OutputEnded || st == OutputRefused {
			return nil
		}
		return fmt.Errorf("%q still %v", sql, st)
	})
	st, got, reason := rec.ending()
	if got != code {
		t.Errorf("%q: %v with code %q (%s), want code %q", sql, st, got, reason, code)
	}
}

// TestEngineSchemaChanges: each schema change, seen through the change
// stream (a write to the table after the DDL brings its new Relation) or
// through a catalog check (no write follows; DROP TABLE sends nothing at
// all), ends exactly the subscriptions it breaks, with a code, and leaves
// the others exact.
func TestEngineSchemaChanges(t *testing.T) {
	const (
		named  = "SELECT id, qty FROM items WHERE qty > 3"
		window = "SELECT id, name FROM items ORDER BY name DESC LIMIT 3"
		count  = "SELECT count(*) FROM items WHERE qty < 5"
		star   = "SELECT * FROM items WHERE qty = 2"
		join   = "SELECT i.id, o.n FROM items i JOIN orders o ON o.item = i.id WHERE o.n > 1"
	)
	subs := []string{named, window, count, star, join}
	const setup = itemsDDL + `CREATE TABLE orders (id int PRIMARY KEY, item int, n int);
INSERT INTO orders SELECT g, g % 7, g % 4 FROM generate_series(1, 30) g;`
	tests := []struct {
		name string
		ddl  string
		// write follows the DDL in its own transaction ("": none, the
		// change is seen by a catalog check).
		write string
		want  map[string]query.Code // sql -> code; the rest stay live
	}{
		{name: "add column, stream", ddl: "ALTER TABLE items ADD COLUMN color text DEFAULT 'red'", write: "UPDATE items SET qty = qty + 1 WHERE id = 4",
			want: map[string]query.Code{star: CodeSchemaChanged}},
		{name: "add column, catalog", ddl: "ALTER TABLE items ADD COLUMN color text",
			want: map[string]query.Code{star: CodeSchemaChanged}},
		{name: "drop column not named, stream", ddl: "ALTER TABLE orders ADD COLUMN x int; ALTER TABLE orders DROP COLUMN x", write: "UPDATE orders SET n = 3 WHERE id = 5",
			want: map[string]query.Code{}},
		{name: "drop column, stream", ddl: "ALTER TABLE items DROP COLUMN name", write: "UPDATE items SET qty = 9 WHERE id = 3",
			want: map[string]query.Code{window: CodeSchemaChanged, star: CodeSchemaChanged}},
		{name: "drop column, catalog", ddl: "ALTER TABLE items DROP COLUMN qty",
			want: map[string]query.Code{named: CodeSchemaChanged, count: CodeSchemaChanged, star: CodeSchemaChanged}},
		{name: "retype column, stream", ddl: "ALTER TABLE items ALTER qty TYPE int8", write: "UPDATE items SET qty = 9 WHERE id = 3",
			want: map[string]query.Code{named: CodeSchemaChanged, count: CodeSchemaChanged, star: CodeSchemaChanged}},
		{name: "retype join column, catalog", ddl: "ALTER TABLE orders ALTER item TYPE int8",
			want: map[string]query.Code{join: CodeSchemaChanged}},
		{name: "rename column, stream", ddl: "ALTER TABLE orders RENAME n TO amount", write: "UPDATE orders SET amount = 3 WHERE id = 5",
			want: map[string]query.Code{join: CodeSchemaChanged}},
		{name: "rename table, catalog", ddl: "ALTER TABLE orders RENAME TO orders2",
			want: map[string]query.Code{join: CodeSchemaChanged}},
		{name: "replica identity, stream", ddl: "CREATE UNIQUE INDEX items_name ON items (name); ALTER TABLE items ALTER name SET NOT NULL; ALTER TABLE items REPLICA IDENTITY USING INDEX items_name",
			write: "DELETE FROM items WHERE id = 2",
			want:  map[string]query.Code{named: CodeSchemaChanged, window: CodeSchemaChanged, count: CodeSchemaChanged, star: CodeSchemaChanged, join: CodeSchemaChanged}},
		{name: "replica identity full, stream", ddl: "ALTER TABLE items REPLICA IDENTITY FULL", write: "DELETE FROM items WHERE id = 2",
			want: map[string]query.Code{}},
		{name: "truncate", ddl: "TRUNCATE items", write: "INSERT INTO items VALUES (1, 'one', 9), (2, 'two', 2)",
			want: map[string]query.Code{}},
		{name: "truncate both, rolled back", ddl: "BEGIN; TRUNCATE items, orders; ROLLBACK", write: "UPDATE items SET qty = 4",
			want: map[string]query.Code{}},
		{name: "drop table", ddl: "DROP TABLE orders",
			want: map[string]query.Code{join: CodeTableDropped}},
		{name: "drop and make again", ddl: "DROP TABLE items CASCADE; CREATE TABLE items (id int PRIMARY KEY, name text, qty int); INSERT INTO items VALUES (1, 'new', 7)",
			want: map[string]query.Code{named: CodeTableDropped, window: CodeTableDropped, count: CodeTableDropped, star: CodeTableDropped, join: CodeTableDropped}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No periodic check: a catalog check runs only when the
			// test asks for it, so the stream cases show the stream's
			// own path.
			r := newRig(t, setup, Config{CatalogCheckInterval: -1})
			ctx := context.Background()
			recs := map[string]*recorder{}
			for _, sql := range subs {
				_, recs[sql] = r.subscribe(sql)
			}
			for _, rec := range recs {
				waitAccepted(t, rec)
			}
			r.exec(tt.ddl)
			if tt.write != "" {
				r.exec(tt.write)
				r.quiesce(30 * time.Second)
			} else {
				r.quiesce(30 * time.Second)
				if err := r.e.CheckCatalog(ctx); err != nil {
					t.Fatalf("CheckCatalog: %v", err)
				}
			}
			for _, sql := range subs {
				if code, ok := tt.want[sql]; ok {
					waitEnded(t, recs[sql], sql, code)
					continue
				}
				if st, code, reason := recs[sql].ending(); st != OutputAccepted {
					t.Fatalf("%q: %v %s (%s), want it live", sql, st, code, reason)
				}
			}
			// The live ones stay exact through more writes (those the
			// new shape allows).
			for _, w := range []string{
				"INSERT INTO items (id, name) VALUES (50, 'x50'), (51, 'x51') ON CONFLICT DO NOTHING",
				"UPDATE items SET qty = 1 WHERE id = 5",
				"UPDATE items SET name = 'zz' WHERE id = 6",
				"UPDATE orders SET item = 50, n = 2 WHERE id = 1",
				"DELETE FROM orders WHERE id = 2",
			} {
				if _, err := r.conn.Exec(ctx, w); err != nil {
					if _, undefined := undefinedObject(err); !undefined {
						t.Fatalf("exec %q: %v", w, err)
					}
				}
			}
			r.quiesce(30 * time.Second)
			for _, sql := range subs {
				if _, ended := tt.want[sql]; ended {
					continue
				}
				ref, ordered := sql, false
				if sql == window {
					ref, ordered = "SELECT id, name, dense_rank() OVER (ORDER BY name DESC) FROM items ORDER BY name DESC, id LIMIT 3", true
				}
				r.check(recs[sql], ref, ordered)
			}
			if strings.Contains(tt.name, "make again") {
				// The new table under the old name is served afresh.
				_, again := r.subscribe(named)
				waitAccepted(t, again)
				r.exec("INSERT INTO items VALUES (2, 'two', 8)")
				r.quiesce(30 * time.Second)
				r.check(again, named, false)
			}
		})
	}
}

// TestEngineDropTableDetected: with the periodic catalog check on, a
// dropped table ends its subscriptions without anything else happening.
func TestEngineDropTableDetected(t *testing.T) {
	r := newRig(t, itemsDDL, Config{CatalogCheckInterval: 50 * time.Millisecond})
	_, rec := r.subscribe("SELECT id FROM items WHERE qty = 1")
	waitAccepted(t, rec)
	r.exec("DROP TABLE items")
	waitEnded(t, rec, "SELECT id FROM items WHERE qty = 1", CodeTableDropped)
	if _, _, reason := rec.ending(); reason != "table public.items was dropped" {
		t.Errorf("reason = %q, want %q", reason, "table public.items was dropped")
	}
}

// TestEngineReplicaIdentity: under REPLICA IDENTITY USING INDEX the old
// row of an update or delete carries the index's columns, not the primary
// key's, and under FULL the whole row; subscriptions on such tables (and a
// table whose only key is its identity index) stay exact through updates
// of the primary key, of the identity's columns, of other columns, and
// deletes.
func TestEngineReplicaIdentity(t *testing.T) {
	const setup = `
CREATE TABLE ri (id int PRIMARY KEY, a int NOT NULL, b text NOT NULL, v int, big text);
CREATE UNIQUE INDEX ri_ab ON ri (a, b);
ALTER TABLE ri REPLICA IDENTITY USING INDEX ri_ab;
INSERT INTO ri SELECT g, g % 5, 'b' || (g / 5), g % 3, NULL FROM generate_series(1, 30) g;
CREATE TABLE nopk (code text NOT NULL, v int);
CREATE UNIQUE INDEX nopk_code ON nopk (code);
ALTER TABLE nopk REPLICA IDENTITY USING INDEX nopk_code;
INSERT INTO nopk SELECT 'c' || g, g % 4 FROM generate_series(1, 20) g;
CREATE TABLE full_t (id int PRIMARY KEY, ref int, v int, big text);
ALTER TABLE full_t REPLICA IDENTITY FULL;
INSERT INTO full_t SELECT g, g % 7, g % 3, NULL FROM generate_series(1, 30) g;`
	r := newRig(t, setup, Config{WindowMargin: 2})
	queries := []struct {
		sql, ref string
		ordered  bool
	}{
		{sql: "SELECT id, a, b, v FROM ri WHERE v = 1"},
		{sql: "SELECT count(*) FROM ri WHERE v < 2"},
		{sql: "SELECT id, v FROM ri ORDER BY v DESC, id LIMIT 4",
			ref: "SELECT id, v, dense_rank() OVER (ORDER BY v DESC, id) FROM ri ORDER BY v DESC, id LIMIT 4", ordered: true},
		{sql: "SELECT code, v FROM nopk WHERE v IN (1, 2)"},
		{sql: "SELECT id, ref, v FROM full_t WHERE v <> 0"},
		{sql: "SELECT f.id, r.b, r.v FROM full_t f LEFT JOIN ri r ON r.id = f.ref WHERE f.v = 1"},
		{sql: "SELECT id, big FROM full_t WHERE big IS NOT NULL"},
	}
	recs := make([]*recorder, len(queries))
	for i, q := range queries {
		_, recs[i] = r.subscribe(q.sql)
	}
	waitAccepted(t, recs...)
	big := strings.Repeat("x", 10000) // stored out of line (TOAST)
	for _, w := range []string{
		"UPDATE ri SET v = 1 WHERE id IN (2, 3, 4)",            // no identity column changed: no old row sent
		"UPDATE ri SET id = id + 100 WHERE id IN (1, 5, 6)",    // the primary key changes, the identity does not
		"UPDATE ri SET a = a + 10 WHERE id IN (7, 8)",          // the identity changes: the old row carries (a, b)
		"UPDATE ri SET a = a + 20, id = id + 200 WHERE id = 9", // both
		"DELETE FROM ri WHERE id IN (10, 101, 3)",              // old rows carry only (a, b)
		"BEGIN; UPDATE ri SET b = 'moved' WHERE id = 11; DELETE FROM ri WHERE id = 11; COMMIT",
		"UPDATE nopk SET v = 1 WHERE code IN ('c3', 'c4')",
		"UPDATE nopk SET code = 'z' || code WHERE code IN ('c1', 'c5')",
		"DELETE FROM nopk WHERE code IN ('c2', 'zc1')",
		"UPDATE full_t SET v = 1 WHERE id < 6",
		"UPDATE full_t SET id = id + 100 WHERE id IN (7, 8)",
		"UPDATE full_t SET ref = 12 WHERE id = 12",
		"DELETE FROM full_t WHERE id IN (13, 107)",
		"UPDATE full_t SET big = '" + big + "' WHERE id IN (14, 15)",
		"UPDATE full_t SET v = 2 WHERE id IN (14, 15)", // big unchanged: not sent in the new row
		"UPDATE full_t SET id = 115 WHERE id = 15",
		"DELETE FROM full_t WHERE id = 14",
	} {
		r.exec(w)
	}
	r.quiesce(30 * time.Second)
	for i, q := range queries {
		ref := q.ref
		if ref == "" {
			ref = q.sql
		}
		r.check(recs[i], ref, q.ordered)
	}
}

// TestEngineHeldValuesAfterDDL: DDL changes no row in the stream, so the
// values held rows keep for a column are stale once it is retyped, or
// dropped and added again; a subscription naming the new column, hydrated
// while another keeps the rows held, must read the new values.
func TestEngineHeldValuesAfterDDL(t *testing.T) {
	tests := []struct {
		name, ddl string
		stream    bool // a write brings the new shape; else a catalog check
	}{
		{"retyped, stream", "ALTER TABLE items ALTER name TYPE varchar(3) USING left(name, 3)", true},
		{"retyped, catalog", "ALTER TABLE items ALTER name TYPE varchar(3) USING left(name, 3)", false},
		{"dropped and added, stream", "ALTER TABLE items DROP COLUMN name; ALTER TABLE items ADD COLUMN name text DEFAULT 'new'", true},
		{"dropped and added, catalog", "ALTER TABLE items DROP COLUMN name; ALTER TABLE items ADD COLUMN name text DEFAULT 'new'", false},
	}
	const named = "SELECT id, name FROM items"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, itemsDDL, Config{CatalogCheckInterval: -1})
			_, holder := r.subscribe("SELECT id, qty FROM items")
			_, old := r.subscribe(named)
			waitAccepted(t, holder, old)
			r.exec(tt.ddl)
			if tt.stream {
				r.exec("UPDATE items SET qty = 5 WHERE id = 1")
			} else if err := r.e.CheckCatalog(context.Background()); err != nil {
				t.Fatal(err)
			}
			waitEnded(t, old, named, CodeSchemaChanged)
			_, again := r.subscribe(named)
			waitAccepted(t, again)
			r.quiesce(30 * time.Second)
			r.check(again, named, false)
			r.check(holder, "SELECT id, qty FROM items", false)
		})
	}
}
