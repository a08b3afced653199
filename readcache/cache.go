package readcache

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/freshetdb/freshet/wire"
	"github.com/maypok86/otter/v2"
)

// Entry states.
const (
	statePending int32 = iota // subscribe sent, no verdict yet
	stateLive                 // result held and kept fresh
	stateRefused              // the engine refused it: read PostgreSQL until it expires
	stateStale                // its socket dropped: resubscribing
	stateDead                 // evicted or ended: never used again
)

// entry is one key's place in the cache.
type entry struct {
	key    string
	sql    string
	params []wire.Param
	sock   atomic.Pointer[socket] // moves when its engine dies (rebalance)
	born   int64                  // Cache.Now when made

	state   atomic.Int32
	res     atomic.Pointer[Result]
	verdict chan struct{} // closed at the first verdict, or when the entry dies
	once    sync.Once
	sentAt  atomic.Int64 // unix nanos of the first subscribe
	keepFor atomic.Int64 // refused entries: how long to remember
	// full is the engines (bits of node.i) that refused the entry
	// too_many_subscriptions: it is routed among the others (bounded
	// load) for as long as it lives.
	full atomic.Uint64

	// guarded by sock.mu
	id     string // current subscription id on sock ("" when none)
	minLSN uint64 // the min_lsn its subscription asked for
	// refusal is set before state turns refused.
	refusal atomic.Pointer[wire.Refused]
}

func (e *entry) decide() { e.once.Do(func() { close(e.verdict) }) }

func (e *entry) weight() uint32 {
	n := int64(len(e.key)) + 256
	if r := e.res.Load(); r != nil {
		n += r.size
	}
	if n > 1<<31 {
		n = 1 << 31
	}
	return uint32(n)
}

// Identity names the database a cache serves: the cluster's
// system_identifier and the database's name.
type Identity struct {
	SystemIdentifier string
	Database         string
}

// ErrMismatch is wrapped by Cache.Err when the engine follows another
// database than the one the reads go to.
var ErrMismatch = errors.New("freshet follows another database")

// Cache serves reads from Freshet: it holds the subscriptions of the
// queries a process reads and their results, kept fresh by the engine. It
// is safe for concurrent use. The database/sql driver (readcache/stdlib)
// and the pgx wrapper (readcache/pgxcache) are built on it.
type Cache struct {
	cfg   Config
	log   *slog.Logger
	seed  maphash.Seed
	nodes []*node       // one per engine (FRESHET_URL's list)
	socks []*socket     // every node's
	floor atomic.Uint64 // the newest position seen on any engine
	moved atomic.Int64  // keys moved off a dead engine or onto a new one
	spilt atomic.Int64  // keys sent on after too_many_subscriptions

	entries *otter.Cache[string, *entry]
	clock   *otter.CoarseClock
	epoch   time.Time   // Open's time, with its monotonic reading (exactNow)
	off     atomic.Bool // disabled is set: the engine follows another database
	known   atomic.Bool // ident is set
	subN    atomic.Int64
	idN     atomic.Uint64
	n       counters

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	ident     *Identity // the database reads go to, once checked
	checkAt   time.Time // last identity check started
	checking  bool
	disabled  error // set once: the engine follows another database
	identDone chan struct{}
}

// Open starts a cache for cfg. With no URL it returns a cache that sends
// every read to PostgreSQL. Sockets connect in the background; until one
// is up and the database identity is checked (Verify), reads go to
// PostgreSQL.
func Open(cfg Config) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cache{cfg: cfg, log: cfg.Logger, seed: maphash.MakeSeed(), identDone: make(chan struct{}), epoch: time.Now()}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if cfg.URL == "" {
		return c, nil
	}
	urls, _ := endpoints(cfg.URL)
	c.clock = otter.NewCoarseClock(time.Millisecond)
	c.entries = otter.Must(&otter.Options[string, *entry]{
		Clock:            c.clock,
		MaximumWeight:    uint64(cfg.MaxBytes),
		Weigher:          func(_ string, e *entry) uint32 { return e.weight() },
		ExpiryCalculator: expiry{c},
		OnDeletion:       c.onDeletion,
	})
	for _, u := range urls {
		n := &node{url: u, i: len(c.nodes), id: hrwID(u)}
		c.nodes = append(c.nodes, n)
		for i := 0; i < cfg.Sockets; i++ {
			s := newSocket(c, len(c.socks), n)
			n.socks = append(n.socks, s)
			c.socks = append(c.socks, s)
			c.wg.Add(1)
			go func() { defer c.wg.Done(); s.run() }()
		}
	}
	if len(c.nodes) > 1 {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.rebalanceLoop() }()
	}
	return c, nil
}

