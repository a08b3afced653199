package s2s

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/wire"
)

// Default limits of Config.
const (
	DefaultMaxConnections   = 10_000
	DefaultMaxSubscriptions = 1_000
	DefaultMaxFrameBytes    = wire.DefaultMaxFrameBytes
	DefaultMaxQueueBytes    = 16 << 20
	DefaultLagInterval      = 500 * time.Millisecond
	DefaultCompileTimeout   = 30 * time.Second
	DefaultWriteTimeout     = 10 * time.Second
)

// Config configures a Server. Start from DefaultConfig: a limit of 0
// lifts it.
type Config struct {
	// Engine serves the subscriptions (required).
	Engine Engine
	// Types resolves non-built-in type OIDs when printing values.
	Types change.TypeResolver
	// Token, when set, must be presented by every client as
	// "Authorization: Bearer <token>".
	Token string
	// MaxConnections caps open connections (503 past it).
	MaxConnections int
	// MaxSubscriptions caps the subscriptions of one connection (a
	// retryable refusal past it).
	MaxSubscriptions int
	// MaxFrameBytes caps the size of a frame read from a client (an error
	// frame past it; the connection stays usable).
	MaxFrameBytes int
	// MaxQueueBytes caps a connection's outgoing queue: past it the
	// connection is closed as a slow consumer.
	MaxQueueBytes int
	// LagInterval is the cadence of lag frames.
	LagInterval time.Duration
	// CompileTimeout bounds registering a subscription with the engine:
	// parsing, catalog look-ups and planning (hydration is not bounded
	// by it: the engine's read timeout is). Past it the subscription is
	// refused, retryable.
	CompileTimeout time.Duration
	// WriteTimeout bounds a write to the socket: one frame, or the frames
	// a connection's write loop drains at once (a deadline at least 0.9
	// times it ahead). A write that misses it drops the connection.
	WriteTimeout time.Duration
	// ServerVersion, SystemIdentifier and Database are sent in hello.
	ServerVersion    string
	SystemIdentifier string
	Database         string
	// Logger; nil is slog.Default().
	Logger *slog.Logger
	// Metrics, when set, are updated by the server.
	Metrics *Metrics
	// Tap, when set, is the engine's stream: the server takes its
	// heartbeats from it (otherwise call Server.Heartbeat).
	Tap *Tap
}

// DefaultConfig returns a Config with every limit at its default.
func DefaultConfig() Config {
	return Config{
		MaxConnections:   DefaultMaxConnections,
		MaxSubscriptions: DefaultMaxSubscriptions,
		MaxFrameBytes:    DefaultMaxFrameBytes,
		MaxQueueBytes:    DefaultMaxQueueBytes,
		LagInterval:      DefaultLagInterval,
		CompileTimeout:   DefaultCompileTimeout,
		WriteTimeout:     DefaultWriteTimeout,
	}
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Engine == nil:
		return errors.New("s2s config: Engine is required")
	case c.MaxConnections < 0, c.MaxSubscriptions < 0, c.MaxFrameBytes < 0, c.MaxQueueBytes < 0:
		return errors.New("s2s config: limits must be 0 (no limit) or positive")
	case c.LagInterval <= 0:
		return fmt.Errorf("s2s config: lag interval %v must be positive", c.LagInterval)
	case c.CompileTimeout <= 0:
		return fmt.Errorf("s2s config: compile timeout %v must be positive", c.CompileTimeout)
	case c.WriteTimeout <= 0:
		return fmt.Errorf("s2s config: write timeout %v must be positive", c.WriteTimeout)
	case c.MaxQueueBytes > 0 && c.MaxFrameBytes > 0 && c.MaxQueueBytes < 4096:
		return fmt.Errorf("s2s config: max queue bytes %d is too small to hold a frame (at least 4096)", c.MaxQueueBytes)
	}
	return nil
}

// Server serves the s2s protocol. It is an http.Handler for the endpoint
// itself; mount it at {base}/s2s/v1.
type Server struct {
	cfg     Config
	log     *slog.Logger
	enc     *encoder
	tokenH  [32]byte
	limiter *logLimiter

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // connections
	writers *writers
	writeWG sync.WaitGroup // the writers

	mu       sync.Mutex
	conns    map[*conn]struct{}
	closing  bool
	connN    atomic.Int64
	queueN   atomic.Int64
	lastBeat atomic.Pointer[change.Heartbeat]

	sendHook atomic.Pointer[func(engine.Output)] // tests: called first in every sink's Send
}

// New returns a server. It logs a warning when no token is set.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		enc:     newEncoder(cfg.Types),
		limiter: newLogLimiter(time.Minute),
		conns:   map[*conn]struct{}{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.writers = newWriters(s.ctx, &s.writeWG)
	if cfg.Tap != nil {
		cfg.Tap.attach(s)
	}
	go s.lagLoop()
	if cfg.Token == "" {
		s.log.Warn("s2s: FRESHET_S2S_TOKEN is not set: anyone who can reach this port can read every followed table")
	} else {
		s.tokenH = sha256.Sum256([]byte(cfg.Token))
	}
	return s, nil
}

