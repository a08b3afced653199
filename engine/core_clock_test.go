package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
)

// clockTemplates are the clocked subscriptions TestCoreClockRandom draws.
var clockTemplates = []string{
	"SELECT id, s FROM tk WHERE ts > now() - interval '%[1]d minutes'",
	"SELECT id FROM tk WHERE ts <= now() + interval '%[2]d minutes' AND s > %[3]d",
	"SELECT id, ts FROM tk WHERE ts BETWEEN now() - interval '%[1]d minutes' AND now()",
	"SELECT count(*) FROM tk WHERE ts < CURRENT_TIMESTAMP",
	"SELECT id FROM tk WHERE d < CURRENT_DATE",
	"SELECT id FROM tk WHERE d >= CURRENT_DATE - %[3]d AND d <= current_date",
	"SELECT s, count(*), max(ts) FROM tk WHERE ts >= now() - interval '%[1]d minutes' AND ts < now() GROUP BY s",
	"SELECT id FROM tk WHERE ts > now() - interval '%[1]d minutes' ORDER BY ts DESC, id LIMIT %[2]d",
	"SELECT id FROM tk WHERE d > CURRENT_DATE - interval '%[2]d hours' ORDER BY id LIMIT %[2]d OFFSET 1",
}

// TestCoreClockRandom drives clocked subscriptions with random writes,
// reads landing late and a clock that advances in random steps (and
// sometimes stands still or steps back), checking every live
// subscription against the brute-force oracle at the harness's clock
// after every step (the harness verifies each output).
func TestCoreClockRandom(t *testing.T) {
	seeds := 12
	if raceEnabled || testing.Short() {
		seeds = 6
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runClockRandom(t, uint64(seed), 300) })
	}
}

func runClockRandom(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 13))
	h := newHarness(t, CoreOptions{WindowMargin: 1 + rng.IntN(3)})
	h.createTable("tk", []string{"id int4 pk", "s int4", "ts timestamptz", "d date"})
	clock := int64(849_657_600_000_000) // 2026-12-04 00:00 UTC
	minute := int64(60_000_000)
	fmtTS := func(us int64) string {
		s, err := change.FormatOID(change.OIDTimestamptz, change.Timestamp{Micros: us}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s[:10] + "T" + s[11:]
	}
	fmtDate := func(us int64) string { return fmtTS(us)[:10] }
	h.setClock(change.Timestamp{Micros: clock})
	var subs []SubID
	var next SubID
	moved := 0
	for step := 0; step < steps; step++ {
		switch op := rng.IntN(12); {
		case op < 2:
			next++
			sql := strings.NewReplacer("%[1]d", fmt.Sprint(5+rng.IntN(60)), "%[2]d", fmt.Sprint(1+rng.IntN(4)),
				"%[3]d", fmt.Sprint(rng.IntN(3))).Replace(clockTemplates[rng.IntN(len(clockTemplates))])
			h.subscribe(next, sql, ModeRows)
			subs = append(subs, next)
		case op < 3 && len(subs) > 3:
			i := rng.IntN(len(subs))
			h.unsubscribe(subs[i])
			subs = slices.Delete(subs, i, i+1)
		case op < 7:
			for w := rng.IntN(3); w >= 0; w-- {
				id := fmt.Sprint(rng.IntN(15))
				ts, d := fmtTS(clock+rng.Int64N(180*minute)-90*minute), fmtDate(clock+rng.Int64N(5*1440*minute)-2*1440*minute)
				if rng.IntN(6) == 0 {
					ts = "null"
				}
				if rng.IntN(6) == 0 {
					d = "null"
				}
				switch rng.IntN(3) {
				case 0:
					h.delete("tk", id)
				default:
					st := h.now()
					for _, ch := range h.pending {
						h.applyTo(st, ch)
					}
					ht := h.tables["tk"]
					if _, ok := st["tk"][h.rowKey(ht, toHStr([]string{id}, 4))]; ok {
						h.update("tk", nil, id, fmt.Sprint(rng.IntN(4)), ts, d)
					} else {
						h.insert("tk", id, fmt.Sprint(rng.IntN(4)), ts, d)
					}
				}
			}
			h.commit(0)
		case op < 9:
			if len(h.readIDs) > 0 {
				h.answer(h.readIDs[rng.IntN(len(h.readIDs))], h.lsn+1)
			}
		default:
			step := rng.Int64N(30 * minute)
			switch rng.IntN(8) {
			case 0:
				step = 0
			case 1:
				step = -rng.Int64N(10 * minute) // stepped back: ignored
			case 2:
				step = rng.Int64N(2 * 1440 * minute) // days at once
			}
			before := len(h.out.String())
			h.setClock(change.Timestamp{Micros: clock + step})
			if step > 0 {
				clock += step
			}
			if len(h.out.String()) > before {
				moved++
			}
		}
	}
	h.answerAll()
	if moved == 0 {
		t.Errorf("the clock moved no row in %d steps", steps)
	}
}

