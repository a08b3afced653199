package shape_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshetdb/freshet/shape"
)

// answer is a response read by a request that may run on any goroutine.
type answer struct {
	code int
	h    http.Header
	body string
	err  error
}

// getAnswer sends a GET to /v1/shape with query q and headers hdr.
func getAnswer(base, q string, hdr map[string]string) answer {
	req, err := http.NewRequest("GET", base+"/v1/shape?"+q, nil)
	if err != nil {
		return answer{err: err}
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return answer{code: res.StatusCode, h: res.Header, body: string(b), err: err}
}

// messagesPart is a body without its up-to-date message (which carries
// the global_last_seen_lsn of the moment each request read).
func messagesPart(body string) string {
	if i := strings.Index(body, `{"headers":{"control":"up-to-date"`); i >= 0 {
		return body[:i]
	}
	return body
}

// changes returns the operation and id of each change message of body,
// and whether any carries old_value or a value with column n.
func changes(t *testing.T, body string) (ops []string, oldValue, hasN bool) {
	t.Helper()
	var msgs []struct {
		Value    map[string]any `json:"value"`
		OldValue map[string]any `json:"old_value"`
		Headers  struct {
			Operation string `json:"operation"`
		} `json:"headers"`
	}
	if err := json.Unmarshal([]byte(body), &msgs); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	for _, m := range msgs {
		if m.Headers.Operation == "" {
			continue
		}
		ops = append(ops, fmt.Sprintf("%s %v", m.Headers.Operation, m.Value["id"]))
		oldValue = oldValue || m.OldValue != nil
		_, n := m.Value["n"]
		hasN = hasN || n
	}
	sort.Strings(ops)
	return ops, oldValue, hasN
}

// holdAll makes e's requests wait with their message bodies until n of
// them have one (or 20 s pass, so that broken sharing fails instead of
// hanging), so that they all hold their shared bodies at once. It returns
// how many have arrived.
func holdAll(e *env, n int32) *atomic.Int32 {
	var arrived atomic.Int32
	all := make(chan struct{})
	e.srv.SetBodyHook(func() {
		if arrived.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(20 * time.Second):
		}
	})
	e.t.Cleanup(func() { e.srv.SetBodyHook(nil) })
	return &arrived
}

// waitHolders waits until n requests hold shared bodies.
func waitHolders(e *env, n int) {
	eventually(e.t, 30*time.Second, func() string {
		if holders, _ := e.srv.BodyHolders(); holders != n {
			return fmt.Sprintf("%d requests hold a shared body, want %d", holders, n)
		}
		return ""
	})
}

// TestSharedBodyBuiltOnce: the clients long-polling one shape at one
// offset are answered with one body built once, their headers their own
// (electric-cursor from each one's cursor, CORS from each one's Origin),
// and the body is dropped when the last of them has been answered.
func TestSharedBodyBuiltOnce(t *testing.T) {
	e := newEnv(t, `CREATE TABLE fan (id int PRIMARY KEY, title text)`, func(c *shape.Config) { c.LongPoll = 30 * time.Second })
	h, off := e.syncTo(map[string]map[string]any{}, "", "-1", "table", "fan")
	const n = 8
	built := e.srv.BodiesBuilt()
	answers := make(chan answer, n)
	for i := 0; i < n; i++ {
		go func() {
			q := "table=fan&handle=" + url.QueryEscape(h) + "&offset=" + off + "&live=true&cursor=" + strconv.Itoa((i+1)*1_000_000_000)
			a := getAnswer(e.url, q, map[string]string{"Origin": fmt.Sprintf("http://c%d.example", i)})
			a.h.Set("x-cursor", strconv.Itoa((i+1)*1_000_000_000))
			a.h.Set("x-origin", fmt.Sprintf("http://c%d.example", i))
			answers <- a
		}()
	}
	waitHolders(e, n)
	if _, err := e.conn.Exec(context.Background(), `INSERT INTO fan SELECT i, 'title ' || i FROM generate_series(1, 50) i`); err != nil {
		t.Fatal(err)
	}
	var first answer
	for i := 0; i < n; i++ {
		a := <-answers
		if a.err != nil || a.code != 200 {
			t.Fatalf("live GET: %d %v %s", a.code, a.err, a.body)
		}
		if ops, _, _ := changes(t, a.body); len(ops) != 50 {
			t.Fatalf("live GET: %d changes, want 50: %s", len(ops), a.body)
		}
		if got, want := a.h.Get("access-control-allow-origin"), a.h.Get("x-origin"); got != want {
			t.Errorf("access-control-allow-origin %q, want the request's Origin %q", got, want)
		}
		sent, _ := strconv.Atoi(a.h.Get("x-cursor"))
		if got, _ := strconv.Atoi(a.h.Get("electric-cursor")); got <= sent || got > sent+3600 {
			t.Errorf("electric-cursor %d for a request with cursor %d: not its own", got, sent)
		}
		if i == 0 {
			first = a
			continue
		}
		if messagesPart(a.body) != messagesPart(first.body) || a.h.Get("etag") != first.h.Get("etag") || a.h.Get("electric-offset") != first.h.Get("electric-offset") {
			t.Errorf("two clients at one offset got different answers:\n%s %s\n%s %s", a.h.Get("etag"), a.body, first.h.Get("etag"), first.body)
		}
	}
	if got := e.srv.BodiesBuilt() - built; got != 1 {
		t.Errorf("%d bodies built for %d clients at one offset, want 1", got, n)
	}
	eventually(t, 10*time.Second, func() string {
		if holders, bodies := e.srv.BodyHolders(); holders != 0 || bodies != 0 {
			return fmt.Sprintf("%d shared bodies still held by %d requests after every answer", bodies, holders)
		}
		return ""
	})
	// Built again, alone, for a catch-up request: the same bytes.
	a := getAnswer(e.url, "table=fan&handle="+url.QueryEscape(h)+"&offset="+off, nil)
	if a.code != 200 || messagesPart(a.body) != messagesPart(first.body) || a.h.Get("etag") != first.h.Get("etag") {
		t.Errorf("a catch-up at the offset: %d %s %s, the live clients had %s %s", a.code, a.h.Get("etag"), a.body, first.h.Get("etag"), first.body)
	}
	if a.h.Get("electric-schema") == "" || a.h.Get("electric-cursor") != "" {
		t.Errorf("a catch-up answer's headers are a live one's: %v", a.h)
	}
}

