package s2s_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
)

// A transaction's touched ids on one connection come in one touched frame,
// even when the transaction's delta frames for rows-mode subscriptions of
// the same connection are interleaved with its touches, and every frame of
// a transaction comes before any frame of the next.
func TestTouchedOneFramePerTransaction(t *testing.T) {
	const groups = 20
	e := newEnv(t, fmt.Sprintf(`CREATE TABLE t (id int PRIMARY KEY, g int, v int);
INSERT INTO t SELECT i, i %% %d, 0 FROM generate_series(1, %d) i;`, groups, 2*groups), nil)
	c, _ := e.connect()
	// Touch and rows subscriptions of one query share a view: the engine
	// emits their outputs alternately.
	var want []string
	for g := range groups {
		c.sendf(`{"type":"subscribe","id":"t%02d","sql":"SELECT id, v FROM t WHERE g = %d","mode":"touch"}`, g, g)
		c.sendf(`{"type":"subscribe","id":"r%02d","sql":"SELECT id, v FROM t WHERE g = %d","mode":"rows"}`, g, g)
		want = append(want, fmt.Sprintf("t%02d", g))
	}
	for range 2 * groups {
		c.expect("accepted")
	}
	const txns = 5
	for range txns {
		e.exec("UPDATE t SET v = v + 1")
	}
	touched := map[change.LSN][]string{}
	deltas := map[change.LSN]int{}
	var last change.LSN
	for len(touched) < txns || len(deltas) < txns || deltas[last] < groups {
		f := c.next()
		lsn, err := change.ParseLSN(f.str("lsn"))
		if err != nil {
			t.Fatalf("frame %s: lsn: %v", f.raw, err)
		}
		if lsn < last {
			t.Fatalf("frame %s after a frame at %s: out of commit order", f.raw, last)
		}
		if lsn > last && last != 0 && (len(touched[last]) == 0 || deltas[last] != groups) {
			t.Fatalf("frame %s before every frame of %s came (touched %v, %d deltas)", f.raw, last, touched[last], deltas[last])
		}
		last = lsn
		switch f.str("type") {
		case "touched":
			if touched[lsn] != nil {
				t.Fatalf("second touched frame for %s: %s (first named %v)", lsn, f.raw, touched[lsn])
			}
			for _, id := range list(f, "ids") {
				s, _ := id.(string)
				touched[lsn] = append(touched[lsn], s)
			}
		case "delta":
			deltas[lsn]++
		default:
			t.Fatalf("unexpected frame %s", f.raw)
		}
	}
	for lsn, ids := range touched {
		sort.Strings(ids)
		if got, w := strings.Join(ids, " "), strings.Join(want, " "); got != w {
			t.Errorf("touched at %s = %s, want %s", lsn, got, w)
		}
	}
}
