package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/ticketdesk"
	"golang.org/x/sys/unix"
)

// The reasons a read goes to PostgreSQL that the dashboard names, in the
// order it names them; every other reason is summed as "other".
var dashReasons = []struct{ key, label string }{
	{"refused", "refused"},
	{"transaction", "transaction"},
	{"after_write", "after a write"},
	{"lag", "lag"},
	{"disconnected", "disconnected"},
	{"evicted", "evicted"},
}

// snapshot is the load's state at one moment, and the rates over the
// second before it.
type snapshot struct {
	At     time.Time
	Uptime time.Duration

	Writer    ticketdesk.WriterStats
	WritesPS  float64
	Readers   int
	Reads     int64 // readers' reads
	ReadErrs  int64
	ReadsPS   float64
	Cache     readcache.Stats
	CachePS   float64            // hits and misses per second
	PGPS      map[string]float64 // reads sent to PostgreSQL per second, by reason
	HitNow    float64            // hit ratio over the last second, -1 when nothing was read
	HitTotal  float64
	EngineLag int64 // ms, -1 when unknown
	C2C       latencySummary

	Passes, Compared, Retried int64
	Mismatches                int
	VerifyErr                 string
	// Exact checkpoints: count, answers compared, mismatches, the last
	// one's WAL position and wait, the longest wait.
	Checkpoints, CPCompared int64
	CPMismatches            int
	CPLSN                   string
	CPWait, CPMost          time.Duration
}

// sampler turns the load's counters into snapshots.
type sampler struct {
	ld    *demoLoad
	start time.Time
	mu    sync.Mutex
	last  *snapshot
}

func (ld *demoLoad) newSampler() *sampler { return &sampler{ld: ld, start: time.Now()} }

// Sample takes a snapshot, with rates measured since the previous one.
func (s *sampler) Sample(ctx context.Context) *snapshot {
	ld := s.ld
	now := time.Now()
	sn := &snapshot{At: now, Uptime: now.Sub(s.start).Truncate(time.Second), Writer: ld.writerStats(),
		Cache: ld.st.cache.Stats(), PGPS: map[string]float64{}, HitNow: -1, HitTotal: -1, EngineLag: ld.st.engineLag(ctx), Readers: ld.cfg.Readers}
	sn.Reads = ld.readsTotal()
	for i := range ld.reads {
		sn.ReadErrs += ld.reads[i].errs.Load()
	}
	if ld.probe != nil {
		sn.C2C = ld.probe.Summary()
	}
	v := &ld.verifier
	v.mu.Lock()
	sn.Passes, sn.Compared, sn.Retried, sn.Mismatches, sn.VerifyErr = v.passes, v.compared, v.retried, len(v.mismatches), v.lastErr
	sn.Checkpoints, sn.CPCompared, sn.CPMismatches, sn.CPLSN, sn.CPWait, sn.CPMost = v.checkpoints, v.cpCompared, v.cpMismatches, v.cpLSN, v.cpWait, v.cpMost
	v.mu.Unlock()

	cached := sn.Cache.Hits + sn.Cache.Misses
	if all := cached + pgTotal(sn.Cache); all > 0 {
		sn.HitTotal = float64(cached) / float64(all)
	}
	s.mu.Lock()
	prev := s.last
	s.last = sn
	s.mu.Unlock()
	if prev == nil {
		return sn
	}
	secs := now.Sub(prev.At).Seconds()
	if secs <= 0 {
		return sn
	}
	rate := func(a, b int64) float64 { return float64(a-b) / secs }
	sn.WritesPS = rate(sn.Writer.Committed, prev.Writer.Committed)
	sn.ReadsPS = rate(sn.Reads, prev.Reads)
	pc := prev.Cache.Hits + prev.Cache.Misses
	sn.CachePS = rate(cached, pc)
	var pgPS float64
	for k, n := range sn.Cache.Postgres {
		if d := rate(n, prev.Cache.Postgres[k]); d > 0 {
			sn.PGPS[k] = d
			pgPS += d
		}
	}
	if sn.CachePS+pgPS > 0 {
		sn.HitNow = sn.CachePS / (sn.CachePS + pgPS)
	}
	return sn
}

func pgTotal(s readcache.Stats) (n int64) {
	for _, v := range s.Postgres {
		n += v
	}
	return n
}

// pgPS sums the per-second PostgreSQL reads.
func (sn *snapshot) pgPS() (n float64) {
	for _, v := range sn.PGPS {
		n += v
	}
	return n
}

