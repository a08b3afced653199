package shape_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/shape"
)

func TestSSE(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) { c.SSEKeepAlive = 300 * time.Millisecond; c.SSETimeout = 3 * time.Second })
	rows := map[string]map[string]any{}
	h, off := e.syncTo(rows, "", "-1", "table", "items")
	req, _ := http.NewRequest("GET", e.url+"/v1/shape?"+qs("table", "items", "offset", off, "handle", h, "live", "true", "live_sse", "true", "experimental_live_sse", "true").Encode(), nil)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	for k, v := range map[string]string{"content-type": "text/event-stream", "cache-control": "public, max-age=2", "electric-handle": h, "electric-offset": off} {
		if got := res.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if res.Header.Get("electric-cursor") == "" {
		t.Errorf("no electric-cursor on the SSE response")
	}
	e.exec(`BEGIN; UPDATE items SET n = 50 WHERE id = 1; DELETE FROM items WHERE id = 2; COMMIT`)
	br := bufio.NewReader(res.Body)
	var events []string
	keepAlive := false
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		line, err := br.ReadString('\n')
		if err != nil {
			break
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "data: "):
			events = append(events, strings.TrimPrefix(line, "data: "))
		case line == ": keep-alive":
			keepAlive = true
		}
		if keepAlive && len(events) >= 3 {
			break
		}
	}
	joined := strings.Join(events, "\n")
	if len(events) < 3 || !strings.Contains(joined, `"operation":"update"`) || !strings.Contains(joined, `"operation":"delete"`) || !strings.Contains(events[2], `"control":"up-to-date"`) {
		t.Errorf("SSE events %v", events)
	}
	if !keepAlive {
		t.Errorf("no keep-alive comment")
	}
}

// TestSSEBytes: an SSE stream from 0_0 carries exactly the messages the
// long-poll responses from 0_0 carry, chunk by chunk and then the log's,
// each as "data: <message>\n\n" with the message's bytes as served
// (values holding commas, braces, quotes, backslashes, newlines and
// "data: "), and an up-to-date where the long-poll has one.
func TestSSEBytes(t *testing.T) {
	e := newEnv(t, `CREATE TABLE odd (id int PRIMARY KEY, t text, j jsonb);
		INSERT INTO odd SELECT i, repeat(E'a,b}{c]["d\\\\e\nf data: g é ', i % 7 + 1), jsonb_build_object('k,}', i, 'v', array[i::text, '"]']) FROM generate_series(1, 120) i`,
		func(c *shape.Config) { c.ChunkBytes = 10000; c.SSETimeout = 15 * time.Second })
	h, _, ok := syncShape(http.DefaultClient, e.url, "table=odd")
	if !ok {
		t.Fatal("never up to date")
	}
	e.exec(`UPDATE odd SET t = t || E'\\",' WHERE id % 3 = 0; DELETE FROM odd WHERE id % 5 = 0; INSERT INTO odd VALUES (500, E'x\\\\"', '{"a":[1,{"b":","}]}')`)
	lsn := regexp.MustCompile(`"global_last_seen_lsn":"[0-9]+"`)
	var want []byte
	events := 0
	eventually(t, time.Minute, func() string {
		want, events = nil, 0
		off := "0_0"
		for i := 0; i < 100; i++ {
			r := e.get("table", "odd", "offset", off, "handle", h)
			if r.code != 200 {
				return sprintf("GET at %s: %d %s", off, r.code, r.body)
			}
			var msgs []json.RawMessage
			if err := json.Unmarshal([]byte(r.body), &msgs); err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				want = append(append(append(want, "data: "...), m...), "\n\n"...)
				events++
			}
			off = r.h.Get("electric-offset")
			if _, ok := r.h["Electric-Up-To-Date"]; ok {
				if !strings.Contains(r.body, `"id":"500"`) {
					return "the writes are not in the shape yet"
				}
				return ""
			}
		}
		return "never up to date"
	})
	if chunks := strings.Count(string(want), `"control":"up-to-date"`); chunks != 1 || events < 130 {
		t.Fatalf("%d events, %d up-to-date, want a few chunks and a log", events, chunks)
	}
	req, _ := http.NewRequest("GET", e.url+"/v1/shape?"+qs("table", "odd", "offset", "0_0", "handle", h, "live", "true", "live_sse", "true").Encode(), nil)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	var got []byte
	for n := 0; n < events; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d events: %v", n, err)
		}
		if line == ": keep-alive\n" {
			continue
		}
		got = append(got, line...)
		if line == "\n" {
			n++
		}
	}
	if g, w := lsn.ReplaceAll(got, []byte("LSN")), lsn.ReplaceAll(want, []byte("LSN")); !bytes.Equal(g, w) {
		t.Errorf("SSE stream\n%s\nwant\n%s", g, w)
	}
}
