package ticketdesk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"

	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/stdlib"
	"gorm.io/gorm"
)

// DefaultCheckpointWait bounds how long Checkpoint waits for the read
// cache to pass PostgreSQL's WAL position.
const DefaultCheckpointWait = 30 * time.Second

// CheckpointConfig configures Checkpoint. The zero value takes the
// defaults.
type CheckpointConfig struct {
	// Position is how far every answer the cached pool returns is exact
	// (readcache.Cache.Position). Default: the read cache of the cached
	// pool's *sql.DB (stdlib.CacheOf).
	Position func() (uint64, bool)
	// Wait bounds the wait for Position to pass the WAL position
	// (default DefaultCheckpointWait).
	Wait time.Duration
	// Rounds is how many argument draws each lookup gets (default 1).
	Rounds int
}

// CheckpointReport is what one Checkpoint found.
type CheckpointReport struct {
	// LSN is PostgreSQL's WAL position when the checkpoint began (writes
	// stopped), and Waited how long the cache took to pass it.
	LSN    string        `json:"lsn"`
	Waited time.Duration `json:"waited_ns"`
	// Compared answers, each read once through the cache and once from
	// PostgreSQL; Mismatches those that differed (Kind "checkpoint").
	Compared   int        `json:"compared"`
	Mismatches []Mismatch `json:"mismatches,omitempty"`
	// AtClock counts answers of clocked lookups (Lookup.Clock) that
	// differed from PostgreSQL's read and equalled PostgreSQL's answer at
	// a clock the cache's answer may be exact at (see Checkpoint).
	AtClock int `json:"at_clock"`
}

// heartbeatStatementTimeout is the statement_timeout of the connection
// pgwal writes heartbeats on: a heartbeat's now() is at most this much
// before any WAL position its statement writes after.
const heartbeatStatementTimeout = 5 * time.Second

// ErrNotPassed is wrapped by Checkpoint's error when the cache did not
// pass the WAL position within CheckpointConfig.Wait.
var ErrNotPassed = errors.New("the read cache did not pass PostgreSQL's WAL position")

