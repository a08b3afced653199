package readcache

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/freshetdb/freshet/wire"
)

// maxReadBytes bounds one frame read from the engine (an accepted frame
// carries a whole result).
const maxReadBytes = 512 << 20

// errDisabled ends a socket for good: the engine follows another database.
var errDisabled = errors.New("read cache disabled")

// socket is one WebSocket to the engine and the keys spread onto it. It
// reconnects with backoff and resubscribes what it holds.
type socket struct {
	c    *Cache
	i    int
	url  string
	node *node

	// seenAt is when the engine last showed it is alive (a hello or a lag
	// frame; unix nanos, Cache.Now): what moves keys off a dead engine.
	seenAt atomic.Int64

	up    atomic.Bool  // connected, hello checked
	lagMS atomic.Int64 // last reported lag; -1 unknown
	lagAt atomic.Int64 // unix nanos of the last lag frame
	// beatAt is when the heartbeat the last lag frame names was written
	// (unix nanos, the server's clock; 0 when not sent).
	beatAt atomic.Int64
	// beatLSN is the position of that heartbeat (0 until the first):
	// every frame of the transactions committed before it has been
	// handled.
	beatLSN atomic.Uint64

	mu        sync.Mutex
	ws        *websocket.Conn
	hello     *wire.Hello
	subs      map[string]*entry   // by subscription id
	held      map[*entry]struct{} // every live, pending or stale entry on this socket
	out       [][]byte
	wake      chan struct{}
	lastErr   error
	lastErrAt time.Time
}

func newSocket(c *Cache, i int, n *node) *socket {
	s := &socket{c: c, i: i, url: n.url, node: n, subs: map[string]*entry{}, held: map[*entry]struct{}{}, wake: make(chan struct{}, 1)}
	s.lagMS.Store(-1)
	return s
}

func (s *socket) usable() bool { return s.up.Load() }

// fresh reports whether reads of this socket's keys may be served at now
// (Cache.Now): it is up and the engine's lag, plus the time since it last
// said so, is within MaxLag.
func (s *socket) fresh(now int64) bool {
	d, ok := s.staleness(now)
	return ok && d <= s.c.cfg.MaxLag
}

// staleness bounds how old an answer of this socket is at now: the lag the
// engine last reported plus the time since then. ok is false while the
// socket is down or no lag is known. The lag is stored before the time it
// arrived, so a reader between the two stores overestimates. The lag was
// measured when the frame was queued: with the heartbeat's write time
// known, the time since then is taken when larger, so the time the frame
// spent queued and in flight counts too (on clocks kept in step).
func (s *socket) staleness(now int64) (time.Duration, bool) {
	if !s.up.Load() {
		return 0, false
	}
	ms := s.lagMS.Load()
	if ms < 0 {
		return 0, false
	}
	d := time.Duration(ms)*time.Millisecond + time.Duration(now-s.lagAt.Load())
	if at := s.beatAt.Load(); at > 0 {
		d = max(d, time.Duration(now-at))
	}
	return d, true
}

func (s *socket) why() Reason {
	if !s.up.Load() {
		return ReasonDisconnected
	}
	return ReasonLag
}

func (s *socket) setErr(err error) {
	s.mu.Lock()
	s.lastErr, s.lastErrAt = err, time.Now()
	s.mu.Unlock()
}

// run connects until the cache closes, with backoff between attempts.
func (s *socket) run() {
	ctx := s.c.ctx
	backoff := s.c.cfg.MinBackoff
	for ctx.Err() == nil {
		start := time.Now()
		err := s.session(ctx)
		s.down()
		if errors.Is(err, errDisabled) || ctx.Err() != nil {
			return
		}
		if err != nil {
			s.setErr(err)
			s.c.log.Warn("freshet read cache: socket down", "socket", s.i, "err", err)
		}
		if time.Since(start) > 10*s.c.cfg.MaxBackoff {
			backoff = s.c.cfg.MinBackoff
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		backoff = min(2*backoff, s.c.cfg.MaxBackoff)
	}
}

// connectError says why a dial failed in words a person can act on.
func connectError(url string, resp *http.Response, err error) error {
	if resp != nil {
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			return fmt.Errorf("connect to %s: 401 Unauthorized: wrong or missing token (set FRESHET_TOKEN to the server's FRESHET_S2S_TOKEN)", url)
		case http.StatusServiceUnavailable:
			return fmt.Errorf("connect to %s: 503 Service Unavailable: the server is at --max-connections or shutting down", url)
		case http.StatusNotFound:
			return fmt.Errorf("connect to %s: 404 Not Found: no s2s endpoint at this path (check FRESHET_URL and the server's --base-path)", url)
		}
		return fmt.Errorf("connect to %s: HTTP %s: %w", url, resp.Status, err)
	}
	return fmt.Errorf("connect to %s: %w", url, err)
}

