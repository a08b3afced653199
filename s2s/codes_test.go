package s2s_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/s2s"
)

// Reads that fail and tables that change are refused or ended with the
// engine's structured code, mapped to the wire's, frame by frame.
func TestReadRefusalCodes(t *testing.T) {
	e := newEnv(t, itemsSetup+"CREATE TABLE doomed (id int PRIMARY KEY);", func(_ *s2s.Config, ec *engine.Config) {
		ec.ReadTimeout = 2 * time.Second
	})
	ctx := context.Background()
	c, _ := e.connect()

	// A read blocked past --read-timeout: timeout, retryable.
	tx, err := e.conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE items IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	c.send(`{"type":"subscribe","id":"slow","sql":"SELECT id FROM items","mode":"rows"}`)
	f := c.expect("refused")
	tx.Rollback(ctx)
	if f.str("id") != "slow" || f.str("code") != "timeout" || f.m["retryable"] != true {
		t.Errorf("refused = %s, want slow, timeout, retryable", f.raw)
	}

	// A table dropped while its first read waits for it: table_dropped,
	// retryable (subscribing again is refused as unknown_table).
	tx, err = e.conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE doomed IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	c.send(`{"type":"subscribe","id":"doomed","sql":"SELECT id FROM doomed","mode":"rows"}`)
	waitFor(t, 30*time.Second, func() error { // compiled, its read waiting on the lock
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE relation = 'doomed'::regclass AND NOT granted").Scan(&n); err != nil || n == 0 {
			return fmt.Errorf("no read waiting on the lock (%v)", err)
		}
		return nil
	})
	if _, err := tx.Exec(ctx, "DROP TABLE doomed"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	f = c.expect("refused")
	if f.str("id") != "doomed" || f.str("code") != "table_dropped" || f.m["retryable"] != true {
		t.Errorf("refused = %s, want doomed, table_dropped, retryable", f.raw)
	}

	// A column the query uses is dropped: ended, schema_changed,
	// retryable.
	c.send(`{"type":"subscribe","id":"named","sql":"SELECT id, name FROM items","mode":"rows"}`)
	c.expect("accepted")
	e.exec("ALTER TABLE items DROP COLUMN name")
	e.exec("UPDATE items SET price = 2 WHERE id = 1") // the stream shows the new shape with a change
	f = c.expect("ended")
	if f.str("id") != "named" || f.str("code") != "schema_changed" || f.m["retryable"] != true {
		t.Errorf("ended = %s, want named, schema_changed, retryable", f.raw)
	}
}
