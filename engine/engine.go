package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Source is a stream of committed transactions and heartbeats in commit
// order: what the engine follows. *pgwal.Reader is one.
type Source interface {
	// Next blocks for the next event: a *change.Txn fragment or a
	// *change.Heartbeat. An error is final.
	Next(ctx context.Context) (change.Event, error)
	// Ack says everything up to and including lsn has been handled.
	Ack(lsn change.LSN)
}

// Beater is a Source that can be asked to move the stream past the
// database's current WAL position soon (*pgwal.Reader writes a heartbeat
// at once). A read lands once the stream has passed the WAL position its
// snapshot was taken at; on a quiet database nothing else would move the
// stream there before the next heartbeat, so the engine calls Beat when a
// read has taken its snapshot. Beat must not block; it is called from the
// read workers. A Source without it leaves reads to the stream's own
// pace (a bus-fed Source: heartbeats at the relay's interval).
type Beater interface {
	Beat()
}

// Sink receives one subscription's outputs, in order: an Accepted (or a
// Refused), then Deltas or Touched, and maybe an Ended. Refused and Ended
// are the last. Send is called from the engine's own goroutine, which owns
// every subscription: it must not block (queue the output, and apply a
// slow-consumer policy of its own).
type Sink interface {
	Send(out Output)
}

// Flusher is a Sink that wants to know where a batch of outputs ends. The
// engine hands outputs to sinks in batches, one for each event it applies
// (a transaction, a landed read, a command), and then calls Flush on every
// sink of the batch that is a Flusher. Every output of one transaction is
// in one batch, so a sink may hold a transaction's outputs and send them
// together on Flush. Flush runs on the engine's goroutine and must not
// block.
type Flusher interface {
	Sink
	Flush()
}

// ReceiptFlusher is a Flusher that wants to know when the stream event
// whose outputs a batch holds reached the engine: the engine calls
// FlushReceived instead of Flush, with the time Source.Next returned the
// event (its last fragment, for a transaction in several), or the zero
// time for a batch no stream event caused (a landed read, a command). The
// s2s server measures from it how long the server itself takes from a
// commit reaching it to the commit's frames being on a socket
// (freshet_s2s_commit_to_write_seconds).
type ReceiptFlusher interface {
	Flusher
	FlushReceived(at time.Time)
}

// Default settings of Config.
const (
	DefaultReadTimeout          = 30 * time.Second
	DefaultReadConcurrency      = 4
	DefaultCatalogCheckInterval = 5 * time.Second
)

// Config configures an Engine. The zero value of a setting takes its
// default.
type Config struct {
	// Source is the change stream to follow (required).
	Source Source
	// ReadDSN is the database hydration reads and catalog lookups go to.
	// It may be a replica or a pooler (PgBouncer in transaction mode):
	// nothing relies on session state beyond one transaction. Required
	// unless ReadPool is given.
	ReadDSN string
	// ReadPool, when set, is used instead of opening a pool on ReadDSN
	// (the engine then does not close it).
	ReadPool *pgxpool.Pool
	// ReadTimeout bounds one read: connection, snapshot and every row.
	ReadTimeout time.Duration
	// ReadConcurrency is how many reads run at once.
	ReadConcurrency int
	// RowLimit refuses a subscription whose read returns more rows (not
	// retryable). 0 takes DefaultReadRowLimit; negative lifts it.
	RowLimit int
	// WindowMargin is the rows held past OFFSET+LIMIT (CoreOptions).
	WindowMargin int
	// Query are the compile options: search path and complexity limits.
	// Its Catalog, when nil, is a query.PGCatalog reading through the read
	// pool. A catalog with an Invalidate(schema, table) method is told
	// when the stream shows a table's new shape.
	Query query.Options
	// Types resolves non-built-in type OIDs (pgwal.Reader.Types()). May
	// be nil.
	Types change.TypeResolver
	// CatalogCheckInterval is how often the catalog is asked whether the
	// tables subscriptions read still exist with the shape they were
	// compiled against (one query on the read pool for all of them). It
	// is the only way to see a DROP TABLE, which the change stream does
	// not report, and a column change no write has followed yet. A read
	// that finds a table gone or altered also starts a check at once.
	// Negative turns the periodic check off.
	CatalogCheckInterval time.Duration
	// Publication names the publication the change stream carries. When
	// set, a query on a table it does not carry is refused
	// (query.CodeNotPublished, retryable: its answer would never be
	// updated), the tables it carries are read again from
	// pg_publication_tables at Open and on every catalog check, and the
	// subscriptions of a table it no longer carries end with that code.
	// Empty checks nothing (tables of system schemas are refused always).
	Publication string
	// Logger; nil is slog.Default().
	Logger *slog.Logger
}

