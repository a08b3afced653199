package bus

import (
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
)

func fixedEpoch(after uint64) uint64 { return after + 100 }

func TestPlanResume(t *testing.T) {
	// An empty stream starts an epoch with no predecessor.
	r := planResume(nil, "", 500, fixedEpoch)
	if !r.newEpoch || r.epoch != 100 || !r.prev.IsZero() || r.expectID != "" {
		t.Fatalf("empty stream: %+v", r)
	}
	// The slot confirmed at most what the bus holds: carry on after it.
	last := msg(7, Pos{LSN: 10}, frag(20, 0, true), beat(25))
	r = planResume(last, "7:0/19:0", 25, fixedEpoch)
	if r.newEpoch || r.epoch != 7 || r.prev != (Pos{LSN: 25}) || r.expectID != "7:0/19:0" || r.open != nil {
		t.Fatalf("consistent bus: %+v", r)
	}
	r = planResume(last, "x", 10, fixedEpoch)
	if r.newEpoch {
		t.Fatalf("slot behind the bus is the normal case after a crash, not a new epoch: %+v", r)
	}
	// The slot confirmed past the bus's end: the bus lost its tail.
	r = planResume(last, "x", 30, fixedEpoch)
	if !r.newEpoch || r.epoch != 107 || !r.prev.IsZero() || r.expectID != "x" || !strings.Contains(r.why, "lost") {
		t.Fatalf("bus behind the slot: %+v", r)
	}
	// The bus ends inside a transaction: continue after its changes.
	open := frag(40, 2, false)
	open.Offset = 10
	r = planResume(msg(7, Pos{LSN: 40, Frag: 1}, open), "y", 30, fixedEpoch)
	if r.open == nil || r.open.lsn != 40 || r.open.nextFrag != 3 || r.open.skip != 11 {
		t.Fatalf("open transaction: %+v %+v", r, r.open)
	}
}

// bigTxn returns the fragments of a transaction at lsn with rows changes,
// cut every per changes, each fragment starting with a relation message
// (as a walsender that just reconnected sends them).
func bigTxn(lsn change.LSN, rows, per int) []*change.Txn {
	rel := testRel()
	var out []*change.Txn
	for i := 0; i < rows; {
		f := &change.Txn{XID: 9, CommitLSN: lsn, EndLSN: lsn + 8, Fragment: len(out)}
		f.Changes = append(f.Changes, change.Change{Op: change.OpRelation, Rel: rel})
		for j := 0; j < per && i < rows; j++ {
			f.Changes = append(f.Changes, change.Change{Op: change.OpInsert, Rel: rel, New: change.Row{change.TextValue(itoa(i))}})
			i++
		}
		out = append(out, f)
	}
	out[len(out)-1].Last = true
	return out
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// rowsOf lists the first column of every insert in evs.
func rowsOf(evs []Event) []string {
	var out []string
	for _, e := range evs {
		if e.Txn == nil {
			continue
		}
		for _, c := range e.Txn.Changes {
			if c.Op == change.OpInsert {
				out = append(out, c.New[0].String())
			}
		}
	}
	return out
}

func TestFilterContinuesCutTransaction(t *testing.T) {
	// The first run cut the transaction every 3 rows and published 2
	// fragments (rows 0-5) before dying; the second run cuts every 4.
	first := bigTxn(100, 10, 3)
	var published []Event
	f := newFilter(resume{epoch: 1})
	for _, fr := range first[:2] {
		e, ok, err := f.pass(fr)
		if err != nil || !ok {
			t.Fatalf("pass: %v %v", ok, err)
		}
		published = append(published, e)
	}
	last := msg(1, Pos{LSN: 90}, published[len(published)-1])
	r := planResume(last, "id", 90, fixedEpoch)
	f = newFilter(r)
	// The slot resends from before the transaction: a heartbeat and a
	// transaction already on the bus, then the cut transaction anew.
	if _, ok, _ := f.pass(&change.Heartbeat{LSN: 95}); ok {
		t.Fatalf("a heartbeat before the bus's end was passed")
	}
	for _, fr := range bigTxn(100, 10, 4) {
		e, ok, err := f.pass(fr)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			published = append(published, e)
		}
	}
	got := strings.Join(rowsOf(published), ",")
	if want := "0,1,2,3,4,5,6,7,8,9"; got != want {
		t.Fatalf("rows on the bus = %s, want %s (each exactly once)", got, want)
	}
	for i, e := range published {
		if e.Txn.Fragment != i {
			t.Fatalf("fragment %d numbered %d", i, e.Txn.Fragment)
		}
	}
	if !published[len(published)-1].Txn.Last {
		t.Fatalf("the last fragment is not Last")
	}
	// Offsets count the rows before each fragment.
	if published[2].Offset != 6 {
		t.Fatalf("offset of the first fragment after the cut = %d, want 6", published[2].Offset)
	}
	// And the next transactions pass; earlier ones are dropped.
	if _, ok, _ := f.pass(txn(90, 3, 1)); ok {
		t.Fatalf("a transaction already on the bus was passed")
	}
	if _, ok, _ := f.pass(txn(110, 3, 1)); !ok {
		t.Fatalf("a new transaction was dropped")
	}
}

func TestFilterDropsWhatTheBusHolds(t *testing.T) {
	f := newFilter(planResume(msg(1, Pos{LSN: 10}, frag(20, 0, true)), "id", 15, fixedEpoch))
	for _, c := range []struct {
		ev   change.Event
		pass bool
	}{
		{txn(10, 1, 1), false},
		{txn(20, 2, 1), false},
		{&change.Heartbeat{LSN: 20}, false},
		{&change.Heartbeat{LSN: 21}, true},
		{txn(30, 3, 1), true},
	} {
		if _, ok, err := f.pass(c.ev); ok != c.pass || err != nil {
			t.Fatalf("pass(%v) = %v, %v; want %v", c.ev.Position(), ok, err, c.pass)
		}
	}
	// A new epoch drops nothing: the bus lost its tail.
	f = newFilter(planResume(msg(1, Pos{LSN: 10}, frag(20, 0, true)), "id", 25, fixedEpoch))
	if _, ok, _ := f.pass(txn(22, 1, 1)); !ok {
		t.Fatalf("a new epoch dropped a transaction")
	}
}

func TestFilterRefusesMismatchedWAL(t *testing.T) {
	open := frag(40, 1, false)
	f := newFilter(planResume(msg(1, Pos{LSN: 40}, open), "id", 30, fixedEpoch))
	if _, _, err := f.pass(txn(50, 1, 1)); err == nil {
		t.Fatalf("a different transaction where the bus's open one should continue was passed")
	}
}