// Heartbeat tells the server a WAL heartbeat has been passed: every output
// of every transaction committed before it has been handed to the sinks.
// Lag frames report its age.
func (s *Server) Heartbeat(hb *change.Heartbeat) {
	if old := s.lastBeat.Load(); old != nil && old.LSN >= hb.LSN {
		return
	}
	s.lastBeat.Store(hb)
	if m := s.cfg.Metrics; m != nil {
		m.heartbeat(hb)
	}
}

func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	// Hashing first makes the comparison's time independent of the
	// token's length as well as its content.
	got := sha256.Sum256([]byte(h[len(prefix):]))
	return subtle.ConstantTimeCompare(got[:], s.tokenH[:]) == 1
}

// refuseUpgrade answers a refused upgrade and logs it, at most once a
// minute per kind.
func (s *Server) refuseUpgrade(w http.ResponseWriter, r *http.Request, status int, kind, msg string) {
	if m := s.cfg.Metrics; m != nil {
		m.Refusals.WithLabelValues(kind).Inc()
	}
	if held, ok := s.limiter.allow(kind); ok {
		s.log.Warn("s2s: refused connection", "reason", kind, "remote", r.RemoteAddr, "detail", msg, "held_back", held)
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="freshet"`)
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	http.Error(w, msg, status)
}

// ServeHTTP upgrades a request to the s2s protocol.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		s.refuseUpgrade(w, r, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token")
		return
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		s.refuseUpgrade(w, r, http.StatusServiceUnavailable, "shutting_down", "server is shutting down")
		return
	}
	if n := s.connN.Add(1); s.cfg.MaxConnections > 0 && n > int64(s.cfg.MaxConnections) {
		s.connN.Add(-1)
		s.refuseUpgrade(w, r, http.StatusServiceUnavailable, "too_many_connections",
			fmt.Sprintf("the server holds %d connections, its limit (--max-connections)", s.cfg.MaxConnections))
		return
	}
	cw := &sockWriter{ResponseWriter: w, timeout: s.cfg.WriteTimeout, maxFrame: s.cfg.MaxFrameBytes}
	// No compression: the write loop frames its messages itself, plain
	// (docs/s2s-protocol.md).
	// Pings are answered through the connection's queue (conn.pong), set
	// before the connection reads its first frame.
	var c *conn
	ws, err := websocket.Accept(cw, r, &websocket.AcceptOptions{InsecureSkipVerify: true, CompressionMode: websocket.CompressionDisabled,
		OnPingReceived: func(_ context.Context, payload []byte) bool { return c.pong(payload) }})
	if err != nil {
		s.connN.Add(-1)
		if held, ok := s.limiter.allow("bad_upgrade"); ok {
			s.log.Warn("s2s: refused connection", "reason", "bad_upgrade", "remote", r.RemoteAddr, "err", err, "held_back", held)
		}
		if m := s.cfg.Metrics; m != nil {
			m.Refusals.WithLabelValues("bad_upgrade").Inc()
		}
		return
	}
	c = newConn(s, ws, cw.sc, r.RemoteAddr)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		s.connN.Add(-1)
		ws.Close(websocket.StatusGoingAway, "server is shutting down")
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	if m := s.cfg.Metrics; m != nil {
		m.Connections.Inc()
	}
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.connN.Add(-1)
		if m := s.cfg.Metrics; m != nil {
			m.Connections.Dec()
		}
		s.wg.Done()
	}()
	c.serve(r.Context())
}

// Stats are counters describing a server.
type Stats struct {
	Connections   int            `json:"connections"`
	Subscriptions map[string]int `json:"subscriptions"` // by mode
	QueueBytes    int64          `json:"queue_bytes"`
	LagMS         *int64         `json:"lag_ms"`
	HeartbeatLSN  string         `json:"heartbeat_lsn,omitempty"`
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	st := Stats{Subscriptions: map[string]int{"rows": 0, "touch": 0}, QueueBytes: s.queueN.Load()}
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	st.Connections = len(conns)
	for _, c := range conns {
		r, t := c.subCounts()
		st.Subscriptions["rows"] += r
		st.Subscriptions["touch"] += t
	}
	if ms, hb := s.lag(time.Now()); hb != nil {
		st.LagMS = &ms
		st.HeartbeatLSN = hb.LSN.String()
	}
	return st
}

// lagFrame encodes a lag frame for now.
func (s *Server) lagFrame(now time.Time) []byte {
	ms, hb := s.lag(now)
	b := append([]byte(nil), `{"type":"lag","ms":`...)
	if hb == nil {
		return append(b, "null}"...)
	}
	b = wire.AppendInt(b, ms)
	b = append(b, `,"lsn":"`...)
	b = append(b, hb.LSN.String()...)
	b = append(b, `","written_us":`...)
	b = wire.AppendInt(b, hb.Written.UnixMicro())
	return append(b, '}')
}

// lagLoop queues a lag frame on every connection each LagInterval: one
// timer for all of them, and the frame joins whatever the connection's
// write loop drains next. Queued behind the connection's other frames, a
// lag frame is late exactly when they are, which is what a client
// watching the cadence should see.
//
// The connections are spread over lagSlots phases of the interval, each
// keeping its phase for its life, so each still gets one lag frame every
// LagInterval, but they are not all written at once: at 10,000 sockets a
// burst of 10,000 writes every 500 ms held the writers for tens of
// milliseconds, and the deltas of a transaction committed meanwhile
// waited behind it (docs/benchmarks.md, s2s round 5).
func (s *Server) lagLoop() {
	slots := lagSlots(s.cfg.LagInterval)
	tick := time.NewTicker(s.cfg.LagInterval / time.Duration(slots))
	defer tick.Stop()
	phase := map[*conn]int{} // each connection's slot
	next := 0                // the slot the next new connection gets
	buckets := make([][]*conn, slots)
	k := 0
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-tick.C:
			if k == 0 {
				// A new cycle: the connections open now, by slot.
				for i := range buckets {
					clear(buckets[i])
					buckets[i] = buckets[i][:0]
				}
				s.mu.Lock()
				for c := range s.conns {
					p, ok := phase[c]
					if !ok {
						p = next
						next = (next + 1) % slots
					}
					buckets[p] = append(buckets[p], c)
				}
				s.mu.Unlock()
				clear(phase)
				for p, b := range buckets {
					for _, c := range b {
						phase[c] = p
					}
				}
			}
			if len(buckets[k]) > 0 {
				b := s.lagFrame(now)
				for _, c := range buckets[k] {
					c.push(b)
				}
			}
			k = (k + 1) % slots
		}
	}
}

