package rctest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/servetest"
	"github.com/freshetdb/freshet/readcache"
)

// Binary builds cmd/freshet once per test process and returns its path.
func Binary() (string, error) { return servetest.Binary() }

// Server is a running `freshet serve` (see internal/servetest).
type Server = servetest.Server

// Start runs freshet serve following dsn (database name) with fast
// heartbeats and lag frames; env adds environment variables.
func Start(t testing.TB, dsn, dbName string, env ...string) *Server {
	t.Helper()
	return servetest.Start(t, servetest.Options{DSN: dsn, Slot: servetest.SlotFor("rc_", dbName), Env: env})
}

// Eventually polls cond every 20 ms until it returns "" or wait passes,
// then fails with its last message.
func Eventually(t testing.TB, wait time.Duration, cond func() string) {
	t.Helper()
	servetest.Eventually(t, wait, cond)
}

// Ctx returns a context for a test step.
func Ctx(t testing.TB) context.Context { return servetest.Ctx(t) }

// Hits is what WarmHit needs of a cache: its hit count and why it is not
// serving.
type Hits interface {
	Stats() readcache.Stats
	Err() error
}

// WarmHit reads until a read is served from c (the first reads check the
// database's identity, wait for the sockets and subscribe).
func WarmHit(t testing.TB, c Hits, read func() error) {
	t.Helper()
	Eventually(t, 30*time.Second, func() string {
		before := c.Stats().Hits
		if err := read(); err != nil {
			return err.Error()
		}
		if c.Stats().Hits == before {
			return fmt.Sprintf("read not served from the cache: stats %+v, err %v", c.Stats(), c.Err())
		}
		return ""
	})
}

// Measure runs read b.N times in all from readers goroutines and reports
// the latency percentiles (p50-ns, p99-ns) and reads/s.
func Measure(b *testing.B, readers int, read func() error) {
	lat := make([][]time.Duration, readers)
	var wg sync.WaitGroup
	per := b.N/readers + 1
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := make([]time.Duration, 0, per)
			for range per {
				t0 := time.Now()
				if err := read(); err != nil {
					b.Error(err)
					return
				}
				l = append(l, time.Since(t0))
			}
			lat[r] = l
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	b.ReportMetric(float64(all[len(all)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(len(all))/el.Seconds(), "reads/s")
}

// BenchSchema is the table the read benchmarks read: 10,000 accounts.
const BenchSchema = `
CREATE TABLE accounts (id int PRIMARY KEY, name text NOT NULL, balance numeric(12,2) NOT NULL, updated timestamptz NOT NULL);
INSERT INTO accounts SELECT i, 'account ' || i, i * 10.5, '2024-01-01 00:00:00+00'::timestamptz + i * interval '1 minute'
FROM generate_series(1, 10000) i;
`

// BenchQuery is one read the benchmarks time: its SQL, its one bind and
// how many rows it returns.
type BenchQuery struct {
	Name string
	SQL  string
	Arg  int32
	Rows int
}

// BenchQueries are a point lookup and a 100-row ordered read of
// BenchSchema.
var BenchQueries = []BenchQuery{
	{"point", "SELECT id, name, balance, updated FROM accounts WHERE id = $1", 42, 1},
	{"100rows", "SELECT id, name, balance, updated FROM accounts WHERE id > $1 ORDER BY updated DESC LIMIT 100", 5000, 100},
}
