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