// BenchmarkClockTick measures one Clock call on a view over 100,000 rows
// whose timestamps are 1 ms apart, the clock advancing 1 ms a call: about
// one row leaves (or enters) per call, which the core finds at the top of
// its heap and settles into one delta. ns/op is the whole call and the
// delta out; it does not grow with the rows held.
func BenchmarkClockTick(b *testing.B) {
	for _, q := range []struct{ name, sql string }{
		{"leave", "SELECT id, s FROM tk WHERE ts > now() - interval '10 seconds'"},
		{"enter", "SELECT id, s FROM tk WHERE ts <= now()"},
		{"count_between", "SELECT count(*) FROM tk WHERE ts BETWEEN now() - interval '10 seconds' AND now()"},
		{"window", "SELECT id FROM tk WHERE ts > now() - interval '10 seconds' ORDER BY ts DESC LIMIT 20"},
	} {
		b.Run(q.name, func(b *testing.B) {
			const rows = 100_000
			h := newHarness(b, CoreOptions{})
			h.check = false
			h.createTable("tk", []string{"id int4 pk", "s int4", "ts timestamptz", "d date"})
			base := int64(849_657_600_000_000)
			for i := range rows {
				s, _ := change.FormatOID(change.OIDTimestamptz, change.Timestamp{Micros: base + int64(i)*1000}, nil)
				h.insert("tk", fmt.Sprint(i), "1", strings.Replace(s, " ", "T", 1), "null")
			}
			h.commit(0)
			h.setClock(change.Timestamp{Micros: base + 10_000_000})
			h.subscribe(1, q.sql, ModeRows)
			h.answerAll()
			h.out.Reset()
			clock := base + 10_000_000
			b.ResetTimer()
			for i := range b.N {
				clock += 1000
				h.core.Clock(h.lsn+change.LSN(i+1), change.Timestamp{Micros: clock})
				h.core.Ready()
			}
		})
	}
}

// TestBenchClockPostgres times BenchmarkClockTick's queries on PostgreSQL
// over the same 100,000 rows (timestamps 1 ms apart around now(), with an
// index on them): what answering each again at every heartbeat would cost,
// the peer of one Clock call. Set FRESHET_CLOCK_BENCH=1.
func TestBenchClockPostgres(t *testing.T) {
	if os.Getenv("FRESHET_CLOCK_BENCH") == "" {
		t.Skip("set FRESHET_CLOCK_BENCH=1 to time the clocked queries on PostgreSQL")
	}
	pool := newPool(t)
	ctx := context.Background()
	for _, sql := range []string{
		"CREATE TABLE tk (id int4 PRIMARY KEY, s int4, ts timestamptz, d date)",
		"INSERT INTO tk SELECT g, 1, now() - interval '10 seconds' + g * interval '1 millisecond', NULL FROM generate_series(0, 99999) g",
		"CREATE INDEX ON tk (ts)",
		"VACUUM ANALYZE tk",
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, sql := range []string{
		"SELECT id, s FROM tk WHERE ts > now() - interval '10 seconds'",
		"SELECT id, s FROM tk WHERE ts <= now()",
		"SELECT count(*) FROM tk WHERE ts BETWEEN now() - interval '10 seconds' AND now()",
		"SELECT id FROM tk WHERE ts > now() - interval '10 seconds' ORDER BY ts DESC LIMIT 20",
	} {
		var times []time.Duration
		for range 7 {
			start := time.Now()
			rows, err := pool.Query(ctx, sql)
			if err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
			for rows.Next() {
			}
			if rows.Err() != nil {
				t.Fatalf("%s: %v", sql, rows.Err())
			}
			rows.Close()
			times = append(times, time.Since(start))
		}
		slices.Sort(times)
		t.Logf("median %v (min %v): %s", times[3], times[0], sql)
	}
}