// reasonsLine names the reasons reads went to PostgreSQL in the last
// second.
func (sn *snapshot) reasonsLine(sep string, format func(label string, v float64) string) string {
	var parts []string
	named := map[string]bool{}
	for _, r := range dashReasons {
		named[r.key] = true
		parts = append(parts, format(r.label, sn.PGPS[r.key]))
	}
	var other float64
	for k, v := range sn.PGPS {
		if !named[k] {
			other += v
		}
	}
	parts = append(parts, format("other", other))
	return strings.Join(parts, sep)
}

func pct(f float64) string {
	if f < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

func lagText(v int64) string {
	if v < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%d ms", v)
}

func c2cText(s latencySummary) string {
	if s.N == 0 {
		return "no samples yet"
	}
	return fmt.Sprintf("p50 %.2f ms  p99 %.2f ms  (last %d of %d stamps)", ms(s.P50), ms(s.P99), s.N, s.Total)
}

// Render writes the dashboard: the screen a person watches.
func (sn *snapshot) Render(w io.Writer, head string) {
	fmt.Fprintf(w, "%s\n", head)
	fmt.Fprintf(w, "up %v   Ctrl-C stops everything\n\n", sn.Uptime)
	fmt.Fprintf(w, "writes      %8.1f/s   %s\n", sn.WritesPS, writerLine(sn.Writer))
	fmt.Fprintf(w, "reads       %8.1f/s   by %d readers (%s reads, %s errors)\n", sn.ReadsPS, sn.Readers, commas(sn.Reads), commas(sn.ReadErrs))
	fmt.Fprintf(w, "  cache     %8.1f/s   answered from memory (%s hits, %s first answers)\n", sn.CachePS, commas(sn.Cache.Hits), commas(sn.Cache.Misses))
	fmt.Fprintf(w, "  postgres  %8.1f/s   %s\n", sn.pgPS(), sn.reasonsLine("  ", func(l string, v float64) string { return fmt.Sprintf("%s %.1f", l, v) }))
	fmt.Fprintf(w, "hit ratio   %8s     last second   %s since start\n", pct(sn.HitNow), pct(sn.HitTotal))
	fmt.Fprintf(w, "lag         %8s     engine (newest heartbeat delivered)\n", lagText(sn.EngineLag))
	fmt.Fprintf(w, "commit-to-cache      %s\n", c2cText(sn.C2C))
	fmt.Fprintf(w, "cache       %d entries, %d subscriptions, %d sockets up\n", sn.Cache.Entries, sn.Cache.Subscriptions, sn.Cache.Connected)
	fmt.Fprintf(w, "verifier    %d passes, %s answers compared, %s re-read, mismatches %d\n", sn.Passes, commas(sn.Compared), commas(sn.Retried), sn.Mismatches)
	fmt.Fprintf(w, "checkpoints %d exact (writer paused, cache past the WAL position), %s answers compared, mismatches %d%s\n",
		sn.Checkpoints, commas(sn.CPCompared), sn.CPMismatches, sn.cpLast())
	if sn.VerifyErr != "" {
		fmt.Fprintf(w, "            last error: %s\n", sn.VerifyErr)
	}
}

// cpLast describes the last checkpoint, "" before the first.
func (sn *snapshot) cpLast() string {
	if sn.Checkpoints == 0 {
		return ""
	}
	return fmt.Sprintf("; last at %s after %d ms (longest %d ms)", sn.CPLSN, sn.CPWait.Milliseconds(), sn.CPMost.Milliseconds())
}

// Line is the snapshot as one plain line (stdout is not a terminal).
func (sn *snapshot) Line() string {
	return fmt.Sprintf("t=%v writes/s=%.1f reads/s=%.1f cache/s=%.1f postgres/s=%.1f (%s) hit=%s lag=%s commit_to_cache=[%s] verify_passes=%d compared=%d mismatches=%d checkpoints=%d checkpoint_compared=%d checkpoint_mismatches=%d",
		sn.Uptime, sn.WritesPS, sn.ReadsPS, sn.CachePS, sn.pgPS(),
		sn.reasonsLine(" ", func(l string, v float64) string { return fmt.Sprintf("%s=%.1f", strings.ReplaceAll(l, " ", "_"), v) }),
		pct(sn.HitNow), lagText(sn.EngineLag), c2cText(sn.C2C), sn.Passes, sn.Compared, sn.Mismatches, sn.Checkpoints, sn.CPCompared, sn.CPMismatches)
}

// Summary is the run's totals as one line, printed when it ends.
func (sn *snapshot) Summary() string {
	cached := sn.Cache.Hits + sn.Cache.Misses
	return fmt.Sprintf("up %v: %s writes committed; %s reads, %s answered from memory, %s from PostgreSQL %v; hit ratio %s; commit-to-cache [%s]; %d verifier passes, %s answers compared, mismatches=%d; %d exact checkpoints, %s answers compared, mismatches=%d",
		sn.Uptime, commas(sn.Writer.Committed), commas(sn.Reads), commas(cached), commas(pgTotal(sn.Cache)), nonZero(sn.Cache.Postgres),
		pct(sn.HitTotal), c2cText(sn.C2C), sn.Passes, commas(sn.Compared), sn.Mismatches, sn.Checkpoints, commas(sn.CPCompared), sn.CPMismatches)
}

// nonZero returns the non-zero counts of m.
func nonZero(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// isTerminal says whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// formatMismatch prints a mismatch with both answers, and for two lists
// the rows only one of them has.
func formatMismatch(mm ticketdesk.Mismatch) string {
	s := fmt.Sprintf("MISMATCH %s (%s) args %s: %s\n  cache:      %s\n  postgresql: %s",
		mm.Lookup, mm.Kind, jsonText(mm.Args), mm.Detail, jsonText(mm.Cached), jsonText(mm.Direct))
	if onlyC, onlyD, ok := listDiff(mm.Cached, mm.Direct); ok {
		s += fmt.Sprintf("\n  only in the cache's answer:      %s\n  only in PostgreSQL's answer:     %s", onlyC, onlyD)
	}
	return s
}

// listDiff returns the elements of two JSON lists that only one has.
func listDiff(a, b any) (onlyA, onlyB string, ok bool) {
	var la, lb []json.RawMessage
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil || json.Unmarshal(ja, &la) != nil || json.Unmarshal(jb, &lb) != nil {
		return "", "", false
	}
	count := map[string]int{}
	for _, x := range lb {
		count[string(x)]++
	}
	var oa, ob []string
	for _, x := range la {
		if count[string(x)] > 0 {
			count[string(x)]--
		} else {
			oa = append(oa, string(x))
		}
	}
	for _, x := range lb {
		if count[string(x)] > 0 {
			count[string(x)]--
			ob = append(ob, string(x))
		}
	}
	if len(oa)+len(ob) == 0 {
		return "(the same rows, in another order)", "", true
	}
	return "[" + strings.Join(oa, ",") + "]", "[" + strings.Join(ob, ",") + "]", true
}

// jsonText is v as JSON, cut at 2,000 bytes.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	if len(b) > 2000 {
		return string(b[:2000]) + fmt.Sprintf("... (%d bytes)", len(b))
	}
	return string(b)
}

