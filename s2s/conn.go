package s2s

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/query"
	"github.com/freshetdb/freshet/wire"
)

// conn is one client connection: a read loop (this goroutine) and a write
// loop draining the outgoing queue.
type conn struct {
	s      *Server
	ws     *websocket.Conn
	nc     *sockConn // under ws
	remote string
	q      *queue

	ctx    context.Context
	cancel context.CancelFunc
	failed chan struct{}  // closed by the first fail
	bg     sync.WaitGroup // register and unsubscribe goroutines; serve waits for them

	// Guarded by q.mu: the client's subscriptions by its ids.
	subs map[string]*sub
	gone bool // torn down: no new subscriptions
	// late (guarded by q.mu) holds the received stamps of frames a writer
	// left pending in nc for the write loop, which observes them when
	// its write has put them on the socket.
	late []time.Time
}

// sub is one subscription; it is the engine.Sink of its outputs.
type sub struct {
	c       *conn
	id      string
	mode    engine.Mode
	started time.Time

	// Guarded by c.q.mu.
	engID      engine.SubID
	registered bool // engID is valid
	live       bool // accepted
	ended      bool // removed from c.subs; nothing more is sent
	cols       []query.Output
	countKey   *engine.Key // a COUNT(*) result's one row, when it has one

	// moves: the subscribe asked for wire.DeltaOrderMoves (set before
	// the subscription is registered, then only read).
	moves bool
}

func newConn(s *Server, ws *websocket.Conn, nc *sockConn, remote string) *conn {
	c := &conn{s: s, ws: ws, nc: nc, remote: remote, q: newQueue(s.cfg.MaxQueueBytes, &s.queueN),
		subs: map[string]*sub{}, failed: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	c.q.wake = c.wakeLocked
	if nc.watch != nil {
		nc.watch.setNotify(c.frameTooLarge)
	}
	return c
}

// wakeLocked has the connection's frames written: by the server's
// writers while the queue is pooled, otherwise by its write loop. c.q.mu
// is held.
func (c *conn) wakeLocked() {
	q := c.q
	if !q.pooled {
		q.signal()
		return
	}
	if !q.inPool {
		q.inPool = true
		c.s.writers.add(c)
	}
}

// serve runs the connection until the client goes, the server shuts it
// down, or it fails.
func (c *conn) serve(reqCtx context.Context) {
	// The server's own frames are framed by us; the library's limit would
	// close the connection on an oversized frame, which we answer instead.
	c.ws.SetReadLimit(-1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.writeLoop()
	}()
	c.readLoop()
	c.cancel()
	<-done
	c.teardown()
	_ = c.ws.CloseNow()
	c.bg.Wait()
}

// fail closes the connection with a close frame; the loops then end.
func (c *conn) fail(code websocket.StatusCode, reason string) {
	select {
	case <-c.failed:
		return
	default:
	}
	c.q.mu.Lock()
	select {
	case <-c.failed:
		c.q.mu.Unlock()
		return
	default:
		close(c.failed)
	}
	c.q.closed = true
	c.q.signal() // the write loop wakes and ends
	c.q.mu.Unlock()
	if code == wire.CloseSlowConsumer {
		c.s.log.Warn("s2s: closing a slow consumer", "remote", c.remote, "reason", reason)
		if m := c.s.cfg.Metrics; m != nil {
			m.SlowConsumers.Inc()
		}
	}
	c.endAll()
	// Close writes the close frame (waiting at most a few seconds for a
	// stuck writer) and ends the read loop. No message follows it.
	c.nc.stop()
	_ = c.ws.Close(code, reason)
	c.cancel()
}

// shutdownDrain is the longest a connection being shut down waits for
// its socket to take the frames ending its subscriptions.
const shutdownDrain = time.Second

// shutdown ends every subscription with a frame saying so (ended
// shutting_down, or refused shutting_down for one not yet accepted), lets
// the socket take them (until ctx ends, at most shutdownDrain), then
// closes the connection with code: a client learns why each subscription
// ended before the close, as from any other ending.
func (c *conn) shutdown(ctx context.Context, code websocket.StatusCode, reason string) {
	c.q.mu.Lock()
	c.gone = true
	var ids []engine.SubID
	for _, sb := range c.subs {
		typ := wire.TypeEnded
		if !sb.live {
			typ = wire.TypeRefused
		}
		if sb.registered {
			ids = append(ids, sb.engID)
		}
		c.dropLocked(sb)
		// A queue past its limit belongs to a client that is not
		// reading: it is closed all the same.
		c.q.pushLocked(simpleFrame(typ, sb.id, wire.CodeShuttingDown, reason, true))
	}
	c.q.wakeLocked()
	c.q.mu.Unlock()
	for _, id := range ids {
		c.unsubscribeEngine(id)
	}
	dctx, cancel := context.WithTimeout(ctx, shutdownDrain)
	defer cancel()
	for !c.drained() && dctx.Err() == nil && c.ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	c.fail(code, reason)
}

// drained reports whether everything queued was written and no write is
// under way.
func (c *conn) drained() bool {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	return len(c.q.items) == 0 && c.q.touch == nil && !c.q.inPool && c.nc.canTry()
}

// endAll ends every subscription: no frame about them follows, and the
// engine is told.
func (c *conn) endAll() {
	c.q.mu.Lock()
	c.gone = true
	var ids []engine.SubID
	for _, sb := range c.subs {
		if sb.registered {
			ids = append(ids, sb.engID)
		}
		c.dropLocked(sb)
	}
	c.q.mu.Unlock()
	for _, id := range ids {
		c.unsubscribeEngine(id)
	}
}

func (c *conn) teardown() {
	c.q.mu.Lock()
	c.q.closed = true
	c.q.mu.Unlock()
	c.endAll()
	items, _ := c.q.take(nil)
	_ = items
}

func (c *conn) unsubscribeEngine(id engine.SubID) {
	// A busy engine may take a while; giving up would leave the view
	// alive in the engine for nobody, so wait long, and say so once a
	// minute if it fails.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.s.cfg.Engine.Unsubscribe(ctx, id); err != nil && c.s.ctx.Err() == nil {
		if held, ok := c.s.limiter.allow("unsubscribe_failed"); ok {
			c.s.log.Warn("s2s: unsubscribe failed; the engine keeps the subscription until it stops", "err", err, "held_back", held)
		}
	}
}

