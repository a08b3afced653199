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
}

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
	row := pg.WithContext(readcache.ViaPostgres(ctx)).Raw("SELECT pg_current_wal_lsn()::text, (pg_current_wal_lsn() - '0/0')::text").Row()
	var num string
	if err := row.Scan(&lsn, &num); err != nil {
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
			if cj, dj := canon(c), canon(d); !bytes.Equal(cj, dj) {
				rep.Mismatches = append(rep.Mismatches, Mismatch{Lookup: l.Name, Args: args, Kind: "checkpoint", Cached: c, Direct: d,
					Detail: fmt.Sprintf("with writes stopped and the cache past %s, the cached answer differs from PostgreSQL's: %s", lsn, Diff(cj, dj))})
			}
		}
	}
	return rep, nil
}
