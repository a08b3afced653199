package engine

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestRowTable drives a rowTable and a Go map with the same random
// inserts, updates, holds and drops (some during a range of the key set,
// as truncate does) and checks after every step that each key's row
// reads back its last values, that a row leaves the key set when dropped
// and its id is freed only once no holder is left, and that an id is
// reused only after recycle. Odd rounds start the key set's ids at 3
// bits, so that it widens as the ids grow.
func TestRowTable(t *testing.T) {
	defer func(b uint8) { keyIDBits = b }(keyIDBits)
	rng := rand.New(rand.NewPCG(3, 4))
	holders := []*viewSource{{hid: 1}, {hid: 2}, {hid: 3}, {hid: 4}, {hid: 5}}
	// sameHolders reports whether row id's holders are hs, as a multiset.
	sameHolders := func(rt *rowTable, id rowID, hs []*viewSource) bool {
		first, more := rt.holders(id)
		got := make(map[uint32]int)
		if first != 0 {
			got[first]++
		} else if len(more) > 0 {
			return false
		}
		for _, h := range more {
			got[h]++
		}
		for _, vs := range hs {
			got[vs.hid]--
		}
		for _, n := range got {
			if n != 0 {
				return false
			}
		}
		return rt.holder(id) == first
	}
	for round := 0; round < 30; round++ {
		keyIDBits = 24
		if round%2 == 1 {
			keyIDBits = 3
		}
		var rt rowTable
		type row struct {
			id   rowID
			val  int64
			hold []*viewSource
		}
		m := make(map[string]*row)
		detached := make(map[rowID][]*viewSource) // dropped while held
		freedNow := make(map[rowID]bool)          // freed in this "call"
		keys := 1 + rng.IntN(3000)
		check := func(step int) {
			if rt.len() != len(m) {
				t.Fatalf("round %d step %d: len = %d, want %d", round, step, rt.len(), len(m))
			}
			for k, r := range m {
				id := rt.lookup(k)
				if id != r.id || rt.key(id) != k {
					t.Fatalf("round %d step %d: lookup(%s) = %d, want %d", round, step, k, id, r.id)
				}
				if got := rt.vals(id).values()[0]; got != r.val {
					t.Fatalf("round %d step %d: %s = %v, want %d", round, step, k, got, r.val)
				}
			}
		}
		for step := 0; step < 1500; step++ {
			k := strconv.Itoa(rng.IntN(keys))
			r := m[k]
			if rng.IntN(100) == 0 {
				rt.reserve(rng.IntN(3000)) // room for more rows never changes those held
			}
			switch op := rng.IntN(12); {
			case op < 4 && r == nil:
				v := rng.Int64()
				id := rt.insert(k, []any{v})
				if freedNow[id] {
					t.Fatalf("id %d reused in the call that freed it", id)
				}
				m[k] = &row{id: id, val: v}
			case op < 4:
				r.val = rng.Int64()
				rt.setVals(r.id, []any{r.val})
			case op < 7 && r != nil:
				vs := holders[rng.IntN(len(holders))]
				rt.addHolder(r.id, vs)
				r.hold = append(r.hold, vs)
			case op < 9 && r != nil && len(r.hold) > 0:
				i := rng.IntN(len(r.hold))
				rt.dropHolder(r.id, r.hold[i])
				r.hold = append(r.hold[:i], r.hold[i+1:]...)
			case op < 10 && r != nil:
				rt.drop(r.id)
				delete(m, k)
				if len(r.hold) > 0 {
					detached[r.id] = r.hold
				} else {
					freedNow[r.id] = true
				}
			case op < 11:
				// Release every detached row's holders.
				for id, hs := range detached {
					for _, vs := range hs {
						rt.dropHolder(id, vs)
					}
					if rt.holder(id) != 0 {
						t.Fatalf("row %d still held after its holders let go", id)
					}
					rt.freeID(id)
					freedNow[id] = true
				}
				clear(detached)
			default:
				// The next core call: freed ids may be reused, and read
				// as freed until they are.
				rt.recycle()
				for id := range freedNow {
					func() {
						defer func() {
							if recover() == nil {
								t.Fatalf("reading freed id %d did not panic", id)
							}
						}()
						rt.key(id)
					}()
				}
				clear(freedNow)
			}
			for id, hs := range detached {
				if first, more := rt.holders(id); first == 0 || !sameHolders(&rt, id, hs) {
					t.Fatalf("detached row %d has holders %d %v, want %d", id, first, more, len(hs))
				}
			}
			if r := m[k]; r != nil && !sameHolders(&rt, r.id, r.hold) {
				first, more := rt.holders(r.id)
				t.Fatalf("round %d step %d: row %s has holders %d %v, want %d", round, step, k, first, more, len(r.hold))
			}
			check(step)
		}
		// Every holder let go: no holder list is left.
		for _, r := range m {
			for _, vs := range r.hold {
				rt.dropHolder(r.id, vs)
			}
		}
		for id, hs := range detached {
			for _, vs := range hs {
				rt.dropHolder(id, vs)
			}
		}
		if len(rt.lists.index) != 0 || len(rt.lists.free) != len(rt.lists.lists) {
			t.Fatalf("round %d: %d holder lists left, %d of %d indexes free", round, len(rt.lists.index), len(rt.lists.free), len(rt.lists.lists))
		}
	}
}

