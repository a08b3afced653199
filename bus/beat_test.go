package bus

import (
	"context"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/pgwal"
	"github.com/jackc/pgx/v5"
)

// TestBeatThroughRelay: with the relay's heartbeats an hour apart, a
// replica's Beat still brings a heartbeat through the bus, past the
// database's WAL position at the time of the request (what a hydration
// read waits for).
func TestBeatThroughRelay(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var sysID, dbName string
	if err := conn.QueryRow(ctx, `SELECT system_identifier::text, current_database() FROM pg_control_system()`).Scan(&sysID, &dbName); err != nil {
		t.Fatal(err)
	}
	s := runBus(t, t.TempDir(), 0)
	nc, _ := busConn(t, s)
	const slot = "beat_relay"
	cfg := pgwal.DefaultConfig()
	cfg.DSN, cfg.Slot, cfg.Publication, cfg.Create = db.DSN, slot, slot, true
	cfg.HeartbeatInterval = time.Hour
	r, err := NewRelay(RelayConfig{Stream: cfg, Conn: nc})
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
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() { stop(); <-done }()
	select {
	case <-opened:
	case err := <-done:
		t.Fatalf("relay stopped before opening: %v", err)
	case <-ctx.Done():
		t.Fatal("relay did not open")
	}
	src, err := OpenSource(ctx, SourceConfig{Conn: nc, SystemID: sysID, Database: dbName, Slot: slot})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for i := range 3 {
		var at change.LSN
		var txt string
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&txt); err != nil {
			t.Fatal(err)
		}
		at, err = change.ParseLSN(txt)
		if err != nil {
			t.Fatal(err)
		}
		src.Beat()
		for {
			ev, err := src.Next(ctx)
			if err != nil {
				t.Fatalf("beat %d: no heartbeat came through the bus (the relay's own are an hour apart): %v", i, err)
			}
			if hb, ok := ev.(*change.Heartbeat); ok && hb.LSN > at {
				break
			}
		}
	}
}
