package engine

import (
	"fmt"
	"testing"
)

// BenchmarkLandRead lands a 5,000-row read of a single-table view and
// builds its Accepted, the core's part of a first answer
// (TestBenchFirstAnswer's "5,000 rows") without PostgreSQL: the rows
// encoded as the reader encodes them (int8 key, text, numeric,
// timestamptz and the int4 the query filters on), in key order as the
// read by an index gives them. Each iteration subscribes, lands the read
// and unsubscribes.
//
//	go test ./engine -run '^$' -bench LandRead -benchmem
func BenchmarkLandRead(b *testing.B) {
	h := newHarness(b, CoreOptions{})
	h.createTable("items", []string{"id int8 pk", "grp int4", "title text", "price numeric", "at timestamptz"})
	plan, r := h.compile("SELECT id, title, price, at FROM items WHERE grp = 1", nil)
	if r != nil {
		b.Fatal(r)
	}
	c := NewCore(CoreOptions{})
	c.Subscribe(1, plan, ModeRows)
	req := c.Ready().Reads[0]
	cols, _ := readColumns(req)
	text := map[string]func(i int) string{
		"id":    func(i int) string { return fmt.Sprint(i) },
		"grp":   func(int) string { return "1" },
		"title": func(i int) string { return fmt.Sprintf("item number %d", i) },
		"price": func(i int) string { return fmt.Sprintf("%d.%02d", i%1000/7, i%100) },
		"at":    func(i int) string { return fmt.Sprintf("2026-01-%02d %02d:%02d:00+00", 1+i/1440%28, i/60%24, i%60) },
	}
	var sl slabs
	held := make([]rowVals, 5000)
	for i := range held {
		var enc []byte
		var boxes []any
		for j, col := range plan.Sources[0].Columns {
			rc := cols[j]
			rc.binary = false // decoded from text here
			v, err := decodeValue(&sl, rc, []byte(text[col.Name](i+1)), nil)
			if err != nil {
				b.Fatal(err)
			}
			enc, boxes = appendVal(enc, v, boxes)
		}
		if boxes != nil {
			b.Fatalf("row %d: boxed values, want every value encoded", i)
		}
		held[i] = rowVals{enc: string(enc)}
	}
	c.Unsubscribe(1)
	c.Ready()
	id := SubID(1)
	for b.Loop() {
		id++
		c.Subscribe(id, plan, ModeRows)
		req := c.Ready().Reads[0]
		c.ReadDone(req.ID, ReadResult{Snapshot: Snapshot{LSN: c.Position()}, Encoded: EncodedRows{held}, Complete: true})
		out := c.Ready().Outputs
		if len(out) != 1 || out[0].Kind != OutputAccepted || len(out[0].Rows) != len(held) {
			b.Fatalf("outputs %v, want one Accepted of %d rows", out, len(held))
		}
		c.Unsubscribe(id)
		c.Ready()
	}
}