// ErrClosed is returned by an Engine that has been closed or whose stream
// failed (Err says why).
var ErrClosed = errors.New("engine closed")

// Engine keeps subscriptions' results fresh: one goroutine owns the Core
// and feeds it the change stream; hydration reads run on a pool of
// workers; compiling happens on the caller's goroutine.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	core    *Core
	pool    *pgxpool.Pool
	ownPool bool
	catalog query.Catalog
	pub     *query.PGPublication // nil without Config.Publication
	reader  *reader
	applied *appliedLog

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	events  chan received
	cmds    chan command
	results chan readResult
	queue   *readQueue
	nextSub atomic.Uint64
	pos     atomic.Uint64 // the core's position, for Position

	// checkNow asks the watcher for a catalog check (it holds a token
	// while one is asked for); checkMu serializes checks.
	checkNow chan struct{}
	checkMu  sync.Mutex

	done    chan struct{} // closed when the core goroutine ends
	errMu   sync.Mutex
	err     error
	closing sync.Once

	// Owned by the core goroutine.
	sinks    map[SubID]Sink
	flushing []Flusher  // sinks of the batch being handed out
	received time.Time  // when the event being applied came from the Source (zero: no event)
	acked    change.LSN // the last position acknowledged to the source
	// recompiling counts the recompile goroutines running.
	recompiling int
	// fresh holds, until it is accepted, what each subscription was
	// compiled from: one refused because its plan met a table's new shape
	// is compiled again (recompile).
	fresh map[SubID]*freshSub
	// The core's options, for a new core after a panic (engine_recover.go);
	// gen counts the cores, so reads asked by an old one are dropped;
	// quarantined are the plan keys whose work panicked (quarantine in
	// the order they came, to forget the oldest).
	coreOpts    CoreOptions
	gen         uint64
	resets      int64
	quarantined map[query.PlanKey]bool
	quarantine  []query.PlanKey
}

// freshSub is a subscription not accepted yet: its query, and how often it
// was compiled again.
type freshSub struct {
	sql     string
	binds   []query.Bind
	mode    Mode
	plan    *query.Plan
	retries int
}

// maxRecompiles bounds how often one subscription is compiled again
// because its plan met a newer shape of a table (each one follows DDL
// committed since the last compile).
const maxRecompiles = 3

// command is a request run on the core goroutine.
type command struct {
	fn    func()
	done  chan struct{}
	blame query.PlanKey // the plan key the command is about, if any (step)
}

// readResult is a finished read, handed back to the core goroutine.
type readResult struct {
	gen uint64        // of the core that asked for it
	key query.PlanKey // its plan's key
	id  ReadID
	res ReadResult
}

// invalidator is what a catalog needs to be told about shape changes.
type invalidator interface {
	Invalidate(schema, name string)
}

