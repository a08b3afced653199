package pgwal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Errors returned by Next when the slot can no longer deliver changes.
// Both mean changes may be gone for good: the consumer must start over
// (re-snapshot) rather than carry on.
var (
	// ErrSlotDropped means the replication slot was dropped while the
	// reader followed it.
	ErrSlotDropped = errors.New("replication slot was dropped; changes since the last acknowledged position are lost: recreate it (Create) and start again from a fresh snapshot")
	// ErrSlotInvalidated means PostgreSQL invalidated the slot (wal_status
	// 'lost'), usually because it pinned more WAL than
	// max_slot_wal_keep_size allows.
	ErrSlotInvalidated = errors.New("replication slot was invalidated (wal_status 'lost', it held more WAL than max_slot_wal_keep_size allows); changes are lost: drop it with pg_drop_replication_slot, recreate it (Create), and start again from a fresh snapshot")
	// ErrClosed is returned by Next after Close.
	ErrClosed = errors.New("reader closed")
)

const (
	defaultSlot           = "freshet"
	defaultPublication    = "freshet"
	defaultStatusInterval = 10 * time.Second
	defaultHeartbeat      = 500 * time.Millisecond

	// defaultProtoVersion is pgoutput protocol 2, chosen by measurement
	// (TestProtoThroughput, FRESHET_PROTO_BENCH=1 and =21 to swap the
	// order; PostgreSQL 15.18, 2 shared cores under load average ~12, the
	// same WAL drained through two slots made at the same point):
	//
	//	                          proto 1             proto 2
	//	200,000 small txns        18.7k / 17.9k tx/s  22.1k / 16.3k tx/s (a tie: order and load decide)
	//	one 1,000,000-row txn     27.6s / 25.2s       17.7s / 17.3s      (2 is 1.45-1.55x faster)
	//
	// With protocol 1 the walsender must hold a big transaction until its
	// commit, spilling it to pg_replslot on the database server past
	// logical_decoding_work_mem and reading it back; with protocol 2 it
	// streams the transaction while it is written, and our decoder bounds
	// the memory it buffers (DecoderOptions.MemoryLimit, SpillDir). Small
	// transactions cost the same either way.
	defaultProtoVersion = 2

	// The receiver hands XLogData to the consumer in batches: the
	// messages pgconn has already buffered go in one batch, so a wake-up
	// of the consumer costs one channel operation for up to maxBatchMsgs
	// messages rather than one each. At most queueLen*maxBatchMsgs (256,
	// as many as the queue held one by one before) wait in the queue.
	queueLen       = 4         // batches between the receiver and the consumer
	maxBatchMsgs   = 64        // most messages in one batch
	maxBatchBytes  = 64 << 10  // a batch is handed over once it holds this many bytes
	maxPooledBatch = 1 << 20   // batch buffers up to this size are reused
	receiveBuffer  = 256 << 10 // bytes one read syscall of the replication connection may take

	backoffMin     = 200 * time.Millisecond
	backoffMax     = 15 * time.Second
	cleanupTimeout = 10 * time.Second
	connectTimeout = 30 * time.Second

	// closeReportTimeout bounds how long Close waits for the slot to show
	// the last acknowledged position.
	closeReportTimeout = 3 * time.Second
)

// Config configures a Reader. Start from DefaultConfig.
type Config struct {
	DSN         string   // the database to follow; replication=database is added
	Slot        string   // replication slot; "" = "freshet"
	Publication string   // publication; "" = "freshet"
	Tables      []string // publication tables ("t" or "schema.t"); empty = FOR ALL TABLES
	Create      bool     // create the slot and publication when missing

	// ProtoVersion is pgoutput's proto_version, 1 or 2; 0 = 2 (see
	// defaultProtoVersion for why).
	ProtoVersion int
	Binary       bool // values in binary send form

	// StartLSN is where to resume: transactions that committed at or before
	// it are not delivered. 0 = the slot's confirmed_flush_lsn.
	StartLSN change.LSN

	// HeartbeatInterval is how often a heartbeat is written into the WAL;
	// 0 turns heartbeats off. DefaultConfig sets 500ms.
	HeartbeatInterval time.Duration
	// StatusInterval is how often a standby status update reports the
	// acknowledged position when the server asks for nothing sooner;
	// 0 = 10s.
	StatusInterval time.Duration
	// AckedOnly keeps the slot's confirmed position at what the consumer
	// acknowledged: without it an idle slot moves on to the server's WAL
	// end when everything delivered is acknowledged. A consumer that must
	// tell, after a restart, whether the slot moved past something it
	// never handled (freshet relay, comparing the slot with its bus) sets
	// it, and keeps heartbeats on so its acknowledgements keep the slot
	// from pinning WAL.
	AckedOnly bool

	Logger  *slog.Logger   // nil = slog.Default()
	Decoder DecoderOptions // fragment sizes, memory limit, spill dir; ProtoVersion, Binary, HeartbeatPrefix and Types are set by the Reader
}

