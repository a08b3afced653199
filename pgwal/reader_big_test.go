package pgwal

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
)

// heapSampler records the peak runtime HeapInuse while it runs.
type heapSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	wg   sync.WaitGroup
}

func sampleHeap(every time.Duration) *heapSampler {
	h := &heapSampler{stop: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		var ms runtime.MemStats
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > h.peak.Load() {
				h.peak.Store(ms.HeapInuse)
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

func (h *heapSampler) done() uint64 {
	close(h.stop)
	h.wg.Wait()
	return h.peak.Load()
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
	const bound = 256 << 20
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
			peak := heap.done()
			t.Logf("proto %d: %d rows in %d fragments, peak HeapInuse %.1f MiB (insert took %v, streaming after it %v)", proto, rows, frags, float64(peak)/(1<<20), wrote.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
			if peak > bound {
				t.Fatalf("peak HeapInuse %d MiB, want under %d MiB", peak>>20, bound>>20)
			}
			if left, _ := os.ReadDir(cfg.Decoder.SpillDir); len(left) != 0 {
				t.Errorf("%d spill files left in %s", len(left), cfg.Decoder.SpillDir)
			}
		})
	}
}
