package main

import (
	"context"
	"fmt"
	"math/rand"
	"os/exec"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/freshetdb/freshet/ticketdesk"
	"gorm.io/gorm"
)

// benchRoute is one route's measurement: every read's latency, overall
// and by lookup.
type benchRoute struct {
	name     string
	elapsed  time.Duration
	all      []time.Duration
	byLookup [][]time.Duration
	errs     int64
}

// benchReads runs conc goroutines reading random lookups through db for d.
func benchReads(ctx context.Context, name string, db *gorm.DB, lookups []ticketdesk.Lookup, world *ticketdesk.World,
	conc int, d time.Duration, seed uint64) *benchRoute {
	res := &benchRoute{name: name, byLookup: make([][]time.Duration, len(lookups))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(seed) + int64(g)))
			by := make([][]time.Duration, len(lookups))
			var errs int64
			for ctx.Err() == nil {
				i := r.Intn(len(lookups))
				l := lookups[i]
				args := l.Args(r, world)
				t0 := time.Now()
				_, err := l.Run(ctx, db, args)
				el := time.Since(t0)
				if err != nil {
					if ctx.Err() == nil {
						errs++
					}
					continue
				}
				by[i] = append(by[i], el)
			}
			mu.Lock()
			for i, ds := range by {
				res.byLookup[i] = append(res.byLookup[i], ds...)
				res.all = append(res.all, ds...)
			}
			res.errs += errs
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

// demoBench implements `freshet demo bench`.
func (m *Main) demoBench(ctx context.Context, cfg *demoConfig) error {
	cfg.Readers = 0
	return m.withLoad(ctx, cfg, func(st *demoStack, ld *demoLoad) error { return m.bench(ctx, cfg, st, ld) })
}

// bench measures both routes on a running load.
func (m *Main) bench(ctx context.Context, cfg *demoConfig, st *demoStack, ld *demoLoad) error {
	// The lookups the engine refuses go to PostgreSQL on both routes:
	// only the ones it serves are measured.
	var lookups []ticketdesk.Lookup
	for _, l := range ld.Active() {
		if l.Expect == ticketdesk.Cached {
			lookups = append(lookups, l)
		}
	}
	// Warm the cache: every lookup subscribed for a spread of arguments.
	m.say("warming the cache (every working-set key read; then until no new subscription for 2s)...")
	benchReads(ctx, "warm", st.cached, lookups, st.world, cfg.Concurrency, 2*time.Second, cfg.Seed)
	for i, l := range ld.lookups {
		for _, args := range ld.keys[i] {
			l.Run(ctx, st.cached, args)
		}
	}
	ld.WaitWarm(ctx, 2*time.Second, time.Minute)
	load0 := loadAvg()
	before := st.cache.Stats()
	m.say("measuring the %d lookups the engine serves, %d goroutines, %v per route, writer at %v transactions/s", len(lookups), cfg.Concurrency, cfg.Duration, cfg.Rate)
	cached := benchReads(ctx, "cache", st.cached, lookups, st.world, cfg.Concurrency, cfg.Duration, cfg.Seed+1)
	after := st.cache.Stats()
	direct := benchReads(ctx, "postgres", st.direct, lookups, st.world, cfg.Concurrency, cfg.Duration, cfg.Seed+1)
	if ctx.Err() != nil {
		return nil
	}
	hits := (after.Hits + after.Misses) - (before.Hits + before.Misses)
	pg := pgTotal(after) - pgTotal(before)
	fmt.Fprintf(m.Stdout, "load average before: %s\n", load0)
	fmt.Fprintf(m.Stdout, "the cache route's reads: %s from memory, %s sent to PostgreSQL %v\n\n", commas(hits), commas(pg), diffReasons(after.Postgres, before.Postgres))
	tw := tabwriter.NewWriter(m.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "route\treads/s\tp50 ms\tp99 ms\terrors\t")
	for _, r := range []*benchRoute{cached, direct} {
		s := summarize(r.all, int64(len(r.all)))
		fmt.Fprintf(tw, "%s\t%.0f\t%.3f\t%.3f\t%d\t\n", r.name, float64(len(r.all))/r.elapsed.Seconds(), ms(s.P50), ms(s.P99), r.errs)
	}
	tw.Flush()
	cs, ds := summarize(cached.all, 0), summarize(direct.all, 0)
	if cs.P50 > 0 && len(direct.all) > 0 {
		fmt.Fprintf(m.Stdout, "cache/postgres: %.1fx the reads/s, p50 %.1fx faster\n\n",
			float64(len(cached.all))/cached.elapsed.Seconds()/(float64(len(direct.all))/direct.elapsed.Seconds()), float64(ds.P50)/float64(cs.P50))
	}
	// In the mix, the slowest lookup holds most goroutines most of the
	// time on both routes (a closed loop): each lookup alone says more.
	m.say("each lookup alone, %v per route...", cfg.PerLookup)
	tw = tabwriter.NewWriter(m.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lookup (alone)\tcache reads/s\tpostgres reads/s\tratio\tcache p50 ms\tpostgres p50 ms\tcache p99 ms\tpostgres p99 ms\t")
	for _, l := range lookups {
		one := []ticketdesk.Lookup{l}
		c := benchReads(ctx, "cache", st.cached, one, st.world, cfg.Concurrency, cfg.PerLookup, cfg.Seed+2)
		d := benchReads(ctx, "postgres", st.direct, one, st.world, cfg.Concurrency, cfg.PerLookup, cfg.Seed+2)
		if ctx.Err() != nil {
			return nil
		}
		cr, dr := float64(len(c.all))/c.elapsed.Seconds(), float64(len(d.all))/d.elapsed.Seconds()
		cs, ds := summarize(c.all, 0), summarize(d.all, 0)
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.1fx\t%.3f\t%.3f\t%.3f\t%.3f\t\n", l.Name, cr, dr, cr/max(dr, 1e-9), ms(cs.P50), ms(ds.P50), ms(cs.P99), ms(ds.P99))
	}
	tw.Flush()
	fmt.Fprintf(m.Stdout, "load average after: %s\n", loadAvg())
	return nil
}

// diffReasons returns the non-zero differences between two reason counts.
func diffReasons(after, before map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// loadAvg returns the machine's load averages as uptime prints them.
func loadAvg() string {
	out, err := exec.Command("uptime").Output()
	if err != nil {
		return "unknown"
	}
	s := strings.TrimSpace(string(out))
	if i := strings.Index(s, "load average"); i >= 0 {
		return s[i:]
	}
	return s
}
