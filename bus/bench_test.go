package bus

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/pgwal"
	"github.com/jackc/pgx/v5"
)

// The relay's figures for docs/benchmarks.md, run by hand:
//
//	FRESHET_BUS_BENCH=1 go test ./bus -run 'TestBench' -v -count=1
//
// TestBenchThroughput drains the same WAL (small transactions written
// before either starts, from slots made at the same point) through a bare
// pgwal.Reader acknowledging every transaction (what `freshet tail
// --format none` does) and through the relay into JetStream, embedded in
// the test process (file store, fsync before every acknowledgement, and
// without), on the same machine. TestBenchLatency measures commit to event
// at a steady 200 transactions per second, straight off the slot and
// through the relay and the bus.
func benchOn(t *testing.T) {
	if os.Getenv("FRESHET_BUS_BENCH") == "" {
		t.Skip("set FRESHET_BUS_BENCH=1 to measure (docs/benchmarks.md)")
	}
}

func benchConfig(dsn, slot string) pgwal.Config {
	cfg := pgwal.DefaultConfig()
	cfg.DSN, cfg.Slot, cfg.Publication, cfg.Create = dsn, slot, "bench", true
	cfg.HeartbeatInterval = 100 * time.Millisecond
	cfg.Logger = quietLog()
	return cfg
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestBenchThroughput(t *testing.T) {
	benchOn(t)
	const txns = 100_000
	db := pgtest.NewDB(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE items (id int PRIMARY KEY, v text); CREATE PUBLICATION bench FOR ALL TABLES`); err != nil {
		t.Fatal(err)
	}
	slots := []string{"bench_tail", "bench_sync", "bench_nosync"}
	for _, s := range slots {
		if _, err := conn.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, s); err != nil {
			t.Fatal(err)
		}
	}
	// Small transactions, 1,000 to a round trip (each its own
	// transaction block) to get there quickly.
	for i := 0; i < txns; i += 1000 {
		var sb strings.Builder
		for j := i; j < i+1000; j++ {
			fmt.Fprintf(&sb, "BEGIN; INSERT INTO items VALUES (%d, 'x'); COMMIT;\n", j)
		}
		if _, err := conn.PgConn().Exec(ctx, sb.String()).ReadAll(); err != nil {
			t.Fatal(err)
		}
	}
	var endS string
	conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&endS)
	end, _ := change.ParseLSN(endS)

	// The tail: read and acknowledge every transaction.
	start := time.Now()
	rd, err := pgwal.Open(ctx, benchConfig(db.DSN, slots[0]))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		ev, err := rd.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tx, ok := ev.(*change.Txn); ok && tx.Last {
			rd.Ack(tx.CommitLSN)
			n++
		}
		if ev.Position() >= end {
			break // a heartbeat past the end
		}
	}
	tailTook := time.Since(start)
	rd.Close()
	t.Logf("tail (pgwal.Reader, --format none): %d transactions in %v: %.0f tx/s", n, tailTook.Round(time.Millisecond), float64(n)/tailTook.Seconds())

	for i, sync := range []bool{true, false} {
		s := runBusOpts(t, t.TempDir(), sync)
		nc, js := busConn(t, s)
		cfg := benchConfig(db.DSN, slots[1+i])
		r, err := NewRelay(RelayConfig{Stream: cfg, Conn: nc, Settings: DefaultStreamSettings(), Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		for r.Stats().Acked < end { // a heartbeat past the end
			time.Sleep(2 * time.Millisecond)
		}
		took := time.Since(start)
		st := r.Stats()
		stop()
		<-done
		info, _ := js.Stream(ctx, StreamName(sysIDOf(t, conn), slots[1+i]))
		si, _ := info.Info(ctx)
		t.Logf("relay to JetStream (sync_always=%v): %d events in %d messages (%d stored, %.1f MB) in %v: %.0f events/s, %.2fx the tail",
			sync, st.Events, st.Messages, si.State.Msgs, float64(si.State.Bytes)/1e6, took.Round(time.Millisecond), float64(st.Events)/took.Seconds(),
			tailTook.Seconds()/took.Seconds())
		s.Shutdown()
	}
}

func sysIDOf(t *testing.T, conn *pgx.Conn) string {
	var id string
	if err := conn.QueryRow(context.Background(), `SELECT system_identifier::text FROM pg_control_system()`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestBenchLatency(t *testing.T) {
	benchOn(t)
	const samples = 2000
	db := pgtest.NewDB(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE items (id int PRIMARY KEY, v text); CREATE PUBLICATION bench FOR ALL TABLES`); err != nil {
		t.Fatal(err)
	}
	s := runBusOpts(t, t.TempDir(), true)
	nc, _ := busConn(t, s)
	direct, err := pgwal.Open(ctx, benchConfig(db.DSN, "lat_direct"))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	r, err := NewRelay(RelayConfig{Stream: benchConfig(db.DSN, "lat_relay"), Conn: nc, Settings: DefaultStreamSettings(), Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{}, 1)
	r.Opened = func() {
		select {
		case opened <- struct{}{}:
		default:
		}
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go r.Run(rctx)
	<-opened
	src, err := OpenSource(ctx, SourceConfig{Conn: nc, SystemID: sysIDOf(t, conn), Database: db.Name, Slot: "lat_relay", Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()

	var mu sync.Mutex
	committed := map[uint32]time.Time{}
	var viaSlot, viaBus []time.Duration
	follow := func(next func(context.Context) (change.Event, error), ack func(change.LSN), out *[]time.Duration, done chan struct{}) {
		defer close(done)
		for {
			ev, err := next(rctx)
			if err != nil {
				return
			}
			tx, ok := ev.(*change.Txn)
			if !ok || !tx.Last {
				continue
			}
			now := time.Now()
			ack(tx.CommitLSN)
			mu.Lock()
			if at, ok := committed[tx.XID]; ok {
				*out = append(*out, now.Sub(at))
				if len(*out) >= samples {
					mu.Unlock()
					return
				}
			}
			mu.Unlock()
		}
	}
	d1, d2 := make(chan struct{}), make(chan struct{})
	go follow(direct.Next, direct.Ack, &viaSlot, d1)
	go follow(src.Next, src.Ack, &viaBus, d2)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < samples+50; i++ {
		<-tick.C
		var xid int64
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx.QueryRow(ctx, `INSERT INTO items VALUES ($1, 'x') RETURNING txid_current()`, i).Scan(&xid)
		mu.Lock()
		committed[uint32(xid)] = time.Now() // just before the commit: the bound includes the commit's round trip
		mu.Unlock()
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	<-d1
	<-d2
	pct := func(ds []time.Duration, p float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[int(p*float64(len(s)-1))]
	}
	t.Logf("commit to event, %d transactions at 200/s: off the slot p50 %v p99 %v; through the relay and JetStream (fsync before ack) p50 %v p99 %v",
		samples, pct(viaSlot, .5).Round(10*time.Microsecond), pct(viaSlot, .99).Round(10*time.Microsecond),
		pct(viaBus, .5).Round(10*time.Microsecond), pct(viaBus, .99).Round(10*time.Microsecond))
	_ = fmt.Sprint
}