// TestSharedBodyOffsets: requests at two offsets that read to the same
// end, holding their bodies at once, each get the messages after their
// own offset.
func TestSharedBodyOffsets(t *testing.T) {
	e := newEnv(t, `CREATE TABLE fan (id int PRIMARY KEY, title text)`, func(c *shape.Config) { c.LongPoll = 30 * time.Second })
	ctx := context.Background()
	h, off0 := e.syncTo(map[string]map[string]any{}, "", "-1", "table", "fan")
	if _, err := e.conn.Exec(ctx, `INSERT INTO fan SELECT i, 'title ' || i FROM generate_series(1, 3) i`); err != nil {
		t.Fatal(err)
	}
	var off1 string
	eventually(t, 30*time.Second, func() string {
		a := getAnswer(e.url, "table=fan&handle="+url.QueryEscape(h)+"&offset="+off0, nil)
		if ops, _, _ := changes(t, a.body); len(ops) != 3 {
			return fmt.Sprintf("the first insert not yet in the shape: %s", a.body)
		}
		off1 = a.h.Get("electric-offset")
		return ""
	})
	const waiters = 3
	answers := make(chan answer, waiters)
	for i := 0; i < waiters; i++ {
		go func() {
			answers <- getAnswer(e.url, "table=fan&handle="+url.QueryEscape(h)+"&offset="+off1+"&live=true", nil)
		}()
	}
	waitHolders(e, waiters)
	arrived := holdAll(e, waiters+1)
	if _, err := e.conn.Exec(ctx, `INSERT INTO fan SELECT i, 'title ' || i FROM generate_series(4, 6) i`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		if got := arrived.Load(); got != waiters {
			return fmt.Sprintf("%d of %d live clients have their body", got, waiters)
		}
		return ""
	})
	// While the live clients hold theirs: a catch-up from before the
	// first insert, to the same end.
	a := getAnswer(e.url, "table=fan&handle="+url.QueryEscape(h)+"&offset="+off0, nil)
	if ops, _, _ := changes(t, a.body); a.code != 200 || strings.Join(ops, ",") != "insert 1,insert 2,insert 3,insert 4,insert 5,insert 6" {
		t.Errorf("a catch-up at %s while clients at %s are answered: %d %v, want inserts 1 to 6", off0, off1, a.code, ops)
	}
	for i := 0; i < waiters; i++ {
		b := <-answers
		if ops, _, _ := changes(t, b.body); b.code != 200 || strings.Join(ops, ",") != "insert 4,insert 5,insert 6" {
			t.Errorf("a live client at %s: %d %v, want inserts 4 to 6", off1, b.code, ops)
		}
		if b.h.Get("electric-offset") != a.h.Get("electric-offset") {
			t.Errorf("the live client's offset %s, the catch-up's %s: not the same end", b.h.Get("electric-offset"), a.h.Get("electric-offset"))
		}
	}
}

// TestSharedBodyShapes: clients of three shapes of one table (all
// columns, two columns, replica=full) at the same offset, answered at
// once, each get their own shape's messages.
func TestSharedBodyShapes(t *testing.T) {
	e := newEnv(t, `CREATE TABLE fan (id int PRIMARY KEY, title text, n int); INSERT INTO fan VALUES (1, 'one', 1)`, func(c *shape.Config) { c.LongPoll = 30 * time.Second })
	shapes := [][]string{{"table", "fan"}, {"table", "fan", "columns", `"id","title"`}, {"table", "fan", "replica", "full"}}
	const each = 2
	answers := make([]chan answer, len(shapes))
	for i, kv := range shapes {
		h, off := e.syncTo(map[string]map[string]any{}, "", "-1", kv...)
		t.Logf("%v at %s", kv, off)
		q := qs(kv...)
		q.Set("handle", h)
		q.Set("offset", off)
		q.Set("live", "true")
		answers[i] = make(chan answer, each)
		for j := 0; j < each; j++ {
			go func() { answers[i] <- getAnswer(e.url, q.Encode(), nil) }()
		}
	}
	waitHolders(e, each*len(shapes))
	holdAll(e, each*int32(len(shapes)))
	if _, err := e.conn.Exec(context.Background(), `INSERT INTO fan VALUES (2, 'two', 2); UPDATE fan SET title = 'uno' WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	for i, kv := range shapes {
		for j := 0; j < each; j++ {
			a := <-answers[i]
			ops, oldValue, hasN := changes(t, a.body)
			if a.code != 200 || strings.Join(ops, ",") != "insert 2,update 1" {
				t.Errorf("%v: %d %v, want insert 2 and update 1", kv, a.code, ops)
			}
			wantN, wantOld := i != 1, i == 2
			if hasN != wantN || oldValue != wantOld {
				t.Errorf("%v: column n in a value %v (want %v), old_value %v (want %v): another shape's body? %s", kv, hasN, wantN, oldValue, wantOld, a.body)
			}
		}
	}
}
