package s2s_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/internal/wsraw"
	"github.com/freshetdb/freshet/query"
	"github.com/freshetdb/freshet/s2s"
	dto "github.com/prometheus/client_model/go"
)

// rawDial opens a wsraw connection to the env's server and reads hello.
func (e *env) rawDial(dialer *net.Dialer) *wsraw.Conn {
	e.t.Helper()
	c, err := wsraw.Dial(e.url, nil, dialer)
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	e.t.Cleanup(func() { c.Close() })
	if f := rawNext(e.t, c); f.str("type") != "hello" {
		e.t.Fatalf("first frame = %s, want hello", f.raw)
	}
	return c
}

// rawNext reads the next text frame that is not a lag frame (20 s at
// most); a close frame fails the test.
func rawNext(t *testing.T, c *wsraw.Conn) frame {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		f, err := c.ReadFrame(deadline)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		switch f.Op {
		case wsraw.OpText:
		case wsraw.OpClose:
			t.Fatalf("connection closed (%d %q), want a frame", f.CloseCode(), f.Payload[min(2, len(f.Payload)):])
		default:
			continue
		}
		fr := frame{raw: string(f.Payload)}
		if err := json.Unmarshal(f.Payload, &fr.m); err != nil {
			t.Fatalf("frame %s: %v", f.Payload, err)
		}
		if fr.str("type") != "lag" {
			return fr
		}
	}
}

// rawClose reads until the server's close frame and returns its code.
func rawClose(t *testing.T, c *wsraw.Conn) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
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

// An id is held as long as its subscription: one longer than 256 bytes
// is answered bad_id and never held (nor echoed back).
func TestIDLimit(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	c, _ := e.connect()
	long := strings.Repeat("i", 257)
	c.sendf(`{"type":"subscribe","id":%q,"sql":"SELECT * FROM items WHERE id = 1","mode":"rows"}`, long)
	f := c.expect("error")
	if f.str("code") != "bad_id" || f.str("id") != "" || !strings.Contains(f.str("message"), "256") {
		t.Fatalf("error = %.200s, want bad_id naming the limit 256 with no id", f.raw)
	}
	c.sendf(`{"type":"unsubscribe","id":%q}`, strings.Repeat("u", 5000))
	if f := c.expect("error"); f.str("code") != "unknown_id" || f.str("id") != "" {
		t.Fatalf("error = %.200s, want unknown_id with no id echoed", f.raw)
	}
	atLimit := strings.Repeat("k", 256)
	c.sendf(`{"type":"subscribe","id":%q,"sql":"SELECT * FROM items WHERE id = 1","mode":"rows"}`, atLimit)
	if f := c.expect("accepted"); f.str("id") != atLimit {
		t.Fatalf("accepted = %.100s, want id of 256 bytes", f.raw)
	}
	if n := e.srv.Stats().Subscriptions["rows"]; n != 1 {
		t.Fatalf("%d rows subscriptions, want 1 (the long id is not held)", n)
	}
}

// RFC 6455: a text message that is not UTF-8 fails the connection with
// 1007; it is not read with the bad bytes replaced.
func TestInvalidUTF8(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	c := e.rawDial(nil)
	if err := c.WriteText("{\"type\":\"subscribe\",\"id\":\"a\xff\",\"sql\":\"SELECT * FROM items\",\"mode\":\"rows\"}"); err != nil {
		t.Fatal(err)
	}
	if code := rawClose(t, c); code != 1007 {
		t.Fatalf("close code %d, want 1007 (invalid frame payload data)", code)
	}
	if n := e.srv.Stats().Subscriptions["rows"]; n != 0 {
		t.Fatalf("%d subscriptions after the bad frame, want 0", n)
	}
}

// A header that already says the frame is over the limit is answered at
// once, with its payload never sent: a header claiming 2^63-1 bytes too.
// A frame whose payload does come is answered and discarded, and the
// connection stays usable.
func TestFrameHeaderOverLimit(t *testing.T) {
	e := newEnv(t, itemsSetup, func(s *s2s.Config, _ *engine.Config) { s.MaxFrameBytes = 4096 })
	for _, size := range []uint64{math.MaxInt64, 1 << 40, 4097} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			c := e.rawDial(nil)
			if _, err := c.Write(wsraw.AppendFrame(nil, true, wsraw.OpText, size, []byte(`{"type":"ping"`))); err != nil {
				t.Fatal(err)
			}
			f := rawNext(t, c)
			if f.str("type") != "error" || f.str("code") != "frame_too_large" || !strings.Contains(f.str("message"), "4096") {
				t.Fatalf("answer = %s, want error frame_too_large naming the limit", f.raw)
			}
		})
	}
	// Fragmented: the continuation's header passes the limit.
	c := e.rawDial(nil)
	b := wsraw.AppendFrame(nil, false, wsraw.OpText, 3000, []byte(strings.Repeat(" ", 3000)))
	b = wsraw.AppendFrame(b, true, wsraw.OpContinuation, 3000, []byte(strings.Repeat(" ", 100)))
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	if f := rawNext(t, c); f.str("code") != "frame_too_large" {
		t.Fatalf("answer = %s, want frame_too_large", f.raw)
	}
	// The rest comes: discarded, and the connection reads on.
	if _, err := c.Write([]byte(strings.Repeat(" ", 2900))); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteText(`{"type":"ping","data":"after"}`); err != nil {
		t.Fatal(err)
	}
	if f := rawNext(t, c); f.str("type") != "pong" || f.str("data") != "after" {
		t.Fatalf("answer = %s, want the pong (and no second error)", f.raw)
	}
}

