package shape_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/shape"
)

// liveHeap is the live heap after two collections.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestSSEMemory: an SSE response streams a large shape with a bounded
// heap, whatever its size and the chunk threshold's. A shape of about
// 30 MB (4 MiB chunks) and then a 12 MB log are served over SSE to
// sseClients clients at once that each read the first event and then
// stop reading (their receive buffers small, so the kernel holds little
// of the rest): every response is then mid-stream, blocked in a write,
// and the live heap may grow by at most sseMaxPerResponse per response.
// The measure is taken at a point, never by the clock: a response that
// held a whole chunk (or a whole pass of log messages) holds its 4 MiB at
// any point between its first byte and its last.
func TestSSEMemory(t *testing.T) {
	const (
		sseClients        = 4
		sseMaxPerResponse = 1 << 20
	)
	e := newEnv(t, `CREATE TABLE big (id int PRIMARY KEY, pad text NOT NULL);
		INSERT INTO big SELECT i, repeat(md5(i::text), 36) FROM generate_series(1, 24000) i`, func(c *shape.Config) {
		c.ChunkBytes = 4 << 20
		c.SSETimeout = 10 * time.Minute
		c.SSEKeepAlive = 10 * time.Minute
	})
	h, last, ok := syncShape(http.DefaultClient, e.url, "table=big")
	if !ok {
		t.Fatal("the shape never got up to date")
	}
	if !strings.HasPrefix(last, "0_") || last == "0_0" {
		t.Fatalf("the snapshot ends at %s, want several chunks", last)
	}
	// Small receive buffers: what a stalled client's kernel holds is
	// far less than what is left to send.
	tr := &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				c.(*net.TCPConn).SetReadBuffer(64 << 10)
			}
			return c, err
		}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	measure := func(what, off string) {
		t.Helper()
		before := liveHeap()
		var bodies []*http.Response
		var mu sync.Mutex
		var wg sync.WaitGroup
		bad := false
		for i := 0; i < sseClients; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest("GET", e.url+"/v1/shape?"+qs("table", "big", "offset", off, "handle", h, "live", "true", "live_sse", "true", "experimental_live_sse", "true").Encode(), nil)
				req.Header.Set("Accept", "text/event-stream")
				res, err := client.Do(req)
				if err != nil {
					t.Error(err)
					mu.Lock()
					bad = true
					mu.Unlock()
					return
				}
				mu.Lock()
				bodies = append(bodies, res)
				mu.Unlock()
				line, err := bufio.NewReaderSize(res.Body, 1<<10).ReadString('\n')
				if err != nil || !strings.HasPrefix(line, "data: ") {
					t.Errorf("%s: first line %.80q, %v", what, line, err)
					mu.Lock()
					bad = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		after := liveHeap()
		for _, r := range bodies {
			r.Body.Close()
		}
		if bad {
			return
		}
		per := (int64(after) - int64(before)) / sseClients
		t.Logf("%s over SSE: live heap %d -> %d B with %d responses mid-stream: %d B per response", what, before, after, sseClients, per)
		if per > sseMaxPerResponse {
			t.Errorf("%s over SSE: the live heap grew by %d B per response mid-stream, want at most %d B", what, per, sseMaxPerResponse)
		}
	}
	measure("the snapshot", "0_0")
	// A log of about 12 MB after the snapshot's last chunk.
	e.exec(`UPDATE big SET pad = repeat(md5((id + 1)::text), 36) WHERE id <= 10000`)
	eventually(t, time.Minute, func() string {
		r := e.get("table", "big", "offset", last, "handle", h)
		if n := strings.Count(r.body, `"operation":"update"`); r.code != 200 || n == 0 {
			return sprintf("no updates after %s yet: %d", last, r.code)
		}
		return ""
	})
	measure("the log", last)
}
