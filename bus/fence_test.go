package bus

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/pgwal"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestRelayFenced runs the relay under a steady writer, with messages in
// flight and batched by BatchWait, while a second publisher (a zombie
// relay that read the stream's end) writes messages of its own between
// the relay's. The relay's next publish must be refused by the bus (its
// expected last Msg-Id is no longer the stream's), and its new session
// must go on from the stream's end: one unbroken chain in one epoch, every
// row exactly once. It fails if the relay publishes without the fence
// (the chain breaks after the zombie's message) or acknowledges the slot
// before the bus has stored a message (the refused message's transactions
// are then missing, and the relay starts a new epoch).
func TestRelayFenced(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, conn := dbWith(t, ctx, `CREATE TABLE items (id int PRIMARY KEY)`)
	sysID := sysIDOf(t, conn)
	s := runBus(t, t.TempDir(), 0)
	nc, js := busConn(t, s)
	const slot = "relay_fenced"
	cfg := pgwal.DefaultConfig()
	cfg.DSN, cfg.Slot, cfg.Publication, cfg.Create = db.DSN, slot, slot, true
	cfg.HeartbeatInterval = 50 * time.Millisecond
	r, err := NewRelay(RelayConfig{Stream: cfg, Conn: nc, MaxPending: 8, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	done := runOpened(t, rctx, r) // the slot exists: the writer's rows are all after it

	const rows = 600
	wrote := make(chan error, 1)
	go func() {
		for id := 1; id <= rows; id++ {
			if _, err := conn.Exec(ctx, `INSERT INTO items VALUES ($1)`, id); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	// The zombie: a heartbeat chained after the stream's last message,
	// published as a relay would, three times while the writer runs.
	st := func() jetstream.Stream {
		for {
			st, err := js.Stream(ctx, StreamName(sysID, slot))
			if err == nil {
				return st
			}
			if ctx.Err() != nil {
				t.Fatal("the relay never made its stream")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	zombies := 0
	for zombies < 3 {
		time.Sleep(150 * time.Millisecond)
		raw, err := st.GetLastMsgForSubject(ctx, Subject(sysID, slot))
		if err != nil {
			continue // nothing on the bus yet
		}
		last, err := DecodeMessage(raw.Data, nil)
		if err != nil {
			t.Fatal(err)
		}
		z := &Message{Epoch: last.Epoch, Prev: last.Pos(), Events: []Event{{Beat: &change.Heartbeat{LSN: last.Pos().LSN + 1, Seq: 1 << 40}}}}
		msg := nats.NewMsg(Subject(sysID, slot))
		msg.Data = AppendMessage(nil, z)
		if _, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(z.MsgID()), jetstream.WithExpectLastMsgID(raw.Header.Get(jetstream.MsgIDHeader))); err != nil {
			continue // the relay wrote meanwhile: try again
		}
		zombies++
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	var endS string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&endS); err != nil {
		t.Fatal(err)
	}
	end, _ := change.ParseLSN(endS)
	for r.Stats().Acked < end {
		if ctx.Err() != nil {
			t.Fatalf("the relay never acknowledged %v (at %v)", end, r.Stats().Acked)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	ms := readStream(t, js, sysID, slot)
	var c chain
	seen := map[int]int{}
	for i, m := range ms {
		if m.Epoch != ms[0].Epoch {
			t.Fatalf("message %d starts epoch %d: a refused publish must not cost the replicas a new epoch", i, m.Epoch)
		}
		evs, err := c.accept(m)
		if err != nil {
			t.Fatalf("message %d of %d: %v", i, len(ms), err)
		}
		for _, e := range evs {
			if e.Txn == nil {
				continue
			}
			for _, ch := range e.Txn.Changes {
				if ch.Op == change.OpInsert {
					id, _ := strconv.Atoi(ch.New[0].String())
					seen[id]++
				}
			}
		}
	}
	for id := 1; id <= rows; id++ {
		if seen[id] != 1 {
			t.Fatalf("row %d is on the bus %d times, want exactly once", id, seen[id])
		}
	}
	stats := r.Stats()
	if stats.Sessions < 2 {
		t.Fatalf("the relay ran %d session(s): the zombie's messages never fenced it", stats.Sessions)
	}
	t.Logf("%d messages, %d zombie messages, %d relay sessions", len(ms), zombies, stats.Sessions)
}

// dbWith is a new database, a connection to it (closed at the end) and
// the schema made.
func dbWith(t *testing.T, ctx context.Context, schema string) (*pgtest.DB, *pgx.Conn) {
	t.Helper()
	db := pgtest.NewDB(t)
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, schema); err != nil {
		t.Fatal(err)
	}
	return db, conn
}

// runOpened runs r until ctx ends and returns once its first session has
// opened the slot; Run's result comes on the channel.
func runOpened(t *testing.T, ctx context.Context, r *Relay) chan error {
	t.Helper()
	opened := make(chan struct{}, 1)
	r.Opened = func() {
		select {
		case opened <- struct{}{}:
		default:
		}
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case <-opened:
	case err := <-done:
		t.Fatalf("relay stopped before opening: %v", err)
	}
	return done
}
