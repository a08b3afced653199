package engine

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/query"
)

// TestSortedByKey: an unordered result's entries come in key order, for
// keys that share their first 8 or 16 bytes, are prefixes of each other,
// end in zero bytes or hold bytes above 0x7f (the sort compares them as
// words first).
func TestSortedByKey(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	m := map[string]*entry{}
	add := func(k string) { m[k] = &entry{key: k} }
	for _, k := range []string{"", "\x00", "\x00\x00", "a", "a\x00", "ab", "\xff", "\xff\xff\xff\xff\xff\xff\xff\xff\x00"} {
		add(k)
	}
	for i := 0; i < 3000; i++ {
		var b []byte
		switch i % 3 {
		case 0:
			b = query.AppendIntKey(nil, rng.Int63n(2000)-1000)
		case 1:
			b = []byte("sixteen byte pfx")[:rng.Intn(17)]
		}
		for n := rng.Intn(6); n > 0; n-- {
			b = append(b, []byte{0, 1, 'a', 0x80, 0xff}[rng.Intn(5)])
		}
		add(string(b))
	}
	var want []string
	for k := range m {
		want = append(want, k)
	}
	slices.Sort(want)
	var got []string
	var set entrySet
	for _, e := range m {
		set.put(e)
	}
	for _, e := range sortedByKey(&set) {
		got = append(got, e.key)
	}
	if !slices.Equal(got, want) {
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%d keys; at %d: %q, want %q", len(want), i, got[i], want[i])
			}
		}
	}
}

// TestAcceptedKeyOrder: a ModeRows Accepted of a single-table view lists
// its rows in key order whatever order its read gave them in, with
// changes replayed over the read (rows added before, among and after the
// read's, one updated, one deleted) and rows another view already held
// (the harness checks every Accepted against the oracle, in order).
func TestAcceptedKeyOrder(t *testing.T) {
	orders := []struct {
		name  string
		order func([]query.Row) []query.Row
	}{
		{"key order", nil},
		{"reversed", func(rows []query.Row) []query.Row {
			slices.Reverse(rows)
			return rows
		}},
		{"shuffled", func(rows []query.Row) []query.Row {
			rng := rand.New(rand.NewSource(1))
			rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
			return rows
		}},
		{"first last", func(rows []query.Row) []query.Row {
			return append(rows[1:], rows[0])
		}},
		{"a row twice", func(rows []query.Row) []query.Row {
			return append(rows, rows[len(rows)/2])
		}},
	}
	replay := []bool{true, false}
	for _, o := range orders {
		for _, changes := range replay {
			t.Run(fmt.Sprintf("%s, replayed %v", o.name, changes), func(t *testing.T) {
				h := itemsHarness(t)
				for i := 10; i <= 300; i += 10 {
					h.insert("items", itoa(i), "n"+itoa(i), itoa(i%7), "a")
				}
				h.commit(0)
				// A view holding some of the rows first: the second view's
				// read of them meets rows the table already holds.
				h.subscribe(1, "SELECT id, name FROM items WHERE price < 3", ModeRows)
				h.answerAll()
				h.readOrder = o.order
				at := h.lsn + 1
				h.subscribe(2, "SELECT id, name, price FROM items WHERE cat = 'a'", ModeRows)
				id := h.readIDs[len(h.readIDs)-1]
				want := 30
				if changes {
					// Committed after the read's snapshot: replayed over it.
					h.insert("items", "5", "first", "1", "a")
					h.insert("items", "155", "among", "2", "a")
					h.insert("items", "999", "last", "3", "a")
					h.update("items", nil, "70", "renamed", "0", "a")
					h.delete("items", "200")
					h.commit(0)
					want = 32
				}
				h.answer(id, at)
				h.core.Advance(h.lsn + 1)
				h.collect()
				m := h.models[2]
				if !m.accepted || len(m.rows) != want {
					t.Fatalf("sub 2: accepted %v with %d rows, want %d", m.accepted, len(m.rows), want)
				}
				if !slices.IsSortedFunc(m.rows, func(a, b ResultRow) int { return strings.Compare(string(a.Key), string(b.Key)) }) {
					t.Errorf("sub 2: rows not in key order: %s", h.fmtRows(m.rows))
				}
			})
		}
	}
}
