package s2s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/pgwal"
	"github.com/freshetdb/freshet/query"
	"github.com/freshetdb/freshet/s2s"
	"github.com/freshetdb/freshet/wire"
	"github.com/jackc/pgx/v5"
)

// env is a real PostgreSQL database followed by a real reader and engine,
// served by an s2s.Server over a real HTTP listener.
type env struct {
	t    *testing.T
	db   *pgtest.DB
	conn *pgx.Conn // writes and reference reads
	srv  *s2s.Server
	eng  *engine.Engine
	url  string // ws://.../s2s/v1
	http *httptest.Server
}

var slotChars = regexp.MustCompile(`[^a-z0-9_]`)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newEnv runs setup (DDL and rows) in a fresh database and serves it.
// tweak adjusts the server's config.
func newEnv(t *testing.T, setup string, tweak func(*s2s.Config, *engine.Config)) *env {
	t.Helper()
	return newEnvWrapped(t, setup, tweak, nil)
}

// newEnvWrapped is newEnv with the server's engine wrapped by wrap (a
// test's fault injection around the real engine).
func newEnvWrapped(t *testing.T, setup string, tweak func(*s2s.Config, *engine.Config), wrap func(s2s.Engine) s2s.Engine) *env {
	t.Helper()
	ctx := context.Background()
	db := pgtest.NewDB(t)
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, setup); err != nil {
		t.Fatalf("setup: %v", err)
	}
	rcfg := pgwal.DefaultConfig()
	rcfg.DSN, rcfg.Create = db.DSN, true
	slot := "s_" + slotChars.ReplaceAllString(strings.ToLower(db.Name), "_")
	if len(slot) > 60 {
		slot = slot[:60]
	}
	rcfg.Slot, rcfg.Publication = slot, slot
	rcfg.HeartbeatInterval = 50 * time.Millisecond
	rcfg.StatusInterval = 200 * time.Millisecond
	rcfg.Logger = quiet()
	rd, err := pgwal.Open(ctx, rcfg)
	if err != nil {
		t.Fatalf("open reader: %v", err)
	}
	scfg := s2s.DefaultConfig()
	scfg.Types, scfg.Logger = rd.Types(), quiet()
	scfg.ServerVersion, scfg.SystemIdentifier, scfg.Database = "test", rd.SystemID(), rd.Database()
	scfg.LagInterval = 100 * time.Millisecond
	ecfg := engine.Config{ReadDSN: db.DSN, Types: rd.Types(), Logger: quiet(), Query: query.DefaultOptions()}
	if tweak != nil {
		tweak(&scfg, &ecfg)
	}
	tap := s2s.NewTap(rd)
	ecfg.Source = tap
	eng, err := engine.Open(ctx, ecfg)
	if err != nil {
		t.Fatalf("open engine: %v", err)
	}
	scfg.Engine, scfg.Tap = eng, tap
	if wrap != nil {
		scfg.Engine = wrap(eng)
	}
	srv, err := s2s.New(scfg)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle(wire.Path, srv)
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		hs.Close()
		eng.Close()
		rd.Close()
	})
	return &env{t: t, db: db, conn: conn, srv: srv, eng: eng, http: hs,
		url: "ws" + strings.TrimPrefix(hs.URL, "http") + wire.Path}
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.conn.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("exec %q: %v", sql, err)
	}
}

// client is a raw WebSocket client: it sends JSON text it is given and
// reads frames as generic JSON objects, with no client library.
type client struct {
	t  *testing.T
	ws *websocket.Conn
}

// frame is one frame as read: its text and its JSON object.
type frame struct {
	raw string
	m   map[string]any
}

func (f frame) str(k string) string {
	s, _ := f.m[k].(string)
	return s
}

func (e *env) dial(hdr http.Header) (*client, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, e.url, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		return nil, resp, err
	}
	ws.SetReadLimit(64 << 20)
	c := &client{t: e.t, ws: ws}
	e.t.Cleanup(func() { ws.CloseNow() })
	return c, resp, nil
}

// connect dials and reads hello.
func (e *env) connect() (*client, frame) {
	e.t.Helper()
	c, _, err := e.dial(nil)
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	return c, c.expect("hello")
}

func (c *client) send(s string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
		c.t.Fatalf("write %s: %v", s, err)
	}
}

func (c *client) sendf(format string, a ...any) { c.t.Helper(); c.send(fmt.Sprintf(format, a...)) }

// read returns the next frame, lag frames included.
func (c *client) read() (frame, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	typ, b, err := c.ws.Read(ctx)
	if err != nil {
		return frame{}, err
	}
	if typ != websocket.MessageText {
		return frame{}, fmt.Errorf("got a binary message, want JSON text")
	}
	f := frame{raw: string(b)}
	if err := json.Unmarshal(b, &f.m); err != nil {
		return frame{}, fmt.Errorf("frame %s is not a JSON object: %v", b, err)
	}
	return f, nil
}

// next returns the next frame that is not a lag frame.
func (c *client) next() frame {
	c.t.Helper()
	for {
		f, err := c.read()
		if err != nil {
			c.t.Fatalf("read: %v", err)
		}
		if f.str("type") != "lag" {
			return f
		}
	}
}

// expect reads the next non-lag frame and checks its type.
func (c *client) expect(typ string) frame {
	c.t.Helper()
	f := c.next()
	if got := f.str("type"); got != typ {
		c.t.Fatalf("frame type = %q, want %q: %.500s", got, typ, f.raw)
	}
	return f
}

// touchedIDs reads the touched frame of one transaction, checks it names
// n ids, and returns them sorted.
func (c *client) touchedIDs(n int) string {
	c.t.Helper()
	f := c.expect("touched")
	var ids []string
	for _, id := range list(f, "ids") {
		s, _ := id.(string)
		ids = append(ids, s)
	}
	if len(ids) != n {
		c.t.Fatalf("touched frame names %d ids, want %d: %s", len(ids), n, f.raw)
	}
	sort.Strings(ids)
	return fmt.Sprint(ids)
}

// values returns the "values" of a row object as strings ("<null>" for null).
func values(row any) []string {
	m, _ := row.(map[string]any)
	vs, _ := m["values"].([]any)
	out := make([]string, len(vs))
	for i, v := range vs {
		if v == nil {
			out[i] = "<null>"
			continue
		}
		out[i], _ = v.(string)
	}
	return out
}

func key(row any) string {
	m, _ := row.(map[string]any)
	k, _ := m["key"].(string)
	return k
}

func list(f frame, k string) []any {
	l, _ := f.m[k].([]any)
	return l
}
