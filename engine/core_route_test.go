package engine

import (
	"slices"
	"testing"
)

// TestEqIndexShared registers view sources of an equality index under one
// hash (an identical bind of several views, or two values whose hashes
// collide) and removes them in an order that moves the hash between the
// index's maps: each step, the hash must still find exactly the view
// sources registered under it, and another hash none of them.
func TestEqIndexShared(t *testing.T) {
	ix := &eqIndex{one: make(map[uint64]*viewSource)}
	a, b, c := &viewSource{idx: 1}, &viewSource{idx: 2}, &viewSource{idx: 3}
	check := func(step string, want ...*viewSource) {
		t.Helper()
		var got []*viewSource
		ix.each(7, func(vs *viewSource) { got = append(got, vs) })
		slices.SortFunc(got, func(x, y *viewSource) int { return int(x.idx - y.idx) })
		if !slices.Equal(got, want) {
			t.Fatalf("%s: hash 7 finds %v, want %v", step, got, want)
		}
		ix.each(8, func(vs *viewSource) { t.Fatalf("%s: hash 8 finds %v, want none", step, vs) })
		var all []*viewSource
		ix.all(func(vs *viewSource) { all = append(all, vs) })
		if len(all) != len(want) {
			t.Fatalf("%s: all finds %d view sources, want %d", step, len(all), len(want))
		}
	}
	ix.add(7, a)
	check("a added", a)
	ix.add(7, b)
	check("b added", a, b)
	ix.add(7, c)
	check("c added", a, b, c)
	ix.remove(7, b)
	check("b removed", a, c)
	ix.remove(7, a)
	check("a removed", c)
	if len(ix.many) != 0 || ix.one[7] != c {
		t.Fatalf("one view source left: one %v, many %v; want it in one", ix.one, ix.many)
	}
	ix.add(7, a)
	check("a added again", a, c)
	ix.remove(7, a)
	ix.remove(7, c)
	check("all removed")
	if len(ix.one) != 0 || len(ix.many) != 0 {
		t.Fatalf("empty index holds one %v, many %v", ix.one, ix.many)
	}
}