// DefaultConfig returns a Config with every default filled in: slot and
// publication "freshet", pgoutput protocol 2 (streams large transactions
// while they are written: 1.5x faster than protocol 1 on a million-row
// transaction and even on small ones, see defaultProtoVersion),
// heartbeats every 500ms, status updates every 10s. Set DSN before use.
func DefaultConfig() Config {
	return Config{
		Slot:              defaultSlot,
		Publication:       defaultPublication,
		ProtoVersion:      defaultProtoVersion,
		HeartbeatInterval: defaultHeartbeat,
		StatusInterval:    defaultStatusInterval,
	}
}

// Validate reports the first setting that cannot work, saying what is
// accepted.
func (c Config) Validate() error {
	if c.DSN == "" {
		return errors.New("DSN is empty: give the database to follow, like postgres://user@host:5432/db")
	}
	if _, err := pgconn.ParseConfig(c.DSN); err != nil {
		return fmt.Errorf("DSN %q: %w", redactDSN(c.DSN), err)
	}
	if c.Slot != "" && !validName(c.Slot) {
		return fmt.Errorf("slot name %q: PostgreSQL allows only lower-case letters, digits and underscores, 1 to 63 of them", c.Slot)
	}
	if len(c.Publication) > 63 || strings.ContainsRune(c.Publication, 0) {
		return fmt.Errorf("publication name %q: PostgreSQL names are at most 63 bytes, without NUL", c.Publication)
	}
	for _, t := range c.Tables {
		if strings.TrimSpace(t) == "" {
			return errors.New("Tables holds an empty name: give each as table or schema.table")
		}
	}
	if c.ProtoVersion != 0 && c.ProtoVersion != 1 && c.ProtoVersion != 2 {
		return fmt.Errorf("ProtoVersion %d: pgoutput speaks 1 or 2", c.ProtoVersion)
	}
	if c.HeartbeatInterval < 0 {
		return fmt.Errorf("HeartbeatInterval %v: want 0 (off) or more", c.HeartbeatInterval)
	}
	if c.StatusInterval < 0 {
		return fmt.Errorf("StatusInterval %v: want 0 (default) or more", c.StatusInterval)
	}
	return nil
}

// validName reports whether s follows PostgreSQL's replication slot name
// rules: [a-z0-9_]{1,63}.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		return u.String()
	}
	return dsn
}

