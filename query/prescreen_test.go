package query

import (
	"strings"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func TestPrescreen(t *testing.T) {
	tests := []struct {
		sql      string
		alt, in  int64
		lexesBad bool
	}{
		{"SELECT id FROM t WHERE a = 1 OR b = 2 OR c = 3", 3, 0, false},
		{"SELECT id FROM t WHERE (a = 1 OR b = 2) AND c = 3", 1, 0, false},
		{"SELECT id FROM t WHERE NOT a OR b", 2, 0, false},
		{"SELECT id FROM t WHERE CASE WHEN a OR b THEN true END OR c", 2, 0, false},
		{"SELECT id FROM t WHERE x = 'a OR b' OR \"or\" = $$ OR $$ OR y = E'\\' OR '", 3, 0, false},
		{"SELECT id FROM t WHERE a -- OR b\n OR c /* OR /* nested */ OR */", 2, 0, false},
		{"SELECT id FROM t WHERE x IN (1, 2, f(3, 4)) OR y IN (5)", 2, 3, false},
		{"SELECT id FROM t WHERE ARRAY[a OR b] = y", 1, 0, false},
		{"SELECT id FROM t WHERE a OR b ORDER BY c OR d", 2, 0, false},
		{"SELECT id FROM t WHERE a OR b UNION SELECT id FROM t WHERE c OR d OR e", 3, 0, false},
		{"SELECT id FROM t WHERE x = 'unterminated", 0, 0, true},
	}
	for _, tt := range tests {
		sc := prescreen(tt.sql)
		alt, in, ok := sc.alternatives, sc.inValues, sc.lexed
		if ok == tt.lexesBad {
			t.Errorf("prescreen(%q) ok = %v, want %v", tt.sql, ok, !tt.lexesBad)
			continue
		}
		if ok && (alt != tt.alt || in != tt.in) {
			t.Errorf("prescreen(%q) = %d alternatives, %d IN values; want %d, %d", tt.sql, alt, in, tt.alt, tt.in)
		}
	}
}

// TestPrescreenNesting pins prescreen's bound on the parse tree's depth.
func TestPrescreenNesting(t *testing.T) {
	tests := []struct {
		sql  string
		want int64
	}{
		{"SELECT id FROM t", 5},
		{"SELECT id FROM t WHERE a = 1", 6},
		{"SELECT id FROM t WHERE a = 1 AND b = 2 OR c = 3", 6},      // flat lists
		{"SELECT id FROM t WHERE a = 1+1+1+1", 9},                   // a chain
		{"SELECT id FROM t WHERE a = 1::int8::int8", 8},             // :: is one operator
		{"SELECT id FROM t WHERE a = (1+(1+1))", 14},                // groups nest
		{"SELECT f(a+a, b+b+b), c FROM t", 10},                      // items are siblings
		{"SELECT id FROM t WHERE x = 'a+b+c' -- +++\n", 6},          // strings and comments
		{"SELECT id FROM t WHERE CASE WHEN a THEN b ELSE c END", 8}, // CASE nests
		{"SELECT a.id FROM t a JOIN u b ON b.id = a.id JOIN v c ON c.id = b.id", 9},
		{"SELECT 1 UNION SELECT 2, 3 UNION SELECT 4", 7}, // set operations nest across commas
		{"SELECT id FROM t WHERE a IS NOT NULL", 7},
	}
	for _, tt := range tests {
		if got := prescreen(tt.sql).nesting; got != tt.want {
			t.Errorf("prescreen(%q).nesting = %d, want %d", tt.sql, got, tt.want)
		}
	}
}

// TestNulByte: PostgreSQL's parser reads a C string, so the text after a
// NUL would be dropped and another query compiled.
func TestNulByte(t *testing.T) {
	r := Parse("SELECT id FROM users WHERE age = -99\x00 OR age >= 0", DefaultOptions())
	if r == nil || r.Code != CodeNulByte || r.Position != 37 {
		t.Fatalf("Parse with a NUL = %+v, want %s at byte 37", r, CodeNulByte)
	}
}

// nodeDepth returns how many Nodes deep m's tree is: the depth PostgreSQL's
// parser and deparser recurse to on the C stack.
func nodeDepth(m protoreflect.Message) int64 {
	var best int64
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				best = max(best, nodeDepth(l.Get(i).Message()))
			}
		case fd.Message() != nil && !fd.IsMap():
			best = max(best, nodeDepth(v.Message()))
		}
		return true
	})
	if _, ok := m.Interface().(*pg.Node); ok {
		best++
	}
	return best
}

// FuzzPrescreen checks prescreen's nesting bound against the parse tree:
// whatever text lexes and parses, the tree is no deeper than the bound (so
// a text under the ceiling can never crash the parser). Only texts under
// the ceiling are parsed here, as Compile does.
func FuzzPrescreen(f *testing.F) {
	for _, fam := range chainFamilies {
		f.Add(fam.gen(3))
		f.Add(fam.gen(40))
	}
	f.Add("SELECT id FROM t WHERE a = (1+(1+1)) AND b IN (1, 2, 3) OR NOT c IS NULL")
	f.Add("SELECT CASE WHEN a THEN (SELECT 1 UNION SELECT 2) ELSE ARRAY[1,2][1] END FROM t a JOIN u ON u.x = a.x")
	f.Fuzz(func(t *testing.T, sql string) {
		sc := prescreen(sql)
		if sc.nesting > nestingCeiling || strings.IndexByte(sql, 0) >= 0 {
			return
		}
		tree, err := pg.Parse(sql)
		if err != nil {
			return
		}
		if d := nodeDepth(tree.ProtoReflect()); d > sc.nesting {
			t.Fatalf("prescreen bounds %q %d deep; its tree is %d deep", sql, sc.nesting, d)
		}
	})
}
