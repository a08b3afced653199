package readcache

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/wire"
)

// BenchmarkApplyDelta decodes and applies the delta of one changed row
// (moved from the middle of the order to the front) of an ordered result
// of n rows, as the whole order and as moves (wire.DeltaOrderMoves),
// interleaved in one run; each loop applies it to the same result, which
// an adapter has derived from (as a read does), so the cost of keeping
// the unchanged rows' decoded values is counted.
func BenchmarkApplyDelta(b *testing.B) {
	for _, n := range []int{10, 1_000, 100_000} {
		acc := &wire.Accepted{Columns: []wire.Column{{Name: "id", TypeOID: 23}, {Name: "name", TypeOID: 25}}}
		keys := make([]string, n)
		for i := range keys {
			keys[i] = base64.RawURLEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, uint32(i)))
			acc.Rows = append(acc.Rows, wire.Row{Key: keys[i], Values: []*string{sp(strconv.Itoa(i)), sp("item-abcdefgh")}})
		}
		r := newResult(acc)
		r.Memo(MemoDriver, func(*Result, any, []int32) any { return 1 })
		mid := keys[n/2]
		up := fmt.Sprintf(`"upsert":[{"key":%q,"values":["%d","item-moved"]}]`, mid, n/2)
		order := append([]string{mid}, append(append([]string{}, keys[:n/2]...), keys[n/2+1:]...)...)
		frames := map[string][]byte{
			"full":  []byte(`{"type":"delta","id":"q1","lsn":"0/20",` + up + `,"order":["` + strings.Join(order, `","`) + `"]}`),
			"moves": []byte(fmt.Sprintf(`{"type":"delta","id":"q1","lsn":"0/20",%s,"moves":[{"key":%q,"after":null}],"size":%d}`, up, mid, n)),
		}
		for _, form := range []string{"full", "moves"} {
			b.Run(fmt.Sprintf("%d/%s", n, form), func(b *testing.B) {
				for b.Loop() {
					f, err := wire.Decode(frames[form], 0)
					if err != nil {
						b.Fatal(err)
					}
					nr, err := r.apply(f.(*wire.Delta))
					if err != nil || nr.keys[0] != mid {
						b.Fatalf("apply: %v", err)
					}
				}
				b.ReportMetric(float64(len(frames[form])), "B/frame")
			})
		}
	}
}
