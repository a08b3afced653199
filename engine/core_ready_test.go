package engine

import (
	"testing"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

// TestReadyReusesOutputs: the core appends a transaction's outputs into
// the array of the Ready before (cleared by the next Ready), so its deltas
// to 1,000 subscribers of one view allocate no more than its delta to one;
// before 84a19df the outputs' array was grown anew, by doubling, for
// every transaction (about 600 KB at 1,000).
func TestReadyReusesOutputs(t *testing.T) {
	allocs := func(n int) float64 {
		bc := newBenchCore(t)
		plan := bc.compile(t, "SELECT * FROM items WHERE price = 1")
		plans := make([]*query.Plan, n)
		for i := range plans {
			plans[i] = plan
		}
		bc.subscribe(t, plans)
		bc.txn([]change.Change{{Op: change.OpInsert, Rel: bc.rel, New: bc.row(1, 1)}})
		bc.core.Ready()
		rows := []change.Row{bc.row(1, 1), bc.row(1, 1)}
		rows[1][1] = txt("renamed")
		ch := []change.Change{{Op: change.OpUpdate, Rel: bc.rel}}
		i := 0
		return testing.AllocsPerRun(50, func() {
			i++
			ch[0].New = rows[i%2]
			bc.txn(ch)
			rd := bc.core.Ready()
			if len(rd.Outputs) != n {
				t.Fatalf("outputs = %d, want a delta to each of %d subscribers", len(rd.Outputs), n)
			}
			for _, o := range rd.Outputs {
				if o.Kind != OutputDelta || len(o.Rows) != 1 {
					t.Fatalf("output %+v, want a delta of one row", o)
				}
			}
		})
	}
	one, many := allocs(1), allocs(1000)
	if many > one+1 {
		t.Errorf("allocations per transaction: %.0f with 1,000 subscribers of the view, %.0f with one: the outputs' array is not reused", many, one)
	}
}

// TestReadyOutputsBounded holds the array the core keeps for the next
// outputs to maxRecycledOutputs: a transaction that reached more
// subscriptions hands its array to the collector, ready not keeping it.
func TestReadyOutputsBounded(t *testing.T) {
	bc := newBenchCore(t)
	plan := bc.compile(t, "SELECT * FROM items WHERE price = 1")
	n := maxRecycledOutputs + 1
	plans := make([]*query.Plan, n)
	for i := range plans {
		plans[i] = plan
	}
	bc.subscribe(t, plans)
	bc.txn([]change.Change{{Op: change.OpInsert, Rel: bc.rel, New: bc.row(1, 1)}})
	rd := bc.core.Ready()
	if len(rd.Outputs) < n {
		t.Fatalf("outputs = %d, want at least %d", len(rd.Outputs), n)
	}
	if c := cap(bc.core.st.out.Outputs); c > maxRecycledOutputs {
		t.Errorf("the core keeps an array of %d outputs after a transaction to %d subscriptions; want at most %d", c, n, maxRecycledOutputs)
	}
}
