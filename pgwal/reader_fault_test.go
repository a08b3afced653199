package pgwal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// terminateWalsender ends the walsender streaming from slot, waiting until
// there is one.
func terminateWalsender(t testing.TB, conn *pgx.Conn, slot string) {
	t.Helper()
	checkFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		var ok bool
		err := conn.QueryRow(context.Background(), `SELECT coalesce(bool_or(pg_terminate_backend(active_pid)), false) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot).Scan(&ok)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("no active walsender yet")
		}
		return nil
	})
}

func TestTerminateWalsenderMidStream(t *testing.T) {
	for _, proto := range []int{1, 2} {
		t.Run("proto"+strconv.Itoa(proto), func(t *testing.T) {
			db := pgtest.NewDB(t)
			conn := connect(t, db.DSN)
			exec(t, conn, `CREATE TABLE t (id int PRIMARY KEY)`)
			var logs logBuffer
			cfg := testConfig(t, db.DSN)
			cfg.ProtoVersion = proto
			cfg.Logger = testLogger(t, &logs)
			cfg.Decoder.FragmentChanges = 10 // transactions span fragments, so a kill lands mid-transaction
			r := openReader(t, cfg)

			const txns, rows = 300, 25
			writer := connect(t, db.DSN)
			done := make(chan error, 1)
			// The writer writes quarter q+2 only after kill q, so each
			// kill lands on a stream that a live walsender is still
			// sending: the reader cannot have queued the rest of the
			// stream before the kill and end with fewer than 3 kills.
			killed := make(chan struct{}, 3)
			go func() {
				for i := 0; i < txns; i++ {
					if q := i / (txns / 4); q >= 2 && i%(txns/4) == 0 {
						select {
						case <-killed:
						case <-time.After(60 * time.Second):
							done <- fmt.Errorf("quarter %d: kill %d never came", q+1, q-1)
							return
						}
					}
					if _, err := writer.Exec(context.Background(), `INSERT INTO t SELECT g FROM generate_series($1::int, $2::int) g`, i*rows+1, (i+1)*rows); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()

			killer := connect(t, db.DSN)
			next := 1
			kills := 0
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			for next <= txns*rows {
				ev, err := r.Next(ctx)
				if err != nil {
					t.Fatalf("Next after %d rows: %v", next-1, err)
				}
				txn, ok := ev.(*change.Txn)
				if !ok {
					continue
				}
				for _, c := range userChanges(txn.Changes) {
					id, _ := strconv.Atoi(c.New[0].String())
					if id != next {
						t.Fatalf("row %d arrived where %d was due (loss or duplicate)", id, next)
					}
					next++
				}
				if txn.Last {
					r.Ack(txn.CommitLSN)
				}
				if kills < 3 && next > (kills+1)*txns*rows/4 && !txn.Last {
					// Never wait for a walsender here: while the consumer
					// waits, the reader may wait for room in its queue.
					var ok bool
					err := killer.QueryRow(ctx, `SELECT coalesce(bool_or(pg_terminate_backend(active_pid)), false) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, cfg.Slot).Scan(&ok)
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						kills++
						killed <- struct{}{}
					}
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if kills != 3 {
				t.Fatalf("terminated the walsender %d times, want 3", kills)
			}
			if !strings.Contains(logs.String(), "replication connection lost; reconnecting") {
				t.Errorf("no reconnect was logged")
			}
		})
	}
}

func TestStalledConsumerKeepsConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("stalls for several seconds")
	}
	c := startCluster(t, nil)
	admin := connect(t, c.DSN("postgres"))
	exec(t, admin, `ALTER SYSTEM SET wal_sender_timeout = '2s'`, `SELECT pg_reload_conf()`)
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		var v string
		if err := admin.QueryRow(context.Background(), `SHOW wal_sender_timeout`).Scan(&v); err != nil {
			return err
		}
		if v != "2s" {
			return fmt.Errorf("wal_sender_timeout = %s", v)
		}
		return nil
	})
	exec(t, admin, `CREATE TABLE t (id int PRIMARY KEY, pad text)`)
	var logs logBuffer
	cfg := testConfig(t, c.DSN("postgres"))
	cfg.StatusInterval = 10 * time.Second // longer than the timeout: only the stall cadence keeps us alive
	cfg.Logger = testLogger(t, &logs)
	r := openReader(t, cfg)
	// Far more than the queue and socket buffers hold, so the walsender
	// blocks writing to us while we stall.
	exec(t, admin, `INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(1, 200000) g`)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ev, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if txn, ok := ev.(*change.Txn); ok {
		n += len(userChanges(txn.Changes))
	}
	pid := walsenderPID(t, admin, cfg.Slot)
	time.Sleep(6 * time.Second) // the stall: three times wal_sender_timeout
	for n < 200000 {
		ev, err := r.Next(ctx)
		if err != nil {
			b, _ := os.ReadFile(c.LogPath())
			var st string
			_ = admin.QueryRow(context.Background(), `SELECT row_to_json(s)::text FROM pg_stat_replication s`).Scan(&st)
			t.Fatalf("Next after %d rows: %v\nserver log:\n%s\n%s", n, err, b, st)
		}
		if txn, ok := ev.(*change.Txn); ok {
			n += len(userChanges(txn.Changes))
			if txn.Last {
				r.Ack(txn.CommitLSN)
			}
		}
	}
	if got := walsenderPID(t, admin, cfg.Slot); got != pid {
		t.Errorf("walsender PID = %d after the stall, want %d (the connection was dropped)", got, pid)
	}
	if strings.Contains(logs.String(), "reconnecting") {
		t.Errorf("the reader reconnected during the stall:\n%s", logs.String())
	}
	if b, err := os.ReadFile(c.LogPath()); err == nil && strings.Contains(string(b), "terminating walsender process due to replication timeout") {
		t.Errorf("server log shows a replication timeout:\n%s", b)
	}
}

func walsenderPID(t testing.TB, conn *pgx.Conn, slot string) int {
	t.Helper()
	var pid *int
	if err := conn.QueryRow(context.Background(), `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if pid == nil {
		return 0
	}
	return *pid
}

func TestSlotHeldByAnotherProcessIsWaitedFor(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := connect(t, db.DSN)
	exec(t, conn, `CREATE PUBLICATION freshet FOR ALL TABLES`, `SELECT pg_create_logical_replication_slot('freshet', 'pgoutput')`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	holder, _, err := connectReplication(ctx, db.DSN, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := startReplication(ctx, holder, "freshet", 0, pluginOptions(1, "freshet", false)); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	cfg := testConfig(t, db.DSN)
	cfg.Logger = testLogger(t, &logs)
	type result struct {
		r   *Reader
		err error
	}
	opened := make(chan result, 1)
	go func() {
		r, err := Open(ctx, cfg)
		opened <- result{r, err}
	}()
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if !strings.Contains(logs.String(), `replication slot \"freshet\" is in use by another process (PID `) {
			return errors.New("no wait logged yet")
		}
		return nil
	})
	holder.Close(context.Background())
	res := <-opened
	if res.err != nil {
		t.Fatalf("Open after the holder left: %v", res.err)
	}
	defer res.r.Close()
	exec(t, conn, `CREATE TABLE t (id int)`, `INSERT INTO t VALUES (1)`)
	if got := userChanges(nextTxn(t, res.r, 30*time.Second).Changes); len(got) != 1 {
		t.Fatalf("got %d changes, want the insert", len(got))
	}
}

