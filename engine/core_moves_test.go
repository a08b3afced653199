package engine

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// applyMoves is what a subscriber holding the order old does with a
// delta's Removed and Moves: drop the removed and moved rows, then put
// each moved row right after its After (or first). It fails when the
// moves cannot be placed.
func applyMoves(old, removed []Key, moves []Move) ([]Key, error) {
	drop := map[Key]bool{}
	for _, k := range removed {
		drop[k] = true
	}
	after := map[Key]Key{}
	var head *Key
	for _, m := range moves {
		if drop[m.Key] && !slices.Contains(old, m.Key) {
			return nil, fmt.Errorf("key %x moved twice", m.Key)
		}
		drop[m.Key] = true
		if m.Head {
			if head != nil {
				return nil, fmt.Errorf("two moves to the head: %x and %x", *head, m.Key)
			}
			k := m.Key
			head = &k
			continue
		}
		if _, dup := after[m.After]; dup {
			return nil, fmt.Errorf("two moves after %x", m.After)
		}
		after[m.After] = m.Key
	}
	var out []Key
	placed := 0
	chain := func(k Key) {
		for {
			n, ok := after[k]
			if !ok {
				return
			}
			delete(after, k)
			out = append(out, n)
			placed++
			k = n
		}
	}
	if head != nil {
		out = append(out, *head)
		placed++
		chain(*head)
	}
	for _, k := range old {
		if drop[k] {
			continue
		}
		out = append(out, k)
		chain(k)
	}
	if placed != len(moves) {
		return nil, fmt.Errorf("%d of %d moves placed (an After not in the result)", placed, len(moves))
	}
	if out == nil {
		out = []Key{}
	}
	return out, nil
}

// checkMoves fails t when o's Moves, applied to the order prev a
// subscriber held, do not give o's Order.
func checkMoves(prev []Key, o Output) error {
	if o.Order == nil {
		if o.Moves != nil {
			return fmt.Errorf("a delta with Moves but no Order")
		}
		return nil
	}
	if o.Moves == nil {
		return fmt.Errorf("an ordered delta without Moves")
	}
	got, err := applyMoves(prev, o.Removed, o.Moves)
	if err != nil {
		return err
	}
	if !slices.Equal(got, o.Order) {
		return fmt.Errorf("moves %v applied to %x give %x, want the order %x", o.Moves, prev, got, o.Order)
	}
	return nil
}

// TestMoves draws an old order and a new one made from it by removals,
// insertions and moves, and checks that the moves the view tells, applied
// to the old order, give the new one, and that one row moved costs one
// move.
func TestMoves(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for iter := 0; iter < 20000; iter++ {
		n := rng.Intn(12)
		if iter%100 == 0 {
			n = rng.Intn(300)
		}
		var old []Key
		for i := 0; i < n; i++ {
			old = append(old, Key(fmt.Sprintf("k%d", i)))
		}
		rng.Shuffle(len(old), func(i, j int) { old[i], old[j] = old[j], old[i] })
		now := slices.Clone(old)
		edits := rng.Intn(4)
		single := edits == 1 && len(now) > 1
		var removed []Key
		for e := 0; e < edits; e++ {
			switch op := rng.Intn(3); {
			case op == 0 && len(now) > 0 && !single:
				i := rng.Intn(len(now))
				removed = append(removed, now[i])
				now = slices.Delete(now, i, i+1)
			case op == 1 && !single:
				k := Key(fmt.Sprintf("n%d", e))
				now = slices.Insert(now, rng.Intn(len(now)+1), k)
			case len(now) > 0:
				i := rng.Intn(len(now))
				k := now[i]
				now = slices.Delete(now, i, i+1)
				now = slices.Insert(now, rng.Intn(len(now)+1), k)
			}
		}
		v := &shownResult{}
		oldIdx := map[string]int{}
		for i, k := range old {
			v.shown = append(v.shown, shownRow{key: string(k)})
			oldIdx[string(k)] = i
		}
		var vis []*entry
		visible := map[string]bool{}
		for _, k := range now {
			vis = append(vis, &entry{key: string(k)})
			visible[string(k)] = true
		}
		ms := v.moves(vis, oldIdx, visible)
		got, err := applyMoves(old, removed, ms)
		if err != nil {
			t.Fatalf("old %v new %v: moves %v: %v", old, now, ms, err)
		}
		if !slices.Equal(got, now) && !(len(got) == 0 && len(now) == 0) {
			t.Fatalf("old %v new %v: moves %v give %v", old, now, ms, got)
		}
		if single && len(ms) > 1 {
			t.Fatalf("old %v new %v: one row moved, %d moves: %v", old, now, len(ms), ms)
		}
	}
}
