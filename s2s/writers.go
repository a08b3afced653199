package s2s

import (
	"context"
	"runtime"
	"sync"
)

// writers write every connection's frames: a connection with frames to
// send is put on a list, and a few goroutines (one per processor) take
// connections from it and write to each socket without waiting on it
// (sockConn.tryMessages). A socket that does not take a write at once is
// handed to its connection's own write loop, which may wait, so a client
// that stops reading never holds a writer.
//
// With a write loop per socket woken for every transaction, a
// transaction at 1,000 sockets was 1,000 goroutine wake-ups and parks
// on top of the 1,000 writes; the writers go from one socket to the next.
type writers struct {
	mu     sync.Mutex
	cond   *sync.Cond
	list   []*conn
	head   int // list[head:] wait
	closed bool
}

// writersBatch is how many connections a writer takes at once: small, so
// that every writer gets a share of a transaction's sockets.
const writersBatch = 16

func newWriters(ctx context.Context, wg *sync.WaitGroup) *writers {
	w := &writers{}
	w.cond = sync.NewCond(&w.mu)
	context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		w.cond.Broadcast()
	})
	n := runtime.GOMAXPROCS(0)
	wg.Add(n)
	for range n {
		go func() {
			defer wg.Done()
			w.run()
		}()
	}
	return w
}

// add puts c on the list (once: the queue's inPool says it is there).
func (w *writers) add(c *conn) {
	w.mu.Lock()
	w.list = append(w.list, c)
	w.mu.Unlock()
	w.cond.Signal()
}

func (w *writers) run() {
	var batch []*conn
	var d drain
	for {
		w.mu.Lock()
		for w.head == len(w.list) && !w.closed {
			w.cond.Wait()
		}
		if w.closed {
			w.mu.Unlock()
			return
		}
		end := min(w.head+writersBatch, len(w.list))
		batch = append(batch[:0], w.list[w.head:end]...)
		clear(w.list[w.head:end])
		w.head = end
		if w.head == len(w.list) {
			w.list, w.head = w.list[:0], 0
		}
		more := w.head < len(w.list)
		w.mu.Unlock()
		if more {
			w.cond.Signal() // another writer takes the next share
		}
		for i, c := range batch {
			c.poolWrite(&d)
			batch[i] = nil
		}
	}
}
