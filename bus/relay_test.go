package bus

import (
	"context"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/pgwal"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// readStream returns every message of the stream of (sysID, slot), in
// order, from its first.
func readStream(t *testing.T, js jetstream.JetStream, sysID, slot string) []*Message {
	t.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, StreamName(sysID, slot))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*Message
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		raw, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		m, err := DecodeMessage(raw.Data, nil)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

// TestRelayRestarts runs a relay on a real slot and a real bus, stops it
// at random moments under a writer (publishes in flight, large
// transactions cut between fragments) and starts it again with other
// fragment sizes: the stream must hold every committed transaction exactly
// once, in commit order, on one unbroken chain.
func TestRelayRestarts(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE TABLE items (id int PRIMARY KEY, txn int NOT NULL, v text)`); err != nil {
		t.Fatal(err)
	}
	var sysID string
	if err := conn.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&sysID); err != nil {
		t.Fatal(err)
	}
	s := runBus(t, t.TempDir(), 0)
	nc, js := busConn(t, s)
	slot := "relay_restarts"

	var openResumes int64
	run := func(ctx context.Context, fragChanges int) (*Relay, chan error) {
		cfg := pgwal.DefaultConfig()
		cfg.DSN, cfg.Slot, cfg.Publication, cfg.Create = db.DSN, slot, slot, true
		cfg.HeartbeatInterval = 50 * time.Millisecond
		cfg.Decoder.FragmentChanges = fragChanges
		set := DefaultStreamSettings()
		set.MaxMsgSize = 64 << 10 // large transactions span messages
		r, err := NewRelay(RelayConfig{Stream: cfg, Conn: nc, Settings: set, MaxPending: 8})
		if err != nil {
			t.Fatal(err)
		}
		inner := runOpened(t, ctx, r)
		done := make(chan error, 1)
		go func() { err := <-inner; openResumes += r.openResumes.Load(); done <- err }()
		return r, done
	}

	// The writer: small and large transactions, each row naming its
	// transaction.
	const txns = 400
	wrote := make(chan error, 1)
	rctx, stop := context.WithCancel(ctx)
	_, done := run(rctx, 5)
	go func() {
		id := 0
		for i := range txns {
			n, v := 1, "x"
			if i%5 == 3 {
				n, v = 40+i%7, strings.Repeat("y", 3000)
			}
			b := &pgx.Batch{}
			b.Queue("BEGIN")
			for range n {
				id++
				b.Queue(`INSERT INTO items VALUES ($1, $2, $3)`, id, i, v)
			}
			b.Queue("COMMIT")
			if err := conn.SendBatch(ctx, b).Close(); err != nil {
				wrote <- err
				return
			}
			time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		}
		wrote <- nil
	}()
	// Stop and start the relay while the writer runs.
	sizes := []int{7, 3, 11, 4, 2}
	for i := 0; ; i++ {
		time.Sleep(time.Duration(20+rand.IntN(100)) * time.Millisecond)
		stop()
		if err := <-done; err != nil {
			t.Fatalf("relay run %d: %v", i, err)
		}
		rctx, stop = context.WithCancel(ctx)
		_, done = run(rctx, sizes[i%len(sizes)])
		if i >= 12 {
			break
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	var end change.LSN
	var endS string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&endS); err != nil {
		t.Fatal(err)
	}
	end, _ = change.ParseLSN(endS)
	// Wait until the bus holds a heartbeat past the writer's end.
	for {
		ms := readStream(t, js, sysID, slot)
		if len(ms) > 0 && ms[len(ms)-1].Pos().LSN > end {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the bus never reached %v", end)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-done

	// Audit the stream.
	ms := readStream(t, js, sysID, slot)
	var c chain
	rows := map[int]int{}  // id -> times seen
	txnOf := map[int]int{} // writer's transaction -> commit LSN index
	var commits []change.LSN
	open := -1
	for i, m := range ms {
		if i > 0 && m.Epoch != ms[0].Epoch {
			t.Fatalf("message %d starts epoch %d: the relay's restarts must not break the chain", i, m.Epoch)
		}
		evs, err := c.accept(m)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if len(evs) != len(m.Events) && i > 0 {
			t.Fatalf("message %d partly dropped", i)
		}
		for _, e := range evs {
			if e.Txn == nil {
				continue
			}
			if e.Txn.Fragment == 0 {
				if open >= 0 {
					t.Fatalf("transaction %d starts before the one before it ended", len(commits))
				}
				commits = append(commits, e.Txn.CommitLSN)
				open = len(commits) - 1
			}
			for _, ch := range e.Txn.Changes {
				if ch.Op != change.OpInsert {
					continue
				}
				id, _ := strconv.Atoi(ch.New[0].String())
				w, _ := strconv.Atoi(ch.New[1].String())
				rows[id]++
				if k, ok := txnOf[w]; ok && k != open {
					t.Fatalf("writer transaction %d spread over two bus transactions", w)
				}
				txnOf[w] = open
			}
			if e.Txn.Last {
				open = -1
			}
		}
	}
	if !sort.SliceIsSorted(commits, func(i, j int) bool { return commits[i] < commits[j] }) {
		t.Fatalf("commit LSNs out of order")
	}
	var total int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM items`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	for id := 1; id <= total; id++ {
		if rows[id] != 1 {
			t.Fatalf("row %d is on the bus %d times, want exactly once", id, rows[id])
		}
	}
	if len(rows) != total || len(txnOf) != txns {
		t.Fatalf("bus holds %d rows of %d transactions, want %d of %d", len(rows), len(txnOf), total, txns)
	}
	t.Logf("%d messages, %d transactions, %d rows; %d restarts continued a transaction cut on the bus", len(ms), len(commits), total, openResumes)
}
