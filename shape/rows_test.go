package shape

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestEntry: an entry gives back each column's text, NULL apart from the
// empty string, its key and the key it is found by.
func TestEntry(t *testing.T) {
	for _, vals := range [][]*string{
		{},
		{nil},
		{str("")},
		{str("1"), nil, str(""), str("x/y"), nil},
		{nil, nil, str("tail")},
	} {
		var sc scratch
		sc.text("junk from the row before")
		sc.reset()
		for _, v := range vals {
			if v == nil {
				sc.null()
			} else {
				sc.text(*v)
			}
		}
		e := sc.entry([]byte(`"public"."t"/"1"`), "engine-key")
		if e.cols() != len(vals) {
			t.Fatalf("cols = %d, want %d", e.cols(), len(vals))
		}
		if e.key() != `"public"."t"/"1"` || e.look() != "engine-key" {
			t.Fatalf("key %q look %q", e.key(), e.look())
		}
		for i, v := range vals {
			got, ok := e.val(i)
			if v == nil {
				if ok {
					t.Errorf("%v: column %d = %q, want NULL", show(vals), i, got)
				}
			} else if !ok || got != *v {
				t.Errorf("%v: column %d = %q (%v), want %q", show(vals), i, got, ok, *v)
			}
		}
	}
}

// TestElectricKey: the key quotes each primary key value, doubles its
// slashes and writes NULL as _.
func TestElectricKey(t *testing.T) {
	lay := &layout{pk: []int{2, 0}, keyPfx: []byte(`"public"."t"`)}
	var sc scratch
	sc.text("a/b")
	sc.text("not in the key")
	sc.null()
	if got, want := string(sc.electricKey(lay)), `"public"."t"/_/"a//b"`; got != want {
		t.Fatalf("key = %s, want %s", got, want)
	}
}

// TestRowSet: rows are found, replaced and removed the same way in the
// small form and once the set has become a map.
func TestRowSet(t *testing.T) {
	for _, n := range []int{1, smallRows, smallRows + 1, 50} {
		rs := newRowSet(0, false)
		mk := func(i, v int) entry {
			var sc scratch
			sc.text(fmt.Sprint(v))
			return sc.entry([]byte(fmt.Sprintf("k%d", i)), fmt.Sprintf("e%d", i))
		}
		for i := 0; i < n; i++ {
			rs.put(mk(i, i))
		}
		for i := 0; i < n; i += 2 {
			rs.put(mk(i, -i)) // replaced, not added
		}
		for i := 1; i < n; i += 3 {
			rs.del(fmt.Sprintf("e%d", i))
		}
		want := map[string]string{}
		for i := 0; i < n; i++ {
			if i%3 == 1 && i >= 1 {
				continue
			}
			v := i
			if i%2 == 0 {
				v = -i
			}
			want[fmt.Sprintf("e%d", i)] = fmt.Sprint(v)
		}
		if rs.len() != len(want) {
			t.Fatalf("n=%d: len = %d, want %d", n, rs.len(), len(want))
		}
		for k, v := range want {
			e, ok := rs.get(k)
			got, _ := e.val(0)
			if !ok || got != v {
				t.Fatalf("n=%d: get(%s) = %q %v, want %q", n, k, got, ok, v)
			}
		}
		seen := 0
		rs.each(func(e entry) {
			if _, ok := want[e.look()]; !ok {
				t.Fatalf("n=%d: each gave %s, which was removed", n, e.look())
			}
			seen++
		})
		if seen != len(want) {
			t.Fatalf("n=%d: each gave %d rows, want %d", n, seen, len(want))
		}
		if _, ok := rs.get("e1"); ok && n > 1 {
			t.Fatalf("n=%d: a removed row is found", n)
		}
	}
	// Reloaded rows are found by their Electric key.
	rs := newRowSet(0, true)
	var sc scratch
	sc.text("v")
	rs.put(sc.entry([]byte(`"public"."t"/"1"`), ""))
	if _, ok := rs.get(`"public"."t"/"1"`); !ok {
		t.Fatal("a reloaded row is not found by its Electric key")
	}
}

func str(s string) *string { return &s }

func show(vals []*string) []string {
	var out []string
	for _, v := range vals {
		if v == nil {
			out = append(out, "NULL")
		} else {
			out = append(out, fmt.Sprintf("%q", *v))
		}
	}
	return out
}

