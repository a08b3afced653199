package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestParseServeFlags(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		args  []string
		check func(*serveConfig) string
		bad   string // substring of the usage error
	}{
		{name: "defaults", args: []string{"--dsn", "postgres://x/db", "--insecure"}, check: func(c *serveConfig) string {
			if c.Listen != ":7070" || c.BasePath != "" || c.ReadDSN != "postgres://x/db" || c.Stream.Slot != "freshet" ||
				c.S2S.MaxConnections != 10000 || c.S2S.MaxSubscriptions != 1000 || c.S2S.MaxFrameBytes != 1<<20 ||
				c.S2S.MaxQueueBytes != 16<<20 || c.Stream.HeartbeatInterval != 500*time.Millisecond || !c.Stream.Create ||
				c.S2S.Token != "" || !c.Insecure || c.LogFormat != "text" || c.Engine.RowLimit != 1000000 {
				return fmt.Sprintf("%+v", *c)
			}
			return ""
		}},
		{name: "env", env: map[string]string{"FRESHET_DSN": "postgres://e/db", "FRESHET_READ_DSN": "postgres://replica/db",
			"FRESHET_S2S_TOKEN": "tok", "FRESHET_MAX_SUBSCRIPTIONS": "0", "FRESHET_BASE_PATH": "/fr/", "FRESHET_LOG_FORMAT": "json",
			"FRESHET_HEARTBEAT_INTERVAL": "2s", "FRESHET_ROW_LIMIT": "0", "FRESHET_CREATE": "false"},
			check: func(c *serveConfig) string {
				if c.Stream.DSN != "postgres://e/db" || c.ReadDSN != "postgres://replica/db" || c.S2S.Token != "tok" ||
					c.S2S.MaxSubscriptions != 0 || c.BasePath != "/fr" || c.LogFormat != "json" ||
					c.Stream.HeartbeatInterval != 2*time.Second || c.Engine.RowLimit != -1 || c.Stream.Create {
					return fmt.Sprintf("%+v", *c)
				}
				return ""
			}},
		{name: "flag wins", env: map[string]string{"FRESHET_DSN": "postgres://e/db", "FRESHET_MAX_CONNECTIONS": "5"},
			args: []string{"--max-connections", "7", "--token", "flagtok"},
			check: func(c *serveConfig) string {
				if c.S2S.MaxConnections != 7 || c.S2S.Token != "flagtok" {
					return fmt.Sprintf("%+v", c.S2S)
				}
				return ""
			}},
		{name: "timeouts and catalog check", args: []string{"--dsn", "postgres://x/db", "--insecure", "--write-timeout", "3s", "--compile-timeout", "4s", "--catalog-check-interval", "0"},
			check: func(c *serveConfig) string {
				if c.S2S.WriteTimeout != 3*time.Second || c.S2S.CompileTimeout != 4*time.Second || c.Engine.CatalogCheckInterval >= 0 {
					return fmt.Sprintf("write %v compile %v catalog check %v", c.S2S.WriteTimeout, c.S2S.CompileTimeout, c.Engine.CatalogCheckInterval)
				}
				return ""
			}},
		{name: "bad catalog check", args: []string{"--dsn", "x", "--catalog-check-interval", "-1s"}, bad: "--catalog-check-interval"},
		{name: "no dsn", bad: "no database given"},
		// Secure by default: no token is a refusal to start that names
		// both ways out.
		{name: "no token", args: []string{"--dsn", "postgres://x/db"}, bad: "FRESHET_S2S_TOKEN (or --token)"},
		{name: "no token names insecure", args: []string{"--dsn", "postgres://x/db"}, bad: "--insecure (FRESHET_INSECURE=true)"},
		{name: "insecure false", env: map[string]string{"FRESHET_INSECURE": "false"}, args: []string{"--dsn", "postgres://x/db"}, bad: "no token set"},
		{name: "insecure by env", env: map[string]string{"FRESHET_DSN": "postgres://e/db", "FRESHET_INSECURE": "true"},
			check: func(c *serveConfig) string {
				if !c.Insecure || c.S2S.Token != "" {
					return fmt.Sprintf("insecure %v token %q", c.Insecure, c.S2S.Token)
				}
				return ""
			}},
		{name: "bad insecure", env: map[string]string{"FRESHET_INSECURE": "maybe"}, args: []string{"--dsn", "x"}, bad: "\"maybe\": want true or false"},
		{name: "insecure flag off", env: map[string]string{"FRESHET_INSECURE": "true"}, args: []string{"--dsn", "postgres://x/db", "--insecure=false"}, bad: "no token set"},
		{name: "bad number", args: []string{"--dsn", "x", "--max-frame-bytes", "-1"}, bad: "--max-frame-bytes"},
		{name: "bad duration", args: []string{"--dsn", "x", "--heartbeat", "soon"}, bad: "--heartbeat"},
		{name: "bad log format", args: []string{"--dsn", "x", "--log-format", "xml"}, bad: "--log-format"},
		{name: "argument", args: []string{"--dsn", "x", "extra"}, bad: "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"FRESHET_DSN", "FRESHET_READ_DSN", "FRESHET_S2S_TOKEN", "FRESHET_MAX_SUBSCRIPTIONS",
				"FRESHET_BASE_PATH", "FRESHET_LOG_FORMAT", "FRESHET_HEARTBEAT_INTERVAL", "FRESHET_ROW_LIMIT", "FRESHET_CREATE",
				"FRESHET_MAX_CONNECTIONS", "FRESHET_INSECURE"} {
				t.Setenv(k, tt.env[k])
			}
			var out, errOut bytes.Buffer
			m := &Main{Stdout: &out, Stderr: &errOut}
			cfg, err := m.parseServeFlags(tt.args)
			if tt.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tt.bad) {
					t.Fatalf("error = %v, want one mentioning %q", err, tt.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(cfg); msg != "" {
				t.Errorf("config not as expected: %s", msg)
			}
		})
	}
}

