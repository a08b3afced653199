package query

import (
	"context"
	"testing"
	"unsafe"
)

// Plans of one shape share what does not depend on their binds: the
// template, and in it the output and order slices, each source's
// SourceShape, and a source's columns when they are the table's leading
// ones. Plans of other shapes do not, and every plan still describes its
// own query.
func TestShapeSharing(t *testing.T) {
	opts := DefaultOptions()
	opts.Catalog = snapshotCatalog(t)
	compile := func(sql string, binds ...Bind) *Plan {
		t.Helper()
		p, r, err := Compile(context.Background(), sql, binds, opts)
		if err != nil || r != nil {
			t.Fatalf("compile %s: %v %v", sql, err, r)
		}
		return p
	}
	const shape = "SELECT id, name AS n FROM users WHERE name = $1 ORDER BY name DESC LIMIT 3"
	a := compile(shape, Bind{Data: []byte("x")})
	b := compile(shape, Bind{Data: []byte("y")})
	c := compile("SELECT id, name AS m FROM users WHERE name = $1 ORDER BY name LIMIT 3", Bind{Data: []byte("x")})
	d := compile("SELECT id, email FROM users WHERE age = $1", Bind{Data: []byte("1")})
	e := compile("SELECT id, name AS n FROM users u WHERE name = $1 ORDER BY name DESC LIMIT 3", Bind{Data: []byte("x")})
	same := func(x, y unsafe.Pointer) bool { return x == y }
	tests := []struct {
		name      string
		got, want bool
	}{
		{"same shape shares Output", same(unsafe.Pointer(&a.Output[0]), unsafe.Pointer(&b.Output[0])), true},
		{"same shape shares Order", same(unsafe.Pointer(&a.Order[0]), unsafe.Pointer(&b.Order[0])), true},
		{"leading columns are the catalog's", same(unsafe.Pointer(&a.Sources[0].Columns[0]), unsafe.Pointer(&a.Sources[0].Table.Columns[0])), true},
		{"other alias has its own Output", same(unsafe.Pointer(&a.Output[0]), unsafe.Pointer(&c.Output[0])), false},
		{"other direction has its own Order", same(unsafe.Pointer(&a.Order[0]), unsafe.Pointer(&c.Order[0])), false},
		{"columns with a gap are copied", same(unsafe.Pointer(&d.Sources[0].Columns[0]), unsafe.Pointer(&d.Sources[0].Table.Columns[0])), false},
		{"binds stay the plan's own", a.Key == b.Key, false},
		{"same shape shares a source's shape", a.Sources[0].SourceShape == b.Sources[0].SourceShape, true},
		{"other columns have their own source shape", a.Sources[0].SourceShape == d.Sources[0].SourceShape, false},
		{"other alias has its own source shape", a.Sources[0].SourceShape == e.Sources[0].SourceShape, false},
		{"same shape shares the template", a.Template == b.Template, true},
		{"other alias has its own template", a.Template == e.Template, false},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if got := e.Sources[0].Alias; got != "u" {
		t.Errorf("e.Sources[0].Alias = %q, want u", got)
	}
	if got := c.Output[1].Name; got != "m" {
		t.Errorf("c.Output[1].Name = %q, want m", got)
	}
	if c.Order[0].Desc {
		t.Errorf("c.Order[0].Desc = true, want false")
	}
	if got, want := len(d.Sources[0].Columns), 3; got != want {
		t.Errorf("len(d.Sources[0].Columns) = %d, want %d", got, want)
	} else if d.Sources[0].Columns[1].Name != "email" || d.Sources[0].Columns[2].Name != "age" {
		t.Errorf("d's columns = %s, %s; want email, age", d.Sources[0].Columns[1].Name, d.Sources[0].Columns[2].Name)
	}
	if cap(a.Sources[0].Columns) != len(a.Sources[0].Columns) {
		t.Errorf("shared columns have cap %d, want their length %d", cap(a.Sources[0].Columns), len(a.Sources[0].Columns))
	}
}