// TestKeySetWiden adds rows to a key set whose ids start at 3 bits by
// every path that adds one (insert, put, adopt from a stage), removes
// some, and checks that each key finds its row and the set ranges over
// exactly the rows in it, with ids past what the tags first left them.
func TestKeySetWiden(t *testing.T) {
	defer func(b uint8) { keyIDBits = b }(keyIDBits)
	keyIDBits = 3
	var rt, stage rowTable
	stage.stage = true
	want := make(map[string]rowID)
	for i := 0; i < 3000; i++ {
		k := strconv.Itoa(i)
		switch i % 3 {
		case 0:
			want[k] = rt.insert(k, []any{int64(i)})
		case 1:
			want[k] = rt.put(k, rowVals{enc: rt.vals(rt.insert("x"+k, []any{int64(i)})).enc})
			rt.drop(rt.lookup("x" + k))
		default:
			id, added := rt.adopt(&stage, stage.put(k, rowVals{enc: "e"}))
			if !added {
				t.Fatalf("adopt(%s) found a row", k)
			}
			want[k] = id
		}
		if i%7 == 0 {
			rt.drop(want[k])
			delete(want, k)
		}
		if i%500 == 0 {
			rt.recycle()
		}
	}
	if rt.keys.bits() < 12 {
		t.Fatalf("the key set's ids have %d bits after %d ids", rt.keys.bits(), rt.nextID()-1)
	}
	for k, id := range want {
		if got := rt.lookup(k); got != id {
			t.Fatalf("lookup(%s) = %d, want %d", k, got, id)
		}
	}
	n := 0
	for id := range rt.all() {
		if want[rt.key(id)] != id {
			t.Fatalf("the key set ranges over %d (%s), not in it", id, rt.key(id))
		}
		n++
	}
	if n != len(want) || rt.len() != len(want) {
		t.Fatalf("the key set ranges over %d rows, len %d, want %d", n, rt.len(), len(want))
	}
}

// TestIDSet drives an idSet and a Go map with the same random adds and
// removals (some during a range), over ids few and many of which the set
// holds, so that it goes from open addressing to a bitmap and back.
func TestIDSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	forms := map[bool]int{}
	for round := 0; round < 60; round++ {
		var s idSet
		m := make(map[rowID]bool)
		ids := 1 + rng.IntN(5000)
		adds := 3 + rng.IntN(6) // of 10: the set fills, or empties
		for step := 0; step < 4000; step++ {
			id := rowID(1 + rng.IntN(ids))
			if step%1000 == 999 {
				adds = 3 + rng.IntN(6)
			}
			forms[s.bits != nil]++
			switch op := rng.IntN(10); {
			case op < adds:
				if got := s.add(id); got == m[id] {
					t.Fatalf("add(%d) = %v with the id held %v", id, got, m[id])
				}
				m[id] = true
			case op < 9:
				if rng.IntN(50) == 0 {
					s.fit()
				}
				if got := s.remove(id); got != m[id] {
					t.Fatalf("remove(%d) = %v, want %v", id, got, m[id])
				}
				delete(m, id)
			default:
				for x := range s.all() {
					if !m[x] {
						t.Fatalf("range produced %d, not in the map (removed during the range?)", x)
					}
					if rng.IntN(3) == 0 {
						// This one, or one the range may not have reached.
						victim := x
						if rng.IntN(2) == 0 {
							victim = rowID(1 + rng.IntN(ids))
						}
						s.remove(victim)
						delete(m, victim)
					}
				}
			}
			if s.len() != len(m) {
				t.Fatalf("len = %d, want %d", s.len(), len(m))
			}
			for x := range m {
				if !s.has(x) {
					t.Fatalf("has(%d) = false", x)
				}
			}
			n := 0
			for range s.all() {
				n++
			}
			if n != len(m) {
				t.Fatalf("range produced %d ids, want %d", n, len(m))
			}
		}
	}
	if forms[false] == 0 || forms[true] == 0 {
		t.Fatalf("steps in each form: %v, want both", forms)
	}
}
