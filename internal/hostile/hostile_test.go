package hostile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/internal/servetest"
	"github.com/freshetdb/freshet/internal/wsraw"
	"github.com/jackc/pgx/v5"
)

const token = "hostile-suite-token"

// The limits the suite's server runs with (flags below).
const (
	maxFrameBytes = 64 << 10
	maxQueueBytes = 1 << 20
	maxSubs       = 20
)

const setup = `
CREATE TABLE canary (id int PRIMARY KEY, v text);
INSERT INTO canary VALUES (1, 'start');
CREATE TABLE items (id int PRIMARY KEY, grp int NOT NULL, v text, n int8);
INSERT INTO items SELECT i, i % 10, 'v' || i, i FROM generate_series(1, 200) i;
CREATE TABLE pairs (id int PRIMARY KEY, v text);
INSERT INTO pairs SELECT i, 'p' || i FROM generate_series(1, 10) i;
CREATE TABLE w (id int4 PRIMARY KEY, k int4, d date, v text);
INSERT INTO w SELECT i, i, date '2024-01-01' + i % 7, 'w' || i FROM generate_series(1, 300) i;
CREATE TABLE t2 (k int PRIMARY KEY, r int, c1 text);
INSERT INTO t2 VALUES (1, 2, '00000000-0000-0000-0000-000000000001'), (2, 2, '00000000-0000-0000-0000-000000000001'),
	(3, NULL, 'ffffffff-ffff-ffff-ffff-ffffffffffff');
CREATE TABLE again (id int PRIMARY KEY, v text);
INSERT INTO again VALUES (1, 'old');
CREATE TABLE vals (id int PRIMARY KEY, f float8, s text, a int4[]);
INSERT INTO vals VALUES (1, 1.5, 'x', '{1}'), (2, 2.5, 'y', '{2147483647}');
CREATE TABLE ties (k int PRIMARY KEY, r int, c text);
INSERT INTO ties VALUES (1, 1, 'x'), (2, 2, 'x'), (3, 3, 'x'), (4, 4, 'x');
CREATE SCHEMA secret;
CREATE TABLE secret.vault (id int PRIMARY KEY, s text);
INSERT INTO secret.vault VALUES (1, 'hidden');
CREATE TABLE big (id int PRIMARY KEY, body text);
INSERT INTO big VALUES (1, repeat('x', 2 * 1024 * 1024));
CREATE TABLE wide (id int PRIMARY KEY, body text);
INSERT INTO wide SELECT i, repeat('w', 20000) FROM generate_series(1, 60) i;
`

// harness is the suite's server, its database and the canary.
type harness struct {
	srv    *servetest.Server
	db     *pgx.Conn
	canary *canary
}

// canary is one connection holding one subscription whose every change
// it must receive.
type canary struct {
	h      *harness
	frames chan map[string]any
	err    atomic.Value // error: the read loop's end
	n      int
}

// TestHostileInputs runs every case against one server with small
// limits. A case that takes the server down, stalls it or breaks the
// canary fails, and so does any answer other than the exact one expected.
func TestHostileInputs(t *testing.T) {
	runCases(t, cases, "--max-frame-bytes", fmt.Sprint(maxFrameBytes), "--max-queue-bytes", fmt.Sprint(maxQueueBytes),
		"--max-subscriptions", fmt.Sprint(maxSubs), "--row-limit", "100", "--max-sql-bytes", "32768")
}

// TestHostileInputsLimitsLifted runs the cases that must hold with every
// limit lifted ("0 lifts" must never mean "crashes" or "hangs").
func TestHostileInputsLimitsLifted(t *testing.T) {
	runCases(t, liftedCases, "--max-frame-bytes", "0", "--max-sql-bytes", "0", "--max-depth", "0",
		"--max-alternatives", "0", "--max-in-values", "0", "--compile-timeout", "300ms",
		// A publication of some tables only: the others are refused.
		"--tables", "canary,items,big")
}

// runCases starts a server with args, subscribes the canary and runs
// each case, checking the canary after each.
func runCases(t *testing.T, cases []hostileCase, args ...string) {
	db := pgtest.NewDB(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, setup); err != nil {
		t.Fatalf("setup: %v", err)
	}
	srv := servetest.Start(t, servetest.Options{
		DSN: db.DSN, Slot: servetest.SlotFor("hostile_", db.Name), Args: args,
		// A token (secure by default); two writers, so that the ping
		// flood's four clients outnumber them.
		Env: []string{"FRESHET_S2S_TOKEN=" + token, "GOMAXPROCS=2"},
	})
	h := &harness{srv: srv, db: conn}
	h.canary = h.startCanary(t)
	h.canary.check(t, "before every case")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, h)
			h.canary.check(t, "after "+c.name)
		})
		if t.Failed() {
			t.Logf("freshet serve printed:\n%s", tail(srv.Log(), 8000))
			return
		}
	}
}

