package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/freshetdb/freshet/query"
)

// TestSubscribeAfterDropAndCreate: right after DROP TABLE t; CREATE TABLE
// t, a subscription on t reads the new table (docs/queries.md, "Schema
// changes"), though the catalog's cached shape of t is the old table's
// (nothing told it: no change to the new table has come through the
// stream yet) and the first read finds another table under the name. It
// was refused table_dropped until the next catalog check or Relation
// (issue 10 item 18).
func TestSubscribeAfterDropAndCreate(t *testing.T) {
	r := newRig(t, `CREATE TABLE t (id int4 PRIMARY KEY, v text);
INSERT INTO t VALUES (1, 'old');`, Config{CatalogCheckInterval: -1})
	ctx := context.Background()
	// Compiling caches t's shape.
	id, rec := r.subscribe("SELECT id, v FROM t")
	waitAccepted(t, rec)
	if err := r.e.Unsubscribe(ctx, id); err != nil {
		t.Fatal(err)
	}
	// The new t is empty: no row of it is in the stream to bring its
	// Relation (and the catalog's invalidation) first.
	r.exec(`DROP TABLE t; CREATE TABLE t (id int4 PRIMARY KEY, v text, w int4)`)
	_, rec = r.subscribe("SELECT id, v FROM t")
	waitAccepted(t, rec)
	if got, _ := rec.result(false, nil); len(got) != 0 {
		t.Fatalf("accepted %d rows of the new, empty t", len(got))
	}
	// It follows the new table.
	r.exec(`INSERT INTO t VALUES (2, 'new', 0)`)
	r.quiesce(30 * time.Second)
	if got, err := rec.result(false, nil); err != nil || len(got) != 1 || *got[0][1] != "new" {
		t.Fatalf("after an insert into the new t: %v, %v; want the one new row", got, err)
	}
	// A table dropped for good: the read finds it gone, compiling again
	// is refused (unknown_table), and the refusal says what happened.
	r.exec(`DROP TABLE t`)
	rec = newRecorder()
	_, refusal, err := r.e.Subscribe(ctx, "SELECT id, v FROM t WHERE id = 2", nil, ModeRows, rec)
	if err != nil {
		t.Fatal(err)
	}
	if refusal != nil {
		// The catalog had already forgotten t.
		if refusal.Code != query.CodeUnknownTable {
			t.Fatalf("subscribing to a dropped table: refused %v, want unknown_table", refusal)
		}
		return
	}
	waitFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if st, _ := rec.state(); st == 0 {
			return fmt.Errorf("no answer yet")
		}
		return nil
	})
	if st, code, reason := rec.ending(); st != OutputRefused || code != CodeTableDropped {
		t.Fatalf("subscribing to a dropped table: %v %s (%s), want refused table_dropped", st, code, reason)
	}
}

// TestSubscribeSameSQLAfterSchemaChange: a subscription whose SQL is the
// same as a live one's, made after DDL the change stream has not shown
// (no write to the new table yet), is compiled against the catalog's
// cached, older shape: its plan key is the live view's, and it joined
// that view with the old table's rows, where it must read the table as
// it is now (issue 10, a follow-up of item 18). The old subscription ends
// once the check that caught it asks for a catalog check (the periodic
// one is off here), except where the old table is still there and
// unchanged (a table made earlier on the search path).
func TestSubscribeSameSQLAfterSchemaChange(t *testing.T) {
	r := newRig(t, `CREATE SCHEMA a;
CREATE TABLE dropped (id int4 PRIMARY KEY, v text);
CREATE TABLE renamed (id int4 PRIMARY KEY, v text);
CREATE TABLE readded (id int4 PRIMARY KEY, v text);
CREATE TABLE shadowed (id int4 PRIMARY KEY, v text);
INSERT INTO dropped VALUES (1, 'old');
INSERT INTO renamed VALUES (1, 'old');
INSERT INTO readded VALUES (1, 'old');
INSERT INTO shadowed VALUES (1, 'old');`, Config{CatalogCheckInterval: -1, Query: query.Options{SearchPath: []string{"a", "public"}}})
	tests := []struct {
		table, ddl string
		ref        string     // PostgreSQL's answer to the query now
		oldEnd     query.Code // how the old subscription ends; "" stays
		write      string     // a write to the table the name means now
	}{
		{"dropped", "DROP TABLE dropped; CREATE TABLE dropped (id int4 PRIMARY KEY, v text)", "SELECT id, v FROM public.dropped", CodeTableDropped,
			"INSERT INTO dropped VALUES (2, 'new')"},
		{"renamed", "ALTER TABLE renamed RENAME TO renamed_old; CREATE TABLE renamed (id int4 PRIMARY KEY, v text)", "SELECT id, v FROM public.renamed", CodeSchemaChanged,
			"INSERT INTO renamed VALUES (2, 'new')"},
		{"readded", "ALTER TABLE readded DROP COLUMN v; ALTER TABLE readded ADD COLUMN v text", "SELECT id, v FROM public.readded", CodeSchemaChanged,
			"UPDATE readded SET v = 'new'"},
		{"shadowed", "CREATE TABLE a.shadowed (id int4 PRIMARY KEY, v text)", "SELECT id, v FROM a.shadowed", "",
			"INSERT INTO a.shadowed VALUES (2, 'new')"},
	}
	// check is rig.check failing the subtest, not the test.
	check := func(t *testing.T, rec *recorder, ref string) {
		t.Helper()
		want, err := r.reference(ref, nil)
		if err != nil {
			t.Fatalf("reference %q: %v", ref, err)
		}
		got, err := rec.result(false, r.reader.Types())
		if err != nil {
			t.Fatalf("client result: %v", err)
		}
		if err := sameRows(got, want, false); err != nil {
			t.Fatalf("result of %q: %v", ref, err)
		}
	}
	for _, tt := range tests {
		t.Run(tt.table, func(t *testing.T) {
			sql := "SELECT id, v FROM " + tt.table
			old := newRecorder()
			if _, refusal, err := r.e.Subscribe(context.Background(), sql, nil, ModeRows, old); err != nil || refusal != nil {
				t.Fatalf("subscribe %q: %v %v", sql, refusal, err)
			}
			waitAccepted(t, old)
			check(t, old, "SELECT id, v FROM public."+tt.table)
			r.exec(tt.ddl)
			rec := newRecorder()
			if _, refusal, err := r.e.Subscribe(context.Background(), sql, nil, ModeRows, rec); err != nil || refusal != nil {
				t.Fatalf("subscribe %q after the DDL: %v %v", sql, refusal, err)
			}
			waitAccepted(t, rec)
			check(t, rec, tt.ref)
			if tt.oldEnd != "" {
				waitFor(t, 30*time.Second, 5*time.Millisecond, func() error {
					if st, _ := old.state(); st != OutputEnded {
						return fmt.Errorf("old subscription %v, want ended", st)
					}
					return nil
				})
				if _, code, reason := old.ending(); code != tt.oldEnd {
					t.Fatalf("old subscription ended %s (%s), want %s", code, reason, tt.oldEnd)
				}
			}
			r.exec(tt.write)
			r.quiesce(30 * time.Second)
			check(t, rec, tt.ref)
			if tt.oldEnd == "" {
				check(t, old, "SELECT id, v FROM public."+tt.table)
			}
		})
	}
}
