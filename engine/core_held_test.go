package engine

import (
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestAcceptedUnordered: a ModeRowsUnordered subscriber's Accepted holds
// the same rows as a ModeRows one's (the harness's verify compares each
// with the oracle), as Held for a query of one table's columns without
// ORDER BY and as Rows otherwise (a join, a computed column, an ORDER
// BY, a count), whether the view was live before it subscribed or not,
// and its deltas after it.
func TestAcceptedUnordered(t *testing.T) {
	h := itemsHarness(t)
	h.createTable("cats", []string{"name text pk", "label text"})
	for i := 1; i <= 40; i++ {
		h.insert("items", itoa(i), "n"+itoa(i), itoa(i*7%50), []string{"a", "b", "c"}[i%3])
	}
	h.insert("items", "41", "null", "null", "null")
	h.insert("cats", "a", "Alpha")
	h.insert("cats", "b", "Beta")
	h.commit(0)
	queries := []struct {
		sql  string
		held bool
	}{
		{"SELECT id, name, price, cat FROM items", true},
		{"SELECT cat, id FROM items WHERE price > 10", true},
		{"SELECT id, price + 1 FROM items", false},
		{"SELECT i.id, c.label FROM items i JOIN cats c ON c.name = i.cat", false},
		{"SELECT id, price FROM items ORDER BY price, id LIMIT 5", false},
		{"SELECT count(*) FROM items WHERE cat = 'a'", false},
	}
	id := SubID(0)
	for _, q := range queries {
		id++
		h.subscribe(id, q.sql, ModeRows)
		id++
		h.subscribe(id, q.sql, ModeRowsUnordered) // before the view is live
		h.answerAll()
		id++
		h.subscribe(id, q.sql, ModeRowsUnordered) // after
		for _, sub := range []SubID{id - 1, id} {
			m := h.models[sub]
			if !m.accepted {
				t.Fatalf("%s: sub %d not accepted", q.sql, sub)
			}
			if q.held && len(m.rows) < 10 {
				t.Fatalf("%s: sub %d accepted %d rows", q.sql, sub, len(m.rows))
			}
		}
	}
	// Deltas after an unordered Accepted.
	h.update("items", nil, "3", "renamed", "60", "b")
	h.delete("items", "4")
	h.insert("items", "42", "new", "33", "a")
	h.commit(0)
	if h.verified[false] == 0 || h.verified[true] == 0 {
		t.Fatalf("verified %v: want single-table and join results compared", h.verified)
	}
}

// TestAcceptedHeldForm: which form an Accepted takes in each mode.
func TestAcceptedHeldForm(t *testing.T) {
	h := itemsHarness(t)
	h.insert("items", "1", "a", "5", "x")
	h.insert("items", "2", "b", "6", "y")
	h.commit(0)
	var held, rows [3]int
	h.seen = func(o Output) {
		if o.Kind == OutputAccepted {
			mode := h.models[o.Sub].mode
			held[mode], rows[mode] = o.Held.Len(), len(o.Rows)
		}
	}
	capture := func(id SubID, sql string, mode Mode) {
		h.subscribe(id, sql, mode)
		h.answerAll()
	}
	capture(1, "SELECT id, name FROM items", ModeRowsUnordered)
	capture(2, "SELECT id, name FROM items", ModeRows)
	if held[ModeRowsUnordered] != 2 || rows[ModeRowsUnordered] != 0 {
		t.Errorf("ModeRowsUnordered: Held %d, Rows %d; want 2, 0", held[ModeRowsUnordered], rows[ModeRowsUnordered])
	}
	if held[ModeRows] != 0 || rows[ModeRows] != 2 {
		t.Errorf("ModeRows: Held %d, Rows %d; want 0, 2", held[ModeRows], rows[ModeRows])
	}
}

// TestInMemoryOrder: the rows come back once each, by the address of
// their encodings, whatever order they were in (the radix sort's passes
// over addresses that differ in low and high bits).
func TestInMemoryOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{0, 1, 2, 3, 1000, 50_000} {
		// One backing string: the encodings are its substrings, at
		// addresses far apart and close together.
		back := strings.Repeat("x", 8*n+1)
		rows := make([]heldResult, n)
		for i := range rows {
			at := rng.Intn(len(back))
			rows[i] = heldResult{key: strconv.Itoa(i), rv: rowVals{enc: back[at:]}}
		}
		got := inMemoryOrder(slices.Clone(rows))
		if len(got) != n {
			t.Fatalf("%d rows: got %d", n, len(got))
		}
		addr := func(r heldResult) uintptr { return uintptr(unsafe.Pointer(unsafe.StringData(r.rv.enc))) }
		seen := map[string]bool{}
		for i, r := range got {
			if seen[r.key] {
				t.Fatalf("%d rows: row %s twice", n, r.key)
			}
			seen[r.key] = true
			if i > 0 && addr(got[i-1])>>3 > addr(r)>>3 {
				t.Fatalf("%d rows: at %d, address %#x after %#x", n, i, addr(r), addr(got[i-1]))
			}
		}
	}
}
