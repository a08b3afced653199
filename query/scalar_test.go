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

// Plans of one query with different array binds have different Keys:
// a view is shared only by subscriptions with the same result.
func TestArrayBindKeys(t *testing.T) {
	_, cat := testDB(t)
	opts := DefaultOptions()
	opts.Catalog = cat
	key := func(arr string) string {
		p, r, err := Compile(context.Background(), "SELECT id FROM users WHERE tags @> $1 AND age = ANY($2::int[])",
			[]Bind{{OID: 1009, Data: []byte(arr)}, {Data: []byte("{1,2}")}}, opts)
		if err != nil || r != nil {
			t.Fatalf("compile: %v %v", err, r)
		}
		return p.Key
	}
	if key("{api}") == key("{bug}") {
		t.Errorf("'{api}' and '{bug}' give one Key")
	}
	if key("{a,b}") == key("{a,NULL}") || key("{}") == key("{NULL}") {
		t.Errorf("arrays differing by a NULL give one Key")
	}
	if key("{a}") != key("{a}") {
		t.Errorf("one array gives two Keys")
	}
}
