package ticketdesk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"time"

	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/stdlib"
	"gorm.io/gorm"
)

// DefaultSettle is the least time Verify re-reads a differing pair, and
// how old it takes a cached answer to be when the cache reports no
// staleness bound.
const DefaultSettle = 2 * time.Second

// VerifyConfig configures Verify. The zero value takes the defaults.
type VerifyConfig struct {
	// Settle is the staleness assumed when the cache reports none, and
	// the least time a differing pair is re-read (default 2 s); Retry is
	// the pause between re-reads (default 20 ms).
	Settle time.Duration
	Retry  time.Duration
	// Rounds is how many argument draws each lookup gets (default 1).
	Rounds int
	// Stats observes how the cached reads were routed: it is called
	// before and after each first cached read, and the difference names
	// the route. Default: the read cache of the cached pool's *sql.DB
	// (stdlib.CacheOf), if it has one. The read cache exposes counters,
	// not a per-read route, so the observation is exact only while
	// nothing else reads through the same pool: give Verify a pool of
	// its own. Reads whose counters moved by more than one are counted
	// as "unobserved".
	Stats func() readcache.Stats
	// RefusalCode, when set, returns the engine's refusal code for a SQL
	// text the cached pool read (a RefusalLog's Code). With it a read
	// routed "refused" is checked against its lookup: a Refused lookup
	// must be refused with its Code, and a Cached lookup refused for a
	// reason that is not about the query (CapacityCodes) is not counted
	// as misrouted. Without it every refusal of a Cached lookup is.
	RefusalCode func(sql string) string
	// Staleness is how old an answer the cached pool returns may be
	// (readcache.Cache.Staleness). With it a differing pair is re-read
	// only as long as the cache's own bound allows: the cached answer
	// must agree with an answer PostgreSQL gave once it was read at least
	// the time the cache said it might be behind (taken before and after
	// each cached read, the larger) after PostgreSQL's first answer
	// returned, however long the reads take. Default: the read cache of
	// the cached pool's *sql.DB (stdlib.CacheOf), if it has one.
	Staleness func() (time.Duration, bool)
}

// CapacityCodes are refusal codes that say nothing about the query: the
// engine was full, stopping, slow or changing schema. A Cached lookup
// refused with one of them is not misrouted.
var CapacityCodes = map[string]bool{"too_many_subscriptions": true, "shutting_down": true, "timeout": true,
	"internal": true, "read_failed": true, "schema_changed": true, "table_dropped": true}

// Route names of LookupReport.Routes besides the read cache's reasons
// (readcache.Reason names such as "refused", "lag", "timeout").
const (
	RouteCache      = "cache"      // answered from the cache (a hit, or the first result of a subscription)
	RouteUnobserved = "unobserved" // the counters moved by more than one read, or no counters
)

// LookupReport counts one lookup's comparisons.
type LookupReport struct {
	Name   string `json:"name"`
	Expect Expect `json:"expect"`
	// Compared pairs of answers; AgreedAtOnce on the first read;
	// AgreedAfterSettle on a re-read within the settle time; Mismatched
	// never.
	Compared          int `json:"compared"`
	AgreedAtOnce      int `json:"agreed_at_once"`
	AgreedAfterSettle int `json:"agreed_after_settle"`
	Mismatched        int `json:"mismatched"`
	// Routes counts how the first cached read of each comparison was
	// routed: RouteCache, a readcache reason name, or RouteUnobserved.
	Routes map[string]int `json:"routes"`
	// Refusals counts the refused first reads by the engine's code
	// (only with VerifyConfig.RefusalCode; "" when none was recorded).
	Refusals map[string]int `json:"refusals,omitempty"`
	// Misrouted counts reads routed against Expect: a Cached lookup the
	// engine refused (for the query's sake), or a Refused lookup served
	// from the cache or refused with another code.
	Misrouted int `json:"misrouted"`
}

// Mismatch is a comparison that failed, with both answers.
type Mismatch struct {
	Lookup string `json:"lookup"`
	Args   []any  `json:"args"`
	// Kind is "answer" (the cached answer never equalled PostgreSQL's
	// within the settle time), "empty" (a lookup that must stay empty
	// did not) or "route" (read routed against its Expect).
	Kind   string `json:"kind"`
	Cached any    `json:"cached"`
	Direct any    `json:"direct"`
	// Detail says what differs in a sentence.
	Detail string `json:"detail"`
}

// VerifyReport is what Verify found.
type VerifyReport struct {
	Lookups    []LookupReport `json:"lookups"`
	Mismatches []Mismatch     `json:"mismatches"`
	Compared   int            `json:"compared"`
}

// OK reports whether nothing mismatched.
func (r VerifyReport) OK() bool { return len(r.Mismatches) == 0 }