// Open starts an engine following cfg.Source. It connects the read pool
// (when not given one) and checks it can reach the database.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.Source == nil {
		return nil, errors.New("open engine: Config.Source is nil: give the change stream to follow (a *pgwal.Reader)")
	}
	if cfg.ReadPool == nil && cfg.ReadDSN == "" {
		return nil, errors.New("open engine: Config.ReadDSN is empty: give the database to hydrate from, like postgres://user@host:5432/db")
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.ReadConcurrency <= 0 {
		cfg.ReadConcurrency = DefaultReadConcurrency
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CatalogCheckInterval == 0 {
		cfg.CatalogCheckInterval = DefaultCatalogCheckInterval
	}
	e := &Engine{checkNow: make(chan struct{}, 1), cfg: cfg, log: cfg.Logger, pool: cfg.ReadPool, applied: newAppliedLog(),
		events: make(chan received, 64), cmds: make(chan command), results: make(chan readResult),
		queue: newReadQueue(), done: make(chan struct{}), sinks: make(map[SubID]Sink), fresh: make(map[SubID]*freshSub),
		quarantined: make(map[query.PlanKey]bool)}
	if e.pool == nil {
		pcfg, err := pgxpool.ParseConfig(cfg.ReadDSN)
		if err != nil {
			return nil, fmt.Errorf("open engine: parse ReadDSN: %w", err)
		}
		// Reads plus room for catalog lookups, so compiling is not
		// queued behind long reads.
		pcfg.MaxConns = int32(cfg.ReadConcurrency + 2)
		// The simple protocol prepares nothing on the server, so catalog
		// queries work through a transaction-mode pooler.
		pcfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		if pcfg.ConnConfig.RuntimeParams["application_name"] == "" {
			pcfg.ConnConfig.RuntimeParams["application_name"] = "freshet-read"
		}
		if e.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
			return nil, fmt.Errorf("open engine: read pool: %w", err)
		}
		e.ownPool = true
		if err := e.pool.Ping(ctx); err != nil {
			e.pool.Close()
			return nil, fmt.Errorf("open engine: connect to the read database: %w", err)
		}
	}
	e.catalog = cfg.Query.Catalog
	if e.catalog == nil {
		e.catalog = query.NewPGCatalog(e.pool)
	}
	e.cfg.Query.Catalog = e.catalog
	if cfg.Publication != "" {
		e.pub = query.NewPGPublication(e.pool, cfg.Publication)
		if _, err := e.pub.Load(ctx); err != nil {
			if e.ownPool {
				e.pool.Close()
			}
			return nil, fmt.Errorf("open engine: %w", err)
		}
		e.cfg.Query.Publication = e.pub
	}
	e.coreOpts = CoreOptions{WindowMargin: cfg.WindowMargin, ReadRowLimit: cfg.RowLimit, Types: cfg.Types}
	e.core = NewCore(e.coreOpts)
	e.reader = &reader{pool: e.pool, types: cfg.Types, log: e.applied, timeout: cfg.ReadTimeout}
	if b, ok := cfg.Source.(Beater); ok {
		e.reader.beat = b.Beat
	}

	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.wg.Add(3 + cfg.ReadConcurrency)
	go e.pump()
	go e.run()
	go e.watch()
	for range cfg.ReadConcurrency {
		go e.work()
	}
	return e, nil
}

// Subscribe compiles sql with its binds, checks the plan's tables against
// PostgreSQL as it is now (engine_current.go: one catalog query, so a
// plan compiled from a cached shape older than the table never joins a
// view of the old table), and registers it. It returns the
// subscription's id, or a refusal when the query is not supported (an
// answer, not an error: read PostgreSQL instead), or an error when it could
// not decide (catalog I/O, ctx, a closed engine). The subscription's
// outputs, starting with its Accepted or Refused, go to sink.
func (e *Engine) Subscribe(ctx context.Context, sql string, binds []query.Bind, mode Mode, sink Sink) (SubID, *query.Refusal, error) {
	if sink == nil {
		return 0, nil, errors.New("subscribe: sink is nil")
	}
	plan, refusal, err := e.compileCurrent(ctx, sql, binds)
	if err != nil {
		return 0, nil, fmt.Errorf("subscribe: %w", err)
	}
	if refusal != nil {
		return 0, refusal, nil
	}
	id := SubID(e.nextSub.Add(1))
	err = e.doFor(ctx, plan.Key, func() {
		if e.refuseQuarantined(id, plan, sink) {
			return
		}
		e.sinks[id] = sink
		e.fresh[id] = &freshSub{sql: sql, binds: binds, mode: mode, plan: plan}
		e.core.Subscribe(id, plan, mode)
	})
	if err != nil {
		return 0, nil, fmt.Errorf("subscribe: %w", err)
	}
	return id, nil, nil
}