// hostileCase is one hostile input: run sends it on a connection of its
// own, calls h.canary.check while it is in flight, and checks the
// answer exactly.
type hostileCase struct {
	name string
	run  func(t *testing.T, h *harness)
}

// cases are the suite's cases for the server with small limits: the
// frames and protocol here, the queries in queries_test.go.
var cases = slices.Concat(frameCases, queryCases, windowCases, []hostileCase{retypedCase})

var frameCases = []hostileCase{
	// Item 5: secure by default.
	{"no token: 401", func(t *testing.T, h *harness) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, resp, err := websocket.Dial(ctx, h.srv.URL, nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("dial without the token: %v (%v), want 401", err, resp)
		}
		_, resp, err = websocket.Dial(ctx, h.srv.URL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer wrong"}}})
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("dial with a wrong token: %v (%v), want 401", err, resp)
		}
	}},
	{"stats and metrics expose no row, SQL or token", func(t *testing.T, h *harness) {
		c := h.dial(t)
		const secret = "sqlsecret-0b7e"
		c.send(t, `{"type":"subscribe","id":"s","sql":"SELECT id, v FROM items WHERE v <> '`+secret+`' AND id = 5","mode":"rows"}`)
		c.expect(t, "accepted", "")
		h.canary.check(t, "while subscribed")
		for _, path := range []string{"/stats", "/metrics"} {
			resp, err := http.Get("http://" + h.srv.Addr + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s without the token = %d, want 200", path, resp.StatusCode)
			}
			for _, s := range []string{secret, "SELECT", token, "'v5'", `"v5"`, h.srv.DSN} {
				if strings.Contains(string(b), s) {
					t.Errorf("%s exposes %q", path, s)
				}
			}
		}
	}},

	// Item 8: a subscription id is held whole.
	errorCase("id over 256 bytes", `{"type":"subscribe","id":"`+strings.Repeat("i", 300)+`","sql":"SELECT id FROM items WHERE id = 1","mode":"rows"}`, "bad_id"),
	errorCase("id of 60 KB", `{"type":"subscribe","id":"`+strings.Repeat("j", 60<<10)+`","sql":"SELECT id FROM items WHERE id = 1","mode":"rows"}`, "bad_id"),
	errorCase("empty id", `{"type":"subscribe","id":"","sql":"SELECT id FROM items WHERE id = 1","mode":"rows"}`, "bad_id"),

	// Item 10: a header over the frame limit is answered at once.
	{"header claims 2^63-1 bytes", func(t *testing.T, h *harness) {
		c := h.rawDial(t, nil)
		if _, err := c.Write(wsraw.AppendFrame(nil, true, wsraw.OpText, math.MaxInt64, []byte(`{"type":"subscribe"`))); err != nil {
			t.Fatal(err)
		}
		h.canary.check(t, "while the frame's payload never comes")
		if f := rawNext(t, c); f["type"] != "error" || f["code"] != "frame_too_large" {
			t.Fatalf("answer = %v, want error frame_too_large", f)
		}
	}},
	{"header claims the limit plus one", func(t *testing.T, h *harness) {
		c := h.rawDial(t, nil)
		if _, err := c.Write(wsraw.AppendFrame(nil, true, wsraw.OpText, maxFrameBytes+1, nil)); err != nil {
			t.Fatal(err)
		}
		if f := rawNext(t, c); f["type"] != "error" || f["code"] != "frame_too_large" {
			t.Fatalf("answer = %v, want error frame_too_large", f)
		}
		h.canary.check(t, "while the payload is awaited")
		// The payload comes after all: discarded, and the connection reads on.
		if _, err := c.Write([]byte(strings.Repeat(" ", maxFrameBytes+1))); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteText(`{"type":"ping","data":"after"}`); err != nil {
			t.Fatal(err)
		}
		if f := rawNext(t, c); f["type"] != "pong" || f["data"] != "after" {
			t.Fatalf("answer = %v, want pong after", f)
		}
	}},
	errorCase("frame of 100 KB", `{"type":"ping","data":"`+strings.Repeat("z", 100<<10)+`"}`, "frame_too_large"),

	// Item 13: invalid UTF-8 closes with 1007.
	{"invalid UTF-8 in a text frame", func(t *testing.T, h *harness) {
		c := h.rawDial(t, nil)
		if err := c.WriteText("{\"type\":\"subscribe\",\"id\":\"a\xc3\x28\",\"sql\":\"SELECT id FROM items WHERE id = 1\",\"mode\":\"rows\"}"); err != nil {
			t.Fatal(err)
		}
		h.canary.check(t, "while the connection is failed")
		if code := rawClose(t, c); code != 1007 {
			t.Fatalf("close code %d, want 1007", code)
		}
	}},

	// Item 7: clients flooding pings without reading stall no one, and are
	// closed as slow consumers once their unread pongs pass the queue's
	// limit.
	{"four clients flood pings and never read", func(t *testing.T, h *harness) {
		before := h.metric(t, "freshet_s2s_slow_consumers_total")
		small := &net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) {
				syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			})
		}}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		dropped := make(chan struct{}, 4)
		for range 4 {
			c := h.rawDial(t, small)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				var batch []byte
				for range 200 {
					batch = wsraw.AppendFrame(batch, true, wsraw.OpPing, 125, []byte(strings.Repeat("p", 125)))
				}
				rest := batch
				for {
					select {
					case <-stop:
						return
					default:
					}
					// A write cut by its deadline goes on where it
					// stopped: the stream's frames stay whole.
					c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
					n, err := c.Write(rest)
					if rest = rest[n:]; len(rest) == 0 {
						rest = batch
					}
					if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
						dropped <- struct{}{} // the server closed this client
						return
					}
				}
			}()
		}
		defer func() { close(stop); wg.Wait() }()
		for i := range 3 {
			h.canary.check(t, fmt.Sprintf("during the flood (%d)", i))
		}
		for i := range 4 {
			select {
			case <-dropped:
			case <-time.After(60 * time.Second):
				t.Fatalf("%d of 4 flooders closed by the server after a minute", i)
			}
		}
		servetest.Eventually(t, 30*time.Second, func() string {
			if n := h.metric(t, "freshet_s2s_slow_consumers_total"); n != before+4 {
				return fmt.Sprintf("%v slow consumers closed, want the 4 flooders", n-before)
			}
			return ""
		})
	}},

	// Item 9: an answer bigger than --max-queue-bytes.
	refusedCase("result bigger than the queue", `{"type":"subscribe","id":"big","sql":"SELECT * FROM big WHERE id = 1","mode":"rows"}`, "result_too_large", false),
	{"a transaction bigger than the queue, read as it comes", func(t *testing.T, h *harness) {
		c := h.dial(t)
		for i := range 4 {
			c.send(t, fmt.Sprintf(`{"type":"subscribe","id":"w%d","sql":"SELECT * FROM wide WHERE id BETWEEN %d AND %d","mode":"rows"}`, i, 15*i+1, 15*i+15))
			c.expect(t, "accepted", "")
		}
		// 60 rows of 20 kB in one transaction: 1.2 MB for this client, over
		// the 1 MiB queue, to a client reading as fast as it can.
		h.exec(t, "UPDATE wide SET body = repeat('u', 20000)")
		h.canary.check(t, "after the big transaction")
		for range 4 {
			c.expect(t, "delta", "")
		}
		c.send(t, `{"type":"ping","data":"still"}`)
		c.expect(t, "pong", "")
	}},

	// Protocol refusals that were already in place: each with its code.
	errorCase("not JSON", `this is not json`, "bad_frame"),
	errorCase("no type", `{"id":"x"}`, "bad_frame"),
	errorCase("member of the wrong type", `{"type":"subscribe","id":"x","sql":42}`, "bad_frame"),
	errorCase("unknown type", `{"type":"launch"}`, "unknown_type"),
	errorCase("server-only type", `{"type":"hello"}`, "unknown_type"),
	errorCase("unsubscribe of an unknown id", `{"type":"unsubscribe","id":"nope"}`, "unknown_id"),
	{"binary message", func(t *testing.T, h *harness) {
		c := h.rawDial(t, nil)
		if err := c.WriteFrame(wsraw.OpBinary, []byte(`{"type":"ping"}`)); err != nil {
			t.Fatal(err)
		}
		h.canary.check(t, "during")
		if f := rawNext(t, c); f["code"] != "bad_frame" {
			t.Fatalf("answer = %v, want bad_frame", f)
		}
	}},
	{"duplicate id", func(t *testing.T, h *harness) {
		c := h.dial(t)
		c.send(t, `{"type":"subscribe","id":"d","sql":"SELECT id FROM items WHERE id = 1","mode":"rows"}`)
		c.expect(t, "accepted", "")
		c.send(t, `{"type":"subscribe","id":"d","sql":"SELECT id FROM items WHERE id = 2","mode":"rows"}`)
		h.canary.check(t, "during")
		c.expect(t, "error", "bad_id")
	}},
	{"one subscription over --max-subscriptions", func(t *testing.T, h *harness) {
		c := h.dial(t)
		for i := range maxSubs {
			c.send(t, fmt.Sprintf(`{"type":"subscribe","id":"m%d","sql":"SELECT id FROM items WHERE id = %d","mode":"touch"}`, i, i+1))
			c.expect(t, "accepted", "")
		}
		c.send(t, `{"type":"subscribe","id":"over","sql":"SELECT id FROM items WHERE id = 100","mode":"touch"}`)
		h.canary.check(t, "during")
		c.expect(t, "refused", "too_many_subscriptions")
	}},
	refusedCase("bad mode", `{"type":"subscribe","id":"a","sql":"SELECT id FROM items","mode":"both"}`, "bad_mode", false),
	refusedCase("binary bind not base64", `{"type":"subscribe","id":"a","sql":"SELECT id FROM items WHERE id = $1","params":[{"oid":23,"format":"binary","value":"%%%"}],"mode":"rows"}`, "bad_param", false),
	refusedCase("unknown bind format", `{"type":"subscribe","id":"a","sql":"SELECT id FROM items WHERE id = $1","params":[{"oid":23,"format":"hex","value":"00"}],"mode":"rows"}`, "bad_param", false),
	refusedCase("bind that is not an int4", `{"type":"subscribe","id":"a","sql":"SELECT id FROM items WHERE id = $1","params":[{"oid":23,"value":"x"}],"mode":"rows"}`, "bind", false),
	refusedCase("not SQL", `{"type":"subscribe","id":"a","sql":"SELEKT * FROM items","mode":"rows"}`, "syntax", false),
	refusedCase("SQL over --max-sql-bytes", `{"type":"subscribe","id":"a","sql":"SELECT id FROM items WHERE v = '`+strings.Repeat("q", 40<<10)+`'","mode":"rows"}`, "too_long", false),
	refusedCase("unknown table", `{"type":"subscribe","id":"a","sql":"SELECT * FROM nope","mode":"rows"}`, "unknown_table", true),
	refusedCase("DISTINCT ON whose ORDER BY can tie", `{"type":"subscribe","id":"a","sql":"SELECT DISTINCT ON (grp) grp, v FROM items ORDER BY grp","mode":"rows"}`, "distinct", false),
	refusedCase("more rows than --row-limit", `{"type":"subscribe","id":"a","sql":"SELECT id FROM items","mode":"rows"}`, "row_limit", false),
}