// dropLocked removes sb from the connection.
func (c *conn) dropLocked(sb *sub) {
	if sb.ended {
		return
	}
	sb.ended = true
	delete(c.subs, sb.id)
	if sb.mode == engine.ModeTouch {
		c.q.untouchLocked(sb.id)
	}
	if m := c.s.cfg.Metrics; m != nil {
		m.Subscriptions.WithLabelValues(sb.mode.String()).Dec()
	}
}

func (c *conn) subCounts() (rows, touch int) {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	for _, sb := range c.subs {
		if sb.mode == engine.ModeTouch {
			touch++
		} else {
			rows++
		}
	}
	return rows, touch
}

// pong queues the answer to a WebSocket ping (a control frame, payload
// at most 125 bytes) behind the frames queued before it, and tells the
// library not to write one itself: its pong waits on the socket holding
// it, and a client flooding pings without reading would hold its read
// loop and socket for as long as the write may take. Queued, the pongs
// count toward the slow-consumer limit like any frame the client does
// not read.
func (c *conn) pong(payload []byte) bool {
	c.q.mu.Lock()
	if c.q.closed {
		c.q.mu.Unlock()
		return false
	}
	ok := c.q.pushItemLocked(item{frame: append([]byte(nil), payload...), pong: true})
	c.q.wakeLocked()
	c.q.mu.Unlock()
	if !ok {
		c.overflow()
	}
	return false
}

// push queues a frame; a full queue closes the connection as a slow
// consumer.
func (c *conn) push(b []byte) {
	c.q.mu.Lock()
	if c.q.closed {
		c.q.mu.Unlock()
		return // the connection is going; nothing more is sent
	}
	ok := c.q.pushLocked(b)
	c.q.wakeLocked()
	c.q.mu.Unlock()
	if !ok {
		c.overflow()
	}
}

func (c *conn) overflow() {
	c.q.mu.Lock()
	closed := c.gone
	c.q.mu.Unlock()
	select {
	case <-c.failed:
		return
	default:
	}
	if closed {
		return
	}
	// fail must not run on the engine's goroutine: it talks to the engine
	// and to the socket.
	go c.fail(wire.CloseSlowConsumer, fmt.Sprintf("outgoing queue passed %d bytes (--max-queue-bytes): read faster", c.s.cfg.MaxQueueBytes))
}

