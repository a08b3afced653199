package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/bus"
	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/pgwal"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// newDiffRig makes the differential test's rig: newRig (the engine on a
// slot), or newBusRig for TestDifferentialBus.
var newDiffRig = newRig

// diffBusSeeds is how many seeds TestDifferentialBus runs in CI.
const diffBusSeeds = 4

// TestDifferentialBus is TestDifferential with the engine fed from the
// bus (docs/scale-out.md): a relay publishes the slot to JetStream, and
// the engine joins the stream mid-way (inside a large transaction, or
// between two, with or without a replay stretch) and lags behind it by a
// random few milliseconds per event, while its hydration reads go to
// PostgreSQL directly. Every result must still equal PostgreSQL's.
func TestDifferentialBus(t *testing.T) {
	if testing.Short() {
		t.Skip("differential test: skipped with -short")
	}
	newDiffRig = newBusRig
	t.Cleanup(func() { newDiffRig = newRig })
	seeds := []uint64{}
	switch {
	case *diffSeed != 0:
		seeds = append(seeds, *diffSeed)
	default:
		for i := range diffBusSeeds + *diffSoak {
			seeds = append(seeds, uint64(1000+i)) // the first CI seeds of TestDifferential, through the bus
		}
	}
	total := diffTotals{refused: map[string]int{}, ended: map[string]int{}, shapes: map[string]int{}, ddl: map[string]int{}, touchShapes: map[string]int{}}
	for _, seed := range seeds {
		if !t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runDifferential(t, seed, &total) }) {
			return
		}
	}
	t.Logf("through the bus: compared %d results (%d ordered, %d counts) of %d subscriptions over %d seeds; %d writes committed",
		total.compared, total.ordered, total.counts, total.subs, total.seeds, total.commits)
	if total.compared == 0 {
		t.Fatalf("no result was compared")
	}
}

// newBusRig is newRig with a relay between the slot and the engine: the
// engine's Source is a bus.Source that starts mid-stream and lags.
func newBusRig(t testing.TB, setup string, cfg Config) *rig {
	t.Helper()
	ctx := context.Background()
	db := pgtest.NewDB(t)
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if setup != "" {
		if _, err := conn.Exec(ctx, setup); err != nil {
			t.Fatalf("setup: %v", err)
		}
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatalf("start the bus: %v", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatalf("the bus did not start")
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatalf("connect to the bus: %v", err)
	}
	t.Cleanup(nc.Close)

	rcfg := pgwal.DefaultConfig()
	rcfg.DSN, rcfg.Create = db.DSN, true
	slot := "b_" + slotName.ReplaceAllString(strings.ToLower(db.Name), "_")
	rcfg.Slot, rcfg.Publication = slot[:min(len(slot), 60)], slot[:min(len(slot), 60)]
	rcfg.HeartbeatInterval = 50 * time.Millisecond
	rcfg.StatusInterval = 200 * time.Millisecond
	rcfg.Logger = quietLogger()
	rcfg.Decoder.FragmentChanges = 64
	set := bus.DefaultStreamSettings()
	set.MaxMsgSize = 64 << 10 // transactions span messages
	relay, err := bus.NewRelay(bus.RelayConfig{Stream: rcfg, Conn: nc, Settings: set, MaxPending: 16, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{}, 1)
	relay.Opened = func() {
		select {
		case opened <- struct{}{}:
		default:
		}
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	t.Cleanup(func() { stop(); <-done })
	select {
	case <-opened:
	case err := <-done:
		t.Fatalf("relay: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("relay did not open")
	}

	// The engine joins the stream while a side table is written: inside
	// its large transaction, or between two.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	if _, err := conn.Exec(ctx, `CREATE TABLE bus_side (id int PRIMARY KEY, v text)`); err != nil {
		t.Fatal(err)
	}
	side := make(chan error, 1)
	sconn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sconn.Close(context.Background()) })
	go func() {
		for i := range 20 {
			if _, err := sconn.Exec(ctx, `INSERT INTO bus_side VALUES ($1, 'x')`, i); err != nil {
				side <- err
				return
			}
		}
		_, err := sconn.Exec(ctx, `INSERT INTO bus_side SELECT i, repeat('y', 200) FROM generate_series(100, 1100) i`)
		side <- err
	}()
	time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
	var sysID, dbName string
	if err := conn.QueryRow(ctx, `SELECT system_identifier::text, current_database() FROM pg_control_system()`).Scan(&sysID, &dbName); err != nil {
		t.Fatal(err)
	}
	replay := time.Duration(0)
	if rng.IntN(2) == 0 {
		replay = 300 * time.Millisecond
	}
	src, err := bus.OpenSource(ctx, bus.SourceConfig{Conn: nc, SystemID: sysID, Database: dbName, Slot: rcfg.Slot, Replay: replay, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("open the bus source: %v", err)
	}
	t.Cleanup(src.Close)
	if err := <-side; err != nil {
		t.Fatal(err)
	}
	types := pgwal.NewTypeResolver(db.DSN, quietLogger())
	t.Cleanup(types.Close)
	lag := &lagSource{src: src, rng: rand.New(rand.NewPCG(rng.Uint64(), 2))}
	if tap, ok := cfg.Source.(*ackTap); ok {
		tap.Source = lag
	} else {
		cfg.Source = lag
	}
	cfg.ReadDSN, cfg.Types = db.DSN, types
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	e, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open engine: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return &rig{t: t, db: db, conn: conn, types: types, e: e}
}

// lagSource delays the events of a source: usually not at all or a
// fraction of a millisecond, now and then tens of milliseconds, so the
// engine's position trails PostgreSQL's by varying amounts while reads
// run.
type lagSource struct {
	src Source
	rng *rand.Rand // used on the engine's pump goroutine only
}

func (l *lagSource) Next(ctx context.Context) (change.Event, error) {
	ev, err := l.src.Next(ctx)
	if err != nil {
		return nil, err
	}
	var d time.Duration
	switch n := l.rng.IntN(100); {
	case n < 3:
		d = time.Duration(20+l.rng.IntN(40)) * time.Millisecond
	case n < 30:
		d = time.Duration(l.rng.IntN(1000)) * time.Microsecond
	}
	if d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return ev, nil
}

func (l *lagSource) Ack(lsn change.LSN) { l.src.Ack(lsn) }
