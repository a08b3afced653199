package s2s

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/freshetdb/freshet/change"

	"github.com/freshetdb/freshet/engine"
)

// BenchmarkDeltaOrder encodes the delta of one changed row (moved from
// the middle of the order to the front) of an ordered result of n rows,
// as the whole order (full: what every client got before
// wire.DeltaOrderMoves, and what an old client still gets) and as moves,
// interleaved in one run. B/frame is the frame's size.
func BenchmarkDeltaOrder(b *testing.B) {
	for _, n := range []int{10, 1_000, 100_000} {
		keys := make([]engine.Key, n)
		for i := range keys {
			k := binary.BigEndian.AppendUint32([]byte{0, 0, 0, 0}, uint32(i))
			keys[i] = engine.Key(k)
		}
		mid := keys[n/2]
		order := append([]engine.Key{mid}, append(append([]engine.Key{}, keys[:n/2]...), keys[n/2+1:]...)...)
		row := engine.ResultRow{Key: mid, Values: []any{int64(n / 2), numeric(b, "1.50"), "item-abcdefgh"}}
		for _, form := range []string{"full", "moves"} {
			b.Run(fmt.Sprintf("%d/%s", n, form), func(b *testing.B) {
				e := newEncoder(nil)
				lsn := 0
				var size int
				for b.Loop() {
					lsn++
					// A fresh Output each time (the engine makes one per
					// transaction): nothing shared from the last loop.
					o := engine.Output{Kind: engine.OutputDelta, LSN: change.LSN(0x100 + 0x10*lsn), Rows: []engine.ResultRow{row},
						Order: order, Moves: []engine.Move{{Key: mid, Head: true}}}
					size = len(e.delta("q1", testCols, &o, form == "moves"))
				}
				b.ReportMetric(float64(size), "B/frame")
			})
		}
	}
}
