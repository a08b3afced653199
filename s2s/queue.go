package s2s

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/wire"
)

// item is one frame waiting in a connection's outgoing queue: encoded
// bytes, or a transaction's touched frame, encoded when it is written.
type item struct {
	frame []byte
	touch *touchBatch
	pong  bool // frame is a pong's payload (a control frame), not a text message
	// received is, for the last item of a transaction's frames, when the
	// transaction reached the engine (engine.ReceiptFlusher): the write
	// that puts it on the socket observes commit-to-write from it.
	received time.Time
}

type touchBatch struct {
	lsn   change.LSN
	ids   []string
	bytes int // counted against the queue's limit
}

func (t *touchBatch) encode(dst []byte) []byte {
	dst = append(dst, `{"type":"touched","lsn":"`...)
	dst = append(dst, t.lsn.String()...)
	dst = append(dst, `","ids":[`...)
	for i, id := range t.ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = wire.AppendString(dst, id)
	}
	return append(dst, "]}"...)
}

// queue is a connection's outgoing queue, bounded in bytes. Producers
// (the engine's sinks, the read loop) never wait on it: push fails when
// the bound would be passed, and the connection is then closed.
//
// The bound counts only what waits because the socket did not take it:
// the bytes a tried write left over, and every frame queued while the
// connection's write loop holds the queue (a write that may wait is
// under way or coming) until a write finishes. Frames queued while the
// server's writers hold it are not counted: the socket took everything
// offered so far, so a client reading as fast as it can is never closed
// because one transaction gave it much to read.
type queue struct {
	mu     sync.Mutex
	items  []item
	bytes  int
	limit  int // 0: none
	stall  int // bytes counted against limit (see above)
	closed bool
	ready  chan struct{} // capacity 1: something was pushed
	total  *atomic.Int64 // the server's queued bytes, all connections
	// touch collects the touched ids of the transaction whose outputs are
	// arriving; endTxnLocked queues it as one frame. Its bytes count
	// against the limit from the start.
	touch *touchBatch
	// wake asks for the queued frames to be written (called with mu
	// held); nil wakes the write loop (signal).
	wake func()

	// Who writes the queue: while pooled, the server's writers; otherwise
	// the connection's own write loop (before hello is sent, after a
	// write the socket would not take at once, and for a drain too big
	// to try at once). inPool: on the writers' list or being written by
	// one of them.
	pooled, inPool bool
}

func newQueue(limit int, total *atomic.Int64) *queue {
	return &queue{limit: limit, ready: make(chan struct{}, 1), total: total}
}

func (q *queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// pushLocked appends a frame without waking the write loop (signal does).
// It returns false when the queue is closed or the frame would pass the
// limit.
func (q *queue) pushLocked(b []byte) bool {
	return q.pushItemLocked(item{frame: b})
}

// pushItemLocked is pushLocked for any item but a touched batch.
func (q *queue) pushItemLocked(it item) bool {
	n := len(it.frame)
	if q.closed || !q.countLocked(n) {
		return false
	}
	q.items = append(q.items, it)
	q.bytes += n
	q.total.Add(int64(n))
	return true
}

// countLocked counts n more bytes against the limit while the write loop
// holds the queue; it reports false when they would pass it.
func (q *queue) countLocked(n int) bool {
	if q.pooled {
		return true
	}
	if q.limit > 0 && q.stall+n > q.limit {
		return false
	}
	q.stall += n
	return true
}

// toWriteLoopLocked hands the queue from the server's writers to the
// connection's write loop; refused is what the socket did not take of a
// tried write, counted against the limit from now on.
func (q *queue) toWriteLoopLocked(refused int) {
	q.pooled, q.inPool = false, false
	q.stall = refused
	q.signal()
}

// touchBatchBytes is what a touched frame costs besides its ids.
const touchBatchBytes = 48

// touchLocked adds id to the touched frame of the transaction at lsn,
// which endTxnLocked queues.
func (q *queue) touchLocked(lsn change.LSN, id string) bool {
	if q.closed {
		return false
	}
	if q.touch != nil && q.touch.lsn != lsn {
		// The engine ends every transaction's batch before the next
		// starts; a batch left open would otherwise be lost.
		q.endTxnLocked(time.Time{})
	}
	n := len(id) + 3
	if q.touch == nil {
		n += touchBatchBytes
	}
	if !q.countLocked(n) {
		return false
	}
	if q.touch == nil {
		q.touch = &touchBatch{lsn: lsn}
	}
	q.touch.ids = append(q.touch.ids, id)
	q.touch.bytes += n
	q.bytes += n
	q.total.Add(int64(n))
	return true
}

// endTxnLocked queues the transaction's touched frame, if it has one, and
// wakes the write loop for the transaction's frames: they go to the
// socket together. A non-zero received (when the transaction reached the
// engine) stamps the last of them, unless it carries an older stamp (no
// frame was queued since an earlier transaction's: this one has none).
func (q *queue) endTxnLocked(received time.Time) {
	if q.touch != nil {
		q.items = append(q.items, item{touch: q.touch})
		q.touch = nil
	}
	if len(q.items) > 0 {
		if last := &q.items[len(q.items)-1]; last.received.IsZero() {
			last.received = received
		}
		q.wakeLocked()
	}
}

// wakeLocked asks for the queued frames to be written.
func (q *queue) wakeLocked() {
	if q.wake != nil {
		q.wake()
		return
	}
	q.signal()
}

// untouchLocked removes id from the touched frame being collected: a
// subscription that ended is named in no frame after.
func (q *queue) untouchLocked(id string) {
	t := q.touch
	if t == nil {
		return
	}
	i := slices.Index(t.ids, id)
	if i < 0 {
		return
	}
	t.ids = slices.Delete(t.ids, i, i+1)
	n := len(id) + 3
	if len(t.ids) == 0 {
		q.touch = nil
		n = t.bytes
	}
	t.bytes -= n
	q.bytes -= n
	q.total.Add(-int64(n))
}

// take removes and returns every queued item and the bytes they held
// (a touched frame still collecting ids stays).
func (q *queue) take(buf []item) ([]item, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	items, n := q.items, q.bytes
	q.items, q.bytes = buf[:0], 0
	if t := q.touch; t != nil {
		q.bytes = t.bytes
		n -= t.bytes
	}
	q.total.Add(-int64(n))
	return items, n
}

func (q *queue) size() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes
}