// Unsubscribe ends a subscription. Once it returns, its sink receives
// nothing more. Unknown ids are ignored.
func (e *Engine) Unsubscribe(ctx context.Context, id SubID) error {
	return e.do(ctx, func() {
		delete(e.sinks, id)
		delete(e.fresh, id)
		e.core.Unsubscribe(id)
	})
}

// EngineStats describe an engine.
type EngineStats struct {
	Stats
	Position change.LSN // the commit LSN (or heartbeat position) last applied
	Queued   int        // reads waiting for a worker
	// CoreResets counts the core's panics, each of which ended every
	// subscription and started an empty core (engine_recover.go).
	CoreResets int64
	// Recompiling counts subscriptions being compiled again after their
	// first read met a table's new shape (their answer is still to come).
	Recompiling int
}

// Stats returns the core's counters and the engine's position.
func (e *Engine) Stats(ctx context.Context) (EngineStats, error) {
	var s EngineStats
	err := e.do(ctx, func() {
		s = EngineStats{Stats: e.core.Stats(), Position: e.core.Position(), Queued: e.queue.len(), CoreResets: e.resets, Recompiling: e.recompiling}
	})
	return s, err
}

// Position returns the position the engine has passed: every output of
// every transaction up to it has been handed to the sinks, and every
// subscriber's result is exact at it (Core.Passed).
func (e *Engine) Position() change.LSN { return change.LSN(e.pos.Load()) }

// Done is closed when the engine has stopped (Close, or its stream failed).
func (e *Engine) Done() <-chan struct{} { return e.done }

// Err returns why the engine stopped, nil while it runs or after Close.
func (e *Engine) Err() error {
	e.errMu.Lock()
	defer e.errMu.Unlock()
	return e.err
}

// Close stops the engine: every live subscription is ended (retryable),
// reads in flight are abandoned, and the read pool is closed when the
// engine opened it. The Source is the caller's to close.
func (e *Engine) Close() error {
	e.closing.Do(func() {
		e.cancel()
		e.wg.Wait()
		if e.ownPool {
			e.pool.Close()
		}
	})
	return nil
}

// do runs fn on the core goroutine and waits for it.
func (e *Engine) do(ctx context.Context, fn func()) error { return e.doFor(ctx, query.PlanKey{}, fn) }

// doFor is do for a command about the plan key blame (step).
func (e *Engine) doFor(ctx context.Context, blame query.PlanKey, fn func()) error {
	c := command{fn: fn, done: make(chan struct{}), blame: blame}
	select {
	case e.cmds <- c:
	case <-e.done:
		return e.closedErr()
	case <-ctx.Done():
		return ctx.Err()
	}
	// The core goroutine runs every command it takes before it can end.
	<-c.done
	return nil
}

func (e *Engine) closedErr() error {
	if err := e.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return ErrClosed
}

func (e *Engine) fail(err error) {
	e.errMu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.errMu.Unlock()
	e.cancel()
}

// received is a stream event and when Source.Next returned it.
type received struct {
	ev change.Event
	at time.Time
}

