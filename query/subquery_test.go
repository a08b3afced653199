package query

import (
	"context"
	"math/big"
	"testing"

	"github.com/freshetdb/freshet/change"
)

// The limits count a subquery's WHERE with the outer query's: IN values
// in total, and depth and alternatives per clause.
func TestSubqueryLimits(t *testing.T) {
	opts := DefaultOptions()
	opts.Catalog = snapshotCatalog(t)
	opts.MaxInValues = 4
	opts.MaxDepth = 4
	opts.MaxAlternatives = 3
	for _, c := range []struct {
		sql  string
		code Code
	}{
		{"SELECT id FROM users WHERE age IN (1, 2) AND id IN (SELECT user_id FROM orders WHERE id IN (1, 2))", ""},
		{"SELECT id FROM users WHERE age IN (1, 2) AND id IN (SELECT user_id FROM orders WHERE id IN (1, 2, 3))", CodeTooManyInValues},
		{"SELECT id FROM users WHERE id IN (SELECT user_id FROM orders WHERE id IN (1, 2, 3)) AND age IN (SELECT qty FROM items WHERE line IN (1, 2))", CodeTooManyInValues},
		{"SELECT id FROM users WHERE id IN (SELECT user_id FROM orders WHERE id = 1 OR id = 2 OR id = 3 OR id = 4)", CodeTooComplex},
		{"SELECT id FROM users WHERE id IN (SELECT user_id FROM orders WHERE NOT (NOT (NOT (NOT (NOT (id = 1))))))", CodeTooComplex},
	} {
		_, r, err := Compile(context.Background(), c.sql, nil, opts)
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		switch {
		case c.code == "" && r != nil:
			t.Errorf("%s: refused %s: %s", c.sql, r.Code, r.Message)
		case c.code != "" && (r == nil || r.Code != c.code):
			t.Errorf("%s: refusal %+v, want %s", c.sql, r, c.code)
		}
	}
}

// EvalSource evaluates the subquery's WHERE alone over a row of its
// table; it is True for the outer sources.
func TestEvalSource(t *testing.T) {
	opts := DefaultOptions()
	opts.Catalog = snapshotCatalog(t)
	p, r, err := Compile(context.Background(), "SELECT id FROM users WHERE age > 1 AND id IN (SELECT user_id FROM orders WHERE status = 'paid' OR amount > 5)", nil, opts)
	if err != nil || r != nil {
		t.Fatalf("compile: %v %+v", err, r)
	}
	s := p.Sources[1]
	if s.Join != JoinSemi || len(s.On) != 1 {
		t.Fatalf("source 1: %s with %d equalities, want semi with 1", s.Join, len(s.On))
	}
	row := func(status any, amount int64) []any {
		vals := make([]any, len(s.Columns))
		for i, c := range s.Columns {
			switch c.Name {
			case "status":
				vals[i] = status
			case "amount":
				vals[i] = change.Numeric{Coef: big.NewInt(amount)}
			}
		}
		return vals
	}
	for _, c := range []struct {
		status any
		amount int64
		want   Tri
	}{
		{"paid", 0, True}, {"open", 9, True}, {"open", 1, False}, {nil, 1, Unknown},
	} {
		if got := p.EvalSource(1, row(c.status, c.amount)); got != c.want {
			t.Errorf("EvalSource(status %v, amount %d) = %v, want %v", c.status, c.amount, got, c.want)
		}
	}
	if got := p.EvalSource(0, nil); got != True {
		t.Errorf("EvalSource of the outer source = %v, want true", got)
	}
}