func TestSlotDroppedIsAnError(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := connect(t, db.DSN)
	exec(t, conn, `CREATE TABLE t (id int PRIMARY KEY)`)
	cfg := testConfig(t, db.DSN)
	r := openReader(t, cfg)
	exec(t, conn, `INSERT INTO t VALUES (1)`)
	nextTxn(t, r, 30*time.Second)
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		_, _ = conn.Exec(context.Background(), `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'freshet'`)
		_, err := conn.Exec(context.Background(), `SELECT pg_drop_replication_slot('freshet')`)
		return err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		_, err := r.Next(ctx)
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrSlotDropped) {
			t.Fatalf("Next = %v, want ErrSlotDropped", err)
		}
		t.Logf("Next: %v", err)
		break
	}
}

func TestSlotInvalidatedIsAnError(t *testing.T) {
	c := startCluster(t, map[string]string{"max_slot_wal_keep_size": "1MB"})
	conn := connect(t, c.DSN("postgres"))
	exec(t, conn, `CREATE TABLE t (id int PRIMARY KEY)`, `CREATE TABLE filler (pad text)`)
	cfg := testConfig(t, c.DSN("postgres"))
	cfg.Tables = []string{"t"}
	r := openReader(t, cfg)
	exec(t, conn, `INSERT INTO t VALUES (1)`)
	nextTxn(t, r, 30*time.Second) // delivered and never acknowledged: the slot stays behind
	for i := 0; i < 4; i++ {
		exec(t, conn, `INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 2000)`, `SELECT pg_switch_wal()`)
	}
	exec(t, conn, `CHECKPOINT`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		_, err := r.Next(ctx)
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrSlotInvalidated) {
			var st string
			_ = conn.QueryRow(context.Background(), `SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = 'freshet'`).Scan(&st)
			t.Fatalf("Next = %v (wal_status %q), want ErrSlotInvalidated", err, st)
		}
		t.Logf("Next: %v", err)
		break
	}
	r.Close()
	// Opening it again says the same, up front.
	err := openErr(t, cfg)
	if !errors.Is(err, ErrSlotInvalidated) {
		t.Fatalf("Open = %v, want ErrSlotInvalidated", err)
	}
}

// proxy forwards TCP connections to a server and can cut them all, as a
// network failure would.
type proxy struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	conns []net.Conn
}

func startProxy(t testing.TB, to string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, to: to}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

// cut resets every connection through the proxy.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
	p.conns = nil
}

func TestNetworkCutMidStream(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := connect(t, db.DSN)
	exec(t, conn, `CREATE TABLE t (id int PRIMARY KEY)`)
	u, err := url.Parse(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	var logs logBuffer
	cfg := testConfig(t, u.String())
	cfg.Logger = testLogger(t, &logs)
	cfg.HeartbeatInterval = 50 * time.Millisecond // heartbeats go through the proxy too
	cfg.Decoder.FragmentChanges = 10
	r := openReader(t, cfg)

	const txns, rows = 200, 25
	go func() {
		w, err := pgx.Connect(context.Background(), db.DSN)
		if err != nil {
			return
		}
		defer w.Close(context.Background())
		for i := 0; i < txns; i++ {
			if _, err := w.Exec(context.Background(), `INSERT INTO t SELECT g FROM generate_series($1::int, $2::int) g`, i*rows+1, (i+1)*rows); err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	next, cuts := 1, 0
	for next <= txns*rows {
		ev, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %d rows: %v", next-1, err)
		}
		txn, ok := ev.(*change.Txn)
		if !ok {
			continue
		}
		for _, c := range userChanges(txn.Changes) {
			if id, _ := strconv.Atoi(c.New[0].String()); id != next {
				t.Fatalf("row %d arrived where %d was due (loss or duplicate)", id, next)
			}
			next++
		}
		if txn.Last {
			r.Ack(txn.CommitLSN)
		}
		if cuts < 2 && next > (cuts+1)*txns*rows/3 && !txn.Last {
			p.cut()
			cuts++
		}
	}
	if cuts != 2 {
		t.Fatalf("cut the network %d times, want 2", cuts)
	}
	if !strings.Contains(logs.String(), "replication connection lost; reconnecting") {
		t.Errorf("no reconnect was logged")
	}
}
