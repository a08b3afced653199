package clustertest

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/internal/servetest"
	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/wire"
)

// TestBoundedLoad: two real engines on one database, the first taking at
// most 4 subscriptions a connection. A read cache with one socket per
// engine reads 40 keys; about half have the first engine as their home,
// and those it refuses too_many_subscriptions go to their next choice
// (docs/scale-out.md, "Bounded load") instead of being read from
// PostgreSQL: every key ends up served from memory with PostgreSQL's
// value, 4 of them on the first engine. Without the spill the refused keys
// stay refused and are never served from memory.
func TestBoundedLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := pgtest.NewDB(t)
	db.Exec(t, `CREATE TABLE items (id int PRIMARY KEY, v text); INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 40) g`)
	sysID := db.SystemID(t)
	const limit = 4
	small := servetest.Start(t, servetest.Options{DSN: db.DSN, Slot: servetest.SlotFor("bl_a_", db.Name),
		Env: []string{"FRESHET_MAX_SUBSCRIPTIONS=" + strconv.Itoa(limit)}})
	big := servetest.Start(t, servetest.Options{DSN: db.DSN, Slot: servetest.SlotFor("bl_b_", db.Name)})
	cfg := readcache.DefaultConfig()
	cfg.URL = small.URL + "," + big.URL
	cfg.Sockets = 1
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := readcache.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Verify(readcache.Identity{SystemIdentifier: sysID, Database: db.Name}, nil)

	const sql = "SELECT v FROM items WHERE id = $1"
	read := func(id int) (*readcache.Result, readcache.Reason) {
		s := strconv.Itoa(id)
		return c.Read(ctx, sql, []wire.Param{{OID: 23, Value: &s}})
	}
	var missing []int
	for deadline := time.Now().Add(60 * time.Second); ; {
		missing = missing[:0]
		for id := 1; id <= 40; id++ {
			res, why := read(id)
			if why != readcache.ReasonNone || res == nil {
				missing = append(missing, id)
				continue
			}
			if len(res.Rows) != 1 || string(res.Rows[0][0]) != "v"+strconv.Itoa(id) {
				t.Fatalf("key %d: rows %q, want PostgreSQL's v%d", id, res.Rows, id)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("keys %v never served from memory (spilt %d; stats %+v)", missing, c.Spilt(), c.Stats())
		}
		time.Sleep(100 * time.Millisecond)
	}
	onSmall := 0
	for id := 1; id <= 40; id++ {
		s := strconv.Itoa(id)
		if c.EngineOf(readcache.Key(sql, []wire.Param{{OID: 23, Value: &s}})) == small.URL {
			onSmall++
		}
	}
	if onSmall != limit || c.Spilt() == 0 {
		t.Fatalf("%d keys on the limited engine (want %d), %d spilt (want some)", onSmall, limit, c.Spilt())
	}
	t.Logf("40 keys served from memory: %d on the limited engine, %d sent on to their next choice", onSmall, c.Spilt())
}
