package engine

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
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