// pump reads the stream into the core goroutine's queue. The queue is
// bounded: a busy core slows the stream down rather than buffering it.
func (e *Engine) pump() {
	defer e.wg.Done()
	for {
		ev, err := e.cfg.Source.Next(e.ctx)
		if err != nil {
			if e.ctx.Err() == nil {
				e.fail(fmt.Errorf("read change stream: %w", err))
			}
			return
		}
		select {
		case e.events <- received{ev: ev, at: time.Now()}:
		case <-e.ctx.Done():
			return
		}
	}
}

// run is the core goroutine: the only one that touches the Core and the
// sinks.
func (e *Engine) run() {
	defer e.wg.Done()
	defer close(e.done)
	for {
		select {
		case ev := <-e.events:
			e.received = ev.at
			e.step("apply", query.PlanKey{}, func() { e.apply(ev.ev) })
			e.received = time.Time{}
		case c := <-e.cmds:
			e.step("command", c.blame, func() {
				defer close(c.done)
				c.fn()
			})
		case r := <-e.results:
			if r.gen != e.gen {
				continue // asked by a core that panicked
			}
			e.step("read", r.key, func() { e.core.ReadDone(r.id, r.res) })
		case <-e.ctx.Done():
			e.endAll()
			return
		}
		// Once the step's outputs are handed out (step flushes).
		e.ack()
	}
}

// apply hands one stream event to the core.
func (e *Engine) apply(ev change.Event) {
	switch ev := ev.(type) {
	case *change.Txn:
		if ev.Fragment == 0 {
			// Recorded before the core sees it: a read the core asks
			// for while applying it must find it in its snapshot (the
			// stricter choice is always safe, see appliedLog).
			e.applied.record(ev.XID)
		}
		for i := range ev.Changes {
			if ch := &ev.Changes[i]; ch.Op == change.OpRelation && ch.Rel != nil {
				if inv, ok := e.catalog.(invalidator); ok {
					inv.Invalidate(ch.Rel.Schema, ch.Rel.Table)
				}
				// A Relation comes after a shape change; the stream does
				// not tell everything (a column dropped and added again
				// under its name looks the same): check the catalog.
				e.askCheck()
			}
		}
		e.core.Apply(ev)
		if ev.Last {
			e.applied.advance(e.core.Position())
		}
	case *change.Heartbeat:
		if !ev.Now.IsZero() {
			// The database's clock at the heartbeat: queries using
			// now() move with it (core_clock.go).
			e.core.Clock(ev.LSN, dbClock(ev.Now))
		} else {
			e.core.Advance(ev.LSN)
		}
		e.applied.advance(e.core.Position())
	}
}

// ack acknowledges to the source, once the outputs of the event just
// handled are handed to the sinks (flush), the position every
// subscriber's result is exact at (Core.Passed): a lag frame, which the
// s2s server sends for a heartbeat once it is acknowledged, then vouches
// for no answer the engine still owes (a window re-reading the rows it
// lost). The engine keeps no state that must survive a restart: a
// restarted engine re-hydrates every subscription from PostgreSQL, so it
// never needs the stream again from before what it has applied;
// acknowledging lets PostgreSQL recycle WAL as soon as possible.
func (e *Engine) ack() {
	p := e.core.Passed()
	if p <= e.acked {
		return
	}
	e.acked = p
	e.pos.Store(uint64(p))
	e.cfg.Source.Ack(p)
}

// flush hands the core's outputs to the sinks and its reads to the
// workers.
func (e *Engine) flush() {
	rd := e.core.Ready()
	for _, out := range rd.Outputs {
		sink := e.sinks[out.Sub]
		if sink == nil {
			continue
		}
		if e.recompile(out) {
			continue
		}
		sink.Send(out)
		if f, ok := sink.(Flusher); ok {
			e.flushing = append(e.flushing, f)
		}
		if out.Kind == OutputRefused || out.Kind == OutputEnded {
			delete(e.sinks, out.Sub)
		}
	}
	for i, f := range e.flushing {
		if rf, ok := f.(ReceiptFlusher); ok {
			rf.FlushReceived(e.received)
		} else {
			f.Flush()
		}
		e.flushing[i] = nil
	}
	e.flushing = e.flushing[:0]
	if len(rd.Reads) > 0 {
		m := e.applied.markNow()
		for _, r := range rd.Reads {
			e.queue.push(queuedRead{req: r, askedAt: m, gen: e.gen})
		}
	}
}

