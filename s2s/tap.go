package s2s

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/freshetdb/freshet/change"
)

// Stream is a change stream in commit order: what the engine follows
// (engine.Source; *pgwal.Reader is one).
type Stream interface {
	Next(ctx context.Context) (change.Event, error)
	Ack(lsn change.LSN)
}

// Tap passes a stream through to the engine and tells the server about
// heartbeats. The engine acknowledges a position only after handing every
// output of the transactions before it to the sinks, so when a position at
// or past a heartbeat is acknowledged, every transaction that committed
// before the heartbeat is in the connections' queues: the server's lag
// frames then report that heartbeat's age. Tap also counts what flows.
type Tap struct {
	src  Stream
	srv  atomic.Pointer[Server]
	last atomic.Pointer[change.Heartbeat] // newest heartbeat passed

	mu     sync.Mutex
	beats  []*change.Heartbeat // read, not yet acknowledged
	passed atomic.Bool
	txnN   atomic.Int64
	rowN   atomic.Int64
}

// NewTap returns a Tap on src. Give it to the engine as its source and to
// the server as Config.Tap.
func NewTap(src Stream) *Tap { return &Tap{src: src} }

// attach makes the tap report heartbeats to s.
func (t *Tap) attach(s *Server) {
	t.srv.Store(s)
	if hb := t.last.Load(); hb != nil {
		s.Heartbeat(hb)
	}
}

// Next implements Stream.
func (t *Tap) Next(ctx context.Context) (change.Event, error) {
	ev, err := t.src.Next(ctx)
	switch ev := ev.(type) {
	case *change.Heartbeat:
		t.mu.Lock()
		t.beats = append(t.beats, ev)
		t.mu.Unlock()
	case *change.Txn:
		n := 0
		for i := range ev.Changes {
			switch ev.Changes[i].Op {
			case change.OpInsert, change.OpUpdate, change.OpDelete:
				n++
			}
		}
		t.rowN.Add(int64(n))
		if ev.Last {
			t.txnN.Add(1)
		}
	}
	return ev, err
}

// Ack implements Stream.
func (t *Tap) Ack(lsn change.LSN) {
	t.src.Ack(lsn)
	t.passed.Store(true)
	t.mu.Lock()
	var newest *change.Heartbeat
	for len(t.beats) > 0 && t.beats[0].LSN <= lsn {
		newest = t.beats[0]
		t.beats = t.beats[1:]
	}
	t.mu.Unlock()
	if newest != nil {
		t.last.Store(newest)
		if s := t.srv.Load(); s != nil {
			s.Heartbeat(newest)
		}
	}
}

// Beat passes a request for a heartbeat now to the stream, when it takes
// one (engine.Beater: *pgwal.Reader does); otherwise it does nothing.
func (t *Tap) Beat() {
	if b, ok := t.src.(interface{ Beat() }); ok {
		b.Beat()
	}
}

// Passed reports whether the engine has applied anything from the stream:
// the stream is past the slot's consistent point.
func (t *Tap) Passed() bool { return t.passed.Load() }

// Counts returns the committed transactions and row changes (inserts,
// updates, deletes) read so far.
func (t *Tap) Counts() (txns, rows int64) { return t.txnN.Load(), t.rowN.Load() }
