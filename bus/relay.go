package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/pgwal"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// pipelineDepth is how many messages that are not full may be in flight
// before the relay keeps adding to the next one instead of sending it,
// and maxEventsPerMsg the most events in one message.
const (
	pipelineDepth   = 1
	maxEventsPerMsg = 4096
)

// Defaults of RelayConfig.
const (
	DefaultMaxPending     = 256
	DefaultPublishTimeout = 10 * time.Second
	DefaultBatchWait      = 2 * time.Millisecond
)

// RelayConfig configures a Relay.
type RelayConfig struct {
	// Stream is the slot to follow. The relay sets AckedOnly, and the
	// decoder's fragment size so a fragment fits a message.
	Stream pgwal.Config
	// URL is the bus; Conn, when set, is used instead (not closed).
	URL  string
	Conn *nats.Conn
	// Settings are the stream's (created or updated at each start).
	Settings StreamSettings
	// MaxPending is the most messages published and not yet
	// acknowledged by the bus.
	MaxPending int
	// PublishTimeout bounds the wait for one message's acknowledgement;
	// past it the session starts again.
	PublishTimeout time.Duration
	// BatchWait is the shortest time between two messages that are not
	// full. While transactions keep coming, what arrives meanwhile goes
	// into the next message, so a burst becomes few large messages (the
	// bus's cost, client and server, is per message, not per byte); the
	// first transaction after a quiet stretch goes out at once. 0 is
	// DefaultBatchWait; negative sends a message as soon as the one
	// before it is acknowledged.
	BatchWait time.Duration
	// Logger; nil is slog.Default().
	Logger *slog.Logger
}

// Stats are a relay's counters.
type Stats struct {
	Messages  int64      // messages the bus acknowledged
	Events    int64      // events in them
	Acked     change.LSN // last position acknowledged to the slot
	Epoch     uint64
	Sessions  int64 // sessions started (1 + restarts)
	NewEpochs int64 // epochs this relay started
}

// Relay follows one slot and publishes its events to the bus: each
// message is a batch of whole transactions and heartbeats, or fragments
// of a large transaction, with a Nats-Msg-Id (dedupe) and the Msg-Id of
// the message before it as the expected last one (a second relay's
// publish is refused). The slot is acknowledged only once the bus has
// acknowledged the message holding a transaction's last fragment and
// every message before it.
type Relay struct {
	cfg RelayConfig
	log *slog.Logger

	messages, events atomic.Int64
	acked, epoch     atomic.Uint64
	sessions, epochs atomic.Int64
	openResumes      atomic.Int64 // sessions that continued a transaction cut on the bus

	// Opened, when set, is called after each session has resumed (the
	// slot is open and the stream checked).
	Opened func()
}

// NewRelay returns a relay; Run runs it.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	if cfg.Settings == (StreamSettings{}) {
		cfg.Settings = DefaultStreamSettings()
	}
	if err := cfg.Settings.Validate(); err != nil {
		return nil, err
	}
	if cfg.Conn == nil {
		if err := ValidateURL(cfg.URL); err != nil {
			return nil, err
		}
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = DefaultPublishTimeout
	}
	if cfg.BatchWait == 0 {
		cfg.BatchWait = DefaultBatchWait
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Stream.HeartbeatInterval <= 0 {
		return nil, errors.New("relay: heartbeats are off: the relay needs them (they measure lag through the bus, and their acknowledgements keep an idle slot from pinning WAL); give an interval like 500ms")
	}
	cfg.Stream.AckedOnly = true
	if cfg.Stream.Decoder.FragmentBytes <= 0 || cfg.Stream.Decoder.FragmentBytes > cfg.Settings.MaxMsgSize/2 {
		// A frame is about as large as the pgoutput bytes it came from,
		// plus the relations it carries.
		cfg.Stream.Decoder.FragmentBytes = cfg.Settings.MaxMsgSize / 2
	}
	return &Relay{cfg: cfg, log: cfg.Logger}, nil
}

// Stats returns the relay's counters.
func (r *Relay) Stats() Stats {
	return Stats{Messages: r.messages.Load(), Events: r.events.Load(), Acked: change.LSN(r.acked.Load()),
		Epoch: r.epoch.Load(), Sessions: r.sessions.Load(), NewEpochs: r.epochs.Load()}
}

// codeWrongLastMsgID is JetStream's error code for a publish whose
// expected last Msg-Id is not the stream's (another relay published).
const codeWrongLastMsgID = 10070

// Fenced reports whether err is the bus refusing a publish because the
// stream's last message is not the one the publisher expected: another
// relay has written since.
func Fenced(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == codeWrongLastMsgID
}

// errFatal marks errors a new session would meet again.
type errFatal struct{ err error }

func (e errFatal) Error() string { return e.err.Error() }
func (e errFatal) Unwrap() error { return e.err }