// session runs one connection until it fails.
func (s *socket) session(ctx context.Context) error {
	hdr := http.Header{}
	if s.c.cfg.Token != "" {
		hdr.Set("Authorization", "Bearer "+s.c.cfg.Token)
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	ws, resp, err := websocket.Dial(dctx, s.url, &websocket.DialOptions{HTTPHeader: hdr})
	cancel()
	if err != nil {
		return connectError(s.url, resp, err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(maxReadBytes)
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	f, err := readFrame(hctx, ws)
	cancel()
	if err != nil {
		return fmt.Errorf("read hello from %s: %w", s.url, err)
	}
	h, ok := f.(*wire.Hello)
	if !ok {
		return fmt.Errorf("read hello from %s: got a %s frame first", s.url, f.FrameType())
	}
	if h.Protocol != wire.Version {
		return fmt.Errorf("hello from %s: protocol %d, this client speaks %d", s.url, h.Protocol, wire.Version)
	}
	s.mu.Lock()
	s.ws, s.hello, s.lastErr = ws, h, nil
	s.mu.Unlock()
	s.seenAt.Store(s.c.Now())
	if err := s.tryUp(); err != nil {
		ws.Close(websocket.StatusNormalClosure, "wrong database")
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go s.writeLoop(sctx, ws)
	for {
		f, err := readFrame(sctx, ws)
		if err != nil {
			var de *wire.DecodeError
			if errors.As(err, &de) {
				s.c.log.Warn("freshet read cache: unreadable frame", "socket", s.i, "err", err)
				continue
			}
			return fmt.Errorf("connection to %s lost: %w", s.url, err)
		}
		s.handle(f)
	}
}

func readFrame(ctx context.Context, ws *websocket.Conn) (wire.Frame, error) {
	typ, b, err := ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, &wire.DecodeError{Code: wire.CodeBadFrame, Err: errors.New("binary message")}
	}
	return wire.Decode(b, 0)
}

// identityKnown is called once the reads' database has been checked.
func (s *socket) identityKnown() {
	if err := s.tryUp(); err != nil {
		s.mu.Lock()
		if s.ws != nil {
			s.ws.Close(websocket.StatusNormalClosure, "wrong database")
		}
		s.mu.Unlock()
	}
}

// tryUp checks the hello against the reads' database and, when they
// match, puts the socket in service and resubscribes what it holds.
func (s *socket) tryUp() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ws == nil || s.hello == nil || s.up.Load() {
		return nil
	}
	known, err := s.c.check(s.hello)
	if err != nil {
		return fmt.Errorf("%w: %w", errDisabled, err)
	}
	if !known {
		return nil
	}
	for e := range s.held {
		switch e.state.Load() {
		case statePending, stateStale:
			s.subscribeLocked(e)
		}
	}
	s.up.Store(true)
	return nil
}

// down takes the socket out of service: its keys go stale (reads of them
// go to PostgreSQL) until it reconnects and resubscribes them; other
// sockets' keys are untouched.
func (s *socket) down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.up.Store(false)
	s.lagMS.Store(-1)
	s.beatAt.Store(0)
	s.beatLSN.Store(0)
	s.ws, s.hello, s.out = nil, nil, nil
	clear(s.subs)
	for e := range s.held {
		e.id = ""
		if e.state.CompareAndSwap(stateLive, stateStale) || e.state.CompareAndSwap(statePending, stateStale) {
			e.decide()
		}
	}
}

// subscribe holds e on this socket and asks the engine for it.
func (s *socket) subscribe(e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.state.Load() == stateDead {
		return
	}
	s.held[e] = struct{}{}
	if !s.up.Load() {
		if e.state.CompareAndSwap(statePending, stateStale) {
			e.decide()
		}
		return
	}
	s.subscribeLocked(e)
}

func (s *socket) subscribeLocked(e *entry) {
	id := s.c.nextID()
	e.id = id
	s.subs[id] = e
	// Never an answer older than one this process has seen: the engine
	// accepts only once it is at or past the newest position seen on any
	// engine (they all follow one LSN space), so a key that moves to
	// another engine, or is read again, never goes back in time.
	e.minLSN = s.c.floor.Load()
	// An ordered result's deltas name only the rows that moved (an
	// engine that predates it sends the whole order, which apply reads
	// too).
	sub := &wire.Subscribe{ID: id, SQL: e.sql, Params: e.params, Mode: wire.ModeRows, DeltaOrder: wire.DeltaOrderMoves}
	if e.minLSN > 0 {
		sub.MinLSN = formatLSN(e.minLSN)
	}
	b, err := wire.Encode(sub)
	if err != nil {
		return
	}
	s.enqueueLocked(b)
}

// drop forgets an entry that died, unsubscribing it.
func (s *socket) drop(e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, e)
	if e.id == "" {
		return
	}
	delete(s.subs, e.id)
	if s.up.Load() {
		b, _ := wire.Encode(&wire.Unsubscribe{ID: e.id})
		s.enqueueLocked(b)
	}
	e.id = ""
}