// wsFrame is a frame read by the tests' raw client.
type wsFrame map[string]any

func (f wsFrame) s(k string) string { v, _ := f[k].(string); return v }

func readFrame(ctx context.Context, ws *websocket.Conn) (wsFrame, error) {
	_, b, err := ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	var f wsFrame
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("frame %s: %v", b, err)
	}
	return f, nil
}

// TestServeEndpoints runs serve in-process with a token: health,
// readiness, metrics and stats (readable without the token, exposing no
// row, SQL text, bind or credential), a subscription, and a graceful
// shutdown that closes the socket with 1001 and returns nil.
func TestServeEndpoints(t *testing.T) {
	db := pgtest.NewDB(t)
	const (
		token     = "tok-5e1f0c2b9a"
		rowSecret = "rowsecret-7f3a" // a value in a subscribed row
		sqlSecret = "sqlsecret-91c2" // a literal in a subscribed query
		bindValue = "bindsecret-44d0"
	)
	mustExec(t, db.DSN, "CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t VALUES (1, '"+rowSecret+"')")
	t.Setenv("FRESHET_S2S_TOKEN", token)
	cfg, err := (&Main{Stdout: io.Discard, Stderr: io.Discard}).parseServeFlags([]string{"--dsn", db.DSN,
		"--listen", "127.0.0.1:0", "--slot", "serve_ep", "--publication", "serve_ep", "--heartbeat", "100ms", "--base-path", "/fr",
		"--shape-data-dir", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	addr := make(chan string, 1)
	cfg.Listening = func(a string) { addr <- a }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- (&Main{Stdout: io.Discard, Stderr: io.Discard}).serve(ctx, cfg) }()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a + "/fr"
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start listening")
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d, want 200", code)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _ := get("/readyz")
		if code == 200 {
			break
		}
		if code != 503 || time.Now().After(deadline) {
			t.Fatalf("/readyz = %d, want 503 then 200", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The shape API on the same listener under the base path: its
	// secret is the s2s token unless --shape-secret says otherwise, and
	// DELETE is off unless --shape-allow-deletion.
	send := func(method, path string, hdr ...string) (int, string) {
		req, _ := http.NewRequest(method, base+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		method, path string
		hdr          []string
		code         int
		body         string // a substring of the body
	}{
		{"GET", "/v1/health", nil, 200, `{"status":"active"}`},
		{"GET", "/", nil, 200, ""},
		{"GET", "/nope", nil, 404, "Not found"},
		{"GET", "/v1/shape?table=t&offset=-1", nil, 401, `{"message":"Unauthorized - Invalid API secret"}`},
		{"GET", "/v1//shape?table=t&offset=-1", nil, 401, ""},
		{"GET", "/v1/shape/?table=t&offset=-1", nil, 401, ""},
		{"GET", "/v1/shape?table=t&offset=-1&secret=" + token, nil, 200, rowSecret},
		{"GET", "/v1/shape?table=t&offset=-1", []string{"Authorization", "Bearer " + token}, 200, rowSecret},
		{"DELETE", "/v1/shape?table=t&secret=" + token, nil, 405, `{"message":"DELETE not allowed"}`},
	} {
		code, body := send(c.method, c.path, c.hdr...)
		if code == 301 && c.code == 401 {
			continue // the mux's redirect to the clean path, which is checked
		}
		if code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("%s {base}%s: %d %q, want %d with %q", c.method, c.path, code, body, c.code, c.body)
		}
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	wsURL := "ws" + strings.TrimPrefix(base, "http") + "/s2s/v1"
	if _, resp, err := websocket.Dial(wctx, wsURL, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("dial without the token: %v, want 401", err)
	}
	ws, _, err := websocket.Dial(wctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.Write(wctx, websocket.MessageText, []byte(`{"type":"subscribe","id":"a","sql":"SELECT * FROM t WHERE v <> '`+sqlSecret+`' OR v = $1","params":[{"oid":25,"value":"`+bindValue+`"}],"mode":"rows"}`))
	ws.Write(wctx, websocket.MessageText, []byte(`{"type":"subscribe","id":"b","sql":"SELECT * FROM t WHERE id = 1","mode":"touch"}`))
	ws.Write(wctx, websocket.MessageText, []byte(`{"type":"subscribe","id":"c","sql":"SELECT * FROM nope","mode":"rows"}`))
	for n := 0; n < 3; {
		f, err := readFrame(wctx, ws)
		if err != nil {
			t.Fatal(err)
		}
		if f.s("type") == "accepted" || f.s("type") == "refused" {
			n++
		}
	}
	mustExec(t, db.DSN, "INSERT INTO t VALUES (2, '"+rowSecret+"-2')")
	for {
		f, err := readFrame(wctx, ws)
		if err != nil {
			t.Fatal(err)
		}
		if f.s("type") == "delta" {
			break
		}
	}
	_, metrics := get("/metrics")
	for _, want := range []string{
		`freshet_s2s_connections 1`, `freshet_s2s_subscriptions{mode="rows"} 1`, `freshet_s2s_subscriptions{mode="touch"} 1`,
		`freshet_s2s_refusals_total{reason="unknown_table"} 1`, `freshet_s2s_hydration_seconds_count 2`, `freshet_lag_seconds `,
		`freshet_transactions_total `, `freshet_rows_total `, `freshet_rows_per_second `, `freshet_s2s_queue_bytes `,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	_, stats := get("/stats")
	var st struct {
		S2S struct {
			Connections   int            `json:"connections"`
			Subscriptions map[string]int `json:"subscriptions"`
		} `json:"s2s"`
		Ready    bool   `json:"ready"`
		Database string `json:"database"`
	}
	if err := json.Unmarshal([]byte(stats), &st); err != nil {
		t.Fatalf("/stats is not JSON: %v\n%s", err, stats)
	}
	if st.S2S.Connections != 1 || st.S2S.Subscriptions["rows"] != 1 || !st.Ready || st.Database != db.Name {
		t.Errorf("/stats = %s", stats)
	}
	// Both are readable without the token, so neither may carry a row, a
	// query, a bind or a credential.
	for path, body := range map[string]string{"/metrics": metrics, "/stats": stats} {
		for _, secret := range []string{token, rowSecret, sqlSecret, bindValue, "SELECT", db.DSN} {
			if strings.Contains(body, secret) {
				t.Errorf("%s exposes %q:\n%s", path, secret, body)
			}
		}
	}
	// SIGTERM (the context main cancels on it): each subscription ended
	// shutting_down, then a close frame, exit 0.
	cancel()
	ended := map[string]string{}
	for {
		f, err2 := readFrame(wctx, ws)
		if err = err2; err != nil {
			break
		}
		if f.s("type") == "ended" {
			ended[f.s("id")] = f.s("code")
		}
	}
	if ended["a"] != "shutting_down" || ended["b"] != "shutting_down" || len(ended) != 2 {
		t.Errorf("ended before the close: %v, want a and b shutting_down", ended)
	}
	if code := websocket.CloseStatus(err); code != websocket.StatusGoingAway {
		t.Errorf("socket closed with %v (%v), want 1001 going away", code, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after shutdown, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return after shutdown")
	}
}

// killClient is one backend in TestServeKill9: a socket with a few rows
// subscriptions, rebuilt from each accepted and kept by each delta.
type killClient struct {
	queries map[string]string // id -> SQL
	mu      sync.Mutex
	state   map[string]map[string][]string // id -> key -> values
	count   map[string]string
}

func (c *killClient) run(ctx context.Context, url string, errs chan<- error) {
	for ctx.Err() == nil {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ws, _, err := websocket.Dial(dctx, url, nil)
		cancel()
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		ws.SetReadLimit(64 << 20)
		for id, sql := range c.queries {
			b, _ := json.Marshal(map[string]any{"type": "subscribe", "id": id, "sql": sql, "mode": "rows"})
			ws.Write(ctx, websocket.MessageText, b)
		}
		for {
			f, err := readFrame(ctx, ws)
			if err != nil {
				break
			}
			if err := c.apply(f); err != nil {
				errs <- err
				return
			}
		}
		ws.CloseNow()
	}
}

func rowOf(r any) (string, []string) {
	m, _ := r.(map[string]any)
	k, _ := m["key"].(string)
	vs, _ := m["values"].([]any)
	out := make([]string, len(vs))
	for i, v := range vs {
		if v == nil {
			out[i] = "NULL"
		} else {
			out[i], _ = v.(string)
		}
	}
	return k, out
}

func (c *killClient) apply(f wsFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := f.s("id")
	switch f.s("type") {
	case "accepted":
		st := map[string][]string{}
		rows, _ := f["rows"].([]any)
		for _, r := range rows {
			k, v := rowOf(r)
			st[k] = v
		}
		c.state[id] = st
		c.count[id] = f.s("count")
	case "delta":
		st := c.state[id]
		if st == nil {
			return fmt.Errorf("delta before accepted: %v", f)
		}
		rm, _ := f["remove"].([]any)
		for _, k := range rm {
			delete(st, k.(string))
		}
		up, _ := f["upsert"].([]any)
		for _, r := range up {
			k, v := rowOf(r)
			st[k] = v
		}
		if cnt := f.s("count"); cnt != "" {
			c.count[id] = cnt
		}
	case "refused", "ended", "error":
		return fmt.Errorf("unexpected frame %v", f)
	}
	return nil
}

// rows returns a subscription's held rows, sorted.
func (c *killClient) rows(id string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, v := range c.state[id] {
		out = append(out, strings.Join(v, "|"))
	}
	if cnt := c.count[id]; cnt != "" {
		out = append(out, "count="+cnt)
	}
	slices.Sort(out)
	return out
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestServeKill9 kills `freshet serve` with SIGKILL while a writer
// commits, starts it again on the same slot, and checks that every client,
// once resubscribed, holds exactly what PostgreSQL returns.
func TestServeKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it as a subprocess")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "freshet")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	db := pgtest.NewDB(t)
	mustExec(t, db.DSN,
		"CREATE TABLE acct (id int PRIMARY KEY, grp int NOT NULL, bal numeric(12,2) NOT NULL, note text)",
		"INSERT INTO acct SELECT g, g % 5, g * 1.25, 'n' || g FROM generate_series(1, 300) g")
	addr := freePort(t)
	start := func() (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(bin, "serve", "--insecure", "--dsn", db.DSN, "--listen", addr, "--slot", "serve_kill",
			"--publication", "serve_kill", "--heartbeat", "100ms", "--log-level", "warn")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &stderr
	}
	srv, stderr := start()
	defer func() {
		srv.Process.Kill()
		srv.Wait()
	}()

	queries := []map[string]string{
		{"g0": "SELECT id, bal, note FROM acct WHERE grp = 0", "top": "SELECT id, bal FROM acct ORDER BY bal DESC, id LIMIT 7"},
		{"g1": "SELECT * FROM acct WHERE grp IN (1, 2)", "n": "SELECT COUNT(*) FROM acct WHERE bal > 200"},
		{"rng": "SELECT id, grp FROM acct WHERE bal BETWEEN 50 AND 150", "g4": "SELECT note FROM acct WHERE grp = 4 AND id < 100"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	errs := make(chan error, 10)
	var clients []*killClient
	var wg sync.WaitGroup
	for _, q := range queries {
		c := &killClient{queries: q, state: map[string]map[string][]string{}, count: map[string]string{}}
		clients = append(clients, c)
		wg.Add(1)
		go func() { defer wg.Done(); c.run(ctx, "ws://"+addr+"/s2s/v1", errs) }()
	}
	defer func() { cancel(); wg.Wait() }()

	// The writer moves rows between groups and balances, inserts and
	// deletes, in small transactions.
	wctx, stopWriter := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() {
		conn, err := pgx.Connect(ctx, db.DSN)
		if err != nil {
			wdone <- err
			return
		}
		defer conn.Close(context.Background())
		r := rand.New(rand.NewPCG(1, 2))
		for wctx.Err() == nil {
			id := 1 + r.IntN(400)
			var err error
			switch r.IntN(4) {
			case 0:
				_, err = conn.Exec(ctx, "INSERT INTO acct VALUES ($1, $2, $3, 'i') ON CONFLICT (id) DO UPDATE SET note = 'u'", id, r.IntN(5), r.IntN(40000))
			case 1:
				_, err = conn.Exec(ctx, "DELETE FROM acct WHERE id = $1", id)
			default:
				_, err = conn.Exec(ctx, "UPDATE acct SET grp = $2, bal = bal + $3 WHERE id = $1", id, r.IntN(5), r.IntN(200)-100)
			}
			if err != nil && wctx.Err() == nil {
				wdone <- err
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		wdone <- nil
	}()

	waitHeld := func() {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for _, c := range clients {
			for id := range c.queries {
				for len(c.rows(id)) == 0 {
					if time.Now().After(deadline) {
						t.Fatalf("client never accepted %s; server log:\n%s", id, stderr)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}
	}
	waitHeld()
	time.Sleep(time.Duration(500+rand.IntN(500)) * time.Millisecond)
	if err := srv.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	srv.Wait()
	// Clients lose their sockets; forget what they hold so the check below
	// only passes on state rebuilt from the restarted server.
	for _, c := range clients {
		c.mu.Lock()
		c.state, c.count = map[string]map[string][]string{}, map[string]string{}
		c.mu.Unlock()
	}
	time.Sleep(300 * time.Millisecond) // writes go on while it is down
	srv, stderr = start()
	waitHeld()
	time.Sleep(time.Second) // writes go on against the restarted server
	stopWriter()
	if err := <-wdone; err != nil {
		t.Fatalf("writer: %v", err)
	}

	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	want := func(sql string) []string {
		rows, err := conn.Query(ctx, sql, pgx.QueryResultFormats{pgx.TextFormatCode})
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var vs []string
			for _, raw := range rows.RawValues() {
				if raw == nil {
					vs = append(vs, "NULL")
				} else {
					vs = append(vs, string(raw))
				}
			}
			out = append(out, strings.Join(vs, "|"))
		}
		if strings.Contains(sql, "COUNT(*)") {
			out = append(out, "count="+out[0]) // the row and the count member
		}
		slices.Sort(out)
		return out
	}
	for _, c := range clients {
		for id, sql := range c.queries {
			deadline := time.Now().Add(30 * time.Second)
			for {
				got, exp := c.rows(id), want(sql)
				if slices.Equal(got, exp) {
					break
				}
				select {
				case err := <-errs:
					t.Fatalf("client: %v", err)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s after restart:\n got %d rows %v\nwant %d rows %v\nserver log:\n%s", sql, len(got), got, len(exp), exp, stderr)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	select {
	case err := <-errs:
		t.Fatalf("client: %v", err)
	default:
	}
	if err := srv.Process.Signal(syscallTERM); err != nil {
		t.Fatal(err)
	}
	if err := srv.Wait(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("serve exited with %v after SIGTERM, want 0; log:\n%s", err, stderr)
		}
	}
}

var syscallTERM = syscall.SIGTERM

// A handler that panics is answered 500 internal and logged with its
// stack; the server goes on answering.
func TestRecoverHandler(t *testing.T) {
	var logBuf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logBuf.Write(p)
	}), nil))
	mux := http.NewServeMux()
	mux.HandleFunc("/boom", func(http.ResponseWriter, *http.Request) {
		var m map[string]int
		m["x"] = 1 // a nil map: the kind of bug a request can reach
	})
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	hs := httptest.NewServer(recoverHandler(log, mux))
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/boom")
	if err != nil {
		t.Fatalf("GET /boom: %v (want an answer, not a dropped connection)", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), `"code":"internal"`) {
		t.Fatalf("GET /boom = %d %s, want 500 with code internal", resp.StatusCode, body)
	}
	mu.Lock()
	logged := logBuf.String()
	mu.Unlock()
	if !strings.Contains(logged, "assignment to entry in nil map") || !strings.Contains(logged, "serve_test.go") {
		t.Fatalf("log = %s, want the panic with its stack", logged)
	}
	resp, err = http.Get(hs.URL + "/ok")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /ok after the panic: %v %v", resp, err)
	}
	resp.Body.Close()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
