package pgwal

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
)

// TestProtoThroughput measures how fast a Reader drains the same WAL with
// pgoutput protocol 1 and 2: 200,000 small transactions, then one
// 1,000,000-row transaction, each read through two slots made at the same
// point. It informs defaultProtoVersion; it asserts only that everything
// arrives. Run it with FRESHET_PROTO_BENCH=1 (it takes minutes), or =21
// to drain with protocol 2 first.
func TestProtoThroughput(t *testing.T) {
	if os.Getenv("FRESHET_PROTO_BENCH") == "" {
		t.Skip("set FRESHET_PROTO_BENCH=1 to measure")
	}
	workloads := []struct {
		name  string
		setup string
		txns  int
		rows  int
	}{
		{"200k small transactions", `DO $$ BEGIN FOR i IN 1..200000 LOOP INSERT INTO t VALUES (i, 'row ' || i); COMMIT; END LOOP; END $$`, 200000, 200000},
		{"one 1M-row transaction", `INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 1000000) g`, 1, 1000000},
	}
	for _, w := range workloads {
		t.Run(w.name, func(t *testing.T) {
			db := pgtest.NewDB(t)
			conn := connect(t, db.DSN)
			exec(t, conn, `CREATE TABLE t (id int PRIMARY KEY, v text)`, `CREATE PUBLICATION freshet FOR ALL TABLES`,
				`SELECT pg_create_logical_replication_slot('p1', 'pgoutput')`,
				`SELECT pg_create_logical_replication_slot('p2', 'pgoutput')`)
			exec(t, conn, w.setup)
			order := []int{1, 2}
			if os.Getenv("FRESHET_PROTO_BENCH") == "21" {
				order = []int{2, 1} // to see whether going second helps
			}
			for _, proto := range order {
				cfg := testConfig(t, db.DSN)
				cfg.Create = false
				cfg.Slot = map[int]string{1: "p1", 2: "p2"}[proto]
				cfg.ProtoVersion = proto
				cfg.Logger = testLogger(t, nil)
				start := time.Now()
				r := openReader(t, cfg)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
				txns, rows := 0, 0
				for txns < w.txns {
					ev, err := r.Next(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if txn, ok := ev.(*change.Txn); ok {
						rows += len(userChanges(txn.Changes))
						if txn.Last {
							txns++
							r.Ack(txn.CommitLSN)
						}
					}
				}
				cancel()
				d := time.Since(start)
				r.Close()
				if rows != w.rows {
					t.Fatalf("proto %d: %d rows, want %d", proto, rows, w.rows)
				}
				t.Logf("proto %d: %s drained in %v: %.0f rows/s, %.0f txns/s", proto, w.name, d.Round(time.Millisecond), float64(rows)/d.Seconds(), float64(txns)/d.Seconds())
			}
		})
	}
}
