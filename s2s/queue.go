package s2s

import (
	"sync"
	"sync/atomic"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/wire"
)

// item is one frame waiting in a connection's outgoing queue: encoded
// bytes, or a touched frame still collecting the ids of its transaction.
type item struct {
	frame []byte
	touch *touchBatch
}

type touchBatch struct {
	lsn change.LSN
	ids []string
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
type queue struct {
	mu     sync.Mutex
	items  []item
	bytes  int
	limit  int // 0: none
	closed bool
	ready  chan struct{} // capacity 1: something was pushed
	total  *atomic.Int64 // the server's queued bytes, all connections
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

// pushLocked appends a frame. It returns false when the queue is closed or
// the frame would pass the limit.
func (q *queue) pushLocked(b []byte) bool {
	if q.closed {
		return false
	}
	if q.limit > 0 && q.bytes+len(b) > q.limit {
		return false
	}
	q.items = append(q.items, item{frame: b})
	q.bytes += len(b)
	q.total.Add(int64(len(b)))
	q.signal()
	return true
}

// touchLocked adds id to the touched frame of lsn at the queue's tail, or
// starts one.
func (q *queue) touchLocked(lsn change.LSN, id string) bool {
	if q.closed {
		return false
	}
	n := len(id) + 3
	if q.limit > 0 && q.bytes+n+48 > q.limit {
		return false
	}
	if k := len(q.items); k > 0 && q.items[k-1].touch != nil && q.items[k-1].touch.lsn == lsn {
		t := q.items[k-1].touch
		t.ids = append(t.ids, id)
		q.bytes += n
		q.total.Add(int64(n))
		return true
	}
	q.items = append(q.items, item{touch: &touchBatch{lsn: lsn, ids: []string{id}}})
	q.bytes += n + 48
	q.total.Add(int64(n + 48))
	q.signal()
	return true
}

// take removes and returns every queued item and the bytes they held.
func (q *queue) take(buf []item) ([]item, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	items, n := q.items, q.bytes
	q.items, q.bytes = buf[:0], 0
	q.total.Add(-int64(n))
	return items, n
}

func (q *queue) size() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes
}
