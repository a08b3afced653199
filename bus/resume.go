package bus

import (
	"fmt"

	"github.com/freshetdb/freshet/change"
)

// resume is where a relay session continues the bus: decided from the
// stream's last message and the slot's confirmed position, before the
// first event is read.
type resume struct {
	epoch    uint64
	prev     Pos    // position of the bus's last message in this epoch (zero: none)
	expectID string // Msg-Id of the stream's last message ("" when the stream is empty)
	newEpoch bool   // the chain starts again: replicas must hydrate anew
	why      string // why a new epoch

	// open is the transaction the bus's last message left unfinished
	// (nil when none): its changes up to skip were published; the rest
	// go out as fragments from nextFrag on.
	open *openTxn
}

type openTxn struct {
	lsn      change.LSN
	nextFrag int
	skip     int // changes other than relations already on the bus
}

// planResume decides how a relay continues. last is the stream's last
// message (nil when the stream is empty) with its Msg-Id; slotPos is the
// slot's confirmed position when the reader opened it (the relay
// acknowledges only what the bus stored, and the slot never moves past
// what was acknowledged, pgwal.Config.AckedOnly). epochNow gives a fresh
// epoch number greater than any before.
func planResume(last *Message, lastID string, slotPos change.LSN, epochNow func(after uint64) uint64) resume {
	if last == nil {
		return resume{epoch: epochNow(0), newEpoch: true, why: "the stream is empty"}
	}
	r := resume{epoch: last.Epoch, prev: last.Pos(), expectID: lastID}
	lastPos := last.Pos()
	if lastPos.LSN < slotPos {
		// The slot confirmed a position only once the bus had stored it:
		// the bus has lost its tail (a server restarted without its
		// writes on disk, or a stream made anew). What it lost now exists
		// only in PostgreSQL's tables: start a new epoch so every replica
		// hydrates again rather than carry on past a hole.
		r.epoch = epochNow(last.Epoch)
		r.prev = Pos{}
		r.newEpoch = true
		r.why = fmt.Sprintf("the bus ends at %v but the slot confirmed %v: the bus lost messages it had acknowledged", lastPos, slotPos)
		return r
	}
	e := &last.Events[len(last.Events)-1]
	if e.Txn != nil && !e.Txn.Last {
		r.open = &openTxn{lsn: e.Txn.CommitLSN, nextFrag: e.Txn.Fragment + 1, skip: e.Offset + countRows(e.Txn.Changes)}
	}
	return r
}

// countRows counts changes other than relations: the ones whose order in
// a transaction PostgreSQL reproduces exactly when it sends it again
// (relation messages depend on what the walsender had sent before).
func countRows(cs []change.Change) int {
	n := 0
	for i := range cs {
		if cs[i].Op != change.OpRelation {
			n++
		}
	}
	return n
}

// filter turns the slot's events into the bus's: it drops what the bus
// already holds (PostgreSQL resends from the slot's confirmed position,
// at or before the bus's end) and continues a transaction the bus holds
// only the start of, exactly after its last published change, whatever
// the fragment boundaries of this run. It numbers every fragment's
// Offset.
type filter struct {
	after Pos      // drop events at or before this position
	open  *openTxn // the transaction to continue
	cur   *openTxn // the transaction being published (fragment numbering)
	rows  int      // changes other than relations seen of the current transaction
}

func newFilter(r resume) *filter {
	f := &filter{open: r.open}
	if !r.newEpoch {
		f.after = r.prev
	}
	return f
}

// pass returns the event to publish for ev, or false to drop it.
func (f *filter) pass(ev change.Event) (Event, bool, error) {
	switch ev := ev.(type) {
	case *change.Heartbeat:
		if !f.after.Less(Pos{LSN: ev.LSN}) {
			return Event{}, false, nil
		}
		return Event{Beat: ev}, true, nil
	case *change.Txn:
		if ev.Fragment == 0 {
			f.rows = 0
			f.cur = &openTxn{lsn: ev.CommitLSN}
			if o := f.open; o != nil && o.lsn == ev.CommitLSN {
				f.cur.nextFrag, f.cur.skip = o.nextFrag, o.skip
				f.open = nil
			} else if ev.CommitLSN <= f.after.LSN {
				f.cur.skip = -1 // wholly on the bus already
			} else if o != nil {
				return Event{}, false, fmt.Errorf("relay: the bus ends inside the transaction at %v, but the slot sent the transaction at %v instead: the WAL does not match the bus (was the slot recreated? delete stream or use a new slot)", o.lsn, ev.CommitLSN)
			}
		}
		if f.cur == nil || f.cur.lsn != ev.CommitLSN {
			return Event{}, false, fmt.Errorf("relay: fragment %d of the transaction at %v came without its first fragment", ev.Fragment, ev.CommitLSN)
		}
		if f.cur.skip < 0 {
			return Event{}, false, nil
		}
		start := f.rows
		f.rows += countRows(ev.Changes)
		out := *ev
		if f.cur.skip > start {
			// Part or all of this fragment was published before: keep
			// only the changes after the last one on the bus.
			keep := f.cur.skip - start
			var cs []change.Change
			for i := range ev.Changes {
				if ev.Changes[i].Op == change.OpRelation {
					continue // the frame carries the relations it uses
				}
				if keep > 0 {
					keep--
					continue
				}
				cs = append(cs, ev.Changes[i])
			}
			if keep > 0 || len(cs) == 0 && !ev.Last {
				if keep > 0 && ev.Last {
					return Event{}, false, fmt.Errorf("relay: the transaction at %v has %d changes, but the bus holds %d of it: the WAL does not match the bus", ev.CommitLSN, f.rows, f.cur.skip)
				}
				return Event{}, false, nil
			}
			out.Changes = cs
			start = f.cur.skip
		}
		out.Fragment = f.cur.nextFrag
		f.cur.nextFrag++
		return Event{Txn: &out, Offset: start}, true, nil
	}
	return Event{}, false, nil
}