// Run relays until ctx ends (nil) or an error a restart cannot cure. A
// session that fails (the bus or PostgreSQL unreachable, a publish
// refused because another relay wrote, a slot held by another relay) is
// started again after a pause: each session resumes from the bus's last
// message and the slot's confirmed position.
func (r *Relay) Run(ctx context.Context) error {
	nc := r.cfg.Conn
	if nc == nil {
		var err error
		if nc, err = Connect(ctx, r.cfg.URL, "freshet relay"); err != nil {
			return err
		}
		defer nc.Close()
	}
	wait := 200 * time.Millisecond
	for {
		start := time.Now()
		err := r.session(ctx, nc)
		if ctx.Err() != nil {
			return nil
		}
		var fatal errFatal
		if errors.As(err, &fatal) {
			return fatal.err
		}
		if time.Since(start) > time.Minute {
			wait = 200 * time.Millisecond
		}
		r.log.Warn("relay session ended; starting again", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// pubItem is a message published and waiting for its acknowledgement.
type pubItem struct {
	fut jetstream.PubAckFuture
	ack change.LSN // acknowledge the slot to here once stored (0: nothing)
	n   int        // events
	id  string
}

func (r *Relay) session(ctx context.Context, nc *nats.Conn) error {
	r.sessions.Add(1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(r.cfg.MaxPending+2),
		jetstream.WithPublishAsyncTimeout(r.cfg.PublishTimeout))
	if err != nil {
		return fmt.Errorf("open the bus's JetStream: %w", err)
	}
	rd, err := pgwal.Open(ctx, r.cfg.Stream)
	if err != nil {
		return fmt.Errorf("open slot %q: %w", r.cfg.Stream.Slot, err)
	}
	defer rd.Close()
	sysID, db, slot := rd.SystemID(), rd.Database(), r.cfg.Stream.Slot
	if slot == "" {
		slot = pgwal.DefaultConfig().Slot
	}
	pub := r.cfg.Stream.Publication
	if pub == "" {
		pub = pgwal.DefaultConfig().Publication
	}
	st, err := EnsureStream(ctx, js, r.cfg.Settings, sysID, db, slot, pub)
	if err != nil {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return errFatal{err}
		}
		return err
	}
	// Replicas ask for a heartbeat now when a read has its snapshot
	// (Source.Beat); the reader writes one, requests made meanwhile
	// answered together.
	beats, err := nc.Subscribe(BeatSubject(sysID, slot), func(*nats.Msg) { rd.Beat() })
	if err != nil {
		return fmt.Errorf("subscribe to the bus's heartbeat requests: %w", err)
	}
	defer beats.Unsubscribe()
	subject := Subject(sysID, slot)
	var last *Message
	var lastID string
	raw, err := st.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return fmt.Errorf("read the bus's last message: %w", err)
	default:
		if last, err = DecodeMessage(raw.Data, nil); err != nil {
			return errFatal{fmt.Errorf("the last message of stream %s is not a freshet bus frame: %w", StreamName(sysID, slot), err)}
		}
		lastID = raw.Header.Get(jetstream.MsgIDHeader)
	}
	res := planResume(last, lastID, rd.ConsistentPoint(), newEpoch)
	r.epoch.Store(res.epoch)
	if res.newEpoch {
		r.epochs.Add(1)
		r.log.Warn("relay: starting a new epoch; every replica hydrates again", "epoch", res.epoch, "why", res.why)
	}
	r.log.Info("relay resuming", "stream", StreamName(sysID, slot), "epoch", res.epoch, "after", res.prev,
		"slot_confirmed", rd.ConsistentPoint(), "open_txn", res.open != nil)
	if res.open != nil {
		r.openResumes.Add(1)
	}
	if r.Opened != nil {
		r.Opened()
	}
	flt := newFilter(res)

	// Events are read ahead so a burst is batched into few messages.
	// While the loop below waits (for an acknowledgement or BatchWait),
	// it does not wake for each event that arrives, only when the
	// channel is full (filled): a wake-up per event cost more than
	// everything else the relay does for a small transaction.
	events := make(chan change.Event, 1024)
	filled := make(chan struct{}, 1)
	readErr := make(chan error, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			ev, err := rd.Next(ctx)
			if err != nil {
				readErr <- fmt.Errorf("read slot %q: %w", slot, err)
				return
			}
			select {
			case events <- ev:
				continue
			default:
			}
			select {
			case filled <- struct{}{}:
			default:
			}
			select {
			case events <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	// Acknowledgements are awaited in publish order.
	pending := make(chan pubItem, r.cfg.MaxPending)
	var inflight atomic.Int64       // published, not yet acknowledged
	acked := make(chan struct{}, 1) // an acknowledgement came
	ackErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		for it := range pending {
			select {
			case <-it.fut.Ok():
				inflight.Add(-1)
				select {
				case acked <- struct{}{}:
				default:
				}
				r.messages.Add(1)
				r.events.Add(int64(it.n))
				if it.ack > 0 {
					rd.Ack(it.ack)
					r.acked.Store(uint64(it.ack))
				}
			case err := <-it.fut.Err():
				ackErr <- fmt.Errorf("the bus refused message %s: %w", it.id, err)
				cancel()
				for range pending {
				}
				return
			case <-ctx.Done():
				for range pending {
				}
				return
			}
		}
	}()
	defer close(pending)

	prev, expect := res.prev, res.expectID
	first := true
	maxBytes := r.cfg.Settings.MaxMsgSize - 1024
	var evs []Event
	var body []byte
	flush := func() error {
		if len(evs) == 0 {
			return nil
		}
		if len(body) > r.cfg.Settings.MaxMsgSize-64 {
			return errFatal{fmt.Errorf("relay: one event at %v encodes to %d bytes, over the bus's message size %d: raise --bus-max-msg-size (and the server's max_payload)", evs[0].Pos(), len(body), r.cfg.Settings.MaxMsgSize)}
		}
		err := r.publish(ctx, js, subject, pending, &inflight, &prev, &expect, &first, res.epoch, evs, body)
		evs, body = evs[:0], body[:0]
		return err
	}
	// add filters ev into the message being built; a message over the
	// size is published first.
	add := func(ev change.Event) error {
		e, ok, err := flt.pass(ev)
		if err != nil {
			return errFatal{err}
		}
		if !ok {
			return nil
		}
		size := len(body)
		body = appendEvent(body, &e)
		if len(body) > maxBytes && len(evs) > 0 {
			// Over the size: this event starts the next message.
			body = body[:size]
			if err := flush(); err != nil {
				return err
			}
			body = appendEvent(body, &e)
		}
		evs = append(evs, e)
		return nil
	}
	var lastSend time.Time // when the last message went out
	var due *time.Timer    // BatchWait after it
	full := func() bool { return len(evs) >= maxEventsPerMsg || len(body) >= maxBytes }
	fail := func() error {
		select {
		case err := <-ackErr:
			return err
		default:
		}
		return ctx.Err()
	}
	for {
		select {
		case ev := <-events:
			if err := add(ev); err != nil {
				return err
			}
		case err := <-readErr:
			return err
		case err := <-ackErr:
			return err
		case <-ctx.Done():
			return fail()
		}
		// Take what is waiting. While pipelineDepth messages are in
		// flight, or the last message went out less than BatchWait ago,
		// keep adding to this one rather than send a small one: the
		// number of messages, not their size, is what costs (the bus
		// writes, and fsyncs when run so, each message before
		// acknowledging it).
		for !full() {
			if len(events) > 0 {
				if err := add(<-events); err != nil {
					return err
				}
				continue
			}
			var wake <-chan time.Time
			if inflight.Load() < pipelineDepth {
				wait := r.cfg.BatchWait - time.Since(lastSend)
				if wait <= 0 {
					break
				}
				if due == nil {
					due = time.NewTimer(wait)
				} else {
					due.Reset(wait)
				}
				wake = due.C
			}
			select {
			case <-filled:
			case <-acked:
			case <-wake:
			case err := <-readErr:
				return err
			case err := <-ackErr:
				return err
			case <-ctx.Done():
				return fail()
			}
			if wake != nil {
				due.Stop()
			}
		}
		lastSend = time.Now()
		if err := flush(); err != nil {
			return err
		}
	}
}

// publish sends one message of evs (encoded in body) after prev, expecting
// the stream's last message to be expect.
func (r *Relay) publish(ctx context.Context, js jetstream.JetStream, subject string, pending chan<- pubItem, inflight *atomic.Int64,
	prev *Pos, expect *string, first *bool, epoch uint64, evs []Event, body []byte) error {
	m := Message{Epoch: epoch, Prev: *prev, Events: evs}
	data := appendHeader(make([]byte, 0, len(body)+32), epoch, *prev, len(evs))
	data = append(data, body...)
	id := m.MsgID()
	msg := nats.NewMsg(subject)
	msg.Data = data
	msg.Header.Set("Freshet-Epoch", fmt.Sprint(epoch))
	msg.Header.Set("Freshet-Pos", m.Pos().String())
	msg.Header.Set("Freshet-Prev", prev.String())
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(id)}
	if *expect != "" {
		opts = append(opts, jetstream.WithExpectLastMsgID(*expect))
	} else if *first {
		opts = append(opts, jetstream.WithExpectLastSequence(0))
	}
	inflight.Add(1)
	fut, err := js.PublishMsgAsync(msg, opts...)
	if err != nil {
		return fmt.Errorf("publish message %s: %w", id, err)
	}
	select {
	case pending <- pubItem{fut: fut, ack: m.AckPos(), n: len(evs), id: id}:
	case <-ctx.Done():
		return ctx.Err()
	}
	*prev, *expect, *first = m.Pos(), id, false
	return nil
}

// newEpoch returns an epoch number above after: the time in nanoseconds,
// so a stream made anew (whose last epoch nobody remembers) still gets a
// number no replica has seen.
func newEpoch(after uint64) uint64 {
	e := uint64(time.Now().UnixNano())
	if e <= after {
		e = after + 1
	}
	return e
}
