package bus

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/pgwal"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
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
	txns := envInt("FRESHET_BUS_BENCH_TXNS", 100_000)
	rounds := envInt("FRESHET_BUS_BENCH_ROUNDS", 3)
	// The relays measured against the tail: the code before batching by
	// time (a message as soon as the one before is acknowledged) and the
	// defaults, into a bus fsyncing before every acknowledgement, and the
	// defaults into one that does not.
	type variant struct {
		name string
		sync bool
		wait time.Duration
	}
	variants := []variant{
		{"relay, no batch wait, fsync", true, -1},
		{"relay, defaults, fsync", true, 0},
		{"relay, defaults, no fsync", false, 0},
	}
	if w := os.Getenv("FRESHET_BUS_BENCH_WAIT"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil {
			t.Fatal(err)
		}
		variants = append(variants, variant{"relay, batch wait " + w + ", fsync", true, d})
	}
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
	// Every round reads the same WAL from its own slots: the tail before
	// and after the relays, so the tail's figure is the mean of two
	// measured around them under the same load.
	slot := func(round int, name string) string { return fmt.Sprintf("bench_%d_%s", round, name) }
	for r := 0; r < rounds; r++ {
		names := []string{"tail_a", "tail_b"}
		for i := range variants {
			names = append(names, fmt.Sprint("relay", i))
		}
		for _, n := range names {
			if _, err := conn.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot(r, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Small transactions, 1,000 to a round trip (each its own
	// transaction block) to get there quickly.
	for i := 0; i < txns; i += 1000 {
		var sb strings.Builder
		for j := i; j < min(i+1000, txns); j++ {
			fmt.Fprintf(&sb, "BEGIN; INSERT INTO items VALUES (%d, 'x'); COMMIT;\n", j)
		}
		if _, err := conn.PgConn().Exec(ctx, sb.String()).ReadAll(); err != nil {
			t.Fatal(err)
		}
	}
	var endS string
	conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&endS)
	end, _ := change.ParseLSN(endS)
	buses := map[bool]*server.Server{}
	for _, sync := range []bool{true, false} {
		buses[sync] = runBusOpts(t, t.TempDir(), sync)
	}

	// tail reads and acknowledges every transaction, as `freshet tail
	// --format none` does.
	tail := func(slotName string) (took, cpu time.Duration) {
		cpu0 := cpuTime()
		start := time.Now()
		rd, err := pgwal.Open(ctx, benchConfig(db.DSN, slotName))
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
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
		if n < txns { // and the heartbeats of the readers before it
			t.Fatalf("tail: %d transactions, want %d", n, txns)
		}
		return time.Since(start), cpuTime() - cpu0
	}
	relay := func(v variant, slotName string) (took, cpu time.Duration, st Stats) {
		nc, _ := busConn(t, buses[v.sync])
		defer nc.Close()
		r, err := NewRelay(RelayConfig{Stream: benchConfig(db.DSN, slotName), Conn: nc, Settings: DefaultStreamSettings(),
			BatchWait: v.wait, Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		if dir := os.Getenv("FRESHET_BUS_BENCH_PROFILE"); dir != "" {
			// One CPU profile per relay run: relay-<slot>.prof.
			f, err := os.Create(filepath.Join(dir, "relay-"+slotName+".prof"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
		cpu0 := cpuTime()
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		for r.Stats().Acked < end { // a heartbeat past the end
			time.Sleep(2 * time.Millisecond)
		}
		took, cpu = time.Since(start), cpuTime()-cpu0
		st = r.Stats()
		stop()
		<-done
		return took, cpu, st
	}
	ratios := make([][]float64, len(variants))
	for round := 0; round < rounds; round++ {
		load := loadAvg()
		ta, ca := tail(slot(round, "tail_a"))
		type res struct {
			took, cpu time.Duration
			st        Stats
		}
		var out []res
		for i, v := range variants {
			took, cpu, st := relay(v, slot(round, fmt.Sprint("relay", i)))
			out = append(out, res{took, cpu, st})
		}
		tb, cb := tail(slot(round, "tail_b"))

		tailTook := (ta + tb) / 2
		t.Logf("round %d (load %s): tail %.0f tx/s (%v, %v; CPU %v, %v)", round+1, load, float64(txns)/tailTook.Seconds(),
			ta.Round(time.Millisecond), tb.Round(time.Millisecond), ca.Round(time.Millisecond), cb.Round(time.Millisecond))
		for i, v := range variants {
			o := out[i]
			ratio := tailTook.Seconds() / o.took.Seconds()
			ratios[i] = append(ratios[i], ratio)
			t.Logf("round %d: %s: %d events in %d messages (%.1f events each) in %v: %.0f events/s, CPU %v, %.2fx the tail",
				round+1, v.name, o.st.Events, o.st.Messages, float64(o.st.Events)/float64(max(o.st.Messages, 1)), o.took.Round(time.Millisecond),
				float64(o.st.Events)/o.took.Seconds(), o.cpu.Round(time.Millisecond), ratio)
		}
	}
	for i, v := range variants {
		rs := slices.Clone(ratios[i])
		slices.Sort(rs)
		t.Logf("%s: median %.2fx the tail (%.2f-%.2f over %d rounds)", v.name, rs[len(rs)/2], rs[0], rs[len(rs)-1], len(rs))
	}
}

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return def
}

// loadAvg is the machine's 1-minute load average, for the figures.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// cpuTime is the CPU this process (the relay, the embedded bus and the
// tail alike) has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
	// FRESHET_BUS_BENCH_WAIT sets the relay's batch wait (0: none).
	var wait time.Duration
	if w := os.Getenv("FRESHET_BUS_BENCH_WAIT"); w != "" {
		if wait, err = time.ParseDuration(w); err != nil {
			t.Fatal(err)
		}
		if wait == 0 {
			wait = -1
		}
	}
	r, err := NewRelay(RelayConfig{Stream: benchConfig(db.DSN, "lat_relay"), Conn: nc, Settings: DefaultStreamSettings(), BatchWait: wait, Logger: quietLog()})
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
	rate := envInt("FRESHET_BUS_BENCH_RATE", 200) // transactions per second
	tick := time.NewTicker(time.Second / time.Duration(rate))
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
	t.Logf("commit to event (load %s, batch wait %v), %d transactions at %d/s: off the slot p50 %v p99 %v; through the relay and JetStream (fsync before ack) p50 %v p99 %v",
		loadAvg(), r.cfg.BatchWait, samples, rate, pct(viaSlot, .5).Round(10*time.Microsecond), pct(viaSlot, .99).Round(10*time.Microsecond),
		pct(viaBus, .5).Round(10*time.Microsecond), pct(viaBus, .99).Round(10*time.Microsecond))
	_ = fmt.Sprint
}
