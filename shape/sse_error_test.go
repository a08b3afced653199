package shape_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/shape"
)

// sseClient follows a shape as Electric's client does once it is live
// over SSE (client.ts #requestShapeSSE): it buffers a stream's events
// until an up-to-date, then applies them and moves its offset to
// `${global_last_seen_lsn}_0`; events after the last up-to-date of a
// stream that ends, cleanly or not, are dropped, and the stream is asked
// again at the offset; a 409 starts again from -1 with the new handle.
type sseClient struct {
	e              *env
	query          []string // the shape's parameters
	handle, offset string
	refetched      int // 409s

	mu   sync.Mutex // rows are read while a stream applies
	rows map[string]map[string]any
}

// held returns the client's rows with only their id and n.
func (c *sseClient) held() map[string]map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return idN(c.rows)
}

// sseEnd is how one SSE response ended.
type sseEnd struct {
	status int   // the response's status
	err    error // the body's read error: nil when it ended cleanly
	torn   bool  // it ended inside an event (bytes after the last blank line)
	events int   // events read
}

// stream makes one SSE request at the client's offset and reads it to
// its end (or until ctx is done).
func (c *sseClient) stream(ctx context.Context) sseEnd {
	t := c.e.t
	q := qs(c.query...)
	q.Set("offset", c.offset)
	q.Set("handle", c.handle)
	q.Set("live", "true")
	q.Set("live_sse", "true")
	q.Set("experimental_live_sse", "true")
	req, _ := http.NewRequestWithContext(ctx, "GET", c.e.url+"/v1/shape?"+q.Encode(), nil)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return sseEnd{err: err}
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusConflict {
		io.Copy(io.Discard, res.Body)
		rows := map[string]map[string]any{}
		c.handle, c.offset = c.e.syncTo(rows, res.Header.Get("electric-handle"), "-1", c.query...)
		c.mu.Lock()
		c.rows = rows
		c.mu.Unlock()
		c.refetched++
		return sseEnd{status: res.StatusCode}
	}
	end := sseEnd{status: res.StatusCode}
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Errorf("SSE at %s: %d %s", c.offset, res.StatusCode, b)
		return end
	}
	var buf []map[string]any
	var data []byte // the event being read
	br := bufio.NewReader(res.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			end.err = err
			if errors.Is(err, io.EOF) {
				end.err = nil
			}
			end.torn = line != "" || data != nil
			return end
		}
		switch {
		case line == "\n":
			if data == nil {
				continue
			}
			end.events++
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			data = nil
			buf = append(buf, m)
			h, _ := m["headers"].(map[string]any)
			if h["control"] != "up-to-date" {
				continue
			}
			c.mu.Lock()
			for _, m := range buf {
				applyMsg(c.rows, m)
			}
			c.mu.Unlock()
			buf = nil
			c.offset = h["global_last_seen_lsn"].(string) + "_0"
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimSuffix(strings.TrimPrefix(line, "data: "), "\n")...)
		case strings.HasPrefix(line, ":"):
		default:
			t.Fatalf("SSE line %q", line)
		}
	}
}

// pgRows is PostgreSQL's rows of table (id, n) by Electric key, as a
// client holds them.
func pgRows(e *env, table string) map[string]map[string]any {
	e.t.Helper()
	rs, err := e.conn.Query(context.Background(), `SELECT id::text, n::text FROM `+table)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rs.Close()
	out := map[string]map[string]any{}
	for rs.Next() {
		var id, n string
		if err := rs.Scan(&id, &n); err != nil {
			e.t.Fatal(err)
		}
		out[`"public"."`+table+`"/"`+id+`"`] = map[string]any{"id": id, "n": n}
	}
	return out
}

// idN is rows with only their id and n.
func idN(rows map[string]map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for k, r := range rows {
		out[k] = map[string]any{"id": r["id"], "n": r["n"]}
	}
	return out
}

