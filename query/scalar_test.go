package query

import (
	"context"
	"testing"
)

// OrderOutput names the output column an ORDER BY key sorts by: a column
// key the output that selects that column, an expression key the output
// it names by alias or position, and -1 otherwise (an expression key never
// matches another expression by its position in the plan).
func TestOrderOutput(t *testing.T) {
	_, cat := testDB(t)
	opts := DefaultOptions()
	opts.Catalog = cat
	p, r, err := Compile(context.Background(), "SELECT id, age + 1 AS a, age + 2 AS b FROM users ORDER BY b, age * 3, 2, id", nil, opts)
	if err != nil || r != nil {
		t.Fatalf("compile: %v %v", err, r)
	}
	for i, want := range []int{2, -1, 1, 0} {
		if got := p.OrderOutput(i); got != want {
			t.Errorf("OrderOutput(%d) = %d, want %d", i, got, want)
		}
	}
}