// Close stops every socket and drops every entry.
func (c *Cache) Close() error {
	c.cancel()
	c.wg.Wait()
	if c.entries != nil {
		c.entries.InvalidateAll()
		c.entries.StopAllGoroutines()
		c.clock.Stop()
	}
	return nil
}

// Enabled reports whether the cache may serve reads at all: it has a URL
// and the engine was not found following another database.
func (c *Cache) Enabled() bool {
	return c.entries != nil && !c.off.Load()
}

// Err returns why the cache is not serving reads, or nil: the engine
// follows another database (wraps ErrMismatch), or the last failure to
// connect to it (wrong token, 503, bad URL) while no socket is up.
func (c *Cache) Err() error {
	c.mu.Lock()
	dis := c.disabled
	c.mu.Unlock()
	if dis != nil {
		return dis
	}
	for _, s := range c.socks {
		if s.usable() {
			return nil
		}
	}
	return c.LastConnectError()
}

// LastConnectError returns why the last connection attempt failed (nil
// when the last attempt of every socket succeeded).
func (c *Cache) LastConnectError() error {
	var last error
	var at time.Time
	for _, s := range c.socks {
		s.mu.Lock()
		if s.lastErr != nil && s.lastErrAt.After(at) {
			last, at = s.lastErr, s.lastErrAt
		}
		s.mu.Unlock()
	}
	return last
}

// NeedsIdentity reports whether Verify should be called: the database the
// reads go to has not been checked yet. It rate-limits checks to one a
// second, so a failing check is retried without flooding PostgreSQL; when
// it returns true the caller must call Verify (with the error if the check
// failed).
func (c *Cache) NeedsIdentity() bool {
	if c.entries == nil || c.known.Load() || c.off.Load() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ident != nil || c.disabled != nil || c.checking || time.Since(c.checkAt) < time.Second {
		return false
	}
	c.checking, c.checkAt = true, time.Now()
	return true
}

// IdentityQuery is the query Verify's caller runs on the connection the
// reads go to.
const IdentityQuery = "SELECT system_identifier::text, current_database()::text FROM pg_control_system()"

// Verify records the identity of the database the reads go to, as read by
// IdentityQuery on the reads' own connection. A failed check (err != nil)
// is retried later and never counts as a match.
func (c *Cache) Verify(id Identity, err error) {
	c.mu.Lock()
	c.checking = false
	if err != nil || id.SystemIdentifier == "" {
		c.mu.Unlock()
		c.log.Warn("freshet read cache: could not check which database the reads go to; retrying", "err", err)
		return
	}
	if c.ident != nil {
		c.mu.Unlock()
		return
	}
	c.ident = &id
	c.known.Store(true)
	close(c.identDone)
	c.mu.Unlock()
	for _, s := range c.socks {
		s.identityKnown()
	}
}

// check compares a hello with the identity; ok is false when unknown yet.
func (c *Cache) check(h *wire.Hello) (known bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.disabled != nil {
		return true, c.disabled
	}
	if c.ident == nil {
		return false, nil
	}
	if h.SystemIdentifier != c.ident.SystemIdentifier || h.Database != c.ident.Database {
		c.disabled = fmt.Errorf("%w: it streams database %q of cluster %s, the reads go to database %q of cluster %s; "+
			"point FRESHET_URL at the freshet serving this database: every read goes to PostgreSQL",
			ErrMismatch, h.Database, h.SystemIdentifier, c.ident.Database, c.ident.SystemIdentifier)
		c.off.Store(true)
		c.log.Error("freshet read cache disabled", "err", c.disabled)
		return true, c.disabled
	}
	return true, nil
}

// sockFor returns the socket a new key goes to: one of its home engine's.
func (c *Cache) sockFor(key string) *socket {
	n := c.nodes[0]
	if len(c.nodes) > 1 {
		n = c.home(key, c.aliveSet(c.Now()))
	}
	return n.socks[maphash.String(c.seed, key)%uint64(len(n.socks))]
}

// Bypass counts a read sent to PostgreSQL for reason r by the caller
// (route flags, transactions, writes: decisions the adapters make).
func (c *Cache) Bypass(r Reason) Reason {
	if r > ReasonNone && r < reasonN {
		c.n.pg[r].Add(1)
	}
	return r
}

// Read returns the cached result of sql with params (see ReadKey).
func (c *Cache) Read(ctx context.Context, sql string, params []wire.Param) (*Result, Reason) {
	return c.ReadKey(ctx, []byte(Key(sql, params)))
}