// recompile takes a subscription's Refused for a table's new shape
// (table_dropped, schema_changed) when its plan may have been compiled
// from a catalog that had not seen the DDL yet (a table dropped and made
// again under its name, a column retyped): the subscription is compiled
// again against the catalog read afresh and subscribed under its id, and
// the sink never sees the refusal (unless the new compile is refused too:
// then it does). It reports whether it took out. It runs on the core goroutine.
func (e *Engine) recompile(out Output) bool {
	f := e.fresh[out.Sub]
	switch {
	case f == nil:
		return false
	case out.Kind == OutputAccepted || out.Kind == OutputEnded:
		delete(e.fresh, out.Sub)
		return false
	case out.Kind != OutputRefused:
		return false
	case out.Code != CodeTableDropped && out.Code != CodeSchemaChanged || f.retries >= maxRecompiles:
		delete(e.fresh, out.Sub)
		return false
	}
	f.retries++
	id := out.Sub
	// The goroutine takes a copy: were it to capture the parameter, out
	// would move to the heap on every call, one Output (about 300 bytes)
	// allocated for every output the engine hands out.
	refused := out
	e.recompiling++
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.invalidatePlan(f.plan)
		plan, refusal, err := query.Compile(e.ctx, f.sql, f.binds, e.cfg.Query)
		e.do(e.ctx, func() {
			e.recompiling--
			if e.sinks[id] == nil || e.fresh[id] != f {
				return // unsubscribed meanwhile
			}
			switch {
			case err != nil || refusal != nil:
				// The new shape does not serve the query (a table dropped
				// for good, a column it names gone): the refusal that
				// says what happened stands.
				delete(e.fresh, id)
				e.sinks[id].Send(refused)
				if fl, ok := e.sinks[id].(Flusher); ok {
					fl.Flush()
				}
				delete(e.sinks, id)
			default:
				f.plan = plan
				e.core.Subscribe(id, plan, f.mode)
			}
		})
	}()
	return true
}

// endAll ends every subscription when the engine stops.
func (e *Engine) endAll() {
	reason := "engine closed"
	if err := e.Err(); err != nil {
		reason = "engine stopped: " + err.Error()
	}
	for id, sink := range e.sinks {
		sink.Send(Output{Sub: id, Kind: OutputEnded, LSN: e.core.Position(), Code: CodeEngineStopped, Reason: reason, Retryable: true})
		delete(e.sinks, id)
	}
}

// work runs reads until the engine stops.
func (e *Engine) work() {
	defer e.wg.Done()
	for {
		q, ok := e.queue.pop(e.ctx)
		if !ok {
			return
		}
		res, ok := e.render(&q.req)
		if ok {
			snap, rows, held, complete, err := e.reader.readFor(e.ctx, q.req, q.askedAt)
			res = e.readResult(q.req, snap, rows, held, complete, err)
		}
		select {
		case e.results <- readResult{gen: q.gen, key: q.req.Plan.Key, id: q.req.ID, res: res}:
		case <-e.ctx.Done():
			return
		}
	}
}

