package bus

import (
	"errors"
	"fmt"
)

// ErrBroken is wrapped by the errors a Source returns when the bus can no
// longer be trusted to hold every transaction after the consumer's
// position: a gap in the chain of messages (ErrGap) or a new epoch
// (ErrEpoch). The consumer must start over from a fresh snapshot of
// PostgreSQL: an engine ends its subscriptions (clients resubscribe and
// hydrate again), which is never a wrong answer.
var ErrBroken = errors.New("the change bus lost its continuity; start again from a fresh snapshot")

// ErrGap means a message did not follow the one consumed before it: one or
// more messages are missing (lost by the bus, purged by its retention
// before the consumer read them, or never published).
var ErrGap = fmt.Errorf("%w: gap in the stream", ErrBroken)

// ErrEpoch means the relay started a new epoch: it found the bus behind
// what it had acknowledged to the slot, or the stream was made anew.
var ErrEpoch = fmt.Errorf("%w: new epoch", ErrBroken)

// chain checks every message against the one consumed before it. It is
// the consumer side of the relay's contract: within an epoch, every
// message names the position of the message before it (Prev), and
// positions strictly increase.
type chain struct {
	started bool
	epoch   uint64
	last    Pos
	dropped int // duplicates dropped
}

// accept returns the events of m to hand on, or an error when the chain
// is broken. Before the first message a chain starts at the first event
// that begins a transaction (or is a heartbeat): the rest of a transaction
// whose start it did not see is not its to apply, exactly as an engine
// started on a slot never sees transactions committed before its start.
func (c *chain) accept(m *Message) ([]Event, error) {
	if !c.started {
		for i := range m.Events {
			if m.Events[i].boundary() {
				c.started, c.epoch, c.last = true, m.Epoch, m.Pos()
				return m.Events[i:], nil
			}
		}
		return nil, nil
	}
	if m.Epoch != c.epoch {
		return nil, fmt.Errorf("%w: epoch %d after %d (at %v)", ErrEpoch, m.Epoch, c.epoch, c.last)
	}
	p := m.Pos()
	if !c.last.Less(p) {
		// Delivered twice (a republish the bus's duplicate window no
		// longer caught, or a resent first fragment of a transaction
		// already applied): already applied.
		c.dropped++
		return nil, nil
	}
	if m.Prev != c.last {
		return nil, fmt.Errorf("%w: message at %v follows %v, but the last one consumed is %v", ErrGap, p, m.Prev, c.last)
	}
	c.last = p
	return m.Events, nil
}
