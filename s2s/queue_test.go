package s2s

import (
	"sync/atomic"
	"testing"
	"time"
)

// A transaction's frames wake the write loop once, when the engine ends
// the transaction, with its touched frame last.
func TestQueueTransaction(t *testing.T) {
	var total atomic.Int64
	q := newQueue(0, &total)
	woken := func() bool {
		select {
		case <-q.ready:
			return true
		default:
			return false
		}
	}
	q.mu.Lock()
	q.pushLocked([]byte(`{"type":"delta","id":"a"}`))
	q.touchLocked(7, "t1")
	q.pushLocked([]byte(`{"type":"delta","id":"b"}`))
	q.touchLocked(7, "t2")
	q.mu.Unlock()
	if woken() {
		t.Fatalf("write loop woken before the transaction ended")
	}
	q.mu.Lock()
	q.endTxnLocked(time.Time{})
	q.mu.Unlock()
	if !woken() {
		t.Fatalf("write loop not woken when the transaction ended")
	}
	items, n := q.take(nil)
	var got []string
	for _, it := range items {
		if it.touch != nil {
			got = append(got, string(it.touch.encode(nil)))
		} else {
			got = append(got, string(it.frame))
		}
	}
	want := []string{`{"type":"delta","id":"a"}`, `{"type":"delta","id":"b"}`, `{"type":"touched","lsn":"0/7","ids":["t1","t2"]}`}
	if len(got) != len(want) {
		t.Fatalf("queued %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("frame %d = %s, want %s", i, got[i], want[i])
		}
	}
	if n <= 0 || total.Load() != 0 {
		t.Errorf("take: %d bytes, server total %d after; want > 0 and 0", n, total.Load())
	}
	// Nothing queued: ending a transaction wakes no one.
	q.mu.Lock()
	q.endTxnLocked(time.Time{})
	q.mu.Unlock()
	if woken() {
		t.Errorf("write loop woken for an empty transaction")
	}
}

// A subscription that ends leaves the touched frame being collected; the
// bytes it held are given back.
func TestQueueUntouch(t *testing.T) {
	var total atomic.Int64
	q := newQueue(1000, &total)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.touchLocked(9, "gone")
	q.touchLocked(9, "stays")
	q.untouchLocked("gone")
	if q.touch == nil || len(q.touch.ids) != 1 || q.touch.ids[0] != "stays" {
		t.Fatalf("touched ids after untouch = %v, want [stays]", q.touch)
	}
	q.untouchLocked("stays")
	if q.touch != nil || q.bytes != 0 || total.Load() != 0 {
		t.Fatalf("after every id left: batch %v, %d bytes, server total %d; want none, 0, 0", q.touch, q.bytes, total.Load())
	}
}

// The engine ends a transaction once per subscription of the connection
// it touched: the transaction's last queued frame carries when it
// reached the engine, once, so the connection's write observes it once;
// a batch no stream event caused (a landed read) carries no time, and a
// stamp is never replaced by a later transaction's.
func TestQueueStampsTransactionEnd(t *testing.T) {
	var total atomic.Int64
	q := newQueue(0, &total)
	t1, t2 := time.Unix(100, 0), time.Unix(200, 0)
	q.mu.Lock()
	q.pushLocked([]byte(`{"type":"accepted","id":"a"}`))
	q.endTxnLocked(time.Time{}) // a landed read
	q.pushLocked([]byte(`{"type":"delta","id":"a"}`))
	q.touchLocked(7, "t")
	q.endTxnLocked(t1) // one call per subscription of the batch
	q.endTxnLocked(t1)
	q.endTxnLocked(t2) // nothing queued since: t2 sent nothing here
	q.mu.Unlock()
	items, _ := q.take(nil)
	var d drain
	d.items = items
	d.collectStamps()
	if len(items) != 3 || !items[0].received.IsZero() || !items[1].received.IsZero() || items[2].touch == nil {
		t.Fatalf("items %+v: want accepted and delta unstamped, the touched frame last", items)
	}
	if len(d.stamps) != 1 || !d.stamps[0].Equal(t1) {
		t.Fatalf("stamps %v, want [%v]: the transaction's last frame, once", d.stamps, t1)
	}
}
