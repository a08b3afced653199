package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
)

// batchLog records, across several sinks, the outputs and the flushes in
// the order the engine made them.
type batchLog struct {
	mu      sync.Mutex
	entries []batchEntry
}

type batchEntry struct {
	flush bool
	kind  OutputKind
	lsn   change.LSN
}

// flushSink is a Flusher writing to a shared batchLog.
type flushSink struct{ log *batchLog }

func (s flushSink) Send(o Output) {
	s.log.mu.Lock()
	s.log.entries = append(s.log.entries, batchEntry{kind: o.Kind, lsn: o.LSN})
	s.log.mu.Unlock()
}

func (s flushSink) Flush() {
	s.log.mu.Lock()
	s.log.entries = append(s.log.entries, batchEntry{flush: true})
	s.log.mu.Unlock()
}

var _ Flusher = flushSink{}

// Every output of one transaction, even one that spans several stream
// fragments, reaches the sinks in one batch, and each sink of the batch is
// flushed after it.
func TestEngineFlushEndsTransactions(t *testing.T) {
	r := newRig(t, itemsDDL, Config{})
	log := &batchLog{}
	const subs = 3
	for i := range subs {
		sql := fmt.Sprintf("SELECT id, qty FROM items WHERE qty >= %d", i)
		if _, ref, err := r.e.Subscribe(context.Background(), sql, nil, ModeTouch, flushSink{log}); err != nil || ref != nil {
			t.Fatalf("subscribe %s: %v %v", sql, ref, err)
		}
	}
	waitFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		log.mu.Lock()
		defer log.mu.Unlock()
		n := 0
		for _, e := range log.entries {
			if e.kind == OutputAccepted {
				n++
			}
		}
		if n < subs {
			return fmt.Errorf("%d of %d accepted", n, subs)
		}
		return nil
	})
	// 4 x 20 row changes: more than the rig's 64 changes per fragment.
	const txns = 3
	for range txns {
		r.exec("BEGIN; UPDATE items SET qty = qty + 1; UPDATE items SET qty = qty + 1; UPDATE items SET qty = qty + 1; UPDATE items SET qty = qty + 1; COMMIT")
	}
	r.quiesce(30 * time.Second)

	log.mu.Lock()
	defer log.mu.Unlock()
	closed := map[change.LSN]bool{} // transactions whose batch ended
	var open []change.LSN
	touched := map[change.LSN]int{}
	flushes := 0
	for i, e := range log.entries {
		switch {
		case e.flush:
			flushes++
			for _, l := range open {
				closed[l] = true
			}
			open = open[:0]
		case e.kind == OutputTouched:
			if closed[e.lsn] {
				t.Fatalf("entry %d: touched at %s after its transaction's batch was flushed", i, e.lsn)
			}
			touched[e.lsn]++
			open = append(open, e.lsn)
		}
	}
	if len(open) > 0 {
		t.Errorf("outputs at %v were never flushed", open)
	}
	if len(touched) != txns {
		t.Errorf("touched transactions = %d, want %d", len(touched), txns)
	}
	for lsn, n := range touched {
		if n != subs {
			t.Errorf("transaction %s touched %d subscriptions, want %d", lsn, n, subs)
		}
	}
	if flushes == 0 {
		t.Errorf("no flush")
	}
}