// Verify reads every lookup (Rounds times, with arguments drawn from w by
// r) through cached and through direct and compares the answers as JSON.
// A differing pair is read again (both sides) every Retry until it agrees
// or a cached read that began at least the staleness the cache reported
// for it (VerifyConfig.Staleness; Settle without one) after PostgreSQL's
// first answer returned still differs once Settle has passed since the
// first read: the cached answer agrees when it
// equals any answer PostgreSQL gave since the first read (under writes
// the two reads never happen at the same instant, so a cached answer a
// moment behind is right, but not more behind than the cache says). One
// that never agrees is a Mismatch, kept with the last answers of both.
// This is the in-flight check; Checkpoint compares exactly, with writes
// stopped. direct nil means cached with
// readcache.ViaPostgres on each read. A read that fails is an error: the
// comparison cannot be made.
func Verify(ctx context.Context, cached, direct *gorm.DB, lookups []Lookup, w *World, r *rand.Rand, cfg VerifyConfig) (VerifyReport, error) {
	if cfg.Settle <= 0 {
		cfg.Settle = DefaultSettle
	}
	if cfg.Retry <= 0 {
		cfg.Retry = 20 * time.Millisecond
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 1
	}
	if cfg.Stats == nil || cfg.Staleness == nil {
		if sdb, err := cached.DB(); err == nil {
			if c := stdlib.CacheOf(sdb); c != nil {
				if cfg.Stats == nil {
					cfg.Stats = c.Stats
				}
				if cfg.Staleness == nil {
					cfg.Staleness = c.Staleness
				}
			}
		}
	}
	// staleness is the bound the cache reports now, or Settle when it has
	// none (no socket serves: reads go to PostgreSQL).
	staleness := func() time.Duration {
		if cfg.Staleness != nil {
			if d, ok := cfg.Staleness(); ok {
				return d
			}
		}
		return cfg.Settle
	}
	readDirect := func(l Lookup, args []any) (any, error) {
		if direct == nil {
			return l.Run(readcache.ViaPostgres(ctx), cached, args)
		}
		return l.Run(ctx, direct, args)
	}
	var rep VerifyReport
	for _, l := range lookups {
		lr := LookupReport{Name: l.Name, Expect: l.Expect, Routes: map[string]int{}}
		for range cfg.Rounds {
			args := l.Args(r, w)
			var before readcache.Stats
			if cfg.Stats != nil {
				before = cfg.Stats()
			}
			began := time.Now()
			c, err := l.Run(ctx, cached, args)
			if err != nil {
				return rep, fmt.Errorf("verify %s: read through the cache: %w", l.Name, err)
			}
			stale := staleness()
			route := RouteUnobserved
			if cfg.Stats != nil {
				route = routeOf(before, cfg.Stats())
			}
			lr.Routes[route]++
			if why := misrouted(l, args, route, cfg.RefusalCode, &lr); why != "" {
				lr.Misrouted++
				rep.Mismatches = append(rep.Mismatches, Mismatch{Lookup: l.Name, Args: args, Kind: "route", Cached: c, Detail: why})
			}
			d, err := readDirect(l, args)
			if err != nil {
				return rep, fmt.Errorf("verify %s: read PostgreSQL: %w", l.Name, err)
			}
			lr.Compared++
			rep.Compared++
			cj, dj := canon(c), canon(d)
			if bytes.Equal(cj, dj) {
				lr.AgreedAtOnce++
			} else {
				// PostgreSQL's answers seen since the first read: a cached
				// answer equal to any of them was true within the settle
				// time.
				seen := map[string]bool{string(dj): true}
				agreed, proven := false, false
				// Every change PostgreSQL's first answer shows committed
				// before that read returned (firstEnd). A cached read
				// that began at least its own bound after firstEnd must
				// hold them all, so it differing from every answer
				// PostgreSQL gave proves the cache staler than it said.
				// Earlier re-reads prove nothing: under load one pair of
				// reads can take seconds, and a wall-clock limit from
				// the first read (Settle alone, as before) declared
				// answers stale that were read before their bound had
				// passed (docs/benchmarks.md, "Demo: hit ratio").
				// Settle since the first read stays a minimum wait: under
				// writes a later pair may still agree.
				firstEnd, limit := time.Now(), began.Add(cfg.Settle)
				reads, lastAt, lastStale := 0, began, stale
				for !agreed && (!proven || time.Now().Before(limit)) {
					select {
					case <-ctx.Done():
						return rep, ctx.Err()
					case <-time.After(cfg.Retry):
					}
					at := time.Now()
					// The bound the read was served with lies between
					// the ones reported before and after it (a lag frame
					// may arrive meanwhile): the larger is kept.
					sb := staleness()
					if c, err = l.Run(ctx, cached, args); err != nil {
						return rep, fmt.Errorf("verify %s: read through the cache: %w", l.Name, err)
					}
					s := max(sb, staleness())
					stale = max(stale, s)
					if d, err = readDirect(l, args); err != nil {
						return rep, fmt.Errorf("verify %s: read PostgreSQL: %w", l.Name, err)
					}
					reads++
					cj, dj = canon(c), canon(d)
					seen[string(dj)] = true
					agreed = seen[string(cj)]
					proven = !agreed && !at.Add(-s).Before(firstEnd)
					lastAt, lastStale = at, s
				}
				if agreed {
					lr.AgreedAfterSettle++
				} else {
					lr.Mismatched++
					rep.Mismatches = append(rep.Mismatches, Mismatch{Lookup: l.Name, Args: args, Kind: "answer", Cached: c, Direct: d,
						Detail: fmt.Sprintf("the cached answer differed from every answer PostgreSQL gave for %v (%d re-reads; PostgreSQL's first answer returned %v after the first read, the last cached read began %v after that, past the staleness it was served with, %v; at most %v over the reads): %s",
							time.Since(began).Round(time.Millisecond), reads, firstEnd.Sub(began).Round(time.Millisecond),
							lastAt.Sub(firstEnd).Round(time.Millisecond), lastStale.Round(time.Millisecond), stale.Round(time.Millisecond), Diff(cj, dj))})
				}
			}
			if l.Empty && (!isEmpty(cj) || !isEmpty(dj)) {
				rep.Mismatches = append(rep.Mismatches, Mismatch{Lookup: l.Name, Args: args, Kind: "empty", Cached: c, Direct: d,
					Detail: "a lookup that must stay empty returned rows"})
			}
		}
		rep.Lookups = append(rep.Lookups, lr)
	}
	return rep, nil
}