// statsJSON is what /stats on the desk's port returns.
func (ld *demoLoad) statsJSON(sn *snapshot) ([]byte, error) {
	type lookupStat struct {
		Reads   int64  `json:"reads"`
		Errors  int64  `json:"errors"`
		Expect  string `json:"expect"`
		LastErr string `json:"last_error,omitempty"`
	}
	byLookup := map[string]lookupStat{}
	for i, l := range ld.lookups {
		c := &ld.reads[i]
		s := lookupStat{Reads: c.n.Load(), Errors: c.errs.Load(), Expect: fmt.Sprint(l.Expect)}
		if p := c.lastErr.Load(); p != nil {
			s.LastErr = *p
		}
		byLookup[l.Name] = s
	}
	v := &ld.verifier
	v.mu.Lock()
	mms := append([]ticketdesk.Mismatch{}, v.mismatches...)
	routes := maps.Clone(v.routes)
	v.mu.Unlock()
	return json.MarshalIndent(map[string]any{
		"uptime_seconds":    sn.Uptime.Seconds(),
		"writer":            sn.Writer,
		"writes_per_second": sn.WritesPS,
		"readers": map[string]any{
			"readers":          ld.cfg.Readers,
			"reads":            sn.Reads,
			"errors":           sn.ReadErrs,
			"reads_per_second": sn.ReadsPS,
			"by_lookup":        byLookup,
		},
		"routes": map[string]any{
			"refusal_codes":       ld.st.refusals.Counts(),
			"cache_per_second":    sn.CachePS,
			"postgres_per_second": sn.PGPS,
			"hit_ratio_second":    sn.HitNow,
			"hit_ratio_total":     sn.HitTotal,
			"cache":               sn.Cache,
		},
		"lag": map[string]any{
			"engine_ms":       sn.EngineLag,
			"commit_to_cache": sn.C2C,
		},
		"verifier": map[string]any{
			"passes":     sn.Passes,
			"compared":   sn.Compared,
			"retried":    sn.Retried,
			"mismatches": mms,
			"routes":     routes,
			"last_error": sn.VerifyErr,
			"checkpoints": map[string]any{
				"count":        sn.Checkpoints,
				"compared":     sn.CPCompared,
				"mismatches":   sn.CPMismatches,
				"last_lsn":     sn.CPLSN,
				"last_wait_ms": sn.CPWait.Milliseconds(),
				"most_wait_ms": sn.CPMost.Milliseconds(),
			},
		},
	}, "", "  ")
}