// errorCase sends frame and expects an error frame with code.
func errorCase(name, frame, code string) hostileCase {
	return hostileCase{name, func(t *testing.T, h *harness) {
		c := h.dial(t)
		c.send(t, frame)
		h.canary.check(t, "during")
		c.expect(t, "error", code)
		c.send(t, `{"type":"ping","data":"usable"}`)
		c.expect(t, "pong", "")
	}}
}

// refusedCase sends a subscribe and expects it refused with code (and
// retryable as given).
func refusedCase(name, frame, code string, retryable bool) hostileCase {
	return hostileCase{name, func(t *testing.T, h *harness) {
		c := h.dial(t)
		c.send(t, frame)
		h.canary.check(t, "during")
		f := c.expect(t, "refused", code)
		if f["retryable"] != retryable {
			t.Fatalf("refused = %.300v, want retryable %v", f, retryable)
		}
		c.send(t, `{"type":"ping","data":"usable"}`)
		c.expect(t, "pong", "")
	}}
}

// metric reads one unlabelled figure from /metrics (0 when absent).
func (h *harness) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + h.srv.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}

func (h *harness) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.db.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("exec %s: %v", sql, err)
	}
}

// client is a connection of one case, with the token.
type client struct {
	ws *websocket.Conn
}

func (h *harness) dial(t *testing.T) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, h.srv.URL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	c := &client{ws: ws}
	c.expect(t, "hello", "")
	return c
}

