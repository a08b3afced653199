package query

import (
	"context"
	"strings"
	"testing"
)

// TestPropagate checks the constraints the joins' ON equalities carry from
// one source to another (constraints.go, propagate).
func TestPropagate(t *testing.T) {
	conn, cat := testDB(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `
		CREATE TABLE pt (id int PRIMARY KEY, org int, name text);
		CREATE TABLE pc (id int PRIMARY KEY, ticket_id int, body text);
		CREATE TABLE pk2 (a int, b text, v int, PRIMARY KEY (a, b));
		CREATE TABLE pr (id int PRIMARY KEY, c_id int, tid bigint);`); err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Catalog = cat
	cases := []struct {
		name, sql string
		binds     []Bind
		want      string // per source: alias[constraint; ...]
	}{
		{"inner", "SELECT * FROM pt t JOIN pc c ON c.ticket_id = t.id WHERE t.id = 7", nil,
			"t[id in {7}] c[ticket_id in {7}]"},
		{"inner back", "SELECT * FROM pt t JOIN pc c ON t.id = c.ticket_id WHERE c.ticket_id IN (1, 2)", nil,
			"t[id in {1; 2}] c[ticket_id in {1; 2}]"},
		{"left with a bind", "SELECT t.id, c.body FROM pt t LEFT JOIN pc c ON c.ticket_id = t.id WHERE t.id = $1",
			[]Bind{{OID: 23, Data: []byte("5")}}, "t[id in {5}] c[ticket_id in {5}]"},
		{"left nullable side not carried back", "SELECT * FROM pt t LEFT JOIN pc c ON c.ticket_id = t.id WHERE c.ticket_id = 3", nil,
			"t[] c[ticket_id in {3}]"},
		{"left null-extended row kept", "SELECT * FROM pt t LEFT JOIN pc c ON c.ticket_id = t.id WHERE t.id = 1 AND c.ticket_id IS NULL", nil,
			"t[id in {1}] c[ticket_id in {1}]"},
		{"is null not carried", "SELECT * FROM pt t JOIN pc c ON c.ticket_id = t.org WHERE t.org IS NULL", nil,
			"t[org in {NULL}] c[]"},
		{"null dropped from a value set, both ways", "SELECT * FROM pt t JOIN pc c ON c.ticket_id = t.org WHERE t.org = 2 OR t.org IS NULL", nil,
			"t[org in {2}] c[ticket_id in {2}]"},
		{"range not carried", "SELECT * FROM pt t JOIN pc c ON c.ticket_id = t.id WHERE t.id > 5", nil,
			"t[id range {(5, +inf)}] c[]"},
		{"not in not carried", "SELECT * FROM pt t JOIN pc c ON c.ticket_id = t.id WHERE t.id NOT IN (5)", nil,
			"t[id not-in {5}] c[]"},
		{"intersected", "SELECT * FROM pt t JOIN pc c ON c.ticket_id = t.id WHERE t.id IN (1, 2, 3) AND c.ticket_id IN (2, 3, 4)", nil,
			"t[id in {2; 3}] c[ticket_id in {2; 3}]"},
		{"intersected with a range", "SELECT * FROM pt t JOIN pc c ON c.ticket_id = t.id WHERE t.id IN (1, 2, 3) AND c.ticket_id > 1", nil,
			"t[id in {2; 3}] c[ticket_id in {2; 3}]"},
		{"inner contradiction", "SELECT * FROM pt t JOIN pc c ON c.ticket_id = t.id WHERE t.id = 1 AND c.ticket_id = 2", nil,
			"t[id in {1}] c[ticket_id in {}]"},
		{"left contradiction", "SELECT * FROM pt t LEFT JOIN pc c ON c.ticket_id = t.id WHERE t.id = 1 AND c.ticket_id = 2", nil,
			"t[id in {1}] c[ticket_id in {}]"},
		{"compound", "SELECT * FROM pt t JOIN pk2 k ON k.a = t.id AND k.b = t.name WHERE t.id = 1 AND t.name = 'x'", nil,
			"t[id in {1}; name in {\"x\"}] k[a in {1}; b in {\"x\"}]"},
		{"compound one part", "SELECT * FROM pt t LEFT JOIN pk2 k ON k.a = t.id AND k.b = t.name WHERE t.name IN ('x', 'y')", nil,
			"t[name in {\"x\"; \"y\"}] k[b in {\"x\"; \"y\"}]"},
		{"chain forward through left joins", "SELECT * FROM pt t LEFT JOIN pk2 k ON k.a = t.id LEFT JOIN pr r ON r.c_id = k.a WHERE t.id = 9", nil,
			"t[id in {9}] k[a in {9}] r[c_id in {9}]"},
		{"chain back through inner joins", "SELECT * FROM pt t JOIN pk2 k ON k.a = t.id JOIN pr r ON r.c_id = k.a WHERE r.c_id IN (9, 10)", nil,
			"t[id in {9; 10}] k[a in {9; 10}] r[c_id in {9; 10}]"},
		{"chain back stops at a left join", "SELECT * FROM pt t LEFT JOIN pk2 k ON k.a = t.id JOIN pr r ON r.c_id = k.a WHERE r.c_id = 9", nil,
			"t[] k[a in {9}] r[c_id in {9}]"},
		{"sibling through the root", "SELECT * FROM pc c JOIN pt t ON t.id = c.ticket_id LEFT JOIN pk2 k ON k.a = t.id WHERE c.ticket_id = 4", nil,
			"c[ticket_id in {4}] t[id in {4}] k[a in {4}]"},
		{"types differ", "SELECT * FROM pt t JOIN pr r ON r.tid = t.id WHERE t.id = 3", nil,
			"t[id in {3}] r[]"},
		{"types differ back", "SELECT * FROM pt t JOIN pr r ON r.tid = t.id WHERE r.tid = 3", nil,
			"t[] r[tid in {3}]"},
		{"no filter", "SELECT * FROM pt t LEFT JOIN pc c ON c.ticket_id = t.id", nil,
			"t[] c[]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, r, err := Compile(ctx, tc.sql, tc.binds, opts)
			if err != nil || r != nil {
				t.Fatalf("compile %s: %v %v", tc.sql, err, r)
			}
			var parts []string
			for i, s := range p.Sources {
				var cs []string
				for _, c := range p.Constraints(i) {
					cs = append(cs, s.Columns[c.Column].Name+" "+describeConstraint(c))
				}
				parts = append(parts, s.Alias+"["+strings.Join(cs, "; ")+"]")
			}
			if got := strings.Join(parts, " "); got != tc.want {
				t.Errorf("%s:\n got %s\nwant %s", tc.sql, got, tc.want)
			}
		})
	}
}
