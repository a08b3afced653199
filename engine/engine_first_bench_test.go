package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/pgwal"
	"github.com/freshetdb/freshet/query"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// noBeat hides a Source's Beat: the engine then waits for the stream's own
// heartbeats, as it did before it asked for one (the "cadence" column).
type noBeat struct{ Source }

// acceptSink signals the first Accepted (or Refused) it is sent.
type acceptSink struct {
	once sync.Once
	done chan Output
}

func (s *acceptSink) Send(out Output) {
	if out.Kind == OutputAccepted || out.Kind == OutputRefused {
		s.once.Do(func() { s.done <- out })
	}
}

// firstRig is one database followed by one engine through its own slot,
// with heartbeats at the production cadence (500 ms).
type firstRig struct {
	pool *pgxpool.Pool
	e    *Engine
}

func newFirstRig(t *testing.T, setup string, beat bool, heartbeat time.Duration) *firstRig {
	t.Helper()
	ctx := context.Background()
	db := pgtest.NewDB(t)
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, setup); err != nil {
		t.Fatalf("setup: %v", err)
	}
	conn.Close(ctx)
	rcfg := pgwal.DefaultConfig()
	rcfg.DSN, rcfg.Create = db.DSN, true
	rcfg.Slot = "first_" + slotName.ReplaceAllString(strings.ToLower(db.Name), "_")
	if len(rcfg.Slot) > 60 {
		rcfg.Slot = rcfg.Slot[:60]
	}
	rcfg.Publication = rcfg.Slot
	rcfg.Logger = quietLogger()
	rcfg.HeartbeatInterval = heartbeat
	rd, err := pgwal.Open(ctx, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	var src Source = rd
	if !beat {
		src = noBeat{rd}
	}
	e, err := Open(ctx, Config{Source: src, ReadDSN: db.DSN, Types: rd.Types(), Logger: quietLogger()})
	if err != nil {
		rd.Close()
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Close()
		e.Close()
		rd.Close()
	})
	return &firstRig{pool: pool, e: e}
}

// firstAnswer subscribes and returns the time to the Accepted output.
func (r *firstRig) firstAnswer(t *testing.T, sql string, bind int) time.Duration {
	ctx := context.Background()
	sink := &acceptSink{done: make(chan Output, 1)}
	start := time.Now()
	id, ref, err := r.e.Subscribe(ctx, sql, []query.Bind{{Data: []byte(fmt.Sprint(bind))}}, ModeRows, sink)
	if err != nil || ref != nil {
		t.Fatalf("subscribe %s: %v %v", sql, err, ref)
	}
	var out Output
	select {
	case out = <-sink.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("no answer for %s", sql)
	}
	d := time.Since(start)
	if out.Kind != OutputAccepted {
		t.Fatalf("%s: %s %s", sql, out.Code, out.Reason)
	}
	if err := r.e.Unsubscribe(ctx, id); err != nil {
		t.Fatal(err)
	}
	return d
}

