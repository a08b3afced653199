package main

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freshetdb/freshet/ticketdesk"
)

// demoLoad is the work running on a demoStack: the writer, the readers,
// and, when started, the verifier loop and the lag probe.
type demoLoad struct {
	st      *demoStack
	cfg     *demoConfig
	lookups []ticketdesk.Lookup // the desk's, then the stack's extra ones
	active  atomic.Int64        // readers and the verifier use lookups[:active]
	writer  *ticketdesk.Writer  // nil when --rate is 0

	reads    []lookupCounter // by lookup, same order as lookups
	keys     [][][]any       // each lookup's working set of arguments
	verifier verifierState
	probe    *latencies // commit-to-cache samples, nil until StartProbe

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	failed chan error // the writer's fatal error
}

// lookupCounter counts one lookup's reads by the readers.
type lookupCounter struct {
	n, errs atomic.Int64
	lastErr atomic.Pointer[string]
}

// startLoad starts the writer (at cfg.Rate) and cfg.Readers readers.
func (st *demoStack) startLoad(ctx context.Context, cfg *demoConfig) (*demoLoad, error) {
	ld := &demoLoad{st: st, cfg: cfg, lookups: append(ticketdesk.Lookups(), st.extra...), failed: make(chan error, 1)}
	ld.verifier.routes = map[string]int64{}
	ld.active.Store(int64(len(ld.lookups)))
	if !st.extraOn {
		ld.active.Store(int64(len(ld.lookups) - len(st.extra)))
	}
	ld.reads = make([]lookupCounter, len(ld.lookups))
	// A backend reads some keys again and again: each lookup gets a
	// working set of argument draws that the readers and the verifier
	// pick from, so the cached entries they read are the long-lived ones
	// the stream keeps fresh (not only first answers).
	// With a hot set, the working set draws its ticket ids from it.
	kr := rand.New(rand.NewSource(int64(cfg.Seed) + 3))
	kw := st.world
	if cfg.Hot > 0 && cfg.Hot < kw.MaxTicketID {
		hot := *st.world
		hot.MaxTicketID = cfg.Hot
		kw = &hot
	}
	ld.keys = make([][][]any, len(ld.lookups))
	for i, l := range ld.lookups {
		for range max(1, cfg.Keys) {
			ld.keys[i] = append(ld.keys[i], l.Args(kr, kw))
		}
	}
	ld.ctx, ld.cancel = context.WithCancel(ctx)
	if cfg.Rate > 0 {
		mix, _ := parseMix(cfg.Mix)
		w := ticketdesk.NewWriter(st.directSQL, st.world, writerConfig(cfg, mix))
		ld.writer = w
		ld.go_(func(ctx context.Context) {
			if err := w.Run(ctx); err != nil && ctx.Err() == nil {
				select {
				case ld.failed <- fmt.Errorf("writer: %w", err):
				default:
				}
			}
		})
	}
	for i := range cfg.Readers {
		r := rand.New(rand.NewSource(int64(cfg.Seed) + 1000 + int64(i)))
		var every time.Duration
		if cfg.ReadRate > 0 {
			every = time.Duration(float64(cfg.Readers) / cfg.ReadRate * float64(time.Second))
		}
		ld.go_(func(ctx context.Context) { ld.read(ctx, r, every) })
	}
	return ld, nil
}

// withLoad opens the stack, starts the load, runs f, and undoes it all.
// Ctrl-C while the stack opens is a clean exit.
func (m *Main) withLoad(ctx context.Context, cfg *demoConfig, f func(st *demoStack, ld *demoLoad) error) error {
	st, err := m.openStack(ctx, cfg)
	if err != nil {
		return quiet(ctx, err)
	}
	defer st.Close()
	ld, err := st.startLoad(ctx, cfg)
	if err != nil {
		return quiet(ctx, err)
	}
	defer ld.Stop()
	return f(st, ld)
}