// Send implements engine.Sink. It runs on the engine's goroutine and never
// blocks. A panic while encoding one subscription's output (a bug) ends
// that subscription with internal and is logged with its stack; the
// engine and every other subscription go on.
func (sb *sub) Send(o engine.Output) {
	defer func() {
		if p := recover(); p != nil {
			sb.c.s.logPanic("s2s: encoding an output panicked", p, "remote", sb.c.remote, "kind", int(o.Kind))
			sb.end(wire.CodeInternal, "the server failed to encode this subscription's output (a bug, logged with its stack)", true)
		}
	}()
	sb.send(o)
}

// end ends a subscription the engine still holds (or is registering):
// an ended frame (a refused one before accepted), and the engine is told
// on another goroutine, since the engine's goroutine may be the caller.
func (sb *sub) end(code, reason string, retryable bool) {
	c := sb.c
	c.q.mu.Lock()
	if sb.ended {
		c.q.mu.Unlock()
		return
	}
	typ := wire.TypeEnded
	if !sb.live {
		typ = wire.TypeRefused
	}
	c.dropLocked(sb)
	reg, id := sb.registered, sb.engID
	ok := c.q.pushLocked(simpleFrame(typ, sb.id, code, reason, retryable))
	c.q.wakeLocked()
	c.q.mu.Unlock()
	if typ == wire.TypeRefused {
		c.s.countRefusal(code)
	}
	if reg {
		// Not registered yet: register sees sb.ended and unsubscribes.
		c.bg.Add(1)
		go func() {
			defer c.bg.Done()
			c.unsubscribeEngine(id)
		}()
	}
	if !ok {
		c.overflow()
	}
}

// tooLarge reports whether frame can never be queued on the connection.
func (c *conn) tooLarge(frame []byte) bool {
	lim := c.s.cfg.MaxQueueBytes
	return lim > 0 && len(frame) > lim
}

func (sb *sub) send(o engine.Output) {
	c := sb.c
	if h := c.s.sendHook.Load(); h != nil {
		(*h)(o)
	}
	var frame []byte
	switch o.Kind {
	case engine.OutputAccepted:
		frame = c.s.enc.accepted(sb.id, sb.mode, &o, sb.moves)
	case engine.OutputDelta:
		c.q.mu.Lock()
		cols, countKey := sb.cols, sb.countKey
		c.q.mu.Unlock()
		if countKey != nil {
			// The engine sends a count's change as Count alone; the
			// client also gets the result's one row, as accepted gave it.
			o.Rows = []engine.ResultRow{{Key: *countKey, Values: []any{o.Count}}}
		} else if isCount(cols) {
			// COUNT(*) under LIMIT 0 or an OFFSET: the result is empty
			// whatever the count, so it never changes and no delta is
			// sent (docs/s2s-protocol.md).
			return
		}
		frame = c.s.enc.delta(sb.id, cols, &o, sb.moves)
	case engine.OutputRefused:
		frame = simpleFrame(wire.TypeRefused, sb.id, wireCode(o.Code), o.Reason, o.Retryable)
	case engine.OutputEnded:
		frame = simpleFrame(wire.TypeEnded, sb.id, wireCode(o.Code), o.Reason, o.Retryable)
	}
	if c.tooLarge(frame) {
		// An answer the queue can never hold would close the connection
		// as a slow consumer however fast the client reads, and again
		// after every reconnect: refuse (or end) this subscription alone.
		lim := c.s.cfg.MaxQueueBytes
		if o.Kind == engine.OutputAccepted {
			sb.end(wire.CodeResultTooLarge, fmt.Sprintf("the result is %d bytes as a frame, more than a connection's outgoing queue holds (%d bytes, --max-queue-bytes): narrow the query or read PostgreSQL", len(frame), lim), false)
		} else {
			sb.end(wire.CodeResultTooLarge, fmt.Sprintf("a change to the result is %d bytes as a frame, more than a connection's outgoing queue holds (%d bytes, --max-queue-bytes); subscribing again reads the result afresh", len(frame), lim), true)
		}
		return
	}
	c.q.mu.Lock()
	if sb.ended {
		c.q.mu.Unlock()
		return
	}
	var ok bool
	switch o.Kind {
	case engine.OutputTouched:
		ok = c.q.touchLocked(o.LSN, sb.id)
	case engine.OutputAccepted:
		sb.live = true
		sb.cols = o.Columns
		if isCount(o.Columns) && len(o.Rows) == 1 {
			k := o.Rows[0].Key
			sb.countKey = &k
		}
		ok = c.q.pushLocked(frame)
	case engine.OutputRefused, engine.OutputEnded:
		c.dropLocked(sb)
		ok = c.q.pushLocked(frame)
		c.q.wakeLocked() // the engine may send these outside a batch (Engine.Close)
	default:
		// Queued until Flush: a transaction's frames are written
		// together, with one wake-up of the write loop.
		ok = c.q.pushLocked(frame)
	}
	c.q.mu.Unlock()
	if o.Kind == engine.OutputAccepted {
		if m := c.s.cfg.Metrics; m != nil {
			m.Hydration.Observe(time.Since(sb.started).Seconds())
		}
	}
	if o.Kind == engine.OutputRefused {
		c.s.countRefusal(wireCode(o.Code))
	}
	if !ok {
		c.overflow()
	}
}