// TestShapeIndex: shapes put, replaced and removed at random, under a
// hash that sends many keys to one slot (long probe runs, deletions in
// the middle of a run, runs that wrap around the table's end, growth and
// shrinking), are found exactly as a map of the same keys finds them.
func TestShapeIndex(t *testing.T) {
	for _, spread := range []uint64{1, 3, 64, 1 << 62} {
		rnd := rand.New(rand.NewPCG(spread, 7))
		key := map[*Shape]uint64{}
		x := shapeIndex{
			hash: func(s *Shape) uint64 { return key[s] % spread * 0x9e3779b97f4a7c15 },
			same: func(a, b *Shape) bool { return key[a] == key[b] },
		}
		model := map[uint64]*Shape{}
		for step := 0; step < 20000; step++ {
			k := rnd.Uint64N(300)
			switch rnd.IntN(3) {
			case 0, 1:
				if rnd.IntN(2) == 0 || step < 3000 {
					s := &Shape{}
					key[s] = k
					x.put(s)
					model[k] = s
				} else if s := model[k]; s != nil {
					x.del(s)
					delete(model, k)
				}
			case 2:
				if s := model[k]; s != nil && rnd.IntN(4) == 0 {
					// A shape whose key another now holds is not removed by
					// its key: del removes that shape only.
					o := &Shape{}
					key[o] = k
					x.del(o)
				}
			}
			if x.n != len(model) {
				t.Fatalf("spread %d, step %d: %d shapes, want %d", spread, step, x.n, len(model))
			}
			if step%97 == 0 || step > 19000 {
				for k := uint64(0); k < 300; k++ {
					probe := &Shape{}
					key[probe] = k
					got := x.get(x.hash(probe), func(s *Shape) bool { return key[s] == k })
					if got != model[k] {
						t.Fatalf("spread %d, step %d: key %d found %p, want %p", spread, step, k, got, model[k])
					}
				}
			}
		}
		if len(x.all()) != len(model) {
			t.Fatalf("all: %d shapes, want %d", len(x.all()), len(model))
		}
	}
}

// TestHandleText: a handle's text reads back as the handle, and a text
// String would not write (a leading zero, a sign, a part missing) names
// none, so two texts never find one shape.
func TestHandleText(t *testing.T) {
	for i := 0; i < 100; i++ {
		h := newHandle()
		got, ok := parseHandle(h.String())
		if !ok || got != h {
			t.Fatalf("%s reads back as %v, %v", h, got, ok)
		}
	}
	if h, ok := parseHandle("0-0"); !ok || h != (handle{}) {
		t.Fatal("0-0 is not read")
	}
	for _, s := range []string{"", "-", "1-", "-1", "01-2", "1-02", "+1-2", "1-+2", "1--2", "1-2-3", "x-1", "18446744073709551616-1", "1 -2", "nope"} {
		if h, ok := parseHandle(s); ok {
			t.Errorf("%q read as %v", s, h)
		}
	}
}

// TestRegistry: a shape is found by its first handle, by every handle a
// 409 gave it and by its definition, and by none of them once removed.
func TestRegistry(t *testing.T) {
	r := newRegistry()
	lay := &layout{tableSchema: "public", table: "a"}
	a := &Shape{name: newHandle(), lay: lay}
	b := &Shape{name: newHandle(), lay: lay, where: "x = 1"}
	h2 := newHandle()
	r.put(a, nil)
	r.put(b, nil)
	r.rotate(a, h2)
	a.rareLocked().rotated = []handle{h2}
	for _, c := range []struct {
		h    string
		want *Shape
	}{{a.name.String(), a}, {h2.String(), a}, {b.name.String(), b}, {"1-1", nil}, {"nope", nil}} {
		if got := r.lookup(c.h); got != c.want {
			t.Errorf("lookup(%s) = %p, want %p", c.h, got, c.want)
		}
	}
	if r.get(&definition{Schema: "public", Table: "a"}) != a || r.get(&definition{Schema: "public", Table: "a", Where: "x = 1"}) != b || r.get(&definition{Schema: "public", Table: "b"}) != nil {
		t.Error("get by definition")
	}
	r.del(a, a.rotatedLocked())
	if r.lookup(a.name.String()) != nil || r.lookup(h2.String()) != nil || r.get(&definition{Schema: "public", Table: "a"}) != nil || r.lookup(b.name.String()) != b || r.len() != 1 || r.rotated != nil {
		t.Error("del(a)")
	}
}