// Clients that flood WebSocket pings and never read are closed as slow
// consumers once their unread pongs pass --max-queue-bytes, and stall no
// one meanwhile. Before, the library wrote each pong itself, waiting on
// the socket with it held (for up to its own 5 s; the shared writers
// waited behind it), and such a client was never closed for what it did
// not read.
func TestPingFloodIsASlowConsumer(t *testing.T) {
	metrics := s2s.NewMetrics()
	e := newEnv(t, itemsSetup, func(s *s2s.Config, _ *engine.Config) {
		s.WriteTimeout, s.MaxQueueBytes, s.Metrics = time.Hour, 64<<10, metrics
	})
	var observers []*client
	for i := range 4 {
		o, _ := e.connect()
		o.sendf(`{"type":"subscribe","id":"o%d","sql":"SELECT id, name FROM items WHERE id = 1","mode":"rows"}`, i)
		o.expect("accepted")
		observers = append(observers, o)
	}
	const flooders = 4
	small := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	for range flooders {
		c := e.rawDial(small)
		wg.Add(1)
		go func() {
			defer wg.Done()
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
				// A write cut by its deadline goes on where it stopped:
				// the stream's frames stay whole.
				c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
				n, err := c.Write(rest)
				if rest = rest[n:]; len(rest) == 0 {
					rest = batch
				}
				if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
					return // closed by the server
				}
			}
		}()
	}
	e.exec("UPDATE items SET name = 'flooded' WHERE id = 1")
	for i, o := range observers {
		if v := values(list(o.expect("delta"), "upsert")[0]); v[1] != "flooded" {
			t.Fatalf("observer %d: name %s, want flooded", i, v[1])
		}
	}
	waitFor(t, 30*time.Second, func() error {
		var m dto.Metric
		metrics.SlowConsumers.Write(&m)
		if n := m.GetCounter().GetValue(); n != flooders {
			return fmt.Errorf("%v slow consumers, want the %d flooders", n, flooders)
		}
		return nil
	})
	e.exec("UPDATE items SET name = 'after' WHERE id = 1")
	for _, o := range observers {
		o.expect("delta")
	}
}

// An answer bigger than the connection's outgoing queue can never be
// delivered: that subscription alone is refused (or, for a change,
// ended) result_too_large, and the connection and its other
// subscriptions go on.
func TestResultTooLarge(t *testing.T) {
	e := newEnv(t, `CREATE TABLE big (id int PRIMARY KEY, body text);
		INSERT INTO big VALUES (1, repeat('x', 20000)), (2, 'small');`,
		func(s *s2s.Config, _ *engine.Config) { s.MaxQueueBytes = 8192 })
	c, _ := e.connect()
	c.send(`{"type":"subscribe","id":"ids","sql":"SELECT id FROM big","mode":"rows"}`)
	c.expect("accepted")
	c.send(`{"type":"subscribe","id":"huge","sql":"SELECT * FROM big WHERE id = 1","mode":"rows"}`)
	f := c.expect("refused")
	if f.str("code") != "result_too_large" || f.m["retryable"] != false || !strings.Contains(f.str("reason"), "8192") {
		t.Fatalf("refused = %.300s, want result_too_large, not retryable, naming the limit", f.raw)
	}
	c.send(`{"type":"subscribe","id":"grows","sql":"SELECT * FROM big WHERE id = 2","mode":"rows"}`)
	c.expect("accepted")
	e.exec("UPDATE big SET body = repeat('y', 20000) WHERE id = 2")
	f = c.expect("ended")
	if f.str("id") != "grows" || f.str("code") != "result_too_large" || f.m["retryable"] != true {
		t.Fatalf("ended = %.300s, want grows ended result_too_large, retryable", f.raw)
	}
	e.exec("INSERT INTO big VALUES (3, 'three')")
	if f := c.expect("delta"); f.str("id") != "ids" {
		t.Fatalf("delta = %.300s, want one for ids", f.raw)
	}
	if n := e.srv.Stats().Subscriptions["rows"]; n != 1 {
		t.Fatalf("%d rows subscriptions, want 1 (ids)", n)
	}
}

