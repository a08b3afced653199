package readcache

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/freshetdb/freshet/wire"
)

// fakeEngine is a scripted s2s server: hello, lag frames every 20 ms, and
// every subscribe accepted with one row holding the SQL text.
type fakeEngine struct {
	t     *testing.T
	srv   *httptest.Server
	mu    sync.Mutex
	conns map[*websocket.Conn]map[string]string // sql -> id
	hello wire.Hello
	// silent: subscribes get no answer.
	silent bool
	// busy: upgrades are answered 503.
	busy atomic.Bool
	// mute: no lag frames are sent.
	mute atomic.Bool
}

func newFakeEngine(t *testing.T) *fakeEngine {
	f := &fakeEngine{t: t, conns: map[*websocket.Conn]map[string]string{},
		hello: wire.Hello{Protocol: 1, SystemIdentifier: "1", Database: "db", LagIntervalMS: 20}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeEngine) url() string { return "ws" + strings.TrimPrefix(f.srv.URL, "http") + wire.Path }

func (f *fakeEngine) serve(w http.ResponseWriter, r *http.Request) {
	if f.busy.Load() {
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx := r.Context()
	var wmu sync.Mutex
	send := func(fr wire.Frame) error {
		b, _ := wire.Encode(fr)
		wmu.Lock()
		defer wmu.Unlock()
		return ws.Write(ctx, websocket.MessageText, b)
	}
	h := f.hello
	if send(&h) != nil {
		return
	}
	f.mu.Lock()
	f.conns[ws] = map[string]string{}
	f.mu.Unlock()
	defer func() { f.mu.Lock(); delete(f.conns, ws); f.mu.Unlock() }()
	go func() {
		zero := int64(0)
		for ctx.Err() == nil {
			if f.mute.Load() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			if send(&wire.Lag{MS: &zero, LSN: "0/1"}) != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return
		}
		fr, err := wire.Decode(b, 0)
		if err != nil {
			continue
		}
		if s, ok := fr.(*wire.Subscribe); ok && !f.silent {
			f.mu.Lock()
			f.conns[ws][s.SQL] = s.ID
			f.mu.Unlock()
			v := s.SQL
			send(&wire.Accepted{ID: s.ID, Mode: wire.ModeRows, LSN: "0/1", Columns: []wire.Column{{Name: "sql", TypeOID: 25}},
				Rows: []wire.Row{{Key: "k", Values: []*string{&v}}}})
		}
	}
}

// drop closes the connection holding sql's subscription.
func (f *fakeEngine) drop(sql string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ws, subs := range f.conns {
		if _, ok := subs[sql]; ok {
			ws.CloseNow()
			return true
		}
	}
	return false
}

func openFake(t *testing.T, f *fakeEngine) *Cache {
	cfg := DefaultConfig()
	cfg.URL, cfg.Logger = f.url(), slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.MinBackoff, cfg.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func eventually(t *testing.T, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDroppedSocketDropsOnlyItsKeys: keys on the other socket keep being
// served; the dropped socket's keys go to PostgreSQL until it reconnects
// and resubscribes them.
func TestDroppedSocketDropsOnlyItsKeys(t *testing.T) {
	f := newFakeEngine(t)
	c := openFake(t, f)
	ctx := context.Background()
	// Unverified: nothing is served.
	if _, r := c.Read(ctx, "SELECT 1", nil); r != ReasonDisconnected {
		t.Fatalf("read before the identity check: reason %v, want disconnected", r)
	}
	c.Verify(Identity{SystemIdentifier: "1", Database: "db"}, nil)
	var a, b string
	for i := 0; b == ""; i++ {
		q := "SELECT " + string(rune('a'+i))
		if a == "" {
			a = q
		} else if c.sockFor(Key(q, nil)) != c.sockFor(Key(a, nil)) {
			b = q
		}
	}
	for _, q := range []string{a, b} {
		eventually(t, func() string {
			res, r := c.Read(ctx, q, nil)
			if r != ReasonNone {
				return "read " + q + ": " + r.String()
			}
			if got := string(res.Rows[0][0]); got != q {
				t.Fatalf("result = %q, want %q", got, q)
			}
			return ""
		})
	}
	f.busy.Store(true) // the dropped socket stays down until we say
	if !f.drop(a) {
		t.Fatal("no connection holds " + a)
	}
	eventually(t, func() string {
		if _, r := c.Read(ctx, a, nil); r != ReasonDisconnected {
			return "read of the dropped socket's key: " + r.String()
		}
		return ""
	})
	if _, r := c.Read(ctx, b, nil); r != ReasonNone {
		t.Fatalf("read of the other socket's key: %v, want a hit", r)
	}
	eventually(t, func() string {
		if err := c.LastConnectError(); err == nil || !strings.Contains(err.Error(), "503") {
			return "LastConnectError() = " + errString(err) + ", want 503"
		}
		return ""
	})
	f.busy.Store(false)
	eventually(t, func() string {
		if _, r := c.Read(ctx, a, nil); r != ReasonNone {
			return "after reconnecting: " + r.String()
		}
		return ""
	})
}

func TestMismatchAndFailedCheck(t *testing.T) {
	f := newFakeEngine(t)
	c := openFake(t, f)
	ctx := context.Background()
	if !c.NeedsIdentity() {
		t.Fatal("NeedsIdentity = false before any check")
	}
	c.Verify(Identity{}, errors.New("connection refused"))
	if c.NeedsIdentity() {
		t.Fatal("a failed check is retried at once (want a pause)")
	}
	if _, r := c.Read(ctx, "SELECT 1", nil); r == ReasonNone {
		t.Fatal("a failed check was taken as a match")
	}
	eventually(t, func() string {
		if !c.NeedsIdentity() {
			return "the failed check is not retried"
		}
		return ""
	})
	c.Verify(Identity{SystemIdentifier: "1", Database: "other"}, nil)
	eventually(t, func() string {
		if !errors.Is(c.Err(), ErrMismatch) {
			return "Err() = " + errString(c.Err())
		}
		return ""
	})
	if _, r := c.Read(ctx, "SELECT 1", nil); r != ReasonDisabled {
		t.Fatalf("read with a mismatched engine: %v, want disabled", r)
	}
	if !strings.Contains(c.Err().Error(), `"other"`) {
		t.Fatalf("Err() = %v: want it to name both databases", c.Err())
	}
}

func TestConnectErrors(t *testing.T) {
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	for name, tt := range map[string]struct{ url, want string }{
		"refused":   {"ws://127.0.0.1:1/s2s/v1", "connect to ws://127.0.0.1:1/s2s/v1"},
		"not found": {"ws" + strings.TrimPrefix(notFound.URL, "http") + "/s2s/v1", "404"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.URL, cfg.Logger = tt.url, slog.New(slog.NewTextHandler(io.Discard, nil))
			c, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			eventually(t, func() string {
				if err := c.Err(); err == nil || !strings.Contains(err.Error(), tt.want) {
					return "Err() = " + errString(err) + ", want it to mention " + tt.want
				}
				return ""
			})
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestVerdictTimeout: with no answer from the engine, a read waits
// VerdictTimeout and goes to PostgreSQL; later reads of the same key do
// not wait again.
func TestVerdictTimeout(t *testing.T) {
	f := newFakeEngine(t)
	f.silent = true
	cfg := DefaultConfig()
	cfg.URL, cfg.Logger = f.url(), slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.VerdictTimeout = 50 * time.Millisecond
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Verify(Identity{SystemIdentifier: "1", Database: "db"}, nil)
	ctx := context.Background()
	eventually(t, func() string {
		if _, r := c.Read(ctx, "SELECT 1", nil); r != ReasonTimeout {
			return "first read: " + r.String()
		}
		return ""
	})
	for i := 0; i < 3; i++ {
		if _, r := c.Read(ctx, "SELECT 1", nil); r != ReasonTimeout {
			t.Fatalf("read %d: %v, want timeout", i, r)
		}
	}
	if got := c.Stats().Postgres["timeout"]; got < 4 {
		t.Fatalf("timeouts = %d, want at least 4", got)
	}
	if got := c.Stats().Subscriptions; got != 1 {
		t.Fatalf("subscriptions = %d, want 1 (one subscribe for the key)", got)
	}
}

// Position is the heartbeat position the sockets' lag frames named (the
// fake engine names 0/1), and unknown with no socket up.
func TestPosition(t *testing.T) {
	f := newFakeEngine(t)
	c := openFake(t, f)
	if _, ok := c.Position(); ok {
		t.Fatal("Position known before the identity check")
	}
	c.Verify(Identity{SystemIdentifier: "1", Database: "db"}, nil)
	eventually(t, func() string {
		if lsn, ok := c.Position(); !ok || lsn != 1 {
			return "Position() never became 0/1"
		}
		return ""
	})
}

// TestHitFreshnessNotOnCoarseClock: whether a hit may be served is
// decided on the real time, not on the coarse clock's goroutine, which a
// starved process runs late: with that clock stopped (as if it had not run
// for a while) and the engine's lag frames stopped, a hit goes to
// PostgreSQL (ReasonLag) once MaxLag has passed.
func TestHitFreshnessNotOnCoarseClock(t *testing.T) {
	f := newFakeEngine(t)
	cfg := DefaultConfig()
	cfg.URL, cfg.Logger = f.url(), slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.MaxLag = 200 * time.Millisecond
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.Verify(Identity{SystemIdentifier: "1", Database: "db"}, nil)
	eventually(t, func() string {
		if _, r := c.Read(context.Background(), "SELECT 1", nil); r != ReasonNone {
			return "the read never became a hit: " + r.String()
		}
		return ""
	})
	c.clock.Stop()
	f.mute.Store(true)
	time.Sleep(3 * cfg.MaxLag)
	if _, r := c.Read(context.Background(), "SELECT 1", nil); r != ReasonLag {
		t.Fatalf("read %v after %v with no lag frame, want %v", r, 3*cfg.MaxLag, ReasonLag)
	}
}
