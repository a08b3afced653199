package engine

import (
	"fmt"
	"testing"

	"github.com/freshetdb/freshet/change"
)

// determinismScript drives a harness through a script whose outputs pass
// through every place the core collects views from a map: many views of
// one table, a change whose new key cannot be decoded (every view of the
// table re-reads: rowChange's refresh list), a truncate and a schema
// change ending them. It returns the transcript (every read asked for and
// every output, in order).
func determinismScript(t *testing.T) string {
	h := itemsHarness(t)
	for i := range 12 {
		h.insert("items", itoa(i+1), "n"+itoa(i), itoa(10*(i+1)), "x")
	}
	h.commit(0)
	// Twelve views of items: windows of different sizes (their reads ask
	// for different rows), each with a rows-mode and a touch-mode
	// subscriber.
	for i := range 12 {
		sql := fmt.Sprintf("SELECT id, name FROM items WHERE price > %d ORDER BY price LIMIT %d", i, 1+i)
		h.subscribe(SubID(2*i+1), sql, ModeRows)
		h.subscribe(SubID(2*i+2), sql, ModeTouch)
	}
	h.answerAll()
	// The new row's key does not decode (int4 "x"): the core cannot tell
	// which views it affects, and every view of the table re-reads.
	// It goes to the core alone: the harness's database cannot hold it.
	h.check = false
	ht := h.tables["items"]
	h.nextXID++
	h.lsn += 0x10
	h.core.Apply(&change.Txn{XID: h.nextXID, CommitLSN: h.lsn, Last: true,
		Changes: []change.Change{{Op: change.OpUpdate, Rel: ht.rel, New: h.vals(ht, []string{"x", "bad", "5", "x"})}}})
	h.collect()
	h.truncate("items")
	h.commit(0)
	return h.out.String()
}

// TestCoreDeterministic runs the same inputs through two cores and
// requires the same outputs, byte for byte: the core is a deterministic
// state machine, so no map iteration order may reach its outputs or the
// order of its reads.
func TestCoreDeterministic(t *testing.T) {
	first := determinismScript(t)
	for run := range 4 {
		if again := determinismScript(t); again != first {
			t.Fatalf("run %d's transcript differs from the first run's:\n--- first\n%s--- run %d\n%s", run+2, first, run+2, again)
		}
	}
}

// TestCoreRandomDeterministic runs seeds of TestCoreRandom's random
// subscriptions, writes and read landings twice and compares the
// transcripts byte for byte.
func TestCoreRandomDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		first := runRandom(t, seed, 300, joinsSupported).out.String()
		if again := runRandom(t, seed, 300, joinsSupported).out.String(); again != first {
			t.Fatalf("seed %d: the second run's transcript differs from the first's (%d and %d bytes)", seed, len(again), len(first))
		}
	}
}
