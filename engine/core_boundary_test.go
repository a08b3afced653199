package engine

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/query"
)

// ioImports are the packages a core file must not import: the core has no
// goroutines, no clock and no I/O, and learns of the outside world only
// through its methods.
var ioImports = []string{
	"context", "time", "sync", "net", "os", "io", "log", "database",
	"github.com/jackc/", "github.com/freshetdb/freshet/pgwal",
	"github.com/freshetdb/freshet/internal/",
}

// TestCoreImports parses every core file (core*.go) and fails on an import
// that would let the core do I/O, wait, or read the clock; and on a
// file that says neither side of the line (core*.go, engine*.go, doc.go).
func TestCoreImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	cores := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "doc.go" {
			continue
		}
		if !strings.HasPrefix(name, "core") {
			if !strings.HasPrefix(name, "engine") {
				t.Errorf("%s is neither a core file (core*.go) nor a runtime file (engine*.go): name it for its side", name)
			}
			continue
		}
		cores++
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			for _, bad := range ioImports {
				if path == bad || strings.HasPrefix(path, strings.TrimSuffix(bad, "/")+"/") {
					t.Errorf("%s imports %q: the core does no I/O, keeps no clock and starts no goroutine; move the code to the runtime (engine*.go)", name, path)
				}
			}
		}
	}
	if cores < 5 {
		t.Fatalf("found %d core files, want the package's core*.go (run in the package's directory)", cores)
	}
	if _, err := os.Stat("core.go"); err != nil {
		t.Fatalf("core.go: %v", err)
	}
}

// A failed read's classification, as the runtime made it, reaches the
// subscribers unchanged: the core decides nothing about errors.
func TestCoreReadFailure(t *testing.T) {
	for _, f := range []ReadFailure{
		{Code: CodeReadFailed, Reason: "read failed: ERROR: value out of range (SQLSTATE 22003)", Retryable: false},
		{Code: CodeReadFailed, Reason: "read failed: connection reset", Retryable: true},
		{Code: CodeReadTimeout, Reason: "read failed: timeout", Retryable: true},
		{Code: CodeRowLimit, Reason: "read failed: too many", Retryable: false},
	} {
		h := itemsHarness(t)
		plan, r := h.compile("SELECT id, name FROM items WHERE price > 10", nil)
		if r != nil {
			t.Fatal(r)
		}
		c := h.core
		c.Subscribe(1, plan, ModeRows)
		rd := c.Ready()
		if len(rd.Reads) != 1 {
			t.Fatalf("%d reads, want 1", len(rd.Reads))
		}
		c.ReadDone(rd.Reads[0].ID, ReadResult{Failed: &f, Rows: []query.Row{{{int64(1), "apple"}}}})
		outs := c.Ready().Outputs
		if len(outs) != 1 {
			t.Fatalf("%d outputs, want 1 refusal", len(outs))
		}
		o := outs[0]
		if o.Kind != OutputRefused || o.Code != f.Code || o.Reason != f.Reason || o.Retryable != f.Retryable {
			t.Errorf("refusal = %v %q %q retryable %v, want refused %q %q retryable %v", o.Kind, o.Code, o.Reason, o.Retryable, f.Code, f.Reason, f.Retryable)
		}
		if st := c.Stats(); st.Views != 0 || st.PendingReads != 0 || st.HeldRows != 0 {
			t.Errorf("after the failed read: %+v, want no view, read or row", st)
		}
	}
}
