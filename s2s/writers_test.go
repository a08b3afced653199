package s2s

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// A shared writer never waits on a socket: while a write that may wait
// holds it (the library's pong to a client that does not read, which
// waits up to the write timeout), a writer's turn hands the queue to the
// connection's write loop and returns. Before, the writer waited for the
// socket, and with as many such clients as writers every other
// connection's frames waited too.
func TestWriterSkipsAHeldSocket(t *testing.T) {
	nc, _ := tcpPair(t) // the peer never reads
	sc := newSockConn(nc, time.Hour)
	defer sc.Close()
	blocked := make(chan struct{})
	go func() {
		// As the library writes a control frame: through Write, which
		// holds the socket until the bytes are taken.
		close(blocked)
		sc.Write(make([]byte, 64<<20))
	}()
	<-blocked
	// Wait until the write holds the socket (and waits on it).
	for sc.tryAcquire() {
		sc.release()
		time.Sleep(time.Millisecond)
	}
	var total atomic.Int64
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	c := &conn{s: s, nc: sc, q: newQueue(1<<20, &total), failed: make(chan struct{})}
	c.q.mu.Lock()
	c.q.pooled, c.q.inPool = true, true
	c.q.pushLocked([]byte(`{"type":"lag","ms":1}`))
	c.q.mu.Unlock()
	done := make(chan struct{})
	go func() {
		c.poolWrite(&drain{})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the writer is waiting on a socket held by a write that may wait")
	}
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	if c.q.pooled || c.q.inPool || len(c.q.items) != 1 {
		t.Fatalf("after the writer's turn: pooled %v, in pool %v, %d items; want the queue handed to the write loop whole",
			c.q.pooled, c.q.inPool, len(c.q.items))
	}
	if c.nc.canTry() {
		t.Fatal("canTry on a held socket = true, want false (it must not wait either)")
	}
}
