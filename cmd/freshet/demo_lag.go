package main

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/stdlib"
	"github.com/freshetdb/freshet/wire"
	"github.com/jackc/pgx/v5/pgtype"
	"gorm.io/gorm"
)

// The probe: one row per prober whose stamp the probe writes straight to
// PostgreSQL and then reads through the cache until the cache shows it.
const (
	probeTable = "freshet_demo_probe"
	probeRead  = "SELECT stamp FROM " + probeTable + " WHERE id = $1"
)

// createProbe creates the probe table if it is missing.
func createProbe(ctx context.Context, db *gorm.DB) error {
	err := db.WithContext(ctx).Exec("CREATE TABLE IF NOT EXISTS " + probeTable + " (id int PRIMARY KEY, stamp bigint NOT NULL)").Error
	if err != nil {
		return fmt.Errorf("create the lag probe's table: %w", err)
	}
	return nil
}

// prober measures commit-to-cached-answer latency: it commits a new stamp
// on its row, then polls the cached read of that row until the answer
// served from memory (not a fallback to PostgreSQL) shows the stamp.
type prober struct {
	st     *demoStack
	db     *sql.DB // its own pool and cache, so its polls are not counted with the readers'
	cache  *readcache.Cache
	id     int
	stamp  int64
	params []wire.Param
	poll   time.Duration

	// Fallbacks counts polls the cache sent to PostgreSQL, by reason.
	mu        sync.Mutex
	fallbacks map[string]int64
}

func newProber(st *demoStack, id int) (*prober, error) {
	m := pgtype.NewMap()
	ps, _ := readcache.Params(m, []any{int32(id)})
	db, err := stdlib.Open(st.dsn, st.cacheConfig(nil))
	if err != nil {
		return nil, fmt.Errorf("open the lag probe's read cache: %w", err)
	}
	return &prober{st: st, db: db, cache: stdlib.CacheOf(db), id: id, params: ps, poll: 100 * time.Microsecond, fallbacks: map[string]int64{}}, nil
}

// Close closes the probe's cache.
func (p *prober) Close() error { return p.db.Close() }

// Sample commits one stamp and returns how long after the commit returned
// the cache answered with it. limit bounds the wait.
func (p *prober) Sample(ctx context.Context, limit time.Duration) (time.Duration, error) {
	p.stamp++
	err := p.st.direct.WithContext(ctx).Exec("INSERT INTO "+probeTable+" (id, stamp) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET stamp = EXCLUDED.stamp",
		p.id, p.stamp).Error
	if err != nil {
		return 0, fmt.Errorf("stamp the probe row: %w", err)
	}
	committed := time.Now()
	want := strconv.FormatInt(p.stamp, 10)
	for {
		if p.cache.NeedsIdentity() {
			// The driver checks which database the reads go to on a
			// read's own connection; Cache.Read alone never does.
			var id readcache.Identity
			err := p.db.QueryRowContext(readcache.ViaPostgres(ctx), readcache.IdentityQuery).Scan(&id.SystemIdentifier, &id.Database)
			p.cache.Verify(id, err)
		}
		res, why := p.cache.Read(ctx, probeRead, p.params)
		if why == readcache.ReasonNone {
			if len(res.Rows) == 1 && string(res.Rows[0][0]) == want {
				return time.Since(committed), nil
			}
		} else {
			p.mu.Lock()
			p.fallbacks[why.String()]++
			p.mu.Unlock()
		}
		if time.Since(committed) > limit {
			return 0, fmt.Errorf("the cache did not show stamp %s within %v (last route: %s)", want, limit, why)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(p.poll):
		}
	}
}

// latencies keeps the last n samples for percentiles.
type latencies struct {
	mu   sync.Mutex
	buf  []time.Duration
	next int
	n    int64
}

func newLatencies(keep int) *latencies { return &latencies{buf: make([]time.Duration, 0, keep)} }

