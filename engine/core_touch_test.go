package engine

import (
	"strings"
	"testing"
)

// TestTouchTies: a transaction that leaves an ordered result's rows, their
// output values and the engine's order as they were, but changes which
// rows tie on ORDER BY, changes the result a touch-mode subscriber cached:
// PostgreSQL may have answered the tied rows in either order, and now only
// one is right. Touch-mode subscribers are touched; rows-mode ones, whose
// order is still right, get no delta. (Differential seeds
// 1796150066437542471 and 1796151077997548610, issue 10 item 19.)
func TestTouchTies(t *testing.T) {
	cases := []struct {
		name, sql string
		update    []string // a write to items: id, name, price, cat
	}{
		// Rows 1 and 2 tie at price 10; 2 moves to 11: the engine's
		// order (1, 2) holds, the tie is gone.
		{"tie broken", "SELECT name FROM items ORDER BY price", []string{"2", "b", "11", "x"}},
		// Rows 1 (11) and 2 (10) differ; 2 moves to 11: a new tie,
		// broken by key as before (1, 2).
		{"tie made", "SELECT name FROM items ORDER BY price DESC LIMIT 4", []string{"2", "b", "11", "x"}},
		// The window's last row (3, price 12) and the first row past it
		// (4, price 12) tie: PostgreSQL may answer either; 4 moves to 13.
		{"tie at the cut", "SELECT cat FROM items ORDER BY price LIMIT 3", []string{"4", "d", "13", "x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := itemsHarness(t)
			prices := map[string][]string{"tie broken": {"10", "10", "12", "13"}, "tie made": {"11", "10", "12", "13"}, "tie at the cut": {"10", "11", "12", "12"}}[tc.name]
			for i, p := range prices {
				h.insert("items", itoa(i+1), string(rune('a'+i)), p, "x")
			}
			h.commit(0)
			h.subscribe(1, tc.sql, ModeRows)
			h.subscribe(2, tc.sql, ModeTouch)
			h.answerAll()
			mark := h.out.Len()
			h.update("items", nil, tc.update...)
			h.commit(0)
			got := h.out.String()[mark:]
			if !strings.Contains(got, "sub 2 touched") {
				t.Errorf("the touch-mode subscription was not touched; outputs after the update:\n%s", got)
			}
			if strings.Contains(got, "sub 1 delta") {
				t.Errorf("the rows-mode subscription got a delta for an order that did not change:\n%s", got)
			}
		})
	}
}