func (c Config) withDefaults() Config {
	if c.Slot == "" {
		c.Slot = defaultSlot
	}
	if c.Publication == "" {
		c.Publication = defaultPublication
	}
	if c.ProtoVersion == 0 {
		c.ProtoVersion = defaultProtoVersion
	}
	if c.StatusInterval == 0 {
		c.StatusInterval = defaultStatusInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// HeartbeatPrefix is the logical message prefix of a slot's heartbeats.
func HeartbeatPrefix(slot string) string { return "freshet.heartbeat." + slot }

// Reader follows a database through a logical replication slot and hands
// out its committed transactions in commit order.
//
// One goroutine receives from the walsender: it answers keepalives at once
// and hands XLogData to Next through a bounded queue, in batches of
// whatever it has already read from the socket, while a second one sends
// standby status updates, so a consumer that stops calling Next slows the
// stream (TCP backpressure) but never lets wal_sender_timeout drop the
// connection.
type Reader struct {
	cfg   Config
	start change.LSN // the slot's position at Open
	log   *slog.Logger
	id    systemIdentity
	types *typeCache
	hb    *heartbeater

	queue  chan *batch
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once

	mu       sync.Mutex
	acked    change.LSN // highest acknowledged position
	flushed  change.LSN // reported flush position: acked, or further when idle
	received change.LSN // highest position received
	kaEnd    change.LSN // server WAL end of the newest keepalive
	txnOut   change.LSN // commit LSN of the newest transaction fragment handed out
	inflight int        // XLogData received and not yet decoded
	quiet    bool       // the consumer holds no partial transaction and no ready event

	// Owned by the goroutine calling Next; decMu lets Close release the
	// decoder while Next waits.
	decMu      sync.Mutex
	decClosed  bool
	dec        *Decoder
	peeked     change.Event // the decoder's next ready event, taken early
	cur        *batch       // the batch being decoded
	curAt      int          // next message of cur
	decoded    int          // messages decoded and not yet taken off inflight
	inTxn      bool
	streams    map[uint32]struct{} // protocol 2: streamed xids neither committed nor aborted
	lastCommit change.LSN          // commit LSN of the newest whole transaction delivered
	lastHB     change.LSN
	partial    *partialTxn
	err        error
}

// partialTxn is a transaction whose first fragments were delivered before
// the connection was lost; it is resent whole after the resume.
type partialTxn struct {
	commit    change.LSN
	changes   int // non-relation changes delivered
	bytes     int // Encoded bytes delivered (DecoderOptions.StreamEncoder)
	nextFrag  int
	skip      int // non-relation changes still to skip in the resent copy
	skipBytes int // Encoded bytes still to skip in it
}

// batch is one entry of the receive queue: XLogData messages, copied
// one after another into buf, or a control entry (reset, err).
type batch struct {
	buf   []byte
	msgs  []batchMsg
	reset bool  // a new session begins: decode with a fresh Decoder
	err   error // the stream cannot go on
}

// batchMsg is one XLogData payload of a batch: buf[start:end].
type batchMsg struct {
	start, end int
	walStart   change.LSN
}

var batchPool = sync.Pool{New: func() any { return &batch{buf: make([]byte, 0, 64<<10)} }}

func getBatch() *batch { return batchPool.Get().(*batch) }

// putBatch recycles b once every message in it is decoded (the Decoder
// copies what it keeps).
func putBatch(b *batch) {
	if cap(b.buf) > maxPooledBatch || b.reset || b.err != nil {
		return
	}
	b.buf, b.msgs = b.buf[:0], b.msgs[:0]
	batchPool.Put(b)
}

// Open checks the server, creates the slot and publication when asked,
// and starts streaming from cfg.StartLSN (or where the slot stands).
func Open(ctx context.Context, cfg Config) (*Reader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("open reader: %w", err)
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger.With("slot", cfg.Slot)

	conn, err := connectNormal(ctx, cfg.DSN, nil)
	if err != nil {
		return nil, fmt.Errorf("open reader: %w", err)
	}
	defer conn.Close(context.Background())
	res, err := setup(ctx, conn, &cfg, log)
	if err != nil {
		return nil, fmt.Errorf("open reader: %w", err)
	}
	r := &Reader{
		cfg:        cfg,
		log:        log,
		queue:      make(chan *batch, queueLen),
		quiet:      true,
		streams:    map[uint32]struct{}{},
		lastCommit: max(cfg.StartLSN, res.ConfirmedFlush),
		start:      res.ConfirmedFlush,
	}
	// The server never moves a slot back, and never sends what committed
	// before its confirmed position.
	r.acked = max(cfg.StartLSN, res.ConfirmedFlush)
	r.flushed = r.acked
	r.types = newTypeCache(cfg.DSN, log)
	r.ctx, r.cancel = context.WithCancel(context.Background())

	rconn, err := r.connect(ctx, true)
	if err != nil {
		r.cancel()
		r.types.close()
		undoSetup(conn, &cfg, res, log)
		return nil, fmt.Errorf("open reader: %w", err)
	}
	if cfg.HeartbeatInterval > 0 {
		r.hb = startHeartbeat(r.ctx, cfg.DSN, HeartbeatPrefix(cfg.Slot), cfg.HeartbeatInterval, log)
	}
	r.wg.Add(1)
	go r.run(rconn)
	return r, nil
}

// SystemID is the server's system identifier (IDENTIFY_SYSTEM).
func (r *Reader) SystemID() string { return r.id.SystemID }

// ConsistentPoint is where the slot stood when Open found it: its
// confirmed_flush_lsn, or its consistent point when Open created it.
// Changes that committed after it are streamed.
func (r *Reader) ConsistentPoint() change.LSN { return r.start }

// Database is the name of the followed database.
func (r *Reader) Database() string { return r.id.DBName }

// Types resolves type OIDs that are not built in (enums, domains, arrays
// of them) from pg_type, once per OID.
func (r *Reader) Types() change.TypeResolver { return r.types }

// Beat asks for a heartbeat written now rather than at the next interval,
// and returns at once. The heartbeat is written after the call (requests
// made while one is pending are answered by one), so once it arrives the
// stream has passed every WAL position the database had when Beat was
// called: the engine asks for one when a hydration read has taken its
// snapshot, so the read need not wait for the next interval on a quiet
// database. Each is one transaction (an xid and a WAL flush); at most one
// is written at a time. With heartbeats off (HeartbeatInterval 0) it does
// nothing. Safe to call from any goroutine.
func (r *Reader) Beat() { r.hb.beat() }

// Ack records that everything up to and including lsn is durably handled.
// The slot's confirmed flush position never moves past acknowledged
// positions (except, when nothing delivered is unacknowledged and nothing is
// buffered, to the server's WAL end, so an idle slot does not pin WAL).
// Acknowledging a heartbeat's position acknowledges every transaction
// delivered before it, so do so only once those are handled. It is safe
// to call from any goroutine.
func (r *Reader) Ack(lsn change.LSN) {
	r.mu.Lock()
	if lsn > r.acked {
		r.acked = lsn
	}
	if r.acked > r.flushed {
		r.flushed = r.acked
	}
	r.mu.Unlock()
}

// Close stops streaming, reports the acknowledged position to the server
// one last time, and releases the connections.
func (r *Reader) Close() error {
	r.closeOnce.Do(func() {
		r.cancel()
		r.wg.Wait()
		r.hb.wait()
		r.types.close()
		r.decMu.Lock()
		r.decClosed = true
		if r.dec != nil {
			_ = r.dec.Close()
		}
		r.decMu.Unlock()
	})
	return nil
}

// Next blocks for the next event in commit order: a *change.Txn fragment
// or a *change.Heartbeat. Transactions that committed at or before the
// last delivered position (resent after a reconnect) are dropped. An error
// is final: ErrSlotDropped or ErrSlotInvalidated wrapped, a decode error,
// or ErrClosed.
func (r *Reader) Next(ctx context.Context) (change.Event, error) {
	r.decMu.Lock()
	defer r.decMu.Unlock()
	for {
		if r.err != nil {
			return nil, r.err
		}
		if r.decClosed {
			return nil, ErrClosed
		}
		if r.dec != nil {
			ev := r.peeked
			r.peeked = nil
			if ev == nil {
				var err error
				if ev, err = r.dec.Next(); err != nil {
					r.err = fmt.Errorf("decode: %w", err)
					return nil, r.err
				}
			}
			if ev != nil {
				out := r.filter(ev)
				if out == nil {
					continue
				}
				// Look one event ahead, so the idle acknowledgement knows
				// whether anything is still buffered in the decoder.
				var err error
				if r.peeked, err = r.dec.Next(); err != nil {
					r.err = fmt.Errorf("decode: %w", err)
				}
				r.mu.Lock()
				r.inflight -= r.decoded
				r.decoded = 0
				r.quiet = r.peeked == nil && !r.inTxn && len(r.streams) == 0
				r.mu.Unlock()
				return out, nil
			}
			if b := r.cur; b != nil && r.curAt < len(b.msgs) {
				m := b.msgs[r.curAt]
				r.curAt++
				r.decode(b.buf[m.start:m.end], m.walStart)
				continue
			}
			r.mu.Lock()
			r.inflight -= r.decoded
			r.decoded = 0
			r.quiet = !r.inTxn && len(r.streams) == 0
			r.mu.Unlock()
		}
		if r.cur != nil {
			putBatch(r.cur)
			r.cur, r.curAt = nil, 0
		}
		var b *batch
		var ok bool
		var waitErr error
		r.decMu.Unlock()
		select {
		case b, ok = <-r.queue:
		case <-ctx.Done():
			waitErr = ctx.Err()
		case <-r.ctx.Done():
		}
		r.decMu.Lock()
		if waitErr != nil {
			return nil, waitErr
		}
		if !ok || r.decClosed {
			return nil, ErrClosed
		}
		switch {
		case b.err != nil:
			r.err = b.err
		case b.reset:
			r.newDecoder()
		default:
			r.mu.Lock()
			r.quiet = false
			r.mu.Unlock()
			r.cur, r.curAt = b, 0
		}
	}
}

func (r *Reader) newDecoder() {
	if r.dec != nil {
		_ = r.dec.Close()
	}
	r.peeked = nil
	if r.partial != nil {
		// The server sends the cut-off transaction again from its start.
		r.partial.skip = r.partial.changes
		r.partial.skipBytes = r.partial.bytes
	}
	opts := r.cfg.Decoder
	opts.ProtoVersion = r.cfg.ProtoVersion
	opts.Binary = r.cfg.Binary
	opts.HeartbeatPrefix = HeartbeatPrefix(r.cfg.Slot)
	opts.Types = r.types
	r.dec = NewDecoder(opts)
	r.inTxn = false
	clear(r.streams)
}

// decode feeds one XLogData payload to the decoder, keeping track of
// whether a transaction is open so the idle acknowledgement never skips
// one.
func (r *Reader) decode(msg []byte, walStart change.LSN) {
	r.decoded++
	if len(msg) > 0 {
		switch msg[0] {
		case 'B':
			r.inTxn = true
		case 'C':
			r.inTxn = false
		case 'S':
			if len(msg) >= 5 {
				r.streams[be32(msg[1:])] = struct{}{}
			}
		case 'c':
			if len(msg) >= 5 {
				delete(r.streams, be32(msg[1:]))
			}
		case 'A':
			if len(msg) >= 9 && be32(msg[1:]) == be32(msg[5:]) {
				delete(r.streams, be32(msg[1:]))
			}
		}
	}
	if err := r.dec.Decode(msg, walStart); err != nil {
		r.err = fmt.Errorf("decode message at %s: %w", walStart, err)
	}
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// filter drops what was already delivered before a reconnect and returns
// what is left of ev, or nil.
func (r *Reader) filter(ev change.Event) change.Event {
	switch e := ev.(type) {
	case *change.Heartbeat:
		if e.LSN <= r.lastHB {
			return nil
		}
		r.lastHB = e.LSN
		return e
	case *change.Txn:
		if e.CommitLSN <= r.lastCommit {
			return nil
		}
		if p := r.partial; p != nil {
			if e.CommitLSN != p.commit {
				r.err = fmt.Errorf("transaction committed at %s was cut off after %d changes by a reconnect and not resent (got %s instead): start again from the last acknowledged position", p.commit, p.changes, e.CommitLSN)
				return nil
			}
			if p.skip > 0 {
				e.Changes = skipChanges(e.Changes, &p.skip)
			}
			if k := min(p.skipBytes, len(e.Encoded)); k > 0 {
				e.Encoded, p.skipBytes = e.Encoded[k:], p.skipBytes-k
			}
			if len(e.Changes) == 0 && len(e.Encoded) == 0 && !e.Last {
				return nil
			}
			e.Fragment = p.nextFrag
		}
		if e.Last {
			r.lastCommit = e.CommitLSN
			r.partial = nil
		} else {
			if r.partial == nil {
				r.partial = &partialTxn{commit: e.CommitLSN}
			}
			r.partial.changes += countChanges(e.Changes)
			r.partial.bytes += len(e.Encoded)
			r.partial.nextFrag = e.Fragment + 1
		}
		r.mu.Lock()
		r.txnOut = e.CommitLSN
		r.mu.Unlock()
		return e
	}
	return ev
}

// skipChanges drops the first *n non-relation changes (and the relation
// changes among them, which the consumer already has).
func skipChanges(cs []change.Change, n *int) []change.Change {
	i := 0
	for ; i < len(cs) && *n > 0; i++ {
		if cs[i].Op != change.OpRelation {
			*n--
		}
	}
	return cs[i:]
}

func countChanges(cs []change.Change) int {
	n := 0
	for i := range cs {
		if cs[i].Op != change.OpRelation {
			n++
		}
	}
	return n
}

// flushPosLocked returns the position to report as flushed. When nothing
// delivered is unacknowledged and nothing is buffered anywhere between the
// socket and the consumer, everything the server has sent is handled, so
// the position moves to just before the newest keepalive's WAL end (a
// record may start exactly at that end, and it must still be sent again
// after a restart).
func (r *Reader) flushPosLocked() change.LSN {
	if !r.cfg.AckedOnly && r.inflight == 0 && r.quiet && r.txnOut <= r.acked && r.kaEnd > 0 && r.kaEnd-1 > r.flushed {
		r.flushed = r.kaEnd - 1
	}
	return r.flushed
}

// connect opens a replication connection and starts streaming from the
// reported flush position. A slot held by another process is waited for.
// first is true for the connection made by Open.
func (r *Reader) connect(ctx context.Context, first bool) (*session, error) {
	backoff := backoffMin
	for {
		s, err := r.connectOnce(ctx, first)
		if err == nil {
			return s, nil
		}
		var active *slotActiveError
		if !errors.As(err, &active) {
			return nil, err
		}
		r.log.Warn(fmt.Sprintf("replication slot %q is in use by another process (PID %s); waiting for it to be released", r.cfg.Slot, active.pid), "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for replication slot %q held by PID %s: %w", r.cfg.Slot, active.pid, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, backoffMax)
	}
}

// slotActiveError means another process streams from the slot.
type slotActiveError struct {
	pid string
	err error
}

func (e *slotActiveError) Error() string { return e.err.Error() }
func (e *slotActiveError) Unwrap() error { return e.err }

func (r *Reader) connectOnce(ctx context.Context, first bool) (*session, error) {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, br, err := connectReplication(cctx, r.cfg.DSN, receiveBuffer)
	if err != nil {
		return nil, err
	}
	id, err := identifySystem(cctx, conn)
	if err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	if first {
		r.id = id
	} else if id.SystemID != r.id.SystemID {
		conn.Close(context.Background())
		return nil, &fatalError{fmt.Errorf("the server's system identifier changed from %s to %s (a different or restored cluster): start again from a fresh snapshot", r.id.SystemID, id.SystemID)}
	}
	timeout := senderTimeout(cctx, conn)
	r.mu.Lock()
	start := r.flushed
	r.mu.Unlock()
	if err := startReplication(cctx, conn, r.cfg.Slot, start, pluginOptions(r.cfg.ProtoVersion, r.cfg.Publication, r.cfg.Binary)); err != nil {
		conn.Close(context.Background())
		return nil, r.classify(err)
	}
	r.log.Debug("streaming", "from", start, "proto_version", r.cfg.ProtoVersion)
	return &session{conn: conn, buffered: br, senderTimeout: timeout}, nil
}

// senderTimeout reads wal_sender_timeout (0 = disabled); when it cannot,
// it assumes 4s, so the status cadence while the consumer stalls stays
// short.
func senderTimeout(ctx context.Context, conn *pgconn.PgConn) time.Duration {
	res, err := conn.Exec(ctx, "SELECT setting FROM pg_settings WHERE name = 'wal_sender_timeout'").ReadAll()
	if err != nil || len(res) != 1 || len(res[0].Rows) != 1 {
		return 4 * time.Second
	}
	var ms int64
	if _, err := fmt.Sscan(string(res[0].Rows[0][0]), &ms); err != nil {
		return 4 * time.Second
	}
	return time.Duration(ms) * time.Millisecond
}

// fatalError marks an error after which following the slot cannot go on.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// classify turns server errors into the reader's: slot gone or
// invalidated (fatal), slot busy (wait), or anything else (retry).
func (r *Reader) classify(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch {
	case pgErr.Code == "55006" && strings.Contains(pgErr.Message, "is active for PID"):
		pid := pgErr.Message[strings.LastIndex(pgErr.Message, " ")+1:]
		return &slotActiveError{pid: pid, err: err}
	case pgErr.Code == "42704" && strings.Contains(pgErr.Message, "replication slot"):
		return &fatalError{fmt.Errorf("replication slot %q: %w (%v)", r.cfg.Slot, ErrSlotDropped, err)}
	case strings.Contains(pgErr.Message, "can no longer get changes from replication slot"),
		strings.Contains(pgErr.Message, "cannot read from logical replication slot"):
		return &fatalError{fmt.Errorf("replication slot %q: %w (%v)", r.cfg.Slot, ErrSlotInvalidated, err)}
	case pgErr.Code == "42704" && strings.Contains(pgErr.Message, "publication"):
		return &fatalError{fmt.Errorf("publication %q was dropped: recreate it (Create) and start again: %w", r.cfg.Publication, err)}
	case strings.HasPrefix(pgErr.Code, "28"), pgErr.Code == "3D000", pgErr.Code == "42501":
		return &fatalError{err}
	}
	return err
}

// run streams sessions one after another, reconnecting with backoff, until
// Close or a fatal error.
func (r *Reader) run(s *session) {
	defer r.wg.Done()
	defer close(r.queue)
	backoff := backoffMin
	for {
		if !r.push(&batch{reset: true}) {
			s.conn.Close(context.Background())
			return
		}
		began := time.Now()
		err := r.stream(s)
		if r.ctx.Err() != nil {
			return
		}
		if time.Since(began) > backoffMax {
			backoff = backoffMin
		}
		err = r.classify(err)
		for {
			var fatal *fatalError
			if errors.As(err, &fatal) {
				r.log.Error("replication stopped", "err", err)
				r.push(&batch{err: fatal.err})
				return
			}
			r.log.Warn("replication connection lost; reconnecting", "err", err, "retry_in", backoff)
			select {
			case <-r.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, backoffMax)
			s, err = r.connect(r.ctx, false)
			if err == nil {
				r.log.Info("replication resumed", "from", r.flushedPos())
				break
			}
			if r.ctx.Err() != nil {
				return
			}
		}
	}
}

func (r *Reader) flushedPos() change.LSN {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.flushed
}

// push hands a batch to Next, or gives up when the reader closes.
func (r *Reader) push(b *batch) bool {
	select {
	case r.queue <- b:
		return true
	case <-r.ctx.Done():
		return false
	}
}

// session is one replication connection in CopyBoth mode.
type session struct {
	conn          *pgconn.PgConn
	buffered      *bufio.Reader // below conn's reads: what it holds is read but not yet parsed
	senderTimeout time.Duration
	blocked       atomic.Bool // the receiver waits for room in the queue
}

// stream receives until the connection fails or the reader closes. It
// returns the reason.
func (r *Reader) stream(s *session) error {
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	replyNow := make(chan struct{}, 1)
	statusDone := make(chan error, 1)
	go func() { statusDone <- r.statusLoop(ctx, s, replyNow) }()
	defer func() {
		cancel()
		<-statusDone
		s.conn.Close(context.Background())
	}()

	// XLogData read and not yet handed over: b holds them, pending counts
	// those not yet in r.inflight, received is the newest WALStart.
	b := getBatch()
	pending := 0
	var received change.LSN
	// account adds what was read to what the status updates see. It runs
	// before a keepalive's WAL end is recorded, so the idle
	// acknowledgement never passes a message still in hand.
	account := func() {
		r.mu.Lock()
		r.inflight += pending
		r.received = max(r.received, received)
		r.mu.Unlock()
		pending = 0
	}
	defer func() {
		// What was read before the connection failed is delivered, as
		// the keepalives read with it may already let the idle
		// acknowledgement pass it. Only Close drops it.
		account()
		if len(b.msgs) > 0 && r.push(b) {
			return
		}
		r.mu.Lock()
		r.inflight -= len(b.msgs)
		r.mu.Unlock()
	}()
	fe := s.conn.Frontend()
	for {
		msg, err := s.conn.ReceiveMessage(context.Background())
		if err != nil {
			if ctx.Err() != nil {
				select {
				case serr := <-statusDone:
					statusDone <- serr
					if serr != nil {
						return serr
					}
				default:
				}
			}
			return fmt.Errorf("receive: %w", err)
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			x, ka, err := parseCopyData(m.Data)
			if err != nil {
				return err
			}
			if ka != nil {
				account()
				r.mu.Lock()
				r.kaEnd = max(r.kaEnd, ka.ServerWALEnd)
				r.received = max(r.received, ka.ServerWALEnd)
				r.mu.Unlock()
				if ka.ReplyRequested {
					select {
					case replyNow <- struct{}{}:
					default:
					}
				}
				break
			}
			start := len(b.buf)
			b.buf = append(b.buf, x.Data...)
			b.msgs = append(b.msgs, batchMsg{start: start, end: len(b.buf), walStart: x.WALStart})
			pending++
			received = max(received, x.WALStart)
		case *pgproto3.ErrorResponse:
			return pgconn.ErrorResponseToPgError(m)
		case *pgproto3.CopyDone:
			return errors.New("the server ended the replication stream (CopyDone)")
		default:
			// NoticeResponse, ParameterStatus: nothing to do.
		}
		// Hand the batch over once nothing more is buffered (the next
		// receive would wait for the network) or it is full.
		if len(b.msgs) == 0 || (fe.ReadBufferLen() > 0 || s.buffered.Buffered() > 0) && len(b.msgs) < maxBatchMsgs && len(b.buf) < maxBatchBytes {
			continue
		}
		account()
		select {
		case r.queue <- b:
			b = getBatch()
			continue
		default:
		}
		s.blocked.Store(true)
		select {
		case r.queue <- b:
			s.blocked.Store(false)
			b = getBatch()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// statusLoop sends standby status updates: at once when the server asks,
// soon after the acknowledged position moves, and at least every
// StatusInterval or a sixth of wal_sender_timeout, whichever is shorter.
// The last rule is what keeps the connection: the server asks for replies
// only now and then (not while it is busy sending a large transaction),
// and while the receiver waits for a slow consumer it reads nothing, so it
// cannot see the server's requests at all.
func (r *Reader) statusLoop(ctx context.Context, s *session, replyNow <-chan struct{}) error {
	w := &statusWriter{conn: s.conn.Conn()}
	every := r.cfg.StatusInterval
	if s.senderTimeout > 0 {
		every = min(every, s.senderTimeout/6)
	}
	every = max(every, 20*time.Millisecond)
	tick := min(every, time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	var last time.Time
	var lastFlush change.LSN
	send := func() error {
		r.mu.Lock()
		flush := r.flushPosLocked()
		write := max(r.received, flush)
		r.mu.Unlock()
		last, lastFlush = time.Now(), flush
		if err := w.send(write, flush, 5*time.Second); err != nil {
			s.conn.Conn().Close() // wakes the receiver
			return err
		}
		return nil
	}
	if err := send(); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			// Report the acknowledged position one last time; closing the
			// connection then wakes the receiver. On Close, first wait for
			// the slot to show the report: closing a socket with unread
			// data in it resets the connection, and the walsender may
			// then never read the report, so a consumer that stopped
			// cleanly would be sent again what it had acknowledged.
			err := send()
			if err == nil && r.ctx.Err() != nil {
				r.awaitConfirmed(lastFlush)
			}
			s.conn.Conn().Close()
			if r.ctx.Err() != nil {
				return nil
			}
			return err
		case <-replyNow:
			if err := send(); err != nil {
				return err
			}
		case <-t.C:
			r.mu.Lock()
			moved := r.flushPosLocked() != lastFlush
			r.mu.Unlock()
			if s.blocked.Load() || moved || time.Since(last) >= every-tick/10 {
				if err := send(); err != nil {
					return err
				}
			}
		}
	}
}

// awaitConfirmed waits, for at most closeReportTimeout, until the slot's
// confirmed flush position has reached lsn. It reads pg_replication_slots
// on a connection of its own; failing that, it gives up quietly (the
// position is then reported again by the next reader, which PostgreSQL
// resends from).
func (r *Reader) awaitConfirmed(lsn change.LSN) {
	if lsn == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeReportTimeout)
	defer cancel()
	conn, err := connectNormal(ctx, r.cfg.DSN, nil)
	if err != nil {
		r.log.Debug("could not check the final acknowledgement", "err", err)
		return
	}
	defer conn.Close(context.Background())
	for {
		var confirmed string
		err := conn.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn, '0/0')::text FROM pg_replication_slots WHERE slot_name = $1`, r.cfg.Slot).Scan(&confirmed)
		if err != nil {
			r.log.Debug("could not check the final acknowledgement", "err", err)
			return
		}
		if got, err := change.ParseLSN(confirmed); err == nil && got >= lsn {
			return
		}
		select {
		case <-ctx.Done():
			r.log.Warn("the slot did not show the final acknowledgement before Close returned; the next reader may be sent transactions again", "acknowledged", lsn, "slot_confirmed", confirmed)
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

var _ io.Closer = (*Reader)(nil)