// render fills in req's SQL when the core left it to the runtime
// (ReadRequest.ReadSQL): on the read's worker, so that rendering a
// client's query, which parses and prints it again in time that grows
// with its size, never holds up the core goroutine and every other
// client with it. A panic (a bug: Render only reads back what the
// deparser printed) is that read's failure alone: ok is false and res
// refuses the read's subscriptions with CodeInternal.
func (e *Engine) render(req *ReadRequest) (res ReadResult, ok bool) {
	if req.SQL != "" {
		return res, true
	}
	defer func() {
		if p := recover(); p != nil {
			e.log.Error("rendering a hydration read panicked; its subscriptions are refused (code internal)",
				"read", req.ID, "tables", readTables(*req), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			res, ok = ReadResult{Failed: &ReadFailure{Code: CodeInternal, Reason: fmt.Sprintf("the engine could not render the query's read (%v)", p)}}, false
		}
	}()
	req.SQL = req.ReadSQL()
	return res, true
}

// readResult is what a worker hands the core for a read that ran.
func (e *Engine) readResult(req ReadRequest, snap Snapshot, rows []query.Row, held []rowVals, complete bool, err error) ReadResult {
	res := ReadResult{Snapshot: snap, Rows: rows, Encoded: EncodedRows{held}, Complete: complete}
	if err != nil {
		f := classifyRead(err)
		res = ReadResult{Failed: &f}
		if e.ctx.Err() == nil {
			e.logReadFailure(req, f, err)
			if f.Code == CodeTableDropped || f.Code == CodeSchemaChanged {
				// The catalog must read the tables again, and other
				// views of them may be broken too.
				e.invalidate(req)
				e.askCheck()
			}
		}
	}
	return res
}

// logReadFailure logs a failed read without the query's values: the
// tables it read and the SQLSTATE rather than its SQL (constants) and
// PostgreSQL's message (which quotes the value it rejected); an error
// that is not PostgreSQL's (a connection, a timeout, a schema change) is
// logged as it is. A read over the row limit is an answer (the
// subscription is refused and the backend reads PostgreSQL), not a fault
// to warn about.
func (e *Engine) logReadFailure(req ReadRequest, f ReadFailure, err error) {
	args := []any{"read", req.ID, "code", f.Code, "retryable", f.Retryable, "tables", readTables(req)}
	if state := sqlState(err); state != "" {
		args = append(args, "sqlstate", state)
	} else {
		args = append(args, "err", err)
	}
	if f.Code == CodeRowLimit {
		e.log.Info("hydration read over the row limit", args...)
		return
	}
	e.log.Warn("hydration read failed", args...)
}

// readTables names the tables a read reads, schema-qualified.
func readTables(req ReadRequest) string {
	var b strings.Builder
	for i, s := range req.Sources {
		if s < 0 || s >= len(req.Plan.Sources) {
			continue
		}
		if i > 0 {
			b.WriteString(",")
		}
		t := req.Plan.Sources[s].Table
		b.WriteString(t.Schema + "." + t.Name)
	}
	return b.String()
}

// queuedRead is a read waiting for a worker, with the applied log's state
// when the core asked for it.
type queuedRead struct {
	req     ReadRequest
	askedAt appliedMark
	gen     uint64 // of the core that asked for it
}

// readQueue is an unbounded FIFO of reads: the core goroutine pushes
// without ever waiting; the workers pop. Its length is bounded by the
// views being hydrated, each of which has at most one read in flight.
type readQueue struct {
	mu    sync.Mutex
	items []queuedRead
	ready chan struct{} // has a token while items is not empty
}

func newReadQueue() *readQueue { return &readQueue{ready: make(chan struct{}, 1)} }

func (q *readQueue) push(r queuedRead) {
	q.mu.Lock()
	q.items = append(q.items, r)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *readQueue) pop(ctx context.Context) (queuedRead, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			r := q.items[0]
			q.items[0] = queuedRead{}
			q.items = q.items[1:]
			more := len(q.items) > 0
			q.mu.Unlock()
			if more {
				// Pass the token on so another worker wakes.
				select {
				case q.ready <- struct{}{}:
				default:
				}
			}
			return r, true
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
			return queuedRead{}, false
		}
	}
}

// clear drops every read not taken yet.
func (q *readQueue) clear() {
	q.mu.Lock()
	clear(q.items)
	q.items = q.items[:0]
	q.mu.Unlock()
}