// misrouted says how a read routed route went against l's expectation,
// or "" when it did not, counting its refusal code in lr.
func misrouted(l Lookup, args []any, route string, codeOf func(string) string, lr *LookupReport) string {
	switch {
	case route == RouteCache && l.Expect == Refused:
		return fmt.Sprintf("expected refused (%s), served from the cache", l.Code)
	case route != readcache.ReasonRefused.String():
		return ""
	case codeOf == nil:
		if l.Expect == Cached {
			return "expected cached, refused by the engine"
		}
		return ""
	}
	sql, err := SQLOf(l, args)
	if err != nil {
		return err.Error()
	}
	code := codeOf(sql)
	if lr.Refusals == nil {
		lr.Refusals = map[string]int{}
	}
	lr.Refusals[code]++
	switch {
	case l.Expect == Cached && code == "":
		return "expected cached, refused by the engine (no code recorded)"
	case l.Expect == Cached && !CapacityCodes[code]:
		return fmt.Sprintf("expected cached, refused by the engine: %s", code)
	case l.Expect == Refused && code != l.Code && !CapacityCodes[code]:
		return fmt.Sprintf("expected refused with %s, refused with %q", l.Code, code)
	}
	return ""
}

// canon is the JSON of an answer: rows come ordered from the lookups, so
// equal answers have equal bytes.
func canon(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(fmt.Sprintf("unmarshalable %T: %v", v, err))
	}
	return b
}

func isEmpty(j []byte) bool {
	s := string(j)
	return s == "[]" || s == "null" || s == "0"
}

// routeOf names the route of the one read between two snapshots of the
// read cache's counters.
func routeOf(before, after readcache.Stats) string {
	moved, route := 0, RouteUnobserved
	if n := int((after.Hits - before.Hits) + (after.Misses - before.Misses)); n > 0 {
		moved, route = moved+n, RouteCache
	}
	for reason, n := range after.Postgres {
		if d := int(n - before.Postgres[reason]); d > 0 {
			moved, route = moved+d, reason
		}
	}
	if moved != 1 {
		return RouteUnobserved
	}
	return route
}

// Diff says where two JSON answers first differ: the first row of two
// arrays that differs (by index), their lengths, or both texts when they
// are not arrays.
func Diff(a, b []byte) string {
	var ra, rb []json.RawMessage
	if json.Unmarshal(a, &ra) != nil || json.Unmarshal(b, &rb) != nil {
		return fmt.Sprintf("%.300s against %.300s", a, b)
	}
	for i := 0; i < len(ra) && i < len(rb); i++ {
		if !bytes.Equal(ra[i], rb[i]) {
			return fmt.Sprintf("row %d: %.300s against %.300s (%d rows against %d)", i, ra[i], rb[i], len(ra), len(rb))
		}
	}
	return fmt.Sprintf("%d rows against %d", len(ra), len(rb))
}