// Flush implements engine.Flusher: the engine has handed out a
// transaction's outputs, so its touched frame is complete and its frames
// can go to the socket.
func (sb *sub) Flush() { sb.FlushReceived(time.Time{}) }

// FlushReceived implements engine.ReceiptFlusher: Flush, with the time the
// batch's transaction reached the engine, which the write that carries
// its frames measures from.
func (sb *sub) FlushReceived(at time.Time) {
	q := sb.c.q
	q.mu.Lock()
	q.endTxnLocked(at)
	q.mu.Unlock()
}

var _ engine.ReceiptFlusher = (*sub)(nil)

// wireCodes are the wire codes of the engine's own refusal and ending
// codes that differ from them; a query.Code is sent as it is.
var wireCodes = map[query.Code]string{
	engine.CodeReadTimeout:   wire.CodeTimeout,
	engine.CodeEngineStopped: wire.CodeShuttingDown,
	engine.CodeInternal:      wire.CodeInternal,
	"":                       wire.CodeInternal,
}

// wireCode is the code a refused or ended frame carries for an engine
// output's code.
func wireCode(c query.Code) string {
	if w, ok := wireCodes[c]; ok {
		return w
	}
	return string(c)
}

// observeWrites observes commit-to-write for each stamp: the socket has
// just taken the frames of transactions that reached the engine then.
func (s *Server) observeWrites(stamps []time.Time) {
	m := s.cfg.Metrics
	if m == nil || len(stamps) == 0 {
		return
	}
	now := time.Now()
	for _, at := range stamps {
		m.CommitToWrite.Observe(now.Sub(at).Seconds())
	}
}

func (s *Server) countRefusal(code string) {
	if m := s.cfg.Metrics; m != nil {
		m.Refusals.WithLabelValues(code).Inc()
	}
}

func (c *conn) sendError(code, id, msg string) {
	if len(id) > wire.MaxIDBytes {
		id = "" // never echoed: the frame had no usable id
	}
	b, _ := wire.Encode(&wire.Error{Code: code, ID: id, Message: msg})
	c.push(b)
}

func (c *conn) refuse(id, code, reason string, retryable bool) {
	c.s.countRefusal(code)
	c.push(simpleFrame(wire.TypeRefused, id, code, reason, retryable))
}

func (c *conn) readLoop() {
	max := c.s.cfg.MaxFrameBytes
	var buf bytes.Buffer
	for n := uint64(1); ; n++ {
		typ, r, err := c.ws.Reader(c.ctx)
		if err != nil {
			return
		}
		buf.Reset()
		limit := int64(max) + 1
		if max == 0 {
			limit = 1 << 62
		}
		got, err := buf.ReadFrom(io.LimitReader(r, limit))
		if err != nil {
			return
		}
		if max > 0 && got > int64(max) {
			// Discard the rest without holding it. The frame watch
			// answered when the header said it was over the limit;
			// otherwise (it saw no header) answer now.
			answered := c.nc.watch.answered(n)
			rest, err := io.Copy(io.Discard, r)
			if err != nil {
				return
			}
			if !answered {
				c.frameTooLarge(overMessage{n: n, size: got + rest})
			}
			continue
		}
		if typ != websocket.MessageText {
			c.sendError(wire.CodeBadFrame, "", "binary message: frames are JSON text messages")
			continue
		}
		if !utf8.Valid(buf.Bytes()) {
			// RFC 6455, section 8.1: a text message that is not UTF-8
			// fails the connection with 1007. Reading on would rewrite
			// the bytes (ids that differ could become one).
			c.s.countRefusal(wire.CodeBadFrame)
			c.fail(websocket.StatusInvalidFramePayloadData, "text message is not valid UTF-8")
			return
		}
		c.frame(buf.Bytes())
	}
}

