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
	key := func(arr string) PlanKey {
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

// Text computed from no collatable input (a number cast to text, concat
// of numbers) has the database's default collation: ordering by it is
// refused when that collation is not bytewise, and allowed when it is.
func TestComputedTextCollation(t *testing.T) {
	users := *snapshotCatalog(t)[[2]string{"public", "users"}]
	opts := DefaultOptions()
	for _, tt := range []struct {
		coll Collation
		want Code
	}{
		{Collation{OID: 100, Name: "default", Provider: 'c', Collate: "en_US.UTF-8", Deterministic: true}, CodeCollation},
		{Collation{OID: 100, Name: "default", Provider: 'c', Collate: "C.UTF-8", Deterministic: true}, ""},
	} {
		tb := users
		tb.DefaultCollation = tt.coll
		opts.Catalog = memCatalog{{"public", "users"}: &tb}
		for _, sql := range []string{
			"SELECT id FROM users ORDER BY age::text",
			"SELECT id FROM users WHERE concat(age, small) < '5'",
			"SELECT id, GREATEST(age::text, '3') FROM users",
		} {
			_, r, err := Compile(context.Background(), sql, nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			var got Code
			if r != nil {
				got = r.Code
			}
			if got != tt.want {
				t.Errorf("default collation %s: %s: refusal %q (%v), want %q", tt.coll.Collate, sql, got, r, tt.want)
			}
		}
	}
}
