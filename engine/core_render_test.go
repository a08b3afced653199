package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestCoreRendersNothing: rendering a read's SQL parses and prints the
// client's query again, in time that grows with its size (a 1 MB query
// took seconds), so it must never run on the core's goroutine, which every
// client's work waits on. No core file calls Render (or ReadSQL, which
// calls it); the runtime's read workers do (Engine.render).
func TestCoreRendersNothing(t *testing.T) {
	files, err := filepath.Glob("core*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		n++
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(node ast.Node) bool {
			call, ok := node.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Render" || sel.Sel.Name == "ReadSQL") {
				t.Errorf("%s: the core calls %s: leave rendering to the runtime (ReadRequest.Render, rendered by the read worker)", fset.Position(call.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	if n < 5 {
		t.Fatalf("found %d core files, want the package's core*.go (run in the package's directory)", n)
	}
}

// TestCoreLeavesRenderToRuntime: a plan whose text cannot be rendered (a
// Normalized that does not parse: Render panics) still subscribes and asks
// for its read through the core; the read carries no SQL, and rendering
// it (what the worker does) is where the panic comes.
func TestCoreLeavesRenderToRuntime(t *testing.T) {
	h := newHarness(t, CoreOptions{})
	h.createTable("items", []string{"id int8 pk", "title text"})
	for _, sql := range []string{"SELECT id, title FROM items WHERE id > 3", "SELECT id, title FROM items ORDER BY title LIMIT 2"} {
		plan, r := h.compile(sql, nil)
		if r != nil {
			t.Fatalf("compile %q: %v", sql, r)
		}
		broken, tmpl := *plan, *plan.Template
		tmpl.Text = "this is not SQL"
		broken.Template = &tmpl
		c := NewCore(CoreOptions{})
		c.Subscribe(1, &broken, ModeRows)
		reads := c.Ready().Reads
		if len(reads) != 1 {
			t.Fatalf("%s: %d reads, want 1", sql, len(reads))
		}
		if reads[0].SQL != "" {
			t.Fatalf("%s: the core rendered the read: %q", sql, reads[0].SQL)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: ReadSQL of an unrenderable plan did not panic", sql)
				}
			}()
			reads[0].ReadSQL()
		}()
		if got := (ReadRequest{Plan: plan, Render: reads[0].Render}).ReadSQL(); !strings.HasPrefix(got, "SELECT") {
			t.Errorf("%s: ReadSQL = %q, want the rendered SELECT", sql, got)
		}
	}
}
