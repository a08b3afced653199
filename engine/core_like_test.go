package engine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/query"
)

// TestCoreLikeRandom drives views of random LIKE/ILIKE patterns (literal
// runs of every length, both cases, escapes, wildcards) with random
// writes of names drawn from the same letters, and checks every view
// against the oracle after every transaction: a view the LIKE index fails
// to route a row to (entering, changing or leaving) misses a delta.
func TestCoreLikeRandom(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 12))
			h := newHarness(t, CoreOptions{})
			h.createTable("items", []string{"id int4 pk", "name text", "price int4", "cat text"})
			letters := []string{"a", "b", "A", "B", "c", "-", "é", "É", "ab", "abc", "ABC"}
			word := func(n int) string {
				var b strings.Builder
				for range n {
					b.WriteString(letters[rng.IntN(len(letters))])
				}
				return b.String()
			}
			pattern := func() string {
				var b strings.Builder
				for range 1 + rng.IntN(4) {
					switch rng.IntN(6) {
					case 0:
						b.WriteString("%")
					case 1:
						b.WriteString("_")
					case 2:
						b.WriteString(`\_`)
					default:
						b.WriteString(word(1 + rng.IntN(3)))
					}
				}
				return b.String()
			}
			name := func() string {
				switch rng.IntN(8) {
				case 0:
					return "null"
				case 1:
					return "a_b" + word(rng.IntN(3))
				}
				return word(rng.IntN(6))
			}
			ops := []string{"LIKE", "ILIKE", "~~", "~~*", "NOT LIKE", "NOT ILIKE"}
			var sub SubID
			for range 40 {
				sub++
				sql := fmt.Sprintf("SELECT id, name FROM items WHERE name %s '%s'", ops[rng.IntN(len(ops))], pattern())
				switch rng.IntN(5) {
				case 0:
					sql += fmt.Sprintf(" AND name ILIKE '%%%s%%'", word(1+rng.IntN(2)))
				case 1:
					sql += fmt.Sprintf(" OR price = %d", rng.IntN(4))
				case 2:
					sql += fmt.Sprintf(" AND price > %d", rng.IntN(4))
				}
				h.subscribe(sub, sql, ModeRows)
			}
			h.answerAll()
			ids := map[int]bool{}
			for range 150 {
				for range 1 + rng.IntN(3) {
					id := rng.IntN(15)
					row := []string{fmt.Sprint(id), name(), fmt.Sprint(rng.IntN(4)), "c"}
					switch {
					case !ids[id]:
						h.insert("items", row...)
						ids[id] = true
					case rng.IntN(5) == 0:
						h.delete("items", fmt.Sprint(id))
						delete(ids, id)
					default:
						h.update("items", nil, row...)
					}
				}
				h.commit(0)
				if t.Failed() {
					t.Fatalf("transcript:\n%s", tail(h.out.String(), 3000))
				}
			}
			if h.verified[false] == 0 {
				t.Fatal("no view was verified")
			}
		})
	}
}

// TestCoreLikeIndexNarrows pins the LIKE index's shape: 2,000 ILIKE
// views of distinct numbers each register under a key of their own, a
// changed row's value reaches the few whose key it holds, a pattern
// without a literal run of three bytes stays with the NOT NULL views, and
// unsubscribing every view empties the index.
func TestCoreLikeIndexNarrows(t *testing.T) {
	const n = 2_000
	h := newHarness(t, CoreOptions{})
	h.check = false // the oracle over 10,000 views after each step is quadratic
	h.createTable("items", []string{"id int4 pk", "name text", "price int4", "cat text"})
	for i := range n {
		h.subscribe(SubID(i+1), fmt.Sprintf("SELECT id FROM items WHERE name ILIKE 'Item-%d-%%'", i), ModeRows)
	}
	h.subscribe(n+1, "SELECT id FROM items WHERE name LIKE 'ab%'", ModeRows)
	h.answerAll()
	var tb *table
	for _, x := range h.core.st.tables {
		tb = x
	}
	if len(tb.route.like) != 1 {
		t.Fatalf("LIKE indexes = %d, want 1 (name, ILIKE's fold)", len(tb.route.like))
	}
	ix := tb.route.like[0]
	if ix.n != n {
		t.Errorf("LIKE index holds %d views, want %d", ix.n, n)
	}
	if got := len(tb.route.ne); got != 1 {
		t.Errorf("NOT NULL indexes = %d, want 1 (for 'ab%%')", got)
	}
	count := func(v any) int {
		seen := map[*viewSource]bool{}
		ix.match(v, func(vs *viewSource) { seen[vs] = true })
		return len(seen)
	}
	for _, v := range []string{"item-7919-x", "ITEM-123-abc", "item-5-", "no match here"} {
		// Each view's key is a substring of 'item-<i>-' that no more
		// than a few other views have: the row reaches a handful.
		if got := count(v); got > 8 {
			t.Errorf("value %q reaches %d views, want at most 8", v, got)
		}
	}
	if count("item-7919-x") == 0 {
		t.Errorf("value %q reaches no view, want the one of 'Item-7919-%%'", "item-7919-x")
	}
	// A value with more substrings than there are views: every view.
	if got := count(strings.Repeat("x", 4*n)); got != n {
		t.Errorf("a value of %d bytes reaches %d views, want all %d", 4*n, got, n)
	}
	if got := count(nil); got != 0 {
		t.Errorf("NULL reaches %d views, want 0", got)
	}
	if got := count(unloaded{}); got != n {
		t.Errorf("an unloaded value reaches %d views, want all %d", got, n)
	}
	for i := range n {
		h.unsubscribe(SubID(i + 1))
	}
	if ix.n != 0 || len(ix.keys) != 0 || ix.lens != [likeKeyMax + 1]int{} {
		t.Errorf("after unsubscribing: %d views, %d keys, lens %v; want none", ix.n, len(ix.keys), ix.lens)
	}
}

// TestLikeConstraint pins what the query layer tells the router about
// LIKE: the literal runs of a LIKE pattern, folded for ILIKE, and nothing
// for NOT LIKE or under OR.
func TestLikeConstraint(t *testing.T) {
	h := newHarness(t, CoreOptions{})
	h.createTable("items", []string{"id int4 pk", "name text", "price int4", "cat text"})
	for _, c := range []struct{ where, want string }{
		{`name ILIKE '%Apple_Pie%'`, `[{1 apple} {1 pie}]`},
		{`name LIKE 'Ab\%c%d'`, `[{0 Ab%c} {0 d}]`},
		{`name ~~* 'XY'`, `[{1 xy}]`},
		{`name LIKE '%abc%' AND name ILIKE 'DEF%'`, `[{0 abc} {1 def}]`},
		{`name NOT LIKE '%abc%'`, `[]`},
		{`NOT (name NOT LIKE '%abc%')`, `[{0 abc}]`},
		{`name LIKE '%abc%' OR name LIKE '%abd%'`, `[]`},
	} {
		plan, r := h.compile("SELECT id FROM items WHERE "+c.where, nil)
		if r != nil {
			t.Fatalf("%s: %v", c.where, r)
		}
		var got []query.Substring
		for _, con := range plan.Constraints(0) {
			got = append(got, con.Contains...)
		}
		if s := fmt.Sprint(got); s != c.want && !(c.want == "[]" && len(got) == 0) {
			t.Errorf("%s: Contains = %s, want %s", c.where, s, c.want)
		}
	}
}