func (l *latencies) Add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if len(l.buf) < cap(l.buf) {
		l.buf = append(l.buf, d)
		return
	}
	l.buf[l.next] = d
	l.next = (l.next + 1) % len(l.buf)
}

// Summary returns the percentiles of the samples kept and the number of
// samples ever added.
func (l *latencies) Summary() (s latencySummary) {
	l.mu.Lock()
	sorted := slices.Clone(l.buf)
	s.Total = l.n
	l.mu.Unlock()
	return summarize(sorted, s.Total)
}

// latencySummary are percentiles of a set of durations.
type latencySummary struct {
	N, Total      int64
	P50, P99, Max time.Duration
}

func summarize(ds []time.Duration, total int64) latencySummary {
	s := latencySummary{N: int64(len(ds)), Total: total}
	if len(ds) == 0 {
		return s
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	s.P50, s.P99, s.Max = at(0.50), at(0.99), ds[len(ds)-1]
	return s
}

func (s latencySummary) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, `{"n":%d,"total":%d,"p50_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f}`,
		s.N, s.Total, ms(s.P50), ms(s.P99), ms(s.Max)), nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// demoLag implements `freshet demo lag`.
func (m *Main) demoLag(ctx context.Context, cfg *demoConfig) error {
	return m.withLoad(ctx, cfg, func(st *demoStack, ld *demoLoad) error { return m.lag(ctx, cfg, st, ld) })
}

// lag measures commit-to-cache latency on a running load.
func (m *Main) lag(ctx context.Context, cfg *demoConfig, st *demoStack, ld *demoLoad) error {
	p, err := newProber(st, 1)
	if err != nil {
		return err
	}
	defer p.Close()
	// The first sample subscribes; it is not a measurement.
	if _, err := p.Sample(ctx, 30*time.Second); err != nil {
		return quiet(ctx, err)
	}
	if cfg.Readers > 0 {
		m.say("warming the readers' working set (until no new subscription for 2s)...")
		ld.WaitWarm(ctx, 2*time.Second, time.Minute)
	}
	m.say("measuring %d stamps with the writer at %v transactions/s and %d readers", cfg.Samples, cfg.Rate, cfg.Readers)
	var ds []time.Duration
	reads0, start := ld.readsTotal(), time.Now()
	var engineLag []time.Duration
	for range cfg.Samples {
		d, err := p.Sample(ctx, 30*time.Second)
		if err != nil {
			return quiet(ctx, err)
		}
		ds = append(ds, d)
		if l := st.engineLag(ctx); l >= 0 {
			engineLag = append(engineLag, time.Duration(l)*time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
	s := summarize(ds, int64(len(ds)))
	ws := ld.writerStats()
	fmt.Fprintf(m.Stdout, "commit-to-cache: p50 %.2f ms  p99 %.2f ms  max %.2f ms  (%d stamps)\n", ms(s.P50), ms(s.P99), ms(s.Max), s.N)
	if len(engineLag) > 0 {
		e := summarize(engineLag, int64(len(engineLag)))
		fmt.Fprintf(m.Stdout, "engine heartbeat lag (its /stats, sampled with each stamp): p50 %.0f ms  p99 %.0f ms  max %.0f ms\n", ms(e.P50), ms(e.P99), ms(e.Max))
	}
	fmt.Fprintf(m.Stdout, "writer: %s\n", writerLine(ws))
	if cfg.Readers > 0 {
		fmt.Fprintf(m.Stdout, "readers: %d, %.0f reads/s while measuring\n", cfg.Readers, float64(ld.readsTotal()-reads0)/time.Since(start).Seconds())
	}
	fmt.Fprintf(m.Stdout, "%s\n", loadAvg())
	p.mu.Lock()
	if len(p.fallbacks) > 0 {
		fmt.Fprintf(m.Stdout, "polls the cache sent to PostgreSQL (not counted as answers): %v\n", p.fallbacks)
	}
	p.mu.Unlock()
	return nil
}

// quiet turns an error caused by Ctrl-C into a clean exit.
func quiet(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