// frameTooLarge answers a message over the frame limit.
func (c *conn) frameTooLarge(m overMessage) {
	max := c.s.cfg.MaxFrameBytes
	c.s.countRefusal(wire.CodeFrameTooLarge)
	c.sendError(wire.CodeFrameTooLarge, "", fmt.Sprintf("frame of %d bytes or more is over the limit of %d (max_frame_bytes): it is discarded as it arrives", m.size, max))
}

// frame handles one frame from the client. A panic here is a bug that
// one client's input reached: it is answered internal and logged with
// its stack, and the connection and every other go on.
func (c *conn) frame(b []byte) {
	defer func() {
		if p := recover(); p != nil {
			c.s.logPanic("s2s: a frame's handling panicked", p, "remote", c.remote)
			c.sendError(wire.CodeInternal, "", "the server failed to handle this frame (a bug, logged with its stack): the connection and its subscriptions go on")
		}
	}()
	f, err := wire.Decode(b, 0)
	if err != nil {
		var de *wire.DecodeError
		code := wire.CodeBadFrame
		id := ""
		if errors.As(err, &de) {
			code, id = de.Code, de.ID
		}
		c.sendError(code, id, err.Error())
		return
	}
	switch f := f.(type) {
	case *wire.Subscribe:
		c.subscribe(f)
	case *wire.Unsubscribe:
		c.unsubscribe(f.ID)
	case *wire.Ping:
		b, _ := wire.Encode(&wire.Pong{Data: f.Data})
		c.push(b)
	default:
		c.sendError(wire.CodeUnknownType, "", fmt.Sprintf("a client does not send %q frames", f.FrameType()))
	}
}

func decodeParams(ps []wire.Param) ([]query.Bind, error) {
	binds := make([]query.Bind, len(ps))
	for i, p := range ps {
		b := query.Bind{OID: p.OID}
		switch p.Format {
		case "", wire.FormatText:
			if p.Value != nil {
				b.Data = []byte(*p.Value)
			}
		case wire.FormatBinary:
			b.Format = query.FormatBinary
			if p.Value != nil {
				d, err := base64.StdEncoding.DecodeString(*p.Value)
				if err != nil {
					return nil, fmt.Errorf("parameter $%d: binary value is not base64: %v", i+1, err)
				}
				b.Data = d
			}
		default:
			return nil, fmt.Errorf("parameter $%d: format %q is not text or binary", i+1, p.Format)
		}
		if p.Value != nil && b.Data == nil {
			b.Data = []byte{}
		}
		binds[i] = b
	}
	return binds, nil
}