// ReadKey returns the cached result of the read whose key AppendKey and
// AppendArg built, or the reason the read must go to PostgreSQL (counted
// in Stats). A miss subscribes and, with VerdictTimeout 0 (the default),
// goes to PostgreSQL at once (ReasonHydrating), as does every read of the
// key until the engine's first answer; with a positive VerdictTimeout it
// waits that long for the answer. A hit allocates nothing and does not keep
// key. Callers decide routing, transactions and writes first (see Bypass).
func (c *Cache) ReadKey(ctx context.Context, key []byte) (*Result, Reason) {
	if c.entries == nil || c.off.Load() {
		return nil, c.Bypass(ReasonDisabled)
	}
	if len(key) == 0 {
		return nil, c.Bypass(ReasonUnsupported)
	}
	// The lookup reads key in place: otter neither keeps nor changes it.
	if e, ok := c.entries.GetIfPresent(unsafe.String(&key[0], len(key))); ok {
		switch e.state.Load() {
		case stateLive:
			if s := e.sock.Load(); !s.fresh(c.exactNow()) {
				return nil, c.Bypass(s.why())
			}
			c.n.hits.Add(1)
			return e.res.Load(), ReasonNone
		case stateRefused:
			return nil, c.Bypass(ReasonRefused)
		case stateStale:
			return nil, c.Bypass(ReasonDisconnected)
		case stateDead:
			return nil, c.Bypass(ReasonEvicted)
		}
		return c.wait(ctx, e)
	}
	k := string(key)
	sql, params, ok := paramsOf(k)
	if !ok {
		return nil, c.Bypass(ReasonUnsupported)
	}
	s := c.sockFor(k)
	now := c.Now()
	if !s.fresh(now) {
		return nil, c.Bypass(s.why())
	}
	if c.subN.Load() >= int64(c.cfg.MaxSubscriptions) {
		return nil, c.Bypass(ReasonLimit)
	}
	e := &entry{key: k, sql: sql, params: params, born: now, verdict: make(chan struct{})}
	e.sock.Store(s)
	e.sentAt.Store(time.Now().UnixNano()) // before it is visible: a second reader waits from here
	if got, added := c.entries.SetIfAbsent(k, e); !added {
		return c.wait(ctx, got)
	}
	c.subN.Add(1)
	s.subscribe(e)
	return c.wait(ctx, e)
}

// Staleness bounds how old an answer served from the cache now may be: the
// largest, over the sockets that may serve reads, of the engine's last
// reported lag plus the time since it was reported. Every change committed
// more than that long ago is in every answer a hit returns. ok is false
// when no socket may serve (reads then go to PostgreSQL). A hit is only
// served while its socket's bound is within MaxLag.
func (c *Cache) Staleness() (d time.Duration, ok bool) {
	if c.entries == nil {
		return 0, false
	}
	now := time.Now().UnixNano() // not Now: the bound must not lag behind the clock
	for _, s := range c.socks {
		if sd, sok := s.staleness(now); sok && sd <= c.cfg.MaxLag {
			d, ok = max(d, sd), true
		}
	}
	return d, ok
}

// Position is how far every answer a hit may return is known to be
// exact: the oldest, over the sockets that may serve reads, of the
// positions of the heartbeats their last lag frames named. Every change
// committed before it (a PostgreSQL LSN as one number, X<<32 | Y of its
// X/Y form) is in every such answer. ok is false when a socket that may
// serve reads has not named a heartbeat yet, or none may serve. With
// writes stopped, waiting until Position passes pg_current_wal_lsn()
// makes every hit exact (the demo's verifier checkpoints do).
func (c *Cache) Position() (lsn uint64, ok bool) {
	if c.entries == nil {
		return 0, false
	}
	now := time.Now().UnixNano()
	for _, s := range c.socks {
		if !s.fresh(now) {
			continue
		}
		p := s.beatLSN.Load()
		if p == 0 {
			return 0, false
		}
		if !ok || p < lsn {
			lsn = p
		}
		ok = true
	}
	return lsn, ok
}

// Now returns the cache's clock in Unix nanoseconds: read every
// millisecond by one goroutine, so that a hit does not pay for reading the
// time (about 100 ns on a VM, several times per read). The adapters'
// read-your-writes windows use it too.
func (c *Cache) Now() int64 {
	if c.clock == nil {
		return time.Now().UnixNano()
	}
	return c.clock.NowNano()
}

