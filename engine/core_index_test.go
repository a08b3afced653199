package engine

import (
	"slices"
	"testing"
)

// rec is a record of a test index.
type rec struct{ k int }

func (r *rec) indexKey() int { return r.k }

// TestIndex puts, replaces, finds and removes records in an index through
// its growth and its tombstones' reuse, against a map.
func TestIndex(t *testing.T) {
	var x index[int, *rec]
	want := map[int]*rec{}
	check := func(step string) {
		t.Helper()
		if x.len() != len(want) {
			t.Fatalf("%s: len = %d, want %d", step, x.len(), len(want))
		}
		for k, r := range want {
			if got := x.get(k); got != r {
				t.Fatalf("%s: get(%d) = %v, want %v", step, k, got, r)
			}
		}
		var keys []int
		for r := range x.all() {
			keys = append(keys, r.k)
			if want[r.k] != r {
				t.Fatalf("%s: all gives %v, not in the index", step, r)
			}
		}
		if len(keys) != len(want) {
			t.Fatalf("%s: all gives %d records, want %d", step, len(keys), len(want))
		}
	}
	if x.get(1) != nil || x.remove(1) != nil {
		t.Fatal("empty index finds a record")
	}
	for k := range 1000 {
		r := &rec{k}
		x.put(r)
		want[k] = r
	}
	check("1000 put")
	// A put of a key held replaces its record.
	r := &rec{500}
	x.put(r)
	want[500] = r
	check("500 replaced")
	for k := 0; k < 1000; k += 2 {
		if got := x.remove(k); got != want[k] {
			t.Fatalf("remove(%d) = %v, want %v", k, got, want[k])
		}
		delete(want, k)
	}
	if x.remove(0) != nil {
		t.Fatal("remove of a removed key returns a record")
	}
	check("evens removed")
	// Removing and adding keys many times over reuses the tombstones
	// rather than growing the table for ever.
	size := len(x.slots)
	for round := range 20 {
		for k := 1000 + round*500; k < 1500+round*500; k++ {
			r := &rec{k}
			x.put(r)
			want[k] = r
		}
		for k := 1000 + round*500; k < 1500+round*500; k++ {
			x.remove(k)
			delete(want, k)
		}
	}
	check("churned")
	if len(x.slots) > 2*size {
		t.Fatalf("table grew from %d to %d slots holding %d records", size, len(x.slots), x.len())
	}
	// Removing during a range is safe; the last removal frees every slot.
	for r := range x.all() {
		x.remove(r.k)
		delete(want, r.k)
	}
	check("all removed")
	if x.used != 0 || slices.ContainsFunc(x.tags, func(t uint8) bool { return t != tagEmpty }) {
		t.Fatalf("empty index keeps %d used slots", x.used)
	}
	// An index emptied after a burst does not keep the burst's table.
	if len(x.slots) > maxKeptSlots {
		t.Fatalf("empty index keeps %d slots, want at most %d", len(x.slots), maxKeptSlots)
	}
	x.put(&rec{1})
	want[1] = x.get(1)
	check("put after emptied")
}

// TestIndexGrowInRange checks that growing an index while it is ranged
// over panics rather than skipping or repeating records.
func TestIndexGrowInRange(t *testing.T) {
	var x index[int, *rec]
	for k := range 7 {
		x.put(&rec{k})
	}
	defer func() {
		if recover() == nil {
			t.Fatal("growing during a range did not panic")
		}
	}()
	k := 100
	for range x.all() {
		x.put(&rec{k})
		k++
	}
}