func (c *conn) subscribe(f *wire.Subscribe) {
	if f.ID == "" {
		c.sendError(wire.CodeBadID, "", "subscribe needs a non-empty id")
		return
	}
	if len(f.ID) > wire.MaxIDBytes {
		// A connection holds its ids for as long as the subscriptions
		// live: long ones would pin the frame limit's bytes each.
		c.sendError(wire.CodeBadID, "", fmt.Sprintf("subscription id of %d bytes is over the limit of %d bytes", len(f.ID), wire.MaxIDBytes))
		return
	}
	var mode engine.Mode
	switch f.Mode {
	case wire.ModeRows:
		mode = engine.ModeRows
	case wire.ModeTouch:
		mode = engine.ModeTouch
	default:
		c.refuse(f.ID, wire.CodeBadMode, fmt.Sprintf("mode %q is not rows or touch", f.Mode), false)
		return
	}
	binds, err := decodeParams(f.Params)
	if err != nil {
		c.refuse(f.ID, wire.CodeBadParam, err.Error(), false)
		return
	}
	var minLSN change.LSN
	if f.MinLSN != "" {
		if minLSN, err = change.ParseLSN(f.MinLSN); err != nil {
			c.refuse(f.ID, wire.CodeBadParam, fmt.Sprintf("min_lsn %q: want an LSN like 0/16B3748", f.MinLSN), false)
			return
		}
	}
	// An unknown delta_order is served as the full order (a client
	// asking for a form of a later version gets what this one has;
	// accepted says which it got).
	sb := &sub{c: c, id: f.ID, mode: mode, started: time.Now(), moves: f.DeltaOrder == wire.DeltaOrderMoves}
	c.q.mu.Lock()
	if c.gone {
		c.q.mu.Unlock()
		return
	}
	if _, dup := c.subs[f.ID]; dup {
		c.q.mu.Unlock()
		c.sendError(wire.CodeBadID, f.ID, fmt.Sprintf("subscription id %q is already in use on this connection", f.ID))
		return
	}
	if max := c.s.cfg.MaxSubscriptions; max > 0 && len(c.subs) >= max {
		c.q.mu.Unlock()
		c.refuse(f.ID, wire.CodeTooMany, fmt.Sprintf("this connection holds %d subscriptions, the limit (--max-subscriptions)", max), true)
		return
	}
	c.subs[f.ID] = sb
	c.q.mu.Unlock()
	if m := c.s.cfg.Metrics; m != nil {
		m.Subscriptions.WithLabelValues(mode.String()).Inc()
	}
	sql := f.SQL
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		c.register(sb, sql, binds, minLSN)
	}()
}

// errPanicked is subscribe's error when compiling panicked.
var errPanicked = errors.New("compiling the query failed inside the server (a bug, logged with its stack)")

// subscribeEngine is Engine.Subscribe, with a panic (compiling runs on
// this goroutine: a bug that a query reached) turned into an error.
func (c *conn) subscribeEngine(ctx context.Context, sb *sub, sql string, binds []query.Bind) (id engine.SubID, ref *query.Refusal, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.s.logPanic("s2s: subscribing panicked", p, "remote", c.remote, "sql_bytes", len(sql))
			id, ref, err = 0, nil, errPanicked
		}
	}()
	return c.s.cfg.Engine.Subscribe(ctx, sql, binds, sb.mode, sb)
}

// register asks the engine for the subscription. It runs on a goroutine of
// its own: compiling reads the catalog.
func (c *conn) register(sb *sub, sql string, binds []query.Bind, minLSN change.LSN) {
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.CompileTimeout)
	defer cancel()
	var id engine.SubID
	var ref *query.Refusal
	err := c.awaitPosition(ctx, minLSN)
	if err == nil {
		id, ref, err = c.subscribeEngine(ctx, sb, sql, binds)
	}
	code, reason, retry := "", "", false
	switch {
	case errors.Is(err, errBehind):
		code, reason, retry = wire.CodeBehind, err.Error(), true
	case ref != nil:
		code, reason, retry = string(ref.Code), ref.Message, ref.Retryable
	case errors.Is(err, context.DeadlineExceeded):
		code, reason, retry = wire.CodeTimeout, fmt.Sprintf("compiling the query took longer than %v (--compile-timeout)", c.s.cfg.CompileTimeout), true
	case err != nil:
		code, reason, retry = wire.CodeInternal, err.Error(), true
	}
	c.q.mu.Lock()
	if code != "" {
		if sb.ended {
			c.q.mu.Unlock()
			return
		}
		c.dropLocked(sb)
		c.q.mu.Unlock()
		c.refuse(sb.id, code, reason, retry)
		return
	}
	sb.engID, sb.registered = id, true
	ended := sb.ended
	c.q.mu.Unlock()
	if ended {
		c.unsubscribeEngine(id)
	}
}

// errBehind is wrapped when the engine did not reach a subscribe's
// min_lsn in time.
var errBehind = errors.New("behind")

// positioner is what awaitPosition needs of the engine (*engine.Engine).
type positioner interface{ Position() change.LSN }

