package query

import (
	"context"
	"math"
	"strings"
	"testing"
)

// OFFSET+LIMIT+margin saturates at 2^63-1: wrapped, it was negative (the
// engine's window cut a slice at a negative index) or, with both near
// 2^63, small and positive again (a read of a handful of rows).
func TestWindowEndSaturates(t *testing.T) {
	opts := DefaultOptions()
	opts.Catalog = snapshotCatalog(t)
	for _, c := range []struct {
		sql    string
		margin int64
		end    int64
		limit  string // in the rendered window read
	}{
		{"SELECT id FROM orders ORDER BY id LIMIT 9223372036854775807 OFFSET 9223372036854775807", 32, math.MaxInt64, "LIMIT 9223372036854775807"},
		{"SELECT id FROM orders ORDER BY id LIMIT 9223372036854775807 OFFSET 9223372036854775807", 0, math.MaxInt64, "LIMIT 9223372036854775807"},
		{"SELECT id FROM orders ORDER BY id DESC LIMIT 9223372036854775807", 32, math.MaxInt64, "LIMIT 9223372036854775807"},
		{"SELECT id FROM orders ORDER BY id LIMIT 1 OFFSET 9223372036854775775", 32, math.MaxInt64, "LIMIT 9223372036854775807"},
		{"SELECT id FROM orders ORDER BY id LIMIT 1 OFFSET 9223372036854775774", 32, math.MaxInt64, "LIMIT 9223372036854775807"},
		{"SELECT id FROM orders ORDER BY id LIMIT 1 OFFSET 9223372036854775773", 32, math.MaxInt64 - 1, "LIMIT 9223372036854775806"},
		{"SELECT id FROM orders ORDER BY id FETCH FIRST 9223372036854775807 ROWS ONLY", 5, math.MaxInt64, "LIMIT 9223372036854775807"},
		{"SELECT id FROM orders ORDER BY id LIMIT 10 OFFSET 5", 5, 20, "LIMIT 20"},
		{"SELECT id FROM orders ORDER BY id LIMIT 10 OFFSET 5", -7, 15, "LIMIT 15"},
		{"SELECT id FROM orders ORDER BY id OFFSET 9223372036854775807", 5, math.MaxInt64, ""},
	} {
		p, r, err := Compile(context.Background(), c.sql, nil, opts)
		if err != nil || r != nil {
			t.Fatalf("compile %q: %v %v", c.sql, err, r)
		}
		if got := p.WindowEnd(c.margin); got != c.end {
			t.Errorf("%q: WindowEnd(%d) = %d, want %d", c.sql, c.margin, got, c.end)
		}
		sql := p.Render(RenderOptions{Columns: SelectNeeded, Window: true, Margin: c.margin})
		if c.limit == "" && strings.Contains(sql, "LIMIT") || !strings.Contains(sql, c.limit) || strings.Contains(sql, "OFFSET") {
			t.Errorf("%q: window read %q, want %q and no OFFSET", c.sql, sql, c.limit)
		}
	}
}