// engineRead runs the read the engine runs for sql (the core's request,
// rendered) with the engine's reader, outside the engine: the snapshot,
// the rows decoded and encoded as the core holds them. It returns the
// time it took.
func (r *firstRig) engineRead(t *testing.T, sql string, bind int) time.Duration {
	ctx := context.Background()
	plan, ref, err := query.Compile(ctx, sql, []query.Bind{{Data: []byte(fmt.Sprint(bind))}}, r.e.cfg.Query)
	if err != nil || ref != nil {
		t.Fatalf("compile %s: %v %v", sql, err, ref)
	}
	c := NewCore(r.e.coreOpts)
	c.Subscribe(1, plan, ModeRows)
	req := c.Ready().Reads[0]
	start := time.Now()
	req.SQL = req.ReadSQL()
	if _, _, _, _, err := r.e.reader.readFor(ctx, req, appliedMark{}); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// pgRead runs sql on PostgreSQL and returns the time to its last row,
// every value decoded.
func (r *firstRig) pgRead(t *testing.T, sql string, bind int) time.Duration {
	ctx := context.Background()
	start := time.Now()
	rows, err := r.pool.Query(ctx, sql, bind)
	if err != nil {
		t.Fatal(err)
	}
	// Decoded, as an application would scan them.
	for rows.Next() {
		if _, err := rows.Values(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// TestFirstAnswerWithoutHeartbeat: with heartbeats every hour, a
// subscription on a quiet database is still answered, because the engine
// asks the reader for a heartbeat once its read has its snapshot (without
// that, nothing would move the stream past the read's position for an
// hour). The answer equals PostgreSQL's.
func TestFirstAnswerWithoutHeartbeat(t *testing.T) {
	r := newFirstRig(t, `CREATE TABLE items (id int8 PRIMARY KEY, grp int4 NOT NULL, title text NOT NULL);
INSERT INTO items SELECT g, g % 3, 'item ' || g FROM generate_series(1, 100) g`, true, time.Hour)
	for bind := range 3 {
		sink := &acceptSink{done: make(chan Output, 1)}
		if _, ref, err := r.e.Subscribe(context.Background(), "SELECT id, title FROM items WHERE grp = $1 ORDER BY id LIMIT 5", []query.Bind{{Data: []byte(fmt.Sprint(bind))}}, ModeRows, sink); err != nil || ref != nil {
			t.Fatalf("subscribe: %v %v", err, ref)
		}
		select {
		case out := <-sink.done:
			if out.Kind != OutputAccepted {
				t.Fatalf("grp %d: %s %s", bind, out.Code, out.Reason)
			}
			var got []string
			for _, row := range out.Rows {
				got = append(got, fmt.Sprint(row.Values))
			}
			var want []string
			rows, err := r.pool.Query(context.Background(), "SELECT id, title FROM items WHERE grp = $1 ORDER BY id LIMIT 5", bind)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id int64
				var title string
				if err := rows.Scan(&id, &title); err != nil {
					t.Fatal(err)
				}
				want = append(want, fmt.Sprint([]any{id, title}))
			}
			if strings.Join(got, ";") != strings.Join(want, ";") {
				t.Errorf("grp %d: accepted %v, want %v", bind, got, want)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("grp %d: no answer: nothing moved the stream past the read (the hourly heartbeat is not due)", bind)
		}
	}
}

// TestBenchFirstAnswer measures the time from Subscribe to Accepted for a
// 50-row window and a 5,000-row result, with the database idle and under
// writes (FRESHET_FIRST_BENCH_RATE transactions per second, default 100,
// each updating one row of the table read), against the same read from
// PostgreSQL: "cadence" is an engine that waits for the stream's own
// heartbeats (every 500 ms, as before it asked for one), "beat" one that
// asks for a heartbeat when a read has its snapshot; "the engine's read
// alone" is the same read by the engine's reader outside the engine
// (snapshot, rows decoded and encoded for the core). Each on its own
// database of one cluster, interleaved in one run. Not a test: it runs
// only with FRESHET_FIRST_BENCH=1 (docs/benchmarks.md).
func TestBenchFirstAnswer(t *testing.T) {
	if os.Getenv("FRESHET_FIRST_BENCH") == "" {
		t.Skip("set FRESHET_FIRST_BENCH=1 to run the first-answer benchmark")
	}
	rounds := 20
	if n, err := fmt.Sscan(os.Getenv("FRESHET_FIRST_BENCH_ROUNDS"), &rounds); n != 1 || err != nil {
		rounds = 20
	}
	rate := 100
	if n, err := fmt.Sscan(os.Getenv("FRESHET_FIRST_BENCH_RATE"), &rate); n != 1 || err != nil {
		rate = 100
	}
	// Groups 1-10 hold 5,000 rows each; a 50-row window reads the first
	// 50 of one.
	const setup = `CREATE TABLE items (id int8 PRIMARY KEY, grp int4 NOT NULL, title text NOT NULL, price numeric(10,2), at timestamptz);
INSERT INTO items SELECT g, 1 + g % 10, 'item number ' || g, g % 1000 / 7.0, '2026-01-01'::timestamptz + g * interval '1 minute' FROM generate_series(1, 50000) g;
CREATE INDEX ON items (grp, id); ANALYZE items`
	rigs := map[string]*firstRig{"cadence": newFirstRig(t, setup, false, 500*time.Millisecond), "beat": newFirstRig(t, setup, true, 500*time.Millisecond)}
	queries := []struct{ name, sql string }{
		{"50-row window", "SELECT id, title, price FROM items WHERE grp = $1 ORDER BY id LIMIT 50"},
		{"5,000 rows", "SELECT id, title, price, at FROM items WHERE grp = $1"},
	}
	type cell struct{ load, query, who string }
	got := map[cell][]time.Duration{}
	for _, load := range []string{"idle", "writes"} {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		if load == "writes" {
			for _, r := range rigs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tick := time.NewTicker(time.Second / time.Duration(rate))
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
						}
						if _, err := r.pool.Exec(context.Background(), "UPDATE items SET title = 'item ' || $1 WHERE id = $1", rand.IntN(50000)+1); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
		}
		time.Sleep(time.Second)
		for i := range rounds {
			for _, q := range queries {
				bind := 1 + i%10
				got[cell{load, q.name, "postgres"}] = append(got[cell{load, q.name, "postgres"}], rigs["beat"].pgRead(t, q.sql, bind))
				got[cell{load, q.name, "read"}] = append(got[cell{load, q.name, "read"}], rigs["beat"].engineRead(t, q.sql, bind))
				for _, who := range []string{"cadence", "beat"} {
					got[cell{load, q.name, who}] = append(got[cell{load, q.name, who}], rigs[who].firstAnswer(t, q.sql, bind))
				}
			}
		}
		close(stop)
		wg.Wait()
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/1e6) }
	var b strings.Builder
	fmt.Fprintf(&b, "subscribe to accepted, ms (p50 / p90 / max of %d); writes: %d txn/s\n", rounds, rate)
	fmt.Fprintf(&b, "| load | result | PostgreSQL's read | the engine's read alone | cadence (before) | beat (after) |\n| --- | --- | ---: | ---: | ---: | ---: |\n")
	for _, load := range []string{"idle", "writes"} {
		for _, q := range queries {
			fmt.Fprintf(&b, "| %s | %s |", load, q.name)
			for _, who := range []string{"postgres", "read", "cadence", "beat"} {
				ds := got[cell{load, q.name, who}]
				slices.Sort(ds)
				fmt.Fprintf(&b, " %s / %s / %s |", ms(ds[len(ds)/2]), ms(ds[len(ds)*9/10]), ms(ds[len(ds)-1]))
			}
			b.WriteString("\n")
		}
	}
	t.Log("\n" + b.String())
}