func (q *readQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// invalidate makes the catalog read the tables of req again.
func (e *Engine) invalidate(req ReadRequest) {
	inv, ok := e.catalog.(invalidator)
	if !ok {
		return
	}
	for _, s := range req.Sources {
		t := req.Plan.Sources[s].Table
		inv.Invalidate(t.Schema, t.Name)
	}
}

// askCheck asks the watcher for a catalog check soon.
func (e *Engine) askCheck() {
	select {
	case e.checkNow <- struct{}{}:
	default:
	}
}

// watch runs the catalog check every CatalogCheckInterval and whenever
// one is asked for, until the engine stops.
func (e *Engine) watch() {
	defer e.wg.Done()
	var tick <-chan time.Time
	if e.cfg.CatalogCheckInterval > 0 {
		t := time.NewTicker(e.cfg.CatalogCheckInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-tick:
		case <-e.checkNow:
		case <-e.ctx.Done():
			return
		}
		if err := e.CheckCatalog(e.ctx); err != nil && e.ctx.Err() == nil {
			e.log.Warn("catalog check failed", "err", err)
		}
	}
}

// CheckCatalog asks the catalog now whether the tables subscriptions read
// still exist, by OID, with the shape their queries were compiled against,
// and ends the subscriptions of those that do not (CodeTableDropped,
// CodeSchemaChanged). The engine runs it every CatalogCheckInterval;
// calling it right after running DDL makes the subscriptions it breaks end
// at once. It runs one query on the read pool, and with
// Config.Publication one more, which reads the publication's tables
// again: later compiles see them, and subscriptions on tables it no
// longer carries end (query.CodeNotPublished).
func (e *Engine) CheckCatalog(ctx context.Context) error {
	e.checkMu.Lock()
	defer e.checkMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, e.cfg.ReadTimeout)
	defer cancel()
	var published map[uint32]bool
	if e.pub != nil {
		// Compiles from now on see the publication as it is; views of
		// tables it dropped end below.
		var err error
		if published, err = e.pub.Load(ctx); err != nil {
			return fmt.Errorf("check catalog: %w", err)
		}
	}
	var refs []TableRef
	if err := e.do(ctx, func() { refs = e.core.Tables() }); err != nil {
		return fmt.Errorf("check catalog: %w", err)
	}
	if len(refs) == 0 {
		return nil
	}
	oids := make([]uint32, len(refs))
	for i, r := range refs {
		oids[i] = r.OID
	}
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("check catalog: acquire a read connection: %w", err)
	}
	shapes, err := readShapes(ctx, conn.Conn().PgConn(), oids)
	conn.Release()
	if err != nil {
		return fmt.Errorf("check catalog: %w", err)
	}
	// A table that still exists (a dropped one ends table_dropped) but
	// that the publication no longer carries.
	var unpublished []uint32
	for _, oid := range oids {
		if published != nil && !published[oid] && shapes[oid] != nil {
			unpublished = append(unpublished, oid)
		}
	}
	var broke []TableRef
	err = e.do(ctx, func() {
		broke = e.core.CheckCatalog(oids, shapes)
		if len(unpublished) > 0 {
			e.core.Unpublished(unpublished, e.cfg.Publication)
		}
	})
	if err != nil {
		return fmt.Errorf("check catalog: %w", err)
	}
	if inv, ok := e.catalog.(invalidator); ok {
		// What the catalog holds under those names is stale.
		for _, r := range broke {
			inv.Invalidate(r.Schema, r.Name)
		}
	}
	return nil
}

// dbClock is a time read from PostgreSQL as the change format's
// timestamptz: microseconds since 2000-01-01 UTC.
func dbClock(t time.Time) change.Timestamp {
	return change.Timestamp{Micros: t.UnixMicro() - 946_684_800_000_000}
}
