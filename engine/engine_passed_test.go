package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
	"github.com/jackc/pgx/v5"
)

// TestPassedWindowsWhole: a transaction that shrinks ORDER BY ... LIMIT
// windows below the rows they hold makes each re-read its rows; the
// position the engine acknowledges (what the s2s server's lag frames
// vouch for: every answer exact there) must not pass the transaction
// until every such window is whole again. It did: the refills' deltas
// came after the acknowledgement of the next heartbeat, and at the first
// lag frame past a DELETE 6-118 of 160 windows still held deleted rows
// (issue 10 item 15; the repro is the issue's).
func TestPassedWindowsWhole(t *testing.T) {
	var mu sync.Mutex
	var after change.LSN // the DELETE's commit is before it; 0 until known
	var snaps map[int][][]*string
	var snapErr error
	var recs []*recorder
	types := change.TypeResolver(nil)
	tap := &ackTap{}
	tap.onAck = func(lsn change.LSN) {
		mu.Lock()
		defer mu.Unlock()
		if after == 0 || lsn < after || snaps != nil {
			return
		}
		// The first position acknowledged past the DELETE: what every
		// client holds now must be PostgreSQL's answer after it.
		snaps = map[int][][]*string{}
		for i, rec := range recs {
			got, err := rec.result(true, types)
			if err != nil && snapErr == nil {
				snapErr = fmt.Errorf("subscription %d: %w", i, err)
			}
			snaps[i] = got
		}
	}
	r := newRig(t, `CREATE TABLE w (id int4 PRIMARY KEY, k int4, d date, v text);
INSERT INTO w SELECT i, i, date '2024-01-01' + i % 7, 'v' || i FROM generate_series(1, 300) i;
CREATE TABLE gate (id int4 PRIMARY KEY);`, Config{Source: tap, ReadConcurrency: 1, CatalogCheckInterval: -1})
	types = r.reader.Types()
	ctx := context.Background()
	type sub struct {
		sql   string
		binds []query.Bind
	}
	var subs []sub
	for i := range 160 {
		sql := "SELECT id, k, d FROM w WHERE k > $1 ORDER BY d, k, id LIMIT $2"
		if i%2 == 1 {
			sql = "SELECT id, k FROM w WHERE k > $1 ORDER BY k, id LIMIT $2"
		}
		binds := []query.Bind{{OID: 23, Data: []byte(fmt.Sprint(i % 4))}, {OID: 20, Data: []byte(fmt.Sprint(5 + i%60))}}
		_, rec := r.subscribe(sql, binds...)
		mu.Lock()
		recs = append(recs, rec)
		mu.Unlock()
		subs = append(subs, sub{sql, binds})
	}
	waitAccepted(t, recs...)
	r.quiesce(60 * time.Second)

	// The engine's one read worker waits on a lock while the DELETE's
	// refills queue behind it, so they cannot land before the next
	// heartbeats come.
	lock, err := r.conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, "LOCK TABLE gate IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	gateRec := newRecorder()
	if _, refusal, err := r.e.Subscribe(ctx, "SELECT id FROM gate", nil, ModeRows, gateRec); err != nil || refusal != nil {
		t.Fatalf("subscribe gate: %v %v", refusal, err)
	}
	// A connection of its own: r.conn holds the lock.
	conn, err := pgx.Connect(ctx, r.db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var end string
	if _, err := conn.Exec(ctx, "DELETE FROM w WHERE k <= 150"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&end); err != nil {
		t.Fatal(err)
	}
	endLSN, err := change.ParseLSN(end)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	after = endLSN
	mu.Unlock()
	// Heartbeats past the DELETE reach the core while the refills wait.
	waitFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		st, err := r.e.Stats(ctx)
		if err != nil {
			return err
		}
		if st.Position <= endLSN {
			return fmt.Errorf("engine at %s, DELETE before %s", st.Position, endLSN)
		}
		return nil
	})
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, 5*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if snaps == nil {
			return fmt.Errorf("no position past the DELETE (%s) acknowledged", endLSN)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if snapErr != nil {
		t.Fatal(snapErr)
	}
	stale := 0
	var first error
	for i, s := range subs {
		ref := "SELECT id, k, d, dense_rank() OVER (ORDER BY d, k, id) FROM w WHERE k > $1 ORDER BY d, k, id LIMIT $2"
		if i%2 == 1 {
			ref = "SELECT id, k, dense_rank() OVER (ORDER BY k, id) FROM w WHERE k > $1 ORDER BY k, id LIMIT $2"
		}
		want, err := r.reference(ref, s.binds)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameRows(snaps[i], want, true); err != nil {
			stale++
			if first == nil {
				first = fmt.Errorf("subscription %d (%s): %w", i, s.sql, err)
			}
		}
	}
	if stale > 0 {
		t.Fatalf("at the first position acknowledged past the DELETE, %d of %d windows were not PostgreSQL's answer; the first: %v", stale, len(subs), first)
	}
}