// TestSSESubscriptionEnds: the shape's engine subscription ends while an
// SSE response is open. Retryably (the table's replica identity lost its
// key: the engine ends the subscription, the shape subscribes again and
// appends what changed meanwhile), the stream goes on or ends between
// events, and a client resuming as Electric's does holds PostgreSQL's
// rows, the changes made while the shape was re-subscribing included.
// For good (a column retyped, so the shape's schema is out of date), the
// stream ends at once, between events, and the client's next request is
// a 409 that refetches PostgreSQL's rows.
func TestSSESubscriptionEnds(t *testing.T) {
	e := newEnv(t, `CREATE TABLE pairs (id int PRIMARY KEY, u int NOT NULL UNIQUE, n int);
		INSERT INTO pairs SELECT i, i, i FROM generate_series(1, 20) i`,
		func(c *shape.Config) { c.SSETimeout = 30 * time.Second; c.SSEKeepAlive = 500 * time.Millisecond })
	c := &sseClient{e: e, query: []string{"table", "pairs"}, rows: map[string]map[string]any{}}
	c.handle, c.offset = e.syncTo(c.rows, "", "-1", c.query...)
	first := c.handle

	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan sseEnd, 1)
	go func() { ended <- c.stream(ctx) }()
	e.exec(`UPDATE pairs SET n = 100 WHERE id = 1`)
	// A delete whose old row carries u, not the key: the engine ends the
	// subscription (retryable); what follows lands while the shape
	// subscribes again.
	e.exec(`ALTER TABLE pairs REPLICA IDENTITY USING INDEX pairs_u_key`)
	e.exec(`DELETE FROM pairs WHERE id = 3`)
	e.exec(`ALTER TABLE pairs REPLICA IDENTITY DEFAULT`)
	e.exec(`UPDATE pairs SET n = n + 1000 WHERE id % 4 = 0; INSERT INTO pairs VALUES (50, 50, 50); DELETE FROM pairs WHERE id = 7`)
	want := pgRows(e, "pairs")
	got := func() string {
		if held := c.held(); !reflect.DeepEqual(held, want) {
			return sprintf("client rows %v, want %v", held, want)
		}
		return ""
	}
	deadline := time.Now().Add(40 * time.Second)
	for got() != "" && time.Now().Before(deadline) {
		select {
		case end := <-ended:
			if end.torn || end.err != nil {
				t.Errorf("the stream ended inside an event or with an error: %+v", end)
			}
			go func() { ended <- c.stream(ctx) }()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if msg := got(); msg != "" {
		t.Fatalf("after a retryable end: %s", msg)
	}
	if c.handle != first || c.refetched != 0 {
		t.Errorf("handle %s (first %s), %d refetches: a retryable end kept the shape", c.handle, first, c.refetched)
	}

	// For good: the shape's columns are out of date.
	e.exec(`ALTER TABLE pairs ALTER COLUMN n TYPE bigint`)
	e.exec(`UPDATE pairs SET n = -1 WHERE id = 2`)
	select {
	case end := <-ended:
		if end.torn || end.err != nil || end.status != 200 {
			t.Errorf("the stream of a shape gone out of scope ended %+v, want a clean end between events", end)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the SSE stream of a shape gone out of scope is still open after 20 s")
	}
	cancel()
	if end := c.stream(context.Background()); end.status != http.StatusConflict {
		t.Fatalf("the request after the end: %+v, want a 409", end)
	}
	if c.handle == first {
		t.Errorf("the 409 named the old handle %s", first)
	}
	if want := pgRows(e, "pairs"); !reflect.DeepEqual(c.held(), want) {
		t.Errorf("refetched rows %v, want %v", c.held(), want)
	}
}

// TestSSEReadFails: a snapshot chunk (the second of a few, which an SSE
// request at 0_0 is answered with) that cannot be read whole after
// part of it was sent (its file cut short) ends the SSE response without
// its closing chunk, so that neither the client nor a cache between them
// takes what came as the whole response; the client drops the events
// after its last up-to-date (all of them here) and asks again.
func TestSSEReadFails(t *testing.T) {
	e := newEnv(t, `CREATE TABLE big (id int PRIMARY KEY, n int, t text);
		INSERT INTO big SELECT i, i, repeat('x', 500) FROM generate_series(1, 400) i`,
		func(c *shape.Config) { c.ChunkBytes = 64 << 10; c.SSETimeout = 10 * time.Second })
	h, _, ok := syncShape(http.DefaultClient, e.url, "table=big")
	if !ok {
		t.Fatal("never up to date")
	}
	snaps, _ := filepath.Glob(filepath.Join(e.cfg.DataDir, h, "snap-*"))
	if len(snaps) != 1 {
		t.Fatalf("snapshot files %v, want one", snaps)
	}
	st, err := os.Stat(snaps[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(snaps[0], st.Size()/2); err != nil {
		t.Fatal(err)
	}
	c := &sseClient{e: e, query: []string{"table", "big"}, handle: h, offset: "0_0", rows: map[string]map[string]any{}}
	end := c.stream(context.Background())
	if end.status != 200 || end.err == nil || end.events == 0 {
		t.Errorf("SSE over a cut snapshot chunk: %+v, want 200, events, then a read error (no closing chunk)", end)
	}
	if len(c.rows) != 0 || c.offset != "0_0" {
		t.Errorf("the client applied %d rows and moved to %s from a response that failed", len(c.rows), c.offset)
	}
}
