package engine

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares a scenario's transcript with testdata/<name>.golden.
func golden(t *testing.T, h *harness) {
	t.Helper()
	path := filepath.Join("testdata", t.Name()+".golden")
	got := h.out.String()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("transcript differs from %s (run with -update to accept):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func (h *harness) note(s string) { h.out.WriteString("# " + s + "\n") }

func itemsHarness(t *testing.T) *harness {
	h := newHarness(t, CoreOptions{WindowMargin: 2})
	h.createTable("items", []string{"id int4 pk", "name text", "price int4", "cat text"})
	return h
}

func TestFilter(t *testing.T) {
	h := itemsHarness(t)
	h.insert("items", "1", "apple", "5", "fruit")
	h.insert("items", "2", "pear", "15", "fruit")
	h.commit(0)
	h.note("subscribe: hydrate")
	h.subscribe(1, "SELECT id, name FROM items WHERE price > 10", ModeRows)
	h.answerAll()
	h.note("insert matching and non-matching")
	h.insert("items", "3", "plum", "20", "fruit")
	h.insert("items", "4", "fig", "1", "fruit")
	h.commit(0)
	h.note("update moves a row in, another out")
	h.update("items", nil, "1", "apple", "11", "fruit")
	h.update("items", nil, "2", "pear", "9", "fruit")
	h.commit(0)
	h.note("update of a column not shown: no delta; of a shown one: upsert")
	h.update("items", nil, "3", "plum", "21", "fruit")
	h.commit(0)
	h.update("items", nil, "3", "PLUM", "21", "fruit")
	h.commit(0)
	h.note("delete")
	h.delete("items", "1")
	h.commit(0)
	golden(t, h)
}

func TestSharedViewAndTouch(t *testing.T) {
	h := itemsHarness(t)
	h.insert("items", "1", "apple", "5", "fruit")
	h.commit(0)
	h.subscribe(1, "SELECT * FROM items WHERE cat = 'fruit'", ModeRows)
	h.note("same query written differently shares the view: no second read")
	h.subscribe(2, "select *   from ITEMS where cat='fruit'", ModeTouch)
	h.answerAll()
	h.subscribe(3, "SELECT * FROM items WHERE cat = 'fruit'", ModeRows)
	if got := h.core.Stats().Views; got != 1 {
		t.Errorf("Views = %d, want 1", got)
	}
	h.insert("items", "2", "kiwi", "3", "fruit")
	h.insert("items", "3", "leek", "3", "veg")
	h.commit(0)
	h.note("a change no view can see: no output")
	h.insert("items", "4", "kale", "3", "veg")
	h.commit(0)
	h.unsubscribe(1)
	h.unsubscribe(3)
	h.delete("items", "2")
	h.commit(0)
	h.unsubscribe(2)
	if st := h.core.Stats(); st.Views != 0 || st.HeldRows != 0 || st.Subs != 0 {
		t.Errorf("Stats after the last unsubscribe = %+v, want all zero", st)
	}
	golden(t, h)
}

func TestTxnNetEffect(t *testing.T) {
	h := itemsHarness(t)
	h.insert("items", "1", "apple", "15", "fruit")
	h.insert("items", "2", "pear", "15", "fruit")
	h.commit(0)
	h.subscribe(1, "SELECT id, name, price FROM items WHERE price > 10", ModeRows)
	h.answerAll()
	h.note("insert, update, update, delete of one row in one txn: nothing")
	h.insert("items", "3", "fig", "20", "fruit")
	h.update("items", nil, "3", "fig", "21", "fruit")
	h.update("items", nil, "3", "fig", "22", "fruit")
	h.delete("items", "3")
	h.commit(0)
	h.note("out and back in with the same values: nothing")
	h.update("items", nil, "1", "apple", "5", "fruit")
	h.update("items", nil, "1", "apple", "15", "fruit")
	h.commit(0)
	h.note("primary key change: old key removed, new key upserted")
	h.update("items", []string{"2"}, "20", "pear", "15", "fruit")
	h.commit(0)
	h.note("key change out of the filter, spread over fragments")
	h.update("items", []string{"20"}, "21", "pear", "1", "fruit")
	h.update("items", nil, "1", "apple", "16", "fruit")
	h.insert("items", "5", "lime", "50", "fruit")
	h.commit(1)
	golden(t, h)
}

func TestToast(t *testing.T) {
	h := itemsHarness(t)
	h.insert("items", "1", "apple", "15", "fruit")
	h.insert("items", "2", "pear", "5", "fruit")
	h.commit(0)
	h.subscribe(1, "SELECT id, name, price FROM items WHERE price > 10", ModeRows)
	h.answerAll()
	h.note("unchanged name of a held row is filled from the held row")
	h.update("items", nil, "1", "@u", "16", "fruit")
	h.commit(0)
	h.note("unchanged name of a row not held moving in: the view reads again")
	h.update("items", nil, "2", "@u", "50", "fruit")
	h.commit(0)
	h.answerAll()
	golden(t, h)
}

func TestTruncate(t *testing.T) {
	h := itemsHarness(t)
	h.insert("items", "1", "apple", "15", "fruit")
	h.insert("items", "2", "pear", "5", "fruit")
	h.commit(0)
	h.subscribe(1, "SELECT id FROM items", ModeRows)
	h.subscribe(2, "SELECT count(*) FROM items", ModeRows)
	h.answerAll()
	h.truncate("items")
	h.insert("items", "3", "fig", "1", "fruit")
	h.commit(0)
	golden(t, h)
}

func TestCount(t *testing.T) {
	h := itemsHarness(t)
	h.insert("items", "1", "apple", "15", "fruit")
	h.insert("items", "2", "pear", "5", "fruit")
	h.commit(0)
	h.subscribe(1, "SELECT count(*) FROM items WHERE price > 10", ModeRows)
	h.answerAll()
	h.insert("items", "3", "fig", "20", "fruit")
	h.commit(0)
	h.note("update without old tuple moving a row out: the held key says it matched")
	h.update("items", nil, "1", "apple", "1", "fruit")
	h.commit(0)
	h.note("no change to the count: no output")
	h.update("items", nil, "3", "fig", "21", "fruit")
	h.update("items", nil, "2", "pear", "6", "fruit")
	h.commit(0)
	h.delete("items", "3")
	h.commit(0)
	golden(t, h)
}

func TestWindow(t *testing.T) {
	h := itemsHarness(t) // margin 2
	for i, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		h.insert("items", itoa(i+1), n, itoa(10*(i+1)), "x")
	}
	h.commit(0)
	h.note("ORDER BY price LIMIT 2 OFFSET 1: holds 1+2+2 rows")
	h.subscribe(1, "SELECT id, name, price FROM items ORDER BY price LIMIT 2 OFFSET 1", ModeRows)
	h.answerAll()
	h.note("a row before the window shifts it")
	h.insert("items", "9", "z", "1", "x")
	h.commit(0)
	h.note("rows leaving are replaced by followers held in the margin")
	h.delete("items", "2")
	h.commit(0)
	h.note("margin exhausted: refill read; deltas wait; one delta when it lands")
	h.delete("items", "3")
	h.delete("items", "9")
	h.commit(0)
	h.delete("items", "4")
	h.delete("items", "5")
	h.commit(0)
	h.answerAll()
	h.note("a row beyond the held rows: nothing")
	h.update("items", nil, "8", "h", "85", "x")
	h.commit(0)
	h.note("a row moving from beyond into the window")
	h.update("items", nil, "8", "h", "5", "x")
	h.commit(0)
	golden(t, h)
}

func TestHydrationBuffered(t *testing.T) {
	h := itemsHarness(t)
	h.insert("items", "1", "apple", "15", "fruit")
	h.commit(0) // 0/10
	h.subscribe(1, "SELECT id, name, price FROM items WHERE price > 10", ModeRows)
	h.insert("items", "2", "pear", "20", "fruit")
	lsn2 := h.commit(0) // 0/20: visible in the read
	h.insert("items", "3", "fig", "30", "fruit")
	h.commit(0) // 0/30: not visible (still running at the snapshot)
	h.update("items", nil, "1", "apple", "16", "fruit")
	h.commit(0) // 0/40: after the snapshot
	h.note("read at 0/31 with 0/30's xid in progress: 0/30 and 0/40 are replayed")
	h.answer(1, lsn2+0x11, h.nextXID-1)
	h.note("a read whose snapshot the stream has not passed waits")
	h.subscribe(2, "SELECT id FROM items WHERE price < 100", ModeRows)
	h.answer(2, h.lsn+0x20)
	h.insert("items", "4", "kiwi", "40", "fruit")
	h.commit(0)
	h.insert("items", "5", "lime", "50", "fruit")
	h.commit(0)
	golden(t, h)
}

func TestSchemaChange(t *testing.T) {
	h := itemsHarness(t)
	h.insert("items", "1", "apple", "15", "fruit")
	h.commit(0)
	h.subscribe(1, "SELECT id, name FROM items", ModeRows)
	h.subscribe(2, "SELECT id, price FROM items", ModeRows)
	h.answerAll()
	h.note("a column added: nothing ends; the new column is carried")
	ht := h.tables["items"]
	rel := *ht.rel
	rel.Columns = append(append([]change.Column{}, rel.Columns...), change.Column{Name: "extra", TypeOID: change.OIDInt4, TypeMod: -1})
	ht.rel = &rel
	h.pending = append(h.pending, change.Change{Op: change.OpRelation, Rel: ht.rel})
	h.insert("items", "2", "pear", "5", "fruit", "7")
	h.commit(0)
	h.note("price retyped: the view using it ends, the other goes on")
	rel2 := *ht.rel
	rel2.Columns = slices.Clone(rel2.Columns)
	rel2.Columns[2].TypeOID = change.OIDInt8
	ht.rel = &rel2
	h.pending = append(h.pending, change.Change{Op: change.OpRelation, Rel: ht.rel})
	h.insert("items", "3", "fig", "5", "fruit", "8")
	h.commit(0)
	golden(t, h)
}

// TestIdentityLost: a delete whose old row lacks the row key (the table's
// replica identity changed and its Relation came before the views did)
// ends the table's views rather than leaving the row held.
func TestIdentityLost(t *testing.T) {
	h := itemsHarness(t)
	for i, name := range []string{"apple", "pear", "fig"} {
		h.insert("items", itoa(i+1), name, itoa(5*i), "fruit")
	}
	h.commit(0)
	for id, sql := range []string{"SELECT id, name FROM items ORDER BY name LIMIT 2", "SELECT count(*) FROM items WHERE price > 1"} {
		h.subscribe(SubID(id+1), sql, ModeTouch)
	}
	h.answerAll()
	h.note("a delete identifying the row by name only")
	ht := h.tables["items"]
	h.pending = append(h.pending, change.Change{Op: change.OpDelete, Rel: ht.rel, Old: change.Row{
		{Kind: change.Absent}, {Kind: change.Text, Data: []byte("apple")}, {Kind: change.Absent}, {Kind: change.Absent}}})
	h.commit(0)
	golden(t, h)
}

func itoa(i int) string { return strconv.Itoa(i) }

func joinHarness(t *testing.T) *harness {
	h := newHarness(t, CoreOptions{})
	h.createTable("authors", []string{"id int4 pk", "name text"})
	h.createTable("books", []string{"id int4 pk", "author int4", "title text", "year int4"})
	h.insert("authors", "1", "ann")
	h.insert("authors", "2", "bob")
	h.insert("authors", "3", "cy")
	h.insert("books", "10", "1", "a1", "2001")
	h.insert("books", "11", "1", "a2", "2002")
	h.insert("books", "20", "2", "b1", "2003")
	h.commit(0)
	return h
}

func TestJoin(t *testing.T) {
	h := joinHarness(t)
	h.subscribe(1, "SELECT a.name, b.title FROM authors a JOIN books b ON b.author = a.id WHERE b.year > 2000", ModeRows)
	h.subscribe(2, "SELECT a.name, b.title FROM authors a LEFT JOIN books b ON b.author = a.id ORDER BY a.name, b.title", ModeRows)
	h.subscribe(3, "SELECT count(*) FROM authors a LEFT JOIN books b ON b.author = a.id", ModeRows)
	for _, id := range []ReadID{1, 2, 3, 4, 5, 6} {
		h.out.WriteString("sql " + strconv.Itoa(int(id)) + ": " + h.reads[id].SQL + "\n")
	}
	h.answerAll()
	h.note("a book moves from ann to cy: inner moves; left: ann keeps a1, cy loses its null row")
	h.update("books", nil, "11", "3", "a2", "2002")
	h.commit(0)
	h.note("bob's only book goes: left join null-extends bob")
	h.delete("books", "20")
	h.commit(0)
	h.note("an author renamed: every joined row of theirs changes")
	h.update("authors", nil, "1", "anne")
	h.commit(0)
	h.note("a parent key change orphans its books")
	h.update("authors", []string{"3"}, "4", "cy")
	h.commit(0)
	golden(t, h)
}

// TestTextIdentity: a row changes for its subscribers when its text form
// changes, not when '=' fails: float8 0 <-> -0 and numeric 1.5 -> 1.50 are
// deltas (the client would keep the old text otherwise), NaN -> NaN and an
// unchanged numeric are not (engine-bugs.md #1).
func TestTextIdentity(t *testing.T) {
	h := newHarness(t, CoreOptions{})
	h.createTable("f", []string{"id int4 pk", "x float8", "n numeric"})
	h.insert("f", "1", "-0", "1.5")
	h.insert("f", "2", "0", "2")
	h.insert("f", "3", "NaN", "NaN")
	h.commit(0)
	h.subscribe(1, "SELECT id, x, n FROM f", ModeRows)
	h.answerAll()
	tests := []struct {
		note  string
		apply func()
		want  int
	}{
		{"-0 -> 0: delta", func() { h.update("f", nil, "1", "0", "1.5") }, 1},
		{"0 -> -0: delta", func() { h.update("f", nil, "2", "-0", "2") }, 1},
		{"NaN -> NaN: nothing", func() { h.update("f", nil, "3", "NaN", "NaN") }, 0},
		{"numeric 1.5 -> 1.50: delta", func() { h.update("f", nil, "1", "0", "1.50") }, 1},
		{"same text again: nothing", func() { h.update("f", nil, "1", "0", "1.50") }, 0},
	}
	for _, tt := range tests {
		h.note(tt.note)
		tt.apply()
		from := h.out.Len()
		h.commit(0) // collects the outputs and checks them against the oracle
		if got := strings.Count(h.out.String()[from:], " delta "); got != tt.want {
			t.Errorf("%s: deltas = %d, want %d", tt.note, got, tt.want)
		}
	}
	golden(t, h)
}