// lagSlots is how many phases lagLoop spreads the connections over: one
// every 10 ms of the interval, at most 100.
func lagSlots(interval time.Duration) int {
	return int(min(max(interval/(10*time.Millisecond), 1), 100))
}

// lag is the age of the newest heartbeat passed.
func (s *Server) lag(now time.Time) (int64, *change.Heartbeat) {
	hb := s.lastBeat.Load()
	if hb == nil {
		return 0, nil
	}
	ms := now.Sub(hb.Written).Milliseconds()
	if ms < 0 {
		ms = 0
	}
	return ms, hb
}

// Shutdown stops accepting connections, ends every subscription, sends
// every connection a close frame (1001, going away) and waits for the
// connections to finish or ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.closeAll(ctx, websocket.StatusGoingAway, "server is shutting down")
}

// StreamLost is Shutdown for a server whose engine stopped: connections
// are closed with 4001 (wire.CloseStreamLost) and reason.
func (s *Server) StreamLost(ctx context.Context, reason string) error {
	if len(reason) > 100 {
		reason = reason[:100] // a close frame's reason is at most 123 bytes
	}
	return s.closeAll(ctx, wire.CloseStreamLost, reason)
}

func (s *Server) closeAll(ctx context.Context, code websocket.StatusCode, reason string) error {
	s.mu.Lock()
	s.closing = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		go c.shutdown(ctx, code, reason)
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		s.cancel()
		s.writeWG.Wait() // writers never wait on a socket
		return nil
	case <-ctx.Done():
		s.cancel()
		s.writeWG.Wait()
		return fmt.Errorf("shut down s2s connections: %w", ctx.Err())
	}
}

// logPanic logs a recovered panic with its stack, at error level: it is a
// bug that outside input reached, and the stack is what fixes it.
func (s *Server) logPanic(msg string, p any, attrs ...any) {
	s.log.Error(msg, append(attrs, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))...)
}

// logLimiter lets a kind of log line through at most once per period and
// counts those held back.
type logLimiter struct {
	period time.Duration
	mu     sync.Mutex
	last   map[string]time.Time
	held   map[string]int
}

func newLogLimiter(period time.Duration) *logLimiter {
	return &logLimiter{period: period, last: map[string]time.Time{}, held: map[string]int{}}
}

// allow reports whether a line of kind may be logged now, and how many
// were held back since the last one.
func (l *logLimiter) allow(kind string) (int, bool) {
	return l.allowAt(kind, time.Now())
}

func (l *logLimiter) allowAt(kind string, now time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[kind]; ok && now.Sub(t) < l.period {
		l.held[kind]++
		return 0, false
	}
	held := l.held[kind]
	l.last[kind] = now
	l.held[kind] = 0
	return held, true
}