// Checkpoint compares every lookup exactly. The caller has stopped every
// writer of the desk (Writer.Pause). Checkpoint reads PostgreSQL's WAL
// position, waits until the cached pool's read cache has passed it (a lag
// frame names a heartbeat after it on every socket that serves reads:
// every change committed before it is then in every cached answer), and
// then reads each lookup once through cached and once through direct
// (readcache.ViaPostgres on cached when direct is nil): with nothing
// written since the position was read, the two must be equal byte for
// byte, with no settling and no retry. A lookup the engine refuses is read
// from PostgreSQL both times, and agrees trivially.
func Checkpoint(ctx context.Context, cached, direct *gorm.DB, lookups []Lookup, w *World, r *rand.Rand, cfg CheckpointConfig) (CheckpointReport, error) {
	var rep CheckpointReport
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultCheckpointWait
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 1
	}
	if cfg.Position == nil {
		sdb, err := cached.DB()
		if err != nil {
			return rep, fmt.Errorf("checkpoint: %w", err)
		}
		c := stdlib.CacheOf(sdb)
		if c == nil {
			return rep, errors.New("checkpoint: the cached pool has no read cache: give CheckpointConfig.Position")
		}
		cfg.Position = c.Position
	}
	readDirect := func(l Lookup, args []any) (any, error) {
		if direct == nil {
			return l.Run(readcache.ViaPostgres(ctx), cached, args)
		}
		return l.Run(ctx, direct, args)
	}
	pg := direct
	if pg == nil {
		pg = cached
	}
	var lsn string
	var target uint64
	var began time.Time
	row := pg.WithContext(readcache.ViaPostgres(ctx)).Raw("SELECT pg_current_wal_lsn()::text, (pg_current_wal_lsn() - '0/0')::text, now()").Row()
	var num string
	if err := row.Scan(&lsn, &num, &began); err != nil {
		return rep, fmt.Errorf("checkpoint: read the WAL position: %w", err)
	}
	if _, err := fmt.Sscan(num, &target); err != nil {
		return rep, fmt.Errorf("checkpoint: WAL position %q: %w", num, err)
	}
	rep.LSN = lsn
	if _, ok := cfg.Position(); !ok && len(lookups) > 0 {
		// A pool that has not read through its cache yet has not checked
		// the engine's identity, so its sockets are not up: one read
		// brings them up (its answer is not compared).
		l := lookups[0]
		if _, err := l.Run(ctx, cached, l.Args(r, w)); err != nil {
			return rep, fmt.Errorf("checkpoint %s: read through the cache: %w", l.Name, err)
		}
	}
	start := time.Now()
	for {
		if p, ok := cfg.Position(); ok && p >= target {
			break
		}
		if time.Since(start) > cfg.Wait {
			p, ok := cfg.Position()
			return rep, fmt.Errorf("checkpoint: %w %s within %v (cache position %X/%X, known %v): is the engine following the stream?",
				ErrNotPassed, lsn, cfg.Wait, p>>32, uint32(p), ok)
		}
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	rep.Waited = time.Since(start)
	for _, l := range lookups {
		for range cfg.Rounds {
			args := l.Args(r, w)
			c, err := l.Run(ctx, cached, args)
			if err != nil {
				return rep, fmt.Errorf("checkpoint %s: read through the cache: %w", l.Name, err)
			}
			d, err := readDirect(l, args)
			if err != nil {
				return rep, fmt.Errorf("checkpoint %s: read PostgreSQL: %w", l.Name, err)
			}
			rep.Compared++
			cj, dj := canon(c), canon(d)
			if !bytes.Equal(cj, dj) && l.Clock != nil {
				ok, err := atSomeClock(ctx, pg, l, args, cj, began.Add(-heartbeatStatementTimeout))
				if err != nil {
					return rep, fmt.Errorf("checkpoint %s: %w", l.Name, err)
				}
				if ok {
					rep.AtClock++
					continue
				}
			}
			if !bytes.Equal(cj, dj) {
				rep.Mismatches = append(rep.Mismatches, Mismatch{Lookup: l.Name, Args: args, Kind: "checkpoint", Cached: c, Direct: d,
					Detail: fmt.Sprintf("with writes stopped and the cache past %s, the cached answer differs from PostgreSQL's: %s", lsn, Diff(cj, dj))})
			}
		}
	}
	return rep, nil
}

// atSomeClock reports whether a clocked lookup's cached answer (cj)
// equals PostgreSQL's answer at some clock in [lo, now()]. With writes
// stopped and the cache past the checkpoint's WAL position, every cached
// answer is exact at the database clock of a heartbeat written after that
// position: that heartbeat's now() is no earlier than lo (the
// checkpoint's now() less the heartbeat statement's timeout) and no later
// than PostgreSQL's now() after the cached read. Between the clocks where
// the answer can change (LookupClock.Changes) it is constant, so asking
// PostgreSQL at lo and at each of those is asking at every clock.
func atSomeClock(ctx context.Context, pg *gorm.DB, l Lookup, args []any, cj []byte, lo time.Time) (bool, error) {
	via := pg.WithContext(readcache.ViaPostgres(ctx))
	var hi time.Time
	if err := via.Raw("SELECT now()").Row().Scan(&hi); err != nil {
		return false, fmt.Errorf("read PostgreSQL's clock: %w", err)
	}
	at, err := l.Clock.Changes(readcache.ViaPostgres(ctx), pg, args, lo, hi)
	if err != nil {
		return false, fmt.Errorf("list the clocks its answer changes at: %w", err)
	}
	for _, t := range append([]time.Time{lo}, at...) {
		d, err := l.Clock.RunAt(readcache.ViaPostgres(ctx), pg, args, t)
		if err != nil {
			return false, fmt.Errorf("read PostgreSQL at %v: %w", t, err)
		}
		if bytes.Equal(canon(d), cj) {
			return true, nil
		}
	}
	return false, nil
}