// go_ runs f on a tracked goroutine that ends with the load.
func (ld *demoLoad) go_(f func(ctx context.Context)) {
	ld.wg.Add(1)
	go func() {
		defer ld.wg.Done()
		f(ld.ctx)
	}()
}

// read is one reader: a random lookup with random arguments, through the
// cache, again and again.
func (ld *demoLoad) read(ctx context.Context, r *rand.Rand, every time.Duration) {
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for ctx.Err() == nil {
		i := r.Intn(int(ld.active.Load()))
		l := ld.lookups[i]
		_, err := l.Run(ctx, ld.st.cached, ld.argsOf(i, r))
		c := &ld.reads[i]
		c.n.Add(1)
		if err != nil && ctx.Err() == nil {
			c.errs.Add(1)
			msg := err.Error()
			c.lastErr.Store(&msg)
		}
		if tick != nil {
			select {
			case <-ctx.Done():
			case <-tick:
			}
		}
	}
}

// verifierState accumulates the verifier's passes.
type verifierState struct {
	mu         sync.Mutex
	passes     int64
	compared   int64
	retried    int64            // comparisons that agreed only after a re-read
	routes     map[string]int64 // how the verifier's cached reads were routed
	mismatches []ticketdesk.Mismatch
	lastErr    string
	// Exact checkpoints (CheckpointOnce): how many, the answers they
	// compared, their mismatches (also in mismatches), the last one's
	// WAL position and wait.
	checkpoints    int64
	cpCompared     int64
	cpMismatches   int
	cpLSN          string
	cpWait, cpMost time.Duration
}

// StartVerifier runs a verifier pass every `every`, and an exact
// checkpoint instead of a pass every `checkpoint` (0: none), until the load
// stops.
func (ld *demoLoad) StartVerifier(every, settle, checkpoint time.Duration) {
	r := rand.New(rand.NewSource(int64(ld.cfg.Seed) + 7))
	ld.go_(func(ctx context.Context) {
		last := time.Now()
		for ctx.Err() == nil {
			if checkpoint > 0 && time.Since(last) >= checkpoint {
				ld.CheckpointOnce(ctx, r)
				last = time.Now()
			} else {
				ld.VerifyOnce(ctx, r, settle)
			}
			select {
			case <-ctx.Done():
			case <-time.After(every):
			}
		}
	})
}

// VerifyOnce runs one verifier pass over every lookup in use and returns
// its report.
func (ld *demoLoad) VerifyOnce(ctx context.Context, r *rand.Rand, settle time.Duration) (ticketdesk.VerifyReport, error) {
	var rep ticketdesk.VerifyReport
	var err error
	for try := 0; ; try++ {
		rep, err = ticketdesk.Verify(ctx, ld.st.verifyDB, ld.st.direct, ld.Active(), ld.st.world, r, ld.st.verifyConfig(settle))
		// After a schema change, each pooled connection's prepared
		// statement of a query fails once ("cached plan must not change
		// result type"); pgx then forgets it. No answer was read, so
		// there is nothing to compare: the pass runs again.
		if err == nil || try == 200 || !strings.Contains(err.Error(), "SQLSTATE 0A000") {
			break
		}
	}
	v := &ld.verifier
	v.mu.Lock()
	defer v.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			v.lastErr = err.Error()
		}
		return rep, err
	}
	v.passes++
	v.compared += int64(rep.Compared)
	for _, lr := range rep.Lookups {
		v.retried += int64(lr.AgreedAfterSettle)
		for route, n := range lr.Routes {
			v.routes[route] += int64(n)
		}
	}
	v.mismatches = append(v.mismatches, rep.Mismatches...)
	return rep, nil
}

