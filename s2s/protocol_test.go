package s2s_test

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// SIGTERM's Shutdown: every subscription is ended shutting_down (a
// frame per id, retryable) before the 1001 close, so a client knows why
// each ended.
func TestShutdownEndsBeforeClose(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	c, _ := e.connect()
	c.send(`{"type":"subscribe","id":"r","sql":"SELECT id FROM items WHERE id = 1","mode":"rows"}`)
	c.expect("accepted")
	c.send(`{"type":"subscribe","id":"t","sql":"SELECT id FROM items WHERE id = 2","mode":"touch"}`)
	c.expect("accepted")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go e.srv.Shutdown(ctx)
	ended := map[string]bool{}
	for range 2 {
		f := c.expect("ended")
		if f.str("code") != "shutting_down" || f.m["retryable"] != true {
			t.Fatalf("ended = %s, want shutting_down, retryable", f.raw)
		}
		ended[f.str("id")] = true
	}
	if !ended["r"] || !ended["t"] {
		t.Fatalf("ended %v, want r and t", ended)
	}
	var err error
	for err == nil {
		_, err = c.read()
	}
	if code := websocket.CloseStatus(err); code != websocket.StatusGoingAway {
		t.Fatalf("closed with %v (%v), want 1001 after the ended frames", code, err)
	}
}

// A LIMIT without ORDER BY keeps the first rows in primary-key order:
// accepted says limit and no order, and every delta carries order (the
// whole window, in that order, after the change).
func TestLimitWithoutOrderBy(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	c, _ := e.connect()
	c.send(`{"type":"subscribe","id":"l","sql":"SELECT id FROM items LIMIT 2","mode":"rows"}`)
	f := c.expect("accepted")
	if _, ok := f.m["order"]; ok || f.m["limit"] != 2.0 {
		t.Fatalf("accepted = %s, want limit 2 and no order", f.raw)
	}
	if rows := list(f, "rows"); len(rows) != 2 || values(rows[0])[0] != "1" || values(rows[1])[0] != "2" {
		t.Fatalf("accepted rows = %v, want ids 1 and 2 (primary-key order)", rows)
	}
	e.exec("DELETE FROM items WHERE id = 1")
	f = c.expect("delta")
	order := list(f, "order")
	if len(order) != 2 || len(list(f, "remove")) != 1 || len(list(f, "upsert")) != 1 || values(list(f, "upsert")[0])[0] != "3" {
		t.Fatalf("delta = %s, want 1 removed, 3 added and an order of two keys", f.raw)
	}
	if order[1] != key(list(f, "upsert")[0]) {
		t.Fatalf("delta = %s, want 3 last in order", f.raw)
	}
}

// COUNT(*) under LIMIT 0 or an OFFSET has an empty result whatever the
// count: accepted holds no row and no delta ever comes.
func TestCountUnderOffsetSendsNothing(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	c, _ := e.connect()
	for _, q := range []string{"SELECT COUNT(*) FROM items OFFSET 1", "SELECT COUNT(*) FROM items LIMIT 0"} {
		c.sendf(`{"type":"subscribe","id":%q,"sql":%q,"mode":"rows"}`, q, q)
		if f := c.expect("accepted"); len(list(f, "rows")) != 0 {
			t.Fatalf("accepted = %s, want no rows", f.raw)
		}
	}
	c.send(`{"type":"subscribe","id":"n","sql":"SELECT COUNT(*) FROM items","mode":"rows"}`)
	c.expect("accepted")
	e.exec("INSERT INTO items VALUES (4, 'kiwi', 2.00, NULL)")
	// The plain count's delta comes, and nothing for the empty ones.
	if f := c.expect("delta"); f.str("id") != "n" || f.str("count") != "4" {
		t.Fatalf("delta = %s, want n's count 4", f.raw)
	}
	c.send(`{"type":"ping","data":"after"}`)
	c.expect("pong")
}
