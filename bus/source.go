package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultReplay is how far back in the stream a Source starts by default.
const DefaultReplay = 5 * time.Second

// ErrNoStream is wrapped by OpenSource when the bus has no stream for the
// slot yet (no relay has run).
var ErrNoStream = errors.New("the bus has no stream")

// SourceConfig configures a Source.
type SourceConfig struct {
	// URL is the bus (nats://host:port, comma-separated for several).
	// Conn, when set, is used instead (and not closed by Close).
	URL  string
	Conn *nats.Conn
	// SystemID, Database and Slot name the stream (StreamName) and are
	// checked against its metadata: a replica reads PostgreSQL directly
	// for hydration, so the stream must be that database's.
	SystemID, Database, Slot string
	// Replay is how far back (by the time messages were stored) the
	// consumer starts: the transactions of that stretch are applied
	// before anything else, so a hydration read asked right after the
	// start checks its snapshot against them (engine's applied log), as
	// an engine that has been running would. 0 starts at the stream's
	// last message. Negative takes DefaultReplay.
	Replay time.Duration
	// Logger; nil is slog.Default().
	Logger *slog.Logger
}

// Source is an engine.Source (it has Next and Ack; the engine's tests use
// it, so this package does not import the engine) fed from the bus: an ordered JetStream
// consumer (no acknowledgements, no state on the server) whose every
// message is checked against the one before it. Events come out in
// commit order; a gap or a new epoch is a final error wrapping ErrBroken.
type Source struct {
	cfg     SourceConfig
	nc      *nats.Conn
	ownConn bool
	it      jetstream.MessagesContext
	rels    Relations
	chain   chain
	pending []Event
	err     error
	pub     string
	js      jetstream.JetStream
	name    string
	created time.Time // when the stream was made, at open

	seq   atomic.Uint64 // stream sequence of the last message consumed
	acked atomic.Uint64
}

// OpenSource attaches to the stream of cfg's slot, starting Replay back.
func OpenSource(ctx context.Context, cfg SourceConfig) (*Source, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Replay < 0 {
		cfg.Replay = DefaultReplay
	}
	s := &Source{cfg: cfg, nc: cfg.Conn}
	if s.nc == nil {
		nc, err := Connect(ctx, cfg.URL, "freshet serve")
		if err != nil {
			return nil, err
		}
		s.nc, s.ownConn = nc, true
	}
	fail := func(err error) (*Source, error) {
		if s.ownConn {
			s.nc.Close()
		}
		return nil, err
	}
	js, err := jetstream.New(s.nc)
	if err != nil {
		return fail(fmt.Errorf("open the bus's JetStream: %w", err))
	}
	name := StreamName(cfg.SystemID, cfg.Slot)
	st, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fail(fmt.Errorf("%w %s: start `freshet relay` for this database and slot %q first (or check --slot and that --read-dsn is the database the relay follows)", ErrNoStream, name, cfg.Slot))
	}
	if err != nil {
		return fail(fmt.Errorf("look up stream %s: %w (is JetStream enabled on the server? nats-server -js)", name, err))
	}
	if err := checkMeta(st.CachedInfo().Config, cfg.SystemID, cfg.Database, cfg.Slot); err != nil {
		return fail(err)
	}
	s.pub = st.CachedInfo().Config.Metadata[metaPub]
	s.js, s.name, s.created = js, name, st.CachedInfo().Created
	occ := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverLastPolicy}
	if cfg.Replay > 0 {
		from := time.Now().Add(-cfg.Replay)
		occ = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &from}
	}
	cons, err := st.OrderedConsumer(ctx, occ)
	if err != nil {
		return fail(fmt.Errorf("open a consumer on stream %s: %w", name, err))
	}
	if s.it, err = cons.Messages(); err != nil {
		return fail(fmt.Errorf("consume stream %s: %w", name, err))
	}
	return s, nil
}

// Next implements engine.Source. An error is final.
func (s *Source) Next(ctx context.Context) (change.Event, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return nil, s.err
		}
		wctx, cancel := context.WithTimeout(ctx, silentFor)
		msg, err := s.it.Next(jetstream.NextContext(wctx))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if wctx.Err() != nil {
				// Nothing for a while, though the relay sends heartbeats:
				// a stream deleted and made anew restarts its sequence, and
				// the consumer waits for the sequence after its last.
				if err := s.checkStream(ctx); err != nil {
					s.err = err
					return nil, err
				}
				continue
			}
			s.err = fmt.Errorf("read the bus: %w", err)
			return nil, s.err
		}
		if md, err := msg.Metadata(); err == nil {
			s.seq.Store(md.Sequence.Stream)
		}
		m, err := DecodeMessage(msg.Data(), &s.rels)
		if err != nil {
			s.err = fmt.Errorf("%w: message %d: %w", ErrBroken, s.seq.Load(), err)
			return nil, s.err
		}
		evs, err := s.chain.accept(m)
		if err != nil {
			s.err = err
			return nil, err
		}
		s.pending = evs
	}
	e := s.pending[0]
	s.pending[0] = Event{}
	s.pending = s.pending[1:]
	if e.Txn != nil {
		return e.Txn, nil
	}
	return e.Beat, nil
}

// silentFor is how long Next waits for a message before it checks the
// stream is still the one it opened.
const silentFor = 2 * time.Second

// checkStream reports ErrEpoch when the stream was made anew since the
// source opened it (a new creation time, or a last sequence below what was
// consumed). A stream that is gone for now is waited for.
func (s *Source) checkStream(ctx context.Context) error {
	st, err := s.js.Stream(ctx, s.name)
	if err != nil {
		return nil // gone or unreachable: the consumer keeps trying
	}
	info := st.CachedInfo()
	if !info.Created.Equal(s.created) || info.State.LastSeq < s.seq.Load() {
		return fmt.Errorf("%w: stream %s was made anew (created %v, was %v)", ErrEpoch, s.name, info.Created, s.created)
	}
	return nil
}

// Beat asks the relay for a heartbeat now (engine.Beater): a message on
// BeatSubject, published without waiting. The relay's heartbeat reaches
// this source through the bus like any other, so the stream passes every
// WAL position the database had before the request. A relay that does
// not listen (an older one), or a bus that refuses the publish, leaves
// reads to the relay's interval.
func (s *Source) Beat() {
	_ = s.nc.Publish(BeatSubject(s.cfg.SystemID, s.cfg.Slot), nil)
}

// Ack implements engine.Source. The bus keeps no consumer state, so it
// only records the position.
func (s *Source) Ack(lsn change.LSN) {
	if uint64(lsn) > s.acked.Load() {
		s.acked.Store(uint64(lsn))
	}
}

// Publication returns the publication the relay follows, as the stream's
// metadata names it ("" on a server that keeps no metadata).
func (s *Source) Publication() string { return s.pub }

// Seq returns the stream sequence of the last message consumed.
func (s *Source) Seq() uint64 { return s.seq.Load() }

// Close stops consuming and closes the connection it opened.
func (s *Source) Close() {
	s.it.Stop()
	if s.ownConn {
		s.nc.Close()
	}
}
