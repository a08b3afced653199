package engine

import (
	"math/rand"
	"slices"
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