func (c *client) send(t *testing.T, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
		t.Fatalf("write %.100s: %v", s, err)
	}
}

// next reads the next frame that is not a lag frame.
func (c *client) next(t *testing.T) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, b, err := c.ws.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var f map[string]any
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("frame %.200s: %v", b, err)
		}
		if f["type"] != "lag" {
			return f
		}
	}
}

// expect reads the next frame that is not a lag frame and checks its
// type and, when code is set, its code.
func (c *client) expect(t *testing.T, typ, code string) map[string]any {
	t.Helper()
	f := c.next(t)
	if f["type"] != typ || (code != "" && f["code"] != code) {
		t.Fatalf("frame %.300v, want %s %s", f, typ, code)
	}
	return f
}

func (h *harness) rawDial(t *testing.T, dialer *net.Dialer) *wsraw.Conn {
	t.Helper()
	c, err := wsraw.Dial(h.srv.URL, http.Header{"Authorization": {"Bearer " + token}}, dialer)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if f := rawNext(t, c); f["type"] != "hello" {
		t.Fatalf("first frame %v, want hello", f)
	}
	return c
}

// rawNext reads the next text frame that is not a lag frame.
func rawNext(t *testing.T, c *wsraw.Conn) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f, err := c.ReadFrame(deadline)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if f.Op == wsraw.OpClose {
			t.Fatalf("connection closed with %d, want a frame", f.CloseCode())
		}
		if f.Op != wsraw.OpText {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(f.Payload, &m); err != nil {
			t.Fatalf("frame %.200s: %v", f.Payload, err)
		}
		if m["type"] != "lag" {
			return m
		}
	}
}

