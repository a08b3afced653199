package s2s_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/s2s"
)

// TestSlowConsumer: a socket that never reads while writes continue is
// closed when its queue passes the limit; everyone else keeps receiving.
func TestSlowConsumer(t *testing.T) {
	e := newEnv(t, `CREATE TABLE big (id int PRIMARY KEY, body text); INSERT INTO big VALUES (1, 'x');`,
		func(s *s2s.Config, _ *engine.Config) { s.MaxQueueBytes = 256 << 10 })
	slow, _ := e.connect()
	slow.send(`{"type":"subscribe","id":"s","sql":"SELECT * FROM big","mode":"rows"}`)
	slow.expect("accepted")
	fast, _ := e.connect()
	fast.send(`{"type":"subscribe","id":"f","sql":"SELECT * FROM big","mode":"rows"}`)
	fast.expect("accepted")

	// fast reads everything in the background; slow reads nothing.
	got := make(chan string, 100000)
	go func() {
		for {
			f, err := fast.read()
			if err != nil {
				close(got)
				return
			}
			if f.str("type") == "delta" {
				got <- values(list(f, "upsert")[0])[1][:8]
			}
		}
	}()
	// Each update ships ~100 kB to each socket; the writer waits for the
	// fast socket to receive each one, so only the slow socket falls
	// behind. The kernel's socket buffers take some megabytes before the
	// slow socket's queue grows.
	n := 0
	recv := func(want string) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case v, ok := <-got:
				if !ok {
					t.Fatalf("fast socket closed after %d updates", n)
				}
				if v == want {
					return
				}
			case <-timeout:
				t.Fatalf("fast socket did not receive update %s", want)
			}
		}
	}
	update := func() {
		n++
		e.exec("UPDATE big SET body = $1 || repeat('y', 100000) WHERE id = 1", fmt.Sprintf("%08d", n))
		recv(fmt.Sprintf("%08d", n))
	}
	waitFor(t, 120*time.Second, func() error {
		update()
		if c := e.srv.Stats().Connections; c != 1 {
			return fmt.Errorf("%d connections after %d updates, want the slow one closed", c, n)
		}
		return nil
	})
	// After the slow socket is gone, the fast one still gets every change.
	for range 3 {
		update()
	}
	// The slow socket's reads end: what was sent, then the close.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	for err == nil {
		_, _, err = slow.ws.Read(ctx)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow socket still open: %v", err)
	}
	if code := websocket.CloseStatus(err); code != -1 && code != 4000 {
		t.Errorf("slow socket closed with %d, want 4000 (slow consumer)", code)
	}
}