func (s *socket) enqueueLocked(b []byte) {
	s.out = append(s.out, b)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// writeLoop sends queued frames; callers never wait for the network.
func (s *socket) writeLoop(ctx context.Context, ws *websocket.Conn) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		s.mu.Lock()
		if s.ws != ws {
			s.mu.Unlock()
			return
		}
		out := s.out
		s.out = nil
		s.mu.Unlock()
		for _, b := range out {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := ws.Write(wctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				ws.CloseNow()
				return
			}
		}
	}
}

// handle applies one frame from the engine.
func (s *socket) handle(f wire.Frame) {
	switch f := f.(type) {
	case *wire.Lag:
		if f.MS == nil {
			s.lagMS.Store(-1)
		} else {
			s.lagMS.Store(max(*f.MS, 0))
		}
		if f.WrittenUS != nil {
			s.beatAt.Store(*f.WrittenUS * 1000)
		}
		now := s.c.Now()
		s.lagAt.Store(now)
		s.seenAt.Store(now)
		s.c.saw(f.LSN)
		if lsn := lsnOf(f.LSN); lsn != 0 {
			s.beatLSN.Store(lsn)
		}
	case *wire.Accepted:
		s.mu.Lock()
		e := s.subs[f.ID]
		var min uint64
		if e != nil {
			min = e.minLSN
		}
		s.mu.Unlock()
		if e == nil {
			return // unsubscribed (evicted) before it was accepted: dropped
		}
		if f.Mode != wire.ModeRows {
			s.c.forget(e)
			return
		}
		if lsnOf(f.LSN) < min {
			// An engine that does not know min_lsn answered from before
			// what this process has seen: not served.
			s.c.forget(e)
			return
		}
		e.res.Store(newResult(f))
		s.c.saw(f.LSN)
		if !e.state.CompareAndSwap(statePending, stateLive) && !e.state.CompareAndSwap(stateStale, stateLive) {
			return // died meanwhile: the fill is dropped
		}
		e.decide()
		s.c.reweigh(e)
	case *wire.Delta:
		s.mu.Lock()
		e := s.subs[f.ID]
		s.mu.Unlock()
		if e == nil || e.state.Load() != stateLive {
			return
		}
		nr, err := e.res.Load().apply(f)
		if err != nil {
			s.c.log.Error("freshet read cache: dropping an entry", "err", err)
			s.c.forget(e)
			return
		}
		e.res.Store(nr)
		s.c.saw(f.LSN)
		s.c.reweigh(e)
	case *wire.Refused:
		if f.Code == wire.CodeTooMany && f.Retryable && len(s.c.nodes) > 1 && s.c.spill(s, f.ID) {
			return
		}
		s.refuse(f.ID, &wire.Refused{ID: f.ID, Code: f.Code, Reason: f.Reason, Retryable: f.Retryable})
	case *wire.Ended:
		if f.Retryable {
			s.mu.Lock()
			e := s.subs[f.ID]
			s.mu.Unlock()
			if e != nil {
				s.c.forget(e)
			}
			return
		}
		s.refuse(f.ID, &wire.Refused{ID: f.ID, Code: f.Code, Reason: f.Reason})
	case *wire.Error:
		if f.Code != wire.CodeUnknownID {
			s.c.log.Warn("freshet read cache: the engine could not use a frame", "code", f.Code, "message", f.Message)
		}
	}
}

// refuse remembers that the engine will not serve an entry.
func (s *socket) refuse(id string, r *wire.Refused) {
	s.mu.Lock()
	e := s.subs[id]
	if e != nil {
		delete(s.subs, id)
		delete(s.held, e)
		e.id = ""
	}
	s.mu.Unlock()
	if e == nil {
		return
	}
	e.refusal.Store(r)
	keep := s.c.cfg.RefusedFor
	if r.Retryable {
		keep = s.c.cfg.RetryRefusedFor
	}
	e.keepFor.Store(int64(keep))
	old := e.state.Load()
	if (old == statePending || old == stateStale || old == stateLive) && e.state.CompareAndSwap(old, stateRefused) {
		s.c.subN.Add(-1)
	}
	e.decide()
	s.c.reweigh(e)
	s.c.log.Debug("freshet read cache: query refused", "code", r.Code, "reason", r.Reason, "sql", e.sql)
}
