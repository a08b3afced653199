package shape

import (
	"fmt"
	"hash/maphash"
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

// TestDefIndex: two definitions whose hashes collide are both found, each
// as itself.
func TestDefIndex(t *testing.T) {
	x := newDefIndex()
	a := &Shape{def: definition{Schema: "public", Table: "a"}}
	b := &Shape{def: definition{Schema: "public", Table: "b"}}
	x.put(a, a.def.id())
	// a also under b's hash: b's definition then collides with a's.
	x.m[maphash.String(x.seed, b.def.id())] = a
	x.put(b, b.def.id())
	if x.more[b.def.id()] != b {
		t.Fatal("a colliding definition is not kept by its text")
	}
	if got := x.get(a.def, a.def.id()); got != a {
		t.Fatalf("get(a) = %v", got)
	}
	if got := x.get(b.def, b.def.id()); got != b {
		t.Fatalf("get(b) = %v", got)
	}
	if got := x.get(definition{Schema: "public", Table: "c"}, `{"c"}`); got != nil {
		t.Fatalf("get(c) = %v, want none", got)
	}
	x.del(b, b.def.id())
	if x.get(b.def, b.def.id()) != nil || x.get(a.def, a.def.id()) != a {
		t.Fatal("removing b removed a, or kept b")
	}
}
