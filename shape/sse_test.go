package shape_test

import (
	"bufio"
	"net/http"
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
