package stdlib_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/internal/rctest"
)

// serverSubs returns the rows-mode subscriptions freshet serve holds.
func (e *env) serverSubs() int {
	e.t.Helper()
	resp, err := http.Get("http://" + e.srv.Addr + "/stats")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		S2S struct {
			Subscriptions map[string]int `json:"subscriptions"`
		} `json:"s2s"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		e.t.Fatal(err)
	}
	return st.S2S.Subscriptions["rows"]
}

// TestEviction: the cache stays within MaxBytes, and every entry it
// evicts (by size or idle time) is unsubscribed on the engine.
func TestEviction(t *testing.T) {
	const maxBytes = 48 << 10
	e := newEnv(t, `CREATE TABLE kv (k int PRIMARY KEY, v text);
		INSERT INTO kv SELECT i, repeat('x', 1500) FROM generate_series(1, 100) i;`,
		func(c *readcache.Config) { c.MaxBytes = maxBytes; c.IdleTimeout = 2 * time.Second })
	ctx := context.Background()
	e.warm(func() error { _, err := e.value(ctx, 1); return err })
	start := time.Now()
	for k := 1; k <= 100; k++ {
		if _, err := e.value(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("100 reads: %v, stats %+v", time.Since(start), e.conn.Cache().Stats())
	rctest.Eventually(t, 20*time.Second, func() string {
		st := e.conn.Cache().Stats()
		if st.Bytes > maxBytes {
			return fmt.Sprintf("cache holds %d bytes, limit %d", st.Bytes, maxBytes)
		}
		if st.Entries >= 100 || st.Entries == 0 {
			return fmt.Sprintf("entries = %d, want some but fewer than 100", st.Entries)
		}
		if subs := e.serverSubs(); int64(subs) != st.Subscriptions {
			return fmt.Sprintf("the engine holds %d subscriptions, the cache %d", subs, st.Subscriptions)
		}
		return ""
	})
	t.Logf("bounded: %v", time.Since(start))
	// Idle entries expire and are unsubscribed.
	rctest.Eventually(t, 5*time.Second, func() string {
		e.value(readcache.ViaPostgres(ctx), 1) // any activity lets the cache run its maintenance
		e.conn.Cache().CleanUp()
		if subs := e.serverSubs(); subs != 0 {
			return fmt.Sprintf("the engine still holds %d subscriptions after the idle timeout (cache: %+v)", subs, e.conn.Cache().Stats())
		}
		return ""
	})
}
