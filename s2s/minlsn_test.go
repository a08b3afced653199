package s2s_test

import (
	"context"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/s2s"
)

// A subscribe's min_lsn holds the subscription until the server's
// position reaches it, and refuses it (behind, retryable) when it does not
// in time: an answer is never older than what the client has seen.
func TestSubscribeMinLSN(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *s2s.Config, _ *engine.Config) { c.CompileTimeout = 500 * time.Millisecond })
	c, _ := e.connect()
	var now string
	e.conn.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&now)
	at, _ := change.ParseLSN(now)

	// Far ahead: refused behind.
	c.sendf(`{"type":"subscribe","id":"ahead","sql":"SELECT id FROM items WHERE id = 1","mode":"rows","min_lsn":%q}`, (at + 1<<40).String())
	f := c.expect("refused")
	if f.str("code") != "behind" || f.m["retryable"] != true {
		t.Fatalf("refused = %s, want code behind, retryable", f.raw)
	}
	// Just ahead of the server (a write it has not streamed yet): accepted
	// once it gets there, at or past the position asked for.
	e.exec("UPDATE items SET name = 'APPLE' WHERE id = 1")
	e.conn.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&now)
	c.sendf(`{"type":"subscribe","id":"q","sql":"SELECT id, name FROM items WHERE id = 1","mode":"rows","min_lsn":%q}`, now)
	acc := c.expect("accepted")
	got, err := change.ParseLSN(acc.str("lsn"))
	want, _ := change.ParseLSN(now)
	if err != nil || got < want {
		t.Fatalf("accepted at %s, want at or past min_lsn %s", acc.str("lsn"), now)
	}
	if v := values(list(acc, "rows")[0]); v[1] != "APPLE" {
		t.Fatalf("row = %v, want the update before min_lsn in it", v)
	}
	// A malformed min_lsn is refused at once.
	c.send(`{"type":"subscribe","id":"bad","sql":"SELECT id FROM items","mode":"rows","min_lsn":"nope"}`)
	if f := c.expect("refused"); f.str("code") != "bad_param" || f.m["retryable"] != false {
		t.Fatalf("refused = %s, want bad_param", f.raw)
	}
}