// awaitPosition waits until the engine's position is at or past min: a
// subscription is registered only then, so its accepted result (exact at
// the engine's position when the read lands, which never goes back) is
// not older than what the client has seen on another replica.
func (c *conn) awaitPosition(ctx context.Context, at change.LSN) error {
	if at == 0 {
		return nil
	}
	p, ok := c.s.cfg.Engine.(positioner)
	if !ok {
		return nil
	}
	for wait := time.Millisecond; p.Position() < at; wait = min(2*wait, 50*time.Millisecond) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: the server is at %v and did not reach min_lsn %v within %v (--compile-timeout); it lags behind the replica the client saw", errBehind, p.Position(), at, c.s.cfg.CompileTimeout)
		case <-time.After(wait):
		}
	}
	return nil
}

func (c *conn) unsubscribe(id string) {
	c.q.mu.Lock()
	sb, ok := c.subs[id]
	if !ok {
		c.q.mu.Unlock()
		c.sendError(wire.CodeUnknownID, id, fmt.Sprintf("no subscription %q on this connection", id))
		return
	}
	c.dropLocked(sb)
	reg, engID := sb.registered, sb.engID
	c.q.mu.Unlock()
	if reg {
		c.unsubscribeEngine(engID)
	}
}

// writeLoop sends hello and the first lag frame, then hands the queue to
// the server's writers (the server's lag loop queues the later lag
// frames). It writes the queue itself when they hand it back: when the
// socket would not take a write at once (the writers never wait on a
// socket) or a drain is too big to try at once.
func (c *conn) writeLoop() {
	defer func() {
		if p := recover(); p != nil {
			c.s.logPanic("s2s: a connection's write loop panicked", p, "remote", c.remote)
			c.cancelLoops()
		}
	}()
	cfg := c.s.cfg
	hello, _ := wire.Encode(&wire.Hello{
		Protocol:         wire.Version,
		Server:           cfg.ServerVersion,
		SystemIdentifier: cfg.SystemIdentifier,
		Database:         cfg.Database,
		MaxSubscriptions: cfg.MaxSubscriptions,
		MaxFrameBytes:    cfg.MaxFrameBytes,
		LagIntervalMS:    int(cfg.LagInterval / time.Millisecond),
	})
	if c.nc.writeMessages([][]byte{hello, c.s.lagFrame(time.Now())}) != nil {
		c.cancelLoops()
		return
	}
	// The loop waits on the queue's channel alone (a select over three
	// channels was a tenth of the server's CPU at 1,000 sockets): the
	// connection's end signals it too.
	stop := context.AfterFunc(c.ctx, c.q.signal)
	defer stop()
	var w drain
	c.q.signal() // anything queued meanwhile; then to the writers
	for {
		<-c.q.ready
		if c.ctx.Err() != nil {
			return
		}
		select {
		case <-c.failed:
			return
		default:
		}
		c.q.mu.Lock()
		owned := !c.q.pooled
		c.q.mu.Unlock()
		if !owned {
			continue // a stale signal: the writers have the queue
		}
		c.q.mu.Lock()
		w.stamps = append(w.stamps, c.late...)
		c.late = c.late[:0]
		c.q.mu.Unlock()
		w.items, _ = c.q.take(w.items)
		if w.write(c.nc) != nil {
			c.cancelLoops()
			return
		}
		c.s.observeWrites(w.stamps)
		w.stamps = w.stamps[:0]
		c.q.mu.Lock()
		// The socket took everything offered: what counts against the
		// limit now is what was queued while it did.
		c.q.stall = c.q.bytes
		if len(c.q.items) > 0 {
			c.q.signal() // more came while writing: write it here too
		} else if c.nc.canTry() {
			c.q.pooled = true // back to the writers
		}
		c.q.mu.Unlock()
	}
}

