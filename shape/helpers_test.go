package shape_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/pgwal"
	"github.com/freshetdb/freshet/query"
	"github.com/freshetdb/freshet/shape"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// env is a real PostgreSQL database followed by a real reader and engine,
// served by a shape.Server over a real HTTP listener.
type env struct {
	t    *testing.T
	db   *pgtest.DB
	conn *pgx.Conn
	srv  *shape.Server
	eng  *engine.Engine
	rd   *pgwal.Reader
	pool *pgxpool.Pool
	url  string
	http *httptest.Server
	cfg  shape.Config
}

var slotChars = regexp.MustCompile(`[^a-z0-9_]`)

func quiet() *slog.Logger {
	if os.Getenv("SHAPE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newEnv runs setup in a fresh database and serves it; tweak adjusts the
// shape server's config.
func newEnv(t *testing.T, setup string, tweak func(*shape.Config)) *env {
	t.Helper()
	ctx := context.Background()
	db := pgtest.NewDB(t)
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if setup != "" {
		if _, err := conn.Exec(ctx, setup); err != nil {
			t.Fatalf("setup: %v", err)
		}
	}
	e := &env{t: t, db: db, conn: conn}
	cfg := shape.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Insecure = true
	cfg.LongPoll = 2 * time.Second
	if tweak != nil {
		tweak(&cfg)
	}
	e.cfg = cfg
	e.start()
	return e
}

func (e *env) start() {
	t := e.t
	ctx := context.Background()
	rcfg := pgwal.DefaultConfig()
	rcfg.DSN, rcfg.Create = e.db.DSN, true
	slot := "sh_" + slotChars.ReplaceAllString(strings.ToLower(e.db.Name), "_")
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
	eng, err := engine.Open(ctx, engine.Config{Source: rd, ReadDSN: e.db.DSN, Types: rd.Types(), Logger: quiet(), Query: query.DefaultOptions()})
	if err != nil {
		t.Fatalf("open engine: %v", err)
	}
	pool, err := pgxpool.New(ctx, e.db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.cfg
	cfg.Engine, cfg.Pool, cfg.Types, cfg.Logger, cfg.ServerVersion = eng, pool, rd.Types(), quiet(), "test"
	if cfg.Publication == "" {
		cfg.Publication = slot
	}
	srv, err := shape.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open shape server: %v", err)
	}
	hs := httptest.NewServer(srv)
	e.srv, e.eng, e.rd, e.pool, e.http, e.url = srv, eng, rd, pool, hs, hs.URL
	t.Cleanup(e.stop)
}

// stop closes everything start opened (the data directory stays).
func (e *env) stop() {
	if e.srv == nil {
		return
	}
	e.http.CloseClientConnections()
	e.http.Close()
	e.srv.Close()
	e.eng.Close()
	e.rd.Close()
	e.pool.Close()
	e.srv = nil
}

// restart closes the server and opens it again on the same data dir.
func (e *env) restart() {
	e.stop()
	e.start()
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.conn.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("exec %q: %v", sql, err)
	}
}

// resp is one HTTP answer.
type resp struct {
	code int
	h    http.Header
	body string
}

func (r resp) msgs(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	if err := json.Unmarshal([]byte(r.body), &out); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return out
}

// do sends a request. A 503 saying the shape is not ready yet is retried,
// as Electric's client retries it (a slow machine may take longer than a
// test's short long-poll to hydrate).
func (e *env) do(method string, q url.Values, hdr map[string]string, body string) resp {
	e.t.Helper()
	for i := 0; ; i++ {
		r := e.do1(method, q, hdr, body)
		if r.code != 503 || i == 100 || !(strings.Contains(r.body, "snapshot_pending") || strings.Contains(r.body, "shape_not_ready")) {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *env) do1(method string, q url.Values, hdr map[string]string, body string) resp {
	e.t.Helper()
	u := e.url + "/v1/shape"
	if q != nil {
		u += "?" + q.Encode()
	}
	return e.send(method, u, hdr, body)
}

// path sends a request without a body or headers to the server's path p.
func (e *env) path(method, p string) resp {
	e.t.Helper()
	return e.send(method, e.url+p, nil, "")
}

func (e *env) send(method, u string, hdr map[string]string, body string) resp {
	e.t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, u, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{code: res.StatusCode, h: res.Header, body: string(b)}
}

func (e *env) get(kv ...string) resp {
	e.t.Helper()
	return e.do("GET", qs(kv...), nil, "")
}

func qs(kv ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Add(kv[i], kv[i+1])
	}
	return q
}

// syncTo follows a shape from -1 until up-to-date and returns its rows by
// key, applying messages as Electric's client does, with the last
// handle and offset.
func (e *env) syncTo(rows map[string]map[string]any, handle, offset string, kv ...string) (string, string) {
	e.t.Helper()
	for i := 0; i < 1000; i++ {
		q := qs(kv...)
		q.Set("offset", offset)
		if offset != "-1" {
			q.Set("handle", handle)
		}
		r := e.do("GET", q, nil, "")
		if r.code != 200 {
			e.t.Fatalf("GET %v: %d %s", q, r.code, r.body)
		}
		handle, offset = r.h.Get("electric-handle"), r.h.Get("electric-offset")
		done := false
		for _, m := range r.msgs(e.t) {
			applyMsg(rows, m)
			if h, _ := m["headers"].(map[string]any); h["control"] == "up-to-date" {
				done = true
			}
		}
		if done {
			return handle, offset
		}
	}
	e.t.Fatal("never up-to-date")
	return "", ""
}

func applyMsg(rows map[string]map[string]any, m map[string]any) {
	h, _ := m["headers"].(map[string]any)
	key, _ := m["key"].(string)
	val, _ := m["value"].(map[string]any)
	switch h["operation"] {
	case "insert":
		rows[key] = val
	case "update":
		r := rows[key]
		if r == nil {
			r = map[string]any{}
			rows[key] = r
		}
		for k, v := range val {
			r[k] = v
		}
	case "delete":
		delete(rows, key)
	}
}

// eventually polls cond every 20 ms until it returns "".
func eventually(t *testing.T, wait time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", wait, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }

// syncShape follows the shape at base+"/v1/shape?"+query from -1 until a
// response is up to date, with a plain HTTP client (a non-200, such as
// the 503 of a first snapshot not written yet, is asked again), and
// returns its handle and offset; ok is false after 100 requests or an
// error.
func syncShape(client *http.Client, base, query string) (handle, offset string, ok bool) {
	off, h := "-1", ""
	for j := 0; j < 100; j++ {
		u := base + "/v1/shape?" + query + "&offset=" + off
		if h != "" {
			u += "&handle=" + h
		}
		res, err := client.Get(u)
		if err != nil {
			return "", "", false
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		h, off = res.Header.Get("electric-handle"), res.Header.Get("electric-offset")
		if _, ok := res.Header["Electric-Up-To-Date"]; ok {
			return h, off, true
		}
	}
	return "", "", false
}
