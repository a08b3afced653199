package query

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCompileDeadline: a compile whose context ends answers with the
// context's error, parsing and deparsing included (1 MB of ORed
// equalities with the limits lifted took 16 s past a 10 s
// --compile-timeout). The times are logged, not asserted.
func TestCompileDeadline(t *testing.T) {
	opts := DefaultOptions()
	opts.Catalog = snapshotCatalog(t)
	opts.MaxAlternatives, opts.MaxInValues, opts.MaxDepth, opts.MaxSQLLength = 0, 0, 0, 0
	for _, tt := range []struct {
		name string
		sql  string
	}{
		{"1 MB of ORs", wideQuery(70000)},
		{"1 MB IN list", inQuery(150000)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, timeout := range []time.Duration{0, 20 * time.Millisecond, 300 * time.Millisecond} {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				start := time.Now()
				p, r, err := Compile(ctx, tt.sql, nil, opts)
				took := time.Since(start)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) || p != nil || r != nil {
					t.Fatalf("Compile with a %v timeout = %v, %v, %v (after %v), want the deadline's error", timeout, p != nil, r, err, took)
				}
				t.Logf("%v timeout: answered after %v", timeout, took.Round(time.Millisecond))
			}
			// With time enough it compiles (the query is fine, only long).
			p, r, err := Compile(context.Background(), tt.sql, nil, opts)
			if err != nil || r != nil || p == nil {
				t.Fatalf("Compile without a deadline = %v, %v, %v, want a plan", p != nil, r, err)
			}
		})
	}
	// The parse calls abandoned above end on their own and give back
	// their turns.
	deadline := time.Now().Add(30 * time.Second)
	for len(bigCalls) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d abandoned parser calls still hold a turn after 30 s", len(bigCalls))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
