package pgwal

import (
	"fmt"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
)

// TestCloseReportsLastAck: a position acknowledged just before Close is on
// the slot when Close returns, so a consumer that stops cleanly is not sent
// what it already handled when it starts again.
func TestCloseReportsLastAck(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := connect(t, db.DSN)
	exec(t, conn, `CREATE TABLE t (id int PRIMARY KEY)`)
	cfg := testConfig(t, db.DSN)
	cfg.StatusInterval = 10 * time.Second // only Close's own report can carry the ack in time
	for round := 0; round < 5; round++ {
		r := openReader(t, cfg)
		for i := 0; i < 3; i++ {
			exec(t, conn, fmt.Sprintf(`INSERT INTO t VALUES (%d)`, round*10+i))
		}
		var last change.LSN
		for i := 0; i < 3; i++ {
			txn := nextTxn(t, r, 30*time.Second)
			last = txn.CommitLSN
		}
		r.Ack(last)
		r.Close()
		if got := slotFlush(t, conn, cfg.Slot); got < last {
			t.Fatalf("round %d: confirmed_flush_lsn = %v right after Ack(%v) and Close, want %v", round, got, last, last)
		}
	}
}