// CheckpointOnce pauses the writer, compares every lookup in use exactly
// once the verifier's cache has passed PostgreSQL's WAL position
// (ticketdesk.Checkpoint), resumes the writer, and returns the report.
func (ld *demoLoad) CheckpointOnce(ctx context.Context, r *rand.Rand) (ticketdesk.CheckpointReport, error) {
	if ld.writer != nil {
		ld.writer.Pause()
		defer ld.writer.Resume()
	}
	var rep ticketdesk.CheckpointReport
	var err error
	for try := 0; ; try++ {
		rep, err = ticketdesk.Checkpoint(ctx, ld.st.verifyDB, ld.st.direct, ld.Active(), ld.st.world, r, ticketdesk.CheckpointConfig{})
		// As in VerifyOnce: after a schema change a pooled connection's
		// prepared statement fails once; nothing was compared.
		if err == nil || try == 200 || !strings.Contains(err.Error(), "SQLSTATE 0A000") {
			break
		}
	}
	v := &ld.verifier
	v.mu.Lock()
	defer v.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			v.lastErr = err.Error()
		}
		return rep, err
	}
	v.checkpoints++
	v.cpCompared += int64(rep.Compared)
	v.cpMismatches += len(rep.Mismatches)
	v.cpLSN, v.cpWait, v.cpMost = rep.LSN, rep.Waited, max(v.cpMost, rep.Waited)
	v.mismatches = append(v.mismatches, rep.Mismatches...)
	return rep, nil
}

// StartProbe measures commit-to-cache latency every `every` until the
// load stops, keeping the last 200 samples.
func (ld *demoLoad) StartProbe(every time.Duration) error {
	p, err := newProber(ld.st, 1)
	if err != nil {
		return err
	}
	ld.probe = newLatencies(200)
	ld.go_(func(ctx context.Context) {
		defer p.Close()
		first := true
		for ctx.Err() == nil {
			d, err := p.Sample(ctx, 10*time.Second)
			if err == nil && !first {
				ld.probe.Add(d)
			}
			first = first && err != nil
			select {
			case <-ctx.Done():
			case <-time.After(every):
			}
		}
	})
	return nil
}

// argsOf draws lookup i's arguments: from its working set, or fresh when
// --keys is 0.
func (ld *demoLoad) argsOf(i int, r *rand.Rand) []any {
	if ld.cfg.Keys == 0 {
		return ld.lookups[i].Args(r, ld.st.world)
	}
	ks := ld.keys[i]
	return ks[r.Intn(len(ks))]
}

// WaitWarm waits until the readers' cache has made no new subscription
// (no first answer) for quiet, or until limit.
func (ld *demoLoad) WaitWarm(ctx context.Context, quiet, limit time.Duration) {
	end := time.Now().Add(limit)
	last, since := ld.st.cache.Stats().Misses, time.Now()
	for time.Since(since) < quiet && time.Now().Before(end) && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
		if n := ld.st.cache.Stats().Misses; n != last {
			last, since = n, time.Now()
		}
	}
}

// readsTotal is how many reads the readers made.
func (ld *demoLoad) readsTotal() (n int64) {
	for i := range ld.reads {
		n += ld.reads[i].n.Load()
	}
	return n
}

// Active returns the lookups in use, drawing their arguments as argsOf
// does.
func (ld *demoLoad) Active() []ticketdesk.Lookup {
	out := slices.Clone(ld.lookups[:ld.active.Load()])
	for i := range out {
		out[i].Args = func(r *rand.Rand, _ *ticketdesk.World) []any { return ld.argsOf(i, r) }
	}
	return out
}

// Err returns a channel that carries the writer's fatal error.
func (ld *demoLoad) Err() <-chan error { return ld.failed }

// Stop stops everything the load runs and waits for it.
func (ld *demoLoad) Stop() {
	ld.cancel()
	ld.wg.Wait()
}

// writerStats returns the writer's counters.
func (ld *demoLoad) writerStats() ticketdesk.WriterStats {
	if ld.writer == nil {
		return ticketdesk.WriterStats{}
	}
	return ld.writer.Stats()
}