// One transaction may give a client more than --max-queue-bytes to read
// at once; a client that reads it as fast as it comes is not a slow
// consumer (only what the socket refused to take counts).
func TestFastReaderIsNotSlow(t *testing.T) {
	e := newEnv(t, `CREATE TABLE big (id int PRIMARY KEY, body text);
		INSERT INTO big SELECT i, repeat('x', 500) FROM generate_series(1, 50) i;`,
		func(s *s2s.Config, _ *engine.Config) { s.MaxQueueBytes = 8192 })
	c, _ := e.connect()
	const subs = 40
	for i := range subs {
		c.sendf(`{"type":"subscribe","id":"s%d","sql":"SELECT * FROM big WHERE id = %d","mode":"rows"}`, i, i+1)
		c.expect("accepted")
	}
	for round := range 3 {
		// 40 deltas of 500+ bytes: over 20 kB in one transaction.
		e.exec("UPDATE big SET body = repeat($1, 500) WHERE id <= $2", fmt.Sprint(round), subs)
		for range subs {
			c.expect("delta")
		}
	}
}

// panicky wraps the real engine and panics where a bug in code that
// outside input reaches would: compiling (Subscribe runs the query
// compiler on the caller's goroutine) and unsubscribing (on the read
// loop).
type panicky struct {
	s2s.Engine
	mu         sync.Mutex
	unsubPanic map[engine.SubID]bool
}

func (p *panicky) Subscribe(ctx context.Context, sql string, binds []query.Bind, mode engine.Mode, sink engine.Sink) (engine.SubID, *query.Refusal, error) {
	if strings.Contains(sql, "/*panic:compile*/") {
		panic("injected: compiling panicked")
	}
	id, ref, err := p.Engine.Subscribe(ctx, sql, binds, mode, sink)
	if strings.Contains(sql, "/*panic:unsubscribe*/") {
		p.mu.Lock()
		p.unsubPanic[id] = true
		p.mu.Unlock()
	}
	return id, ref, err
}

func (p *panicky) Unsubscribe(ctx context.Context, id engine.SubID) error {
	p.mu.Lock()
	boom := p.unsubPanic[id]
	delete(p.unsubPanic, id) // once: then it unsubscribes for real
	p.mu.Unlock()
	if boom {
		panic("injected: unsubscribing panicked")
	}
	return p.Engine.Unsubscribe(ctx, id)
}

// A panic where one client's work runs (compiling its query, handling
// its frame, encoding its output) is answered internal; that client's
// other subscriptions and every other client go on.
func TestPanicsAreAnswered(t *testing.T) {
	e := newEnvWrapped(t, itemsSetup, nil, func(eng s2s.Engine) s2s.Engine {
		return &panicky{Engine: eng, unsubPanic: map[engine.SubID]bool{}}
	})
	var sendPanics atomic.Int32
	s2s.SetSendHook(e.srv, func(o engine.Output) {
		if o.Kind == engine.OutputDelta && len(o.Rows) > 0 && len(o.Rows[0].Values) > 1 && fmt.Sprint(o.Rows[0].Values[1]) == "boom" {
			sendPanics.Add(1)
			panic("injected: encoding panicked")
		}
	})
	other, _ := e.connect()
	other.send(`{"type":"subscribe","id":"w","sql":"SELECT id, name FROM items WHERE id = 2","mode":"rows"}`)
	other.expect("accepted")
	c, _ := e.connect()
	c.send(`{"type":"subscribe","id":"live","sql":"SELECT id, name FROM items WHERE id = 2","mode":"rows"}`)
	c.expect("accepted")

	c.send(`{"type":"subscribe","id":"p","sql":"SELECT /*panic:compile*/ * FROM items","mode":"rows"}`)
	if f := c.expect("refused"); f.str("id") != "p" || f.str("code") != "internal" || f.m["retryable"] != true {
		t.Fatalf("refused = %s, want p refused internal, retryable", f.raw)
	}
	c.send(`{"type":"subscribe","id":"u","sql":"SELECT /*panic:unsubscribe*/ id FROM items WHERE id = 3","mode":"rows"}`)
	c.expect("accepted")
	c.send(`{"type":"unsubscribe","id":"u"}`)
	if f := c.expect("error"); f.str("code") != "internal" {
		t.Fatalf("error = %s, want internal", f.raw)
	}
	c.send(`{"type":"subscribe","id":"enc","sql":"SELECT id, name FROM items WHERE id = 1","mode":"rows"}`)
	c.expect("accepted")
	e.exec("UPDATE items SET name = 'boom' WHERE id = 1")
	if f := c.expect("ended"); f.str("id") != "enc" || f.str("code") != "internal" {
		t.Fatalf("ended = %s, want enc ended internal", f.raw)
	}
	if sendPanics.Load() == 0 {
		t.Fatal("the encoding panic was never injected")
	}
	// Everyone goes on.
	e.exec("UPDATE items SET name = 'after' WHERE id = 2")
	for _, cl := range []*client{c, other} {
		if f := cl.expect("delta"); values(list(f, "upsert")[0])[1] != "after" {
			t.Fatalf("delta = %s, want name after", f.raw)
		}
	}
	c.send(`{"type":"ping","data":"ok"}`)
	c.expect("pong")
}
