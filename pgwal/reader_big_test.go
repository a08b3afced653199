package pgwal

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
)

// heapSampler records, while it runs, the peak runtime HeapInuse (live
// objects and garbage not yet collected) and the peak live heap (what the
// last garbage collection found reachable, /gc/heap/live:bytes).
type heapSampler struct {
	peak, live atomic.Uint64
	stop       chan struct{}
	wg         sync.WaitGroup
}

func sampleHeap(every time.Duration) *heapSampler {
	h := &heapSampler{stop: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		var ms runtime.MemStats
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			h.peak.Store(max(h.peak.Load(), ms.HeapInuse))
			metrics.Read(live)
			if live[0].Value.Kind() == metrics.KindUint64 {
				h.live.Store(max(h.live.Load(), live[0].Value.Uint64()))
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// done stops sampling and returns the peak HeapInuse and live heap.
func (h *heapSampler) done() (inuse, live uint64) {
	close(h.stop)
	h.wg.Wait()
	return h.peak.Load(), h.live.Load()
}

// TestMillionRowTransaction streams one 1,000,000-row transaction (100,000
// under -race) and
// checks every row arrives once, in order, with the heap staying bounded.
func TestMillionRowTransaction(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and streams a million rows")
	}
	rows := 1_000_000
	if raceEnabled {
		rows = 100_000 // the million runs in make test's plain pass
	}
	// The decoder buffers at most MemoryLimit of a streamed transaction
	// (protocol 2); what it holds besides (a fragment, the receive queue)
	// is a few MiB. The live heap must stay within MemoryLimit plus that
	// slack. HeapInuse also holds garbage not yet collected, which the
	// collector's default pacing (GOGC=100) lets grow to the live heap's
	// size, so its bound is twice that. Before the buffer grew in fixed
	// chunks it was counted by bytes written while append doubled its
	// capacity: 87 MiB live and 172 MiB in use, over both bounds.
	const (
		slack      = 16 << 20
		liveBound  = DefaultMemoryLimit + slack
		inuseBound = 2*DefaultMemoryLimit + slack
	)
	for _, proto := range []int{1, 2} {
		t.Run("proto"+strconv.Itoa(proto), func(t *testing.T) {
			db := pgtest.NewDB(t)
			conn := connect(t, db.DSN)
			exec(t, conn, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
			cfg := testConfig(t, db.DSN)
			cfg.ProtoVersion = proto
			cfg.Decoder.SpillDir = t.TempDir()
			r := openReader(t, cfg)
			began := time.Now()
			exec(t, conn, fmt.Sprintf(`INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, %d) g`, rows))
			wrote := time.Since(began)
			began = time.Now()

			runtime.GC()
			heap := sampleHeap(20 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			next, frags := 1, 0
			for next <= rows {
				ev, err := r.Next(ctx)
				if err != nil {
					t.Fatalf("Next after %d rows: %v", next-1, err)
				}
				txn, ok := ev.(*change.Txn)
				if !ok {
					continue
				}
				frags++
				for _, c := range txn.Changes {
					if c.Op != change.OpInsert {
						continue
					}
					if id := string(c.New[0].Data); id != strconv.Itoa(next) {
						t.Fatalf("row %s arrived where %d was due", id, next)
					}
					if v := string(c.New[1].Data); v != "row "+strconv.Itoa(next) {
						t.Fatalf("row %d: v = %q", next, v)
					}
					next++
				}
				if txn.Last {
					if next <= rows {
						t.Fatalf("transaction ended after %d rows, want %d", next-1, rows)
					}
					r.Ack(txn.CommitLSN)
				}
			}
			peak, live := heap.done()
			t.Logf("proto %d: %d rows in %d fragments, peak HeapInuse %.1f MiB, peak live heap %.1f MiB (insert took %v, streaming after it %v)", proto, rows, frags, float64(peak)/(1<<20), float64(live)/(1<<20), wrote.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
			if live > liveBound {
				t.Errorf("peak live heap %d MiB, want at most %d MiB (MemoryLimit + %d MiB)", live>>20, liveBound>>20, slack>>20)
			}
			if peak > inuseBound {
				t.Errorf("peak HeapInuse %d MiB, want at most %d MiB (2 x MemoryLimit + %d MiB)", peak>>20, inuseBound>>20, slack>>20)
			}
			if left, _ := os.ReadDir(cfg.Decoder.SpillDir); len(left) != 0 {
				t.Errorf("%d spill files left in %s", len(left), cfg.Decoder.SpillDir)
			}
		})
	}
}
