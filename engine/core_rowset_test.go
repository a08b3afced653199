package engine

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestEntrySet drives an entrySet and a Go map with the same random puts,
// replacements and removals (some during a range, as truncate and intern
// do) and checks that they hold the same entries after every step.
func TestEntrySet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 50; round++ {
		var s entrySet
		m := make(map[string]*entry)
		keys := 1 + rng.IntN(300)
		for step := 0; step < 2000; step++ {
			k := strconv.Itoa(rng.IntN(keys))
			switch op := rng.IntN(10); {
			case op < 5:
				e := &entry{key: k}
				s.put(e)
				m[k] = e
			case op < 9:
				if got, want := s.remove(k), m[k]; got != want {
					t.Fatalf("remove(%s) = %p, want %p", k, got, want)
				}
				delete(m, k)
			default:
				// Remove some and replace others while ranging.
				seen := make(map[string]bool)
				for e := range s.all() {
					if seen[e.key] || m[e.key] != e {
						t.Fatalf("range produced %s twice or a removed entry", e.key)
					}
					seen[e.key] = true
					if rng.IntN(2) == 0 {
						victim := strconv.Itoa(rng.IntN(keys))
						s.remove(victim)
						delete(m, victim)
					} else {
						r := &entry{key: e.key}
						s.put(r)
						m[e.key] = r
					}
				}
			}
			if s.len() != len(m) {
				t.Fatalf("len = %d, want %d", s.len(), len(m))
			}
			for k, e := range m {
				if s.get(k) != e {
					t.Fatalf("get(%s) = %p, want %p", k, s.get(k), e)
				}
			}
			n := 0
			for e := range s.all() {
				if m[e.key] != e {
					t.Fatalf("range produced %s, not in the map", e.key)
				}
				n++
			}
			if n != len(m) {
				t.Fatalf("range produced %d entries, want %d", n, len(m))
			}
			if s.get(strconv.Itoa(keys+1)) != nil {
				t.Fatal("get of an absent key found an entry")
			}
		}
	}
}
