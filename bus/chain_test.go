package bus

import (
	"errors"
	"testing"

	"github.com/freshetdb/freshet/change"
)

// frag is fragment f of the transaction at lsn.
func frag(lsn change.LSN, f int, last bool) Event {
	t := txn(lsn, uint32(lsn), 1)
	t.Fragment, t.Last = f, last
	return Event{Txn: t}
}

func beat(lsn change.LSN) Event { return Event{Beat: &change.Heartbeat{LSN: lsn}} }

func msg(epoch uint64, prev Pos, evs ...Event) *Message {
	return &Message{Epoch: epoch, Prev: prev, Events: evs}
}

// feed runs the messages through a chain and returns the positions it
// handed on, and the first error.
func feed(c *chain, ms ...*Message) ([]Pos, error) {
	var got []Pos
	for _, m := range ms {
		// Through the wire form, as a Source sees them.
		dm, err := DecodeMessage(AppendMessage(nil, m), nil)
		if err != nil {
			return got, err
		}
		evs, err := c.accept(dm)
		if err != nil {
			return got, err
		}
		for _, e := range evs {
			got = append(got, e.Pos())
		}
	}
	return got, nil
}

func posList(ps ...any) []Pos {
	var out []Pos
	for i := 0; i < len(ps); i += 2 {
		out = append(out, Pos{LSN: change.LSN(ps[i].(int)), Frag: ps[i+1].(int)})
	}
	return out
}

func samePos(a, b []Pos) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestChainInOrder(t *testing.T) {
	var c chain
	got, err := feed(&c,
		msg(1, Pos{}, frag(10, 0, true), beat(12)),
		msg(1, Pos{LSN: 12}, frag(20, 0, true)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if want := posList(10, 0, 12, 0, 20, 0); !samePos(got, want) {
		t.Fatalf("handed on %v, want %v", got, want)
	}
}

func TestChainGap(t *testing.T) {
	var c chain
	_, err := feed(&c,
		msg(1, Pos{}, frag(10, 0, true)),
		// The message at 20 was lost: 30 names it as its predecessor.
		msg(1, Pos{LSN: 20}, frag(30, 0, true)),
	)
	if !errors.Is(err, ErrGap) || !errors.Is(err, ErrBroken) {
		t.Fatalf("err = %v, want ErrGap (wrapping ErrBroken)", err)
	}
}

func TestChainEpoch(t *testing.T) {
	var c chain
	_, err := feed(&c,
		msg(1, Pos{}, frag(10, 0, true)),
		msg(2, Pos{}, frag(30, 0, true)),
	)
	if !errors.Is(err, ErrEpoch) || !errors.Is(err, ErrBroken) {
		t.Fatalf("err = %v, want ErrEpoch", err)
	}
	// A new epoch whose chain happens to continue is still a new epoch.
	c = chain{}
	_, err = feed(&c, msg(1, Pos{}, frag(10, 0, true)), msg(2, Pos{LSN: 10}, frag(30, 0, true)))
	if !errors.Is(err, ErrEpoch) {
		t.Fatalf("err = %v, want ErrEpoch", err)
	}
}

func TestChainDuplicate(t *testing.T) {
	var c chain
	m1 := msg(1, Pos{}, frag(10, 0, true))
	m2 := msg(1, Pos{LSN: 10}, frag(20, 0, true))
	m3 := msg(1, Pos{LSN: 20}, frag(30, 0, true))
	got, err := feed(&c, m1, m2, m2, m1, m3)
	if err != nil {
		t.Fatal(err)
	}
	if want := posList(10, 0, 20, 0, 30, 0); !samePos(got, want) {
		t.Fatalf("handed on %v, want %v (duplicates dropped)", got, want)
	}
	if c.dropped != 2 {
		t.Fatalf("dropped = %d, want 2", c.dropped)
	}
}

func TestChainResentFirstFragment(t *testing.T) {
	// A relay published fragments 0 and 1 of the transaction at 50, died,
	// and a relay that did not see the bus's tail sent them again; the
	// next relay continued after fragment 1.
	var c chain
	got, err := feed(&c,
		msg(1, Pos{}, frag(40, 0, true)),
		msg(1, Pos{LSN: 40}, frag(50, 0, false)),
		msg(1, Pos{LSN: 50}, frag(50, 1, false)),
		msg(1, Pos{LSN: 40}, frag(50, 0, false)),
		msg(1, Pos{LSN: 50}, frag(50, 1, false)),
		msg(1, Pos{LSN: 50, Frag: 1}, frag(50, 2, true)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if want := posList(40, 0, 50, 0, 50, 1, 50, 2); !samePos(got, want) {
		t.Fatalf("handed on %v, want %v", got, want)
	}
	// A resent first fragment followed by a fragment that does not chain
	// from what was applied is a gap, not a silent splice.
	c = chain{}
	_, err = feed(&c,
		msg(1, Pos{}, frag(50, 0, false)),
		msg(1, Pos{LSN: 50}, frag(50, 1, false)),
		msg(1, Pos{LSN: 40}, frag(50, 0, false)),
		msg(1, Pos{LSN: 50}, frag(50, 1, true)),
		msg(1, Pos{LSN: 50, Frag: 7}, frag(60, 0, true)),
	)
	if !errors.Is(err, ErrGap) {
		t.Fatalf("err = %v, want ErrGap", err)
	}
}

func TestChainStartsMidStream(t *testing.T) {
	// Started inside a large transaction: its tail is not handed on; the
	// chain starts at the next boundary, inside the same message.
	var c chain
	got, err := feed(&c,
		msg(1, Pos{LSN: 70}, frag(80, 3, false)),
		msg(1, Pos{LSN: 80, Frag: 3}, frag(80, 4, true), beat(85), frag(90, 0, true)),
		msg(1, Pos{LSN: 90}, frag(100, 0, true)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if want := posList(85, 0, 90, 0, 100, 0); !samePos(got, want) {
		t.Fatalf("handed on %v, want %v", got, want)
	}
}