// exactNow returns the time in Unix nanoseconds, read from the monotonic
// clock. Whether an answer may be served is decided on it, never on Now:
// the coarse clock is a
// goroutine's reading, and a process the machine starves for seconds runs
// its readers before that goroutine catches up, so a socket whose lag
// frames stopped would look fresh for as long (the demo's in-flight check
// saw answers 3 s staler than the cache promised, under -race at load 20).
// Stamps taken with Now (lagAt) are older than the truth, which only
// overestimates staleness.
func (c *Cache) exactNow() int64 {
	return c.epoch.UnixNano() + int64(time.Since(c.epoch))
}

// wait waits for e's verdict (not at all with VerdictTimeout 0).
func (c *Cache) wait(ctx context.Context, e *entry) (*Result, Reason) {
	if c.cfg.VerdictTimeout == 0 {
		return nil, c.Bypass(ReasonHydrating)
	}
	left := time.Until(time.Unix(0, e.sentAt.Load()).Add(c.cfg.VerdictTimeout))
	if left <= 0 {
		return nil, c.Bypass(ReasonTimeout)
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-e.verdict:
	case <-t.C:
		return nil, c.Bypass(ReasonTimeout)
	case <-ctx.Done():
		return nil, c.Bypass(ReasonTimeout)
	}
	switch e.state.Load() {
	case stateLive:
		if s := e.sock.Load(); !s.fresh(c.exactNow()) {
			return nil, c.Bypass(s.why())
		}
		c.n.misses.Add(1)
		return e.res.Load(), ReasonNone
	case stateRefused:
		return nil, c.Bypass(ReasonRefused)
	case stateStale:
		return nil, c.Bypass(ReasonDisconnected)
	}
	return nil, c.Bypass(ReasonEvicted)
}

// onDeletion runs after otter removed an entry: unless it was merely
// replaced by itself (a weight update), the entry dies and its
// subscription ends.
func (c *Cache) onDeletion(ev otter.DeletionEvent[string, *entry]) {
	if ev.Cause == otter.CauseReplacement {
		return
	}
	e := ev.Value
	old := e.state.Swap(stateDead)
	if old == stateDead {
		return
	}
	if old != stateRefused {
		c.subN.Add(-1)
	}
	e.decide()
	for {
		// A move may swap the socket while it is being dropped from.
		s := e.sock.Load()
		s.drop(e)
		if e.sock.Load() == s {
			return
		}
	}
}

// reweigh tells otter e's size changed, if e is still the key's entry (an
// evicted entry is never put back).
func (c *Cache) reweigh(e *entry) {
	c.entries.ComputeIfPresent(e.key, func(old *entry) (*entry, otter.ComputeOp) {
		if old != e {
			return old, otter.CancelOp
		}
		return e, otter.WriteOp
	})
}

// forget removes e from the cache (when it is still the key's entry).
func (c *Cache) forget(e *entry) {
	c.entries.ComputeIfPresent(e.key, func(old *entry) (*entry, otter.ComputeOp) {
		if old != e {
			return old, otter.CancelOp
		}
		return nil, otter.InvalidateOp
	})
}

func (c *Cache) nextID() string { return "r" + strconv.FormatUint(c.idN.Add(1), 36) }

// expiry: live and pending entries expire after IdleTimeout without a read
// and at TTL after they were made; refused ones after keepFor.
type expiry struct{ c *Cache }

func (x expiry) live(e *entry) time.Duration {
	if e.state.Load() == stateRefused {
		if d := time.Duration(e.keepFor.Load()); d > 0 {
			return d
		}
	}
	d := x.c.cfg.IdleTimeout
	if rest := x.c.cfg.TTL - time.Duration(x.c.Now()-e.born); rest < d {
		d = rest
	}
	if d <= 0 {
		d = time.Nanosecond
	}
	return d
}

func (x expiry) ExpireAfterCreate(en otter.Entry[string, *entry]) time.Duration {
	return x.live(en.Value)
}
func (x expiry) ExpireAfterUpdate(en otter.Entry[string, *entry], _ *entry) time.Duration {
	if en.Value.state.Load() == stateRefused {
		return x.live(en.Value)
	}
	return en.ExpiresAfter()
}
func (x expiry) ExpireAfterRead(en otter.Entry[string, *entry]) time.Duration {
	if en.Value.state.Load() == stateRefused {
		return en.ExpiresAfter()
	}
	return x.live(en.Value)
}

// CleanUp runs pending maintenance now: expired entries are removed (and
// unsubscribed) without waiting for the next read.
func (c *Cache) CleanUp() {
	if c.entries != nil {
		c.entries.CleanUp()
	}
}
