package query

import (
	"context"
	"sync"
	"testing"
)

// A Plan is shared by every subscription with its Key: evaluating,
// ordering and rendering it from many goroutines gives the answers one
// goroutine gets (run with -race to check it shares nothing mutable).
func TestPlanConcurrent(t *testing.T) {
	opts := DefaultOptions()
	opts.Catalog = snapshotCatalog(t)
	p, r, err := Compile(context.Background(), `SELECT o.id, u.name FROM orders o LEFT JOIN users u ON u.id = o.user_id
		WHERE (u.age IN (1, 2, 30) OR u.name LIKE 'a%') AND o.status <> 'x' ORDER BY u.name DESC, o.id LIMIT 5`, nil, opts)
	if err != nil || r != nil {
		t.Fatal(err, r)
	}
	row := func(id int64, name string, age int64) Row {
		rw := make(Row, 2)
		rw[0] = make([]any, len(p.Sources[0].Columns))
		rw[0][0] = id
		rw[1] = make([]any, len(p.Sources[1].Columns))
		for i, c := range p.Sources[1].Columns {
			switch c.Name {
			case "id":
				rw[1][i] = id
			case "name":
				rw[1][i] = name
			case "age":
				rw[1][i] = age
			}
		}
		return rw
	}
	rows := []Row{row(1, "ann", 30), row(2, "bob", 2), row(3, "al", 7), row(4, "zed", 9), {make([]any, len(p.Sources[0].Columns)), nil}}
	want := make([]Tri, len(rows))
	for i, rw := range rows {
		want[i] = p.Eval(rw)
	}
	sql := p.Render(RenderOptions{Columns: SelectNeeded, Window: true, Margin: 2})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 200; k++ {
				for i, rw := range rows {
					if got := p.Eval(rw); got != want[i] {
						t.Errorf("Eval(row %d) = %v, want %v", i, got, want[i])
						return
					}
					_ = p.CompareWindow(rw, rows[(i+1)%len(rows)])
				}
				if k%50 == 0 && p.Render(RenderOptions{Columns: SelectNeeded, Window: true, Margin: 2}) != sql {
					t.Error("Render differs between goroutines")
					return
				}
			}
		}()
	}
	wg.Wait()
}
