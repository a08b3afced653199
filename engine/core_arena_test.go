package engine

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/freshetdb/freshet/change"
)

// TestKeptOutputs keeps every delta's rows as a sink may, and checks that
// the transactions after it, whose values are decoded, boxed and projected
// into the apply path's reused memory (core_arena.go), leave them as they
// were when handed out; Ready's Outputs slice itself is reused.
func TestKeptOutputs(t *testing.T) {
	bc := newBenchCore(t)
	const views = 10
	bc.subscribe(t, eqPlans(t, bc, views))
	var kept, want [][]ResultRow
	for i := range 3000 {
		row := bc.row(i%50, i%views)
		row[1] = txt(fmt.Sprintf("name-%d-%d", i, i*7919))
		row[3] = txt(fmt.Sprintf("cat-%d", i*31))
		op := change.OpInsert
		if i >= 50 {
			op = change.OpUpdate
		}
		bc.txn([]change.Change{{Op: op, Rel: bc.rel, New: row}})
		rd := bc.core.Ready()
		for _, o := range rd.Outputs {
			if o.Kind != OutputDelta || len(o.Rows) == 0 {
				continue
			}
			kept = append(kept, o.Rows)
			cp := make([]ResultRow, len(o.Rows))
			for j, r := range o.Rows {
				cp[j] = ResultRow{Key: Key(string([]byte(r.Key))), Values: deepValues(r.Values)}
			}
			want = append(want, cp)
		}
	}
	if len(kept) < 2000 {
		t.Fatalf("%d deltas with rows, want at least 2000", len(kept))
	}
	for i := range kept {
		if !reflect.DeepEqual(kept[i], want[i]) {
			t.Fatalf("delta %d kept = %v, handed out as %v", i, kept[i], want[i])
		}
	}
}

// deepValues copies values, their strings' bytes included.
func deepValues(vals []any) []any {
	out := make([]any, len(vals))
	for i, x := range vals {
		if s, ok := x.(string); ok {
			x = string([]byte(s))
		}
		out[i] = x
	}
	return out
}
