package engine

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/freshetdb/freshet/query"
)

// TestJoinRowLimit: a join whose result is far bigger than any of its
// sources' reads (four copies of a 2,000-row table joined on a column with
// 50 values: 128 million joined rows, each read 2,000 rows) is refused
// row_limit once building it examines more joined rows than the row limit,
// instead of holding the core goroutine (and every other subscription) for
// seconds while its memory passes gigabytes; a join that grows past the
// limit through transactions ends row_limit. A canary subscription on
// another table is served throughout (issue 10 item 6).
func TestJoinRowLimit(t *testing.T) {
	const limit = 100_000
	r := newRig(t, `CREATE TABLE items (id int4 PRIMARY KEY, grp int4);
INSERT INTO items SELECT i, i % 50 FROM generate_series(1, 2000) i;
CREATE TABLE pairs (id int4 PRIMARY KEY, grp int4);
INSERT INTO pairs SELECT i, 1 FROM generate_series(1, 200) i;
CREATE TABLE canary (id int4 PRIMARY KEY, v int4);`, Config{RowLimit: limit})
	_, canary := r.subscribe("SELECT id, v FROM canary")
	waitAccepted(t, canary)

	start := time.Now()
	_, big := r.subscribe(`SELECT COUNT(*) FROM items a JOIN items b ON b.grp = a.grp JOIN items c ON c.grp = b.grp JOIN items d ON d.grp = c.grp`)
	// Unbounded, the join's entries pass a gigabyte within seconds.
	const heapBound = 1 << 30
	waitFor(t, 60*time.Second, 10*time.Millisecond, func() error {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > heapBound {
			t.Fatalf("the heap passed %d MiB while the join was built", heapBound>>20)
		}
		if st, _ := big.state(); st == 0 {
			return fmt.Errorf("no answer yet")
		}
		return nil
	})
	waitEnding(t, big, OutputRefused, CodeRowLimit)
	t.Logf("the 128-million-row join was refused row_limit after %v", time.Since(start))

	// 200 rows of one group: 40,000 joined rows, within the limit; 200
	// more make 160,000, past it: the view ends.
	_, grow := r.subscribe(`SELECT a.id, b.id FROM pairs a JOIN pairs b ON b.grp = a.grp`)
	waitAccepted(t, grow)
	r.exec(`INSERT INTO canary VALUES (1, 1)`)
	r.exec(`INSERT INTO pairs SELECT i, 1 FROM generate_series(201, 400) i`)
	r.exec(`INSERT INTO canary VALUES (2, 2)`)
	waitEnding(t, grow, OutputEnded, CodeRowLimit)
	r.quiesce(30 * time.Second)
	if got, err := canary.result(false, nil); err != nil || len(got) != 2 {
		t.Fatalf("canary: %d rows, %v; want the 2 inserted", len(got), err)
	}
	st, err := r.e.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.HeldRows > 2+400+2000 {
		t.Fatalf("the core holds %d rows after the joins ended, want at most the canary's", st.HeldRows)
	}
}

// waitEnding waits for rec's Refused or Ended and checks its kind and code.
func waitEnding(t *testing.T, rec *recorder, kind OutputKind, code query.Code) {
	t.Helper()
	waitFor(t, 60*time.Second, 5*time.Millisecond, func() error {
		if st, _ := rec.state(); st != OutputRefused && st != OutputEnded {
			return fmt.Errorf("subscription is %v", st)
		}
		return nil
	})
	if st, c, reason := rec.ending(); st != kind || c != code {
		t.Fatalf("subscription %v %s (%s), want %v %s", st, c, reason, kind, code)
	}
}