// poolWrite is a writer's turn at the connection: it writes what is
// queued without waiting on the socket, or hands the queue back to the
// connection's write loop.
func (c *conn) poolWrite(w *drain) {
	q := c.q
	defer func() {
		if p := recover(); p != nil {
			c.s.logPanic("s2s: writing a connection's frames panicked", p, "remote", c.remote)
			q.mu.Lock()
			q.inPool = false
			q.mu.Unlock()
			go c.fail(websocket.StatusInternalError, "internal error (logged)")
		}
	}()
	for {
		q.mu.Lock()
		if q.closed || len(q.items) == 0 {
			q.inPool = false
			q.mu.Unlock()
			return
		}
		if q.bytes+10*len(q.items) > sockBufMax {
			// Too big to try at once: the write loop writes it.
			q.toWriteLoopLocked(0)
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		if !c.nc.tryAcquire() {
			// A write that may wait holds the socket (a control frame
			// the library writes, such as a pong to a client that does
			// not read): the write loop waits for it, never a writer.
			q.mu.Lock()
			q.toWriteLoopLocked(0)
			q.mu.Unlock()
			return
		}
		done, pending, err := c.tryDrain(w)
		if err != nil {
			q.mu.Lock()
			q.inPool = false
			q.mu.Unlock()
			go c.cancelLoops() // CloseNow waits for the connection's goroutines
			return
		}
		if !done {
			// The socket took part of it: the rest waits in nc for the
			// write loop, which may wait on the socket. What the socket
			// refused counts toward the slow-consumer limit.
			q.mu.Lock()
			q.toWriteLoopLocked(pending)
			q.mu.Unlock()
			return
		}
	}
}

// tryDrain takes the queue and tries to write it to the socket, which the
// caller acquired; it gives the socket back, and says what the socket
// left pending.
func (c *conn) tryDrain(w *drain) (done bool, pending int, err error) {
	defer c.nc.release()
	w.items, _ = c.q.take(w.items)
	done, err = w.try(c.nc)
	switch {
	case err != nil:
		w.stamps = w.stamps[:0]
	case done:
		c.s.observeWrites(w.stamps)
		w.stamps = w.stamps[:0]
	default:
		// The rest goes out from the write loop, which observes these
		// once the socket has taken it.
		c.q.mu.Lock()
		c.late = append(c.late, w.stamps...)
		c.q.mu.Unlock()
		w.stamps = w.stamps[:0]
	}
	return done, c.nc.pendingLocked(), err
}

// drain is a write loop's reusable buffers for writing what it took from
// the queue.
type drain struct {
	items   []item
	msgs    [][]byte
	ops     []byte // each message's opcode, when a pong is among them
	touches []byte // touched frames encoded for this drain
	ends    []int  // where each ends in touches
	// stamps are the received times of the drained items that carry one
	// (a transaction's last frame), observed once the socket took them.
	stamps []time.Time
}

// collectStamps appends the drained items' received stamps to d.stamps.
func (d *drain) collectStamps() {
	for i := range d.items {
		if at := d.items[i].received; !at.IsZero() {
			d.stamps = append(d.stamps, at)
		}
	}
}

// frames turns the drained items into messages: the touched frames are
// encoded one after another into one buffer, which the messages slice
// once it no longer grows. The opcodes are nil when every message is a
// text message.
func (d *drain) frames() ([][]byte, []byte) {
	d.touches, d.ends = d.touches[:0], d.ends[:0]
	pongs := false
	for i := range d.items {
		pongs = pongs || d.items[i].pong
		if t := d.items[i].touch; t != nil {
			d.touches = t.encode(d.touches)
			d.ends = append(d.ends, len(d.touches))
		}
	}
	d.msgs = d.msgs[:0]
	start, k := 0, 0
	for i := range d.items {
		b := d.items[i].frame
		if d.items[i].touch != nil {
			b = d.touches[start:d.ends[k]]
			start = d.ends[k]
			k++
		}
		d.msgs = append(d.msgs, b)
	}
	if !pongs {
		return d.msgs, nil
	}
	d.ops = d.ops[:0]
	for i := range d.items {
		op := byte(opText)
		if d.items[i].pong {
			op = opPong
		}
		d.ops = append(d.ops, op)
	}
	return d.msgs, d.ops
}

func (d *drain) forget() {
	clear(d.msgs)
	clear(d.items)
}

// write writes the drained items, each frame its own WebSocket message,
// waiting on the socket as long as the write timeout allows.
func (d *drain) write(nc *sockConn) error {
	d.collectStamps()
	err := nc.writeFrames(d.frames())
	d.forget()
	return err
}

// try writes the drained items without waiting on the socket, which the
// caller holds (tryAcquire): what it does not take now stays in nc for a
// write that may wait.
func (d *drain) try(nc *sockConn) (bool, error) {
	d.collectStamps()
	done, err := nc.tryFramesLocked(d.frames())
	d.forget()
	return done, err
}

// cancelLoops ends both loops after a failed write.
func (c *conn) cancelLoops() {
	c.cancel()
	_ = c.ws.CloseNow()
}
