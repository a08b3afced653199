package pgwal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
)

func TestHeartbeats(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := connect(t, db.DSN)
	exec(t, conn, `CREATE TABLE t (id int PRIMARY KEY)`)
	cfg := testConfig(t, db.DSN)
	cfg.HeartbeatInterval = 20 * time.Millisecond
	r := openReader(t, cfg)

	const inserts = 5
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var beats []*change.Heartbeat
	txns, inserted := 0, 0
	for len(beats) < 20 || txns < inserts {
		if inserted < inserts && len(beats) >= 2*(inserted+1) {
			inserted++
			exec(t, conn, fmt.Sprintf(`INSERT INTO t VALUES (%d)`, inserted))
		}
		ev, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %d heartbeats and %d transactions: %v", len(beats), txns, err)
		}
		switch e := ev.(type) {
		case *change.Heartbeat:
			beats = append(beats, e)
			r.Ack(e.LSN)
		case *change.Txn:
			for _, c := range e.Changes {
				if c.Op == change.OpMessage && strings.HasPrefix(c.Message.Prefix, "freshet.heartbeat") {
					t.Fatalf("a heartbeat came through as a user change: %+v", c.Message)
				}
			}
			if got := userChanges(e.Changes); len(got) != 1 || got[0].Op != change.OpInsert {
				t.Fatalf("transaction %d holds %d changes, want the one insert", txns, len(got))
			}
			txns++
			r.Ack(e.CommitLSN)
		}
	}
	if txns != inserts {
		t.Fatalf("%d user transactions, want %d", txns, inserts)
	}
	for i := 1; i < len(beats); i++ {
		if beats[i].Seq <= beats[i-1].Seq {
			t.Errorf("heartbeat %d has seq %d after %d, want rising", i, beats[i].Seq, beats[i-1].Seq)
		}
		if beats[i].LSN <= beats[i-1].LSN {
			t.Errorf("heartbeat %d at %v after %v, want rising positions", i, beats[i].LSN, beats[i-1].LSN)
		}
	}
	for i, b := range beats {
		if b.Written.IsZero() || b.Arrived.Before(b.Written) {
			t.Errorf("heartbeat %d written %v, arrived %v", b.Seq, b.Written, b.Arrived)
		}
		// The database's clock in the heartbeat's transaction: set, and
		// rising with the heartbeats (one server, one clock).
		if b.Now.IsZero() {
			t.Errorf("heartbeat %d carries no database clock (Now)", b.Seq)
		} else if i > 0 && !b.Now.After(beats[i-1].Now) {
			t.Errorf("heartbeat %d: database clock %v after %v, want rising", b.Seq, b.Now, beats[i-1].Now)
		}
	}
	var dbNow time.Time
	if err := conn.QueryRow(ctx, "SELECT now()").Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	if last := beats[len(beats)-1].Now; last.After(dbNow) {
		t.Errorf("last heartbeat's clock %v is after PostgreSQL's now() %v read later", last, dbNow)
	}
	// The heartbeat connection comes back after it is killed.
	last := beats[len(beats)-1].Seq
	exec(t, conn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'freshet' AND backend_type = 'client backend' AND pid <> pg_backend_pid()`)
	for {
		ev, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("Next after killing the heartbeat connection: %v", err)
		}
		if b, ok := ev.(*change.Heartbeat); ok && b.Seq > last+3 {
			break
		}
	}
}

// TestHeartbeatFlush measures how long a lone heartbeat takes to reach the
// stream on an otherwise idle server, written as a transactional and as a
// non-transactional logical message (see heartbeatTransactional). Set
// FRESHET_HEARTBEAT_SAMPLES for more samples.
func TestHeartbeatFlush(t *testing.T) {
	c := startCluster(t, nil)
	dsn := c.DSN("postgres")
	cfg := testConfig(t, dsn)
	r := openReader(t, cfg)
	conn, err := connectNormal(context.Background(), dsn, heartbeatParams)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	prefix := HeartbeatPrefix(cfg.Slot)
	samples := 3
	if s := os.Getenv("FRESHET_HEARTBEAT_SAMPLES"); s != "" {
		fmt.Sscan(s, &samples)
	}

	seq := uint64(0)
	idle := time.Duration(0) // FRESHET_HEARTBEAT_IDLE: quiet time before each non-transactional sample (the WAL writer hibernates after ~10s)
	if s := os.Getenv("FRESHET_HEARTBEAT_IDLE"); s != "" {
		idle, _ = time.ParseDuration(s)
	}
	var start time.Time
	// await waits up to wait for heartbeat seq; it returns how long it took
	// since start.
	await := func(want uint64, wait time.Duration) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		for {
			ev, err := r.Next(ctx)
			if err != nil {
				return 0, err
			}
			if b, ok := ev.(*change.Heartbeat); ok && b.Seq == want {
				return time.Since(start), nil
			}
		}
	}
	for i := 0; i < samples; i++ {
		seq++
		start = time.Now()
		if err := emitHeartbeat(context.Background(), conn, prefix, seq, time.Now(), true); err != nil {
			t.Fatal(err)
		}
		d, err := await(seq, 30*time.Second)
		if err != nil {
			t.Fatalf("transactional heartbeat %d did not arrive: %v", seq, err)
		}
		t.Logf("transactional heartbeat arrived after %v", d)
	}
	for i := 0; i < samples; i++ {
		time.Sleep(idle)
		seq++
		start = time.Now()
		if err := emitHeartbeat(context.Background(), conn, prefix, seq, time.Now(), false); err != nil {
			t.Fatal(err)
		}
		d, err := await(seq, 3*time.Second+idle)
		if err == nil {
			t.Logf("non-transactional heartbeat arrived after %v", d)
			continue
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		t.Logf("non-transactional heartbeat had not arrived after %v", time.Since(start))
		// Anything that flushes WAL brings it: a transaction's commit.
		if _, err := conn.Exec(context.Background(), `SELECT pg_logical_emit_message(true, 'flush', '')`); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		if d, err = await(seq, 30*time.Second); err != nil {
			t.Fatalf("non-transactional heartbeat %d did not arrive after a WAL flush: %v", seq, err)
		}
		t.Logf("non-transactional heartbeat arrived %v after a committing transaction flushed WAL", d)
	}
}
