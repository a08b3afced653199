package query

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
)

// TestClockThresholdPostgres computes ClockBound thresholds at random
// clocks (month ends, leap days, far past and future) with random
// constants and compares each with PostgreSQL's own arithmetic on the
// same expression with the clock as a literal (TimeZone UTC), errors
// included.
func TestClockThresholdPostgres(t *testing.T) {
	conn, cat := testDB(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Catalog = cat
	rng := rand.New(rand.NewPCG(13, 2026))
	bases := []string{"now()", "CURRENT_TIMESTAMP", "LOCALTIMESTAMP", "CURRENT_DATE", "transaction_timestamp()"}
	ivs := func() string {
		switch rng.IntN(4) {
		case 0:
			return fmt.Sprintf("interval '%d mons'", rng.IntN(61)-30)
		case 1:
			return fmt.Sprintf("interval '%d days %d hours'", rng.IntN(801)-400, rng.IntN(49)-24)
		case 2:
			return fmt.Sprintf("interval '%d years %d mons %d days %d microseconds'", rng.IntN(7)-3, rng.IntN(25)-12, rng.IntN(63)-31, rng.Int64N(1e11)-5e10)
		}
		return fmt.Sprintf("interval '%d years'", []int{300000, -300000, 290000, 1}[rng.IntN(4)])
	}
	var errs, n int
	for i := 0; i < 400; i++ {
		base := bases[rng.IntN(len(bases))]
		expr := base
		for j := rng.IntN(3); j > 0; j-- {
			op := []string{" + ", " - "}[rng.IntN(2)]
			if base == "CURRENT_DATE" && j == 1 && rng.IntN(2) == 0 && !strings.Contains(expr, "interval") {
				expr += op + fmt.Sprint(rng.IntN(2000)-1000)
				continue
			}
			expr += op + ivs()
		}
		var clock change.Timestamp
		switch rng.IntN(4) {
		case 0: // the last days of months, around leap years
			y, m := 1996+rng.IntN(10), 1+rng.IntN(12)
			d := change.CivilDays(int64(y), m, 1) + 27 + int64(rng.IntN(4))
			clock.Micros = d*usecsPerDay + rng.Int64N(usecsPerDay)
		case 1: // far from now
			clock.Micros = rng.Int64N(2e17) - 1e17
		default: // around now
			clock.Micros = 849_657_600_000_000 + rng.Int64N(1e14) - 5e13
		}
		col := []string{"created_at", "local_ts", "born"}[rng.IntN(3)]
		sql := fmt.Sprintf("SELECT id FROM users WHERE %s > %s", col, expr)
		p, ref, err := Compile(ctx, sql, nil, opts)
		if err != nil || ref != nil {
			t.Fatalf("%s: %v %v", sql, ref, err)
		}
		got, gerr := p.Clock[0].Threshold(clock)
		lit := strings.TrimPrefix(strings.TrimPrefix(p.Render(RenderOptions{At: &clock}), "SELECT id FROM public.users WHERE "+col+" > "), "")
		q := "SELECT (extract(epoch from (" + lit + ")::timestamptz) * 1000000)::int8 - 946684800000000"
		var want int64
		werr := conn.QueryRow(ctx, q).Scan(&want)
		n++
		switch {
		case werr != nil && gerr != nil:
			errs++
		case werr != nil || gerr != nil:
			t.Errorf("%s at %d: Threshold err %v, PostgreSQL err %v (%s)", expr, clock.Micros, gerr, werr, q)
		case got.Inf != 0 || got.Micros != want:
			t.Errorf("%s at %d: Threshold %+v, PostgreSQL %d (%s)", expr, clock.Micros, got, want, q)
		}
	}
	if errs == 0 || errs == n {
		t.Errorf("%d of %d cases raised: want some, not all", errs, n)
	}
	t.Logf("%d cases, %d raised in both", n, errs)
}