// rawClose reads until the close frame and returns its code.
func rawClose(t *testing.T, c *wsraw.Conn) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f, err := c.ReadFrame(deadline)
		if err != nil {
			t.Fatalf("read: %v, want a close frame", err)
		}
		if f.Op == wsraw.OpClose {
			return f.CloseCode()
		}
	}
}

// startCanary subscribes the canary and reads its connection in the
// background.
func (h *harness) startCanary(t *testing.T) *canary {
	c := h.dial(t)
	// A server with a short --compile-timeout may refuse it timeout on a
	// busy machine: subscribe again.
	for try := 1; ; try++ {
		c.send(t, `{"type":"subscribe","id":"canary","sql":"SELECT id, v FROM canary WHERE id = 1","mode":"rows"}`)
		f := c.next(t)
		if f["type"] == "accepted" {
			break
		}
		if f["type"] != "refused" || f["code"] != "timeout" || try == 10 {
			t.Fatalf("canary's subscribe answered %.300v, want accepted", f)
		}
	}
	cn := &canary{h: h, frames: make(chan map[string]any, 1024)}
	go func() {
		defer close(cn.frames)
		for {
			_, b, err := c.ws.Read(context.Background())
			if err != nil {
				cn.err.Store(err)
				return
			}
			var f map[string]any
			if json.Unmarshal(b, &f) == nil && f["type"] != "lag" {
				cn.frames <- f
			}
		}
	}()
	return cn
}

// check writes a new value to the canary's row and waits for its delta:
// the server must still follow the stream and serve the canary's
// connection. Any other frame on the canary's connection fails.
func (cn *canary) check(t *testing.T, when string) {
	t.Helper()
	cn.n++
	want := fmt.Sprintf("canary-%d", cn.n)
	cn.h.exec(t, "UPDATE canary SET v = $1 WHERE id = 1", want)
	timeout := time.After(60 * time.Second)
	for {
		select {
		case f, ok := <-cn.frames:
			if !ok {
				t.Fatalf("canary %s: its connection ended: %v", when, cn.err.Load())
			}
			if f["type"] != "delta" || f["id"] != "canary" {
				t.Fatalf("canary %s: frame %.300v, want only its deltas", when, f)
			}
			ups, _ := f["upsert"].([]any)
			if len(ups) != 1 {
				t.Fatalf("canary %s: delta %.300v, want one row", when, f)
			}
			row, _ := ups[0].(map[string]any)
			vals, _ := row["values"].([]any)
			if len(vals) == 2 && vals[1] == want {
				return
			}
		case <-timeout:
			t.Fatalf("canary %s: no delta with %s within a minute", when, want)
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
