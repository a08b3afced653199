package ticketdesk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/servetest"
	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/ticketdesk"
	"github.com/freshetdb/freshet/ticketdesk/desktest"
	"gorm.io/gorm"
)

// TestVerifyUnderWriter: four readers verify every lookup while the
// writer runs its whole mix (10 s and at least 100 transactions), with an
// exact checkpoint every 2 s; no answer mismatches, and every lookup was
// routed as it expects.
func TestVerifyUnderWriter(t *testing.T) {
	d := newDesk(t)
	ctx := ctxFor(t, 3*time.Minute)
	wr := ticketdesk.NewWriter(d.direct, d.world, ticketdesk.WriterConfig{Rate: 100, Workers: 2, Seed: 7})
	run, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		// The checkpoints pause the writer, and a slow machine (the race
		// detector) writes slower: run for the time and the count.
		defer wg.Done()
		defer stop()
		start := time.Now()
		for time.Since(start) < 10*time.Second || wr.Stats().Committed < 100 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	wg.Add(1)
	go func() { defer wg.Done(); wr.Run(run) }()
	const readers = 4
	reports := make([][]ticketdesk.VerifyReport, readers)
	errs := make([]error, readers)
	// Exact checkpoints while the readers verify: every 2 s the writer
	// pauses, the checkpoint's own pool passes the WAL position, and
	// every lookup must agree at once.
	var cps []ticketdesk.CheckpointReport
	var cpErr error
	_, cg := d.pool(t)
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewSource(99))
		for len(cps) < 2 || run.Err() == nil {
			select {
			case <-ctx.Done():
				cpErr = ctx.Err()
				return
			case <-time.After(2 * time.Second):
			}
			wr.Pause()
			rep, err := ticketdesk.Checkpoint(ctx, cg, nil, ticketdesk.Lookups(), d.world, r, ticketdesk.CheckpointConfig{})
			wr.Resume()
			if err != nil {
				cpErr = err
				return
			}
			cps = append(cps, rep)
		}
	}()
	for i := range readers {
		p, g := d.pool(t) // a pool each: routes are observed by the pool's counters
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(i)))
			// Whole passes while the writer runs, at least one however
			// slow the machine is.
			for len(reports[i]) == 0 || run.Err() == nil {
				rep, err := ticketdesk.Verify(ctx, g, nil, ticketdesk.Lookups(), d.world, r, ticketdesk.VerifyConfig{RefusalCode: p.Refusals.Code})
				if err != nil {
					errs[i] = err
					return
				}
				reports[i] = append(reports[i], rep)
			}
		}()
	}
	wg.Wait()
	routes, codes := map[string]map[string]int{}, map[string]map[string]int{}
	compared := 0
	for i := range readers {
		if errs[i] != nil {
			t.Fatalf("reader %d: %v", i, errs[i])
		}
		for _, rep := range reports[i] {
			compared += rep.Compared
			for _, m := range rep.Mismatches {
				b, _ := json.Marshal(m)
				t.Errorf("mismatch: %.2000s", b)
			}
			for _, lr := range rep.Lookups {
				if routes[lr.Name] == nil {
					routes[lr.Name] = map[string]int{}
				}
				for k, n := range lr.Routes {
					routes[lr.Name][k] += n
				}
				if codes[lr.Name] == nil {
					codes[lr.Name] = map[string]int{}
				}
				for k, n := range lr.Refusals {
					codes[lr.Name][k] += n
				}
			}
		}
	}
	if cpErr != nil {
		t.Fatalf("checkpoint: %v", cpErr)
	}
	for i, cp := range cps {
		t.Logf("checkpoint %d at %s: waited %v for the cache, compared %d", i, cp.LSN, cp.Waited, cp.Compared)
		if cp.Compared != len(ticketdesk.Lookups()) {
			t.Errorf("checkpoint %d compared %d answers, want one per lookup (%d)", i, cp.Compared, len(ticketdesk.Lookups()))
		}
		for _, m := range cp.Mismatches {
			b, _ := json.Marshal(m)
			t.Errorf("checkpoint %d mismatch: %.2000s", i, b)
		}
	}
	st := wr.Stats()
	t.Logf("writer: %d committed, %d rolled back, %d errors; readers compared %d answers", st.Committed, st.RolledBack, st.Errors, compared)
	if st.Committed < 100 {
		t.Errorf("writer committed %d transactions, want at least 100", st.Committed)
	}
	// Each lookup was routed as it expects whenever the route was its
	// own business (lag or a timeout under load sends any read to
	// PostgreSQL; TestLookups pins the routes on a quiet desk).
	served := 0
	for _, l := range ticketdesk.Lookups() {
		t.Logf("%s: routes %v, refusals %v", l.Name, routes[l.Name], codes[l.Name])
		if l.Expect == ticketdesk.Refused && codes[l.Name][l.Code] == 0 {
			t.Errorf("%s: refusals %v, want some %q", l.Name, codes[l.Name], l.Code)
		}
		served += routes[l.Name][ticketdesk.RouteCache]
		wrong := readcache.ReasonRefused.String()
		if l.Expect == ticketdesk.Refused {
			wrong = ticketdesk.RouteCache
		}
		if routes[l.Name][wrong] > 0 {
			t.Errorf("%s (expects %s): routes %v", l.Name, l.Expect, routes[l.Name])
		}
	}
	if served == 0 {
		t.Errorf("no read was served from the cache")
	}
}

// testVerifyFindsMismatch compares the cache of one desk with a second
// desk seeded the same but with every title changed: Verify must report
// the lookups that show titles as mismatches, with both answers.
func testVerifyFindsMismatch(t *testing.T, d *desk) {
	_, other := seeded(t)
	ctx := ctxFor(t, time.Minute)
	if _, err := other.ExecContext(ctx, `UPDATE tickets SET title = title || ' (changed behind the cache)'`); err != nil {
		t.Fatal(err)
	}
	_, g := d.pool(t)
	var ls []ticketdesk.Lookup
	for _, name := range []string{"ticket_by_id", "org_page", "count_open"} {
		l, _ := ticketdesk.LookupByName(name)
		ls = append(ls, l)
	}
	rep, err := ticketdesk.Verify(ctx, g, gormOn(t, other), ls, d.world, rand.New(rand.NewSource(3)),
		ticketdesk.VerifyConfig{Settle: 300 * time.Millisecond, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, m := range rep.Mismatches {
		if m.Kind != "answer" || m.Cached == nil || m.Direct == nil {
			t.Errorf("mismatch %+v: want kind answer with both answers", m)
		}
		got[m.Lookup]++
	}
	if got["org_page"] != 2 || got["count_open"] != 0 || rep.OK() {
		t.Fatalf("mismatches by lookup = %v, want org_page 2 and count_open 0 (titles differ, counts do not)", got)
	}
	for _, lr := range rep.Lookups {
		if lr.Compared != 2 || lr.AgreedAtOnce+lr.AgreedAfterSettle+lr.Mismatched != 2 {
			t.Errorf("%s: %+v, want 2 comparisons accounted for", lr.Name, lr)
		}
	}
}

// testCheckpointFindsMismatch: a checkpoint comparing the cache of one
// desk with a second desk whose titles differ reports exactly the lookups
// that show titles, at once, with both answers.
func testCheckpointFindsMismatch(t *testing.T, d *desk) {
	_, other := seeded(t)
	ctx := ctxFor(t, time.Minute)
	if _, err := other.ExecContext(ctx, `UPDATE tickets SET title = title || ' (changed behind the cache)' WHERE org_id = 3`); err != nil {
		t.Fatal(err)
	}
	var inOrg3, elsewhere int64
	if err := other.QueryRowContext(ctx, `SELECT min(id) FILTER (WHERE org_id = 3), min(id) FILTER (WHERE org_id <> 3) FROM tickets`).Scan(&inOrg3, &elsewhere); err != nil {
		t.Fatal(err)
	}
	_, g := d.pool(t)
	var ls []ticketdesk.Lookup
	for _, name := range []string{"ticket_by_id", "ticket_by_id", "org_page", "count_open"} {
		l, _ := ticketdesk.LookupByName(name)
		id := inOrg3
		if len(ls) == 1 {
			id = elsewhere
		}
		l.Args = map[string]func(*rand.Rand, *ticketdesk.World) []any{
			"ticket_by_id": func(*rand.Rand, *ticketdesk.World) []any { return []any{id} },
			"org_page":     func(*rand.Rand, *ticketdesk.World) []any { return []any{int64(3), int64(0)} },
			"count_open":   l.Args,
		}[name]
		ls = append(ls, l)
	}
	rep, err := ticketdesk.Checkpoint(ctx, g, gormOn(t, other), ls, d.world, rand.New(rand.NewSource(3)), ticketdesk.CheckpointConfig{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, m := range rep.Mismatches {
		if m.Kind != "checkpoint" || m.Cached == nil || m.Direct == nil {
			t.Errorf("mismatch %+v: want kind checkpoint with both answers", m)
		}
		got[m.Lookup]++
	}
	if rep.Compared != 4 || got["org_page"] != 1 || got["ticket_by_id"] != 1 || got["count_open"] != 0 {
		t.Fatalf("compared %d, mismatches by lookup %v; want 4 compared, org_page and the ticket of organization 3 differing (its titles differ), nothing else", rep.Compared, got)
	}
}

// testVerifyFindsMisroute gives Verify lookups whose expectations are
// wrong: a refused shape said to be cached, a cached one said to be
// refused, a refusal with another code. Each is a "route" mismatch.
func testVerifyFindsMisroute(t *testing.T, d *desk) {
	p, g := d.pool(t)
	ctx := ctxFor(t, time.Minute)
	wrong := map[string]func(*ticketdesk.Lookup){
		"label_by_key": func(l *ticketdesk.Lookup) { l.Expect, l.Code = ticketdesk.Refused, "distinct" },
		"over_cap":     func(l *ticketdesk.Lookup) { l.Code = "aggregate" },
	}
	var ls []ticketdesk.Lookup
	for name, spoil := range wrong {
		l, _ := ticketdesk.LookupByName(name)
		spoil(&l)
		ls = append(ls, l)
	}
	// Every lookup of the desk but over_cap is served: a shape the engine
	// refuses (DISTINCT of float8), said to be cached.
	wrong["distinct_float"] = nil
	ls = append(ls, ticketdesk.Lookup{Name: "distinct_float", Expect: ticketdesk.Cached,
		Args: func(*rand.Rand, *ticketdesk.World) []any { return []any{int64(1)} },
		Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
			out := []float64{}
			err := db.WithContext(ctx).Raw("SELECT DISTINCT priority::float8 AS p FROM tickets WHERE org_id = ? ORDER BY p", a[0]).Scan(&out).Error
			return out, err
		}})
	// The first reads subscribe; once every verdict is in, each read's
	// route is settled.
	servetest.Eventually(t, 30*time.Second, func() string {
		rep, err := ticketdesk.Verify(ctx, g, nil, ls, d.world, rand.New(rand.NewSource(1)), ticketdesk.VerifyConfig{RefusalCode: p.Refusals.Code})
		if err != nil {
			return err.Error()
		}
		got := map[string]string{}
		for _, m := range rep.Mismatches {
			if m.Kind != "route" {
				return fmt.Sprintf("mismatch %+v: want only route mismatches (the answers agree)", m)
			}
			got[m.Lookup] = m.Detail
		}
		if len(got) != len(wrong) {
			return fmt.Sprintf("route mismatches %v, want one for each of %d spoiled lookups", got, len(wrong))
		}
		return ""
	})
}

// testVerifyCapacityRefusal runs a second freshet serve on the desk that
// holds at most 4 subscriptions per connection: past them a cached lookup
// is refused with too_many_subscriptions, which Verify counts by code and,
// given the codes, does not call misrouted (without them it must).
func testVerifyCapacityRefusal(t *testing.T, d *desk) {
	srv := desktest.Serve(t, d.pdb.DSN, d.pdb.Name+"_small", "--max-subscriptions", "4", "--row-limit", fmt.Sprint(ticketdesk.RowLimit))
	// Each round reads other tickets: a miss must wait for the engine's
	// verdict (refused past the cap) rather than read PostgreSQL at once.
	p := desktest.Open(t, d.pdb.DSN, srv.URL, func(c *readcache.Config) { c.Sockets, c.VerdictTimeout = 1, 5*time.Second })
	g := gormOn(t, p.DB)
	ctx := ctxFor(t, time.Minute)
	l, _ := ticketdesk.LookupByName("ticket_by_id")
	ls := []ticketdesk.Lookup{l}
	// The pool reads PostgreSQL until it knows the engine's lag.
	servetest.Eventually(t, 30*time.Second, func() string {
		hits := p.Cache.Stats().Hits + p.Cache.Stats().Misses
		if _, err := l.Run(ctx, g, []any{int64(1)}); err != nil {
			return err.Error()
		}
		if p.Cache.Stats().Hits+p.Cache.Stats().Misses == hits {
			return fmt.Sprintf("not served from the cache: %v", p.Cache.Stats().Postgres)
		}
		return ""
	})
	r := rand.New(rand.NewSource(9))
	rep, err := ticketdesk.Verify(ctx, g, nil, ls, d.world, r, ticketdesk.VerifyConfig{Rounds: 10, RefusalCode: p.Refusals.Code})
	if err != nil {
		t.Fatal(err)
	}
	lr := rep.Lookups[0]
	if lr.Refusals["too_many_subscriptions"] == 0 || lr.Routes[ticketdesk.RouteCache] == 0 || lr.Misrouted != 0 || !rep.OK() {
		t.Fatalf("with refusal codes: %+v, mismatches %+v; want some served, some refused too_many_subscriptions, none misrouted", lr, rep.Mismatches)
	}
	rep, err = ticketdesk.Verify(ctx, g, nil, ls, d.world, r, ticketdesk.VerifyConfig{Rounds: 5})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lookups[0].Misrouted == 0 {
		t.Fatalf("without refusal codes: %+v; want the capacity refusals counted as misrouted", rep.Lookups[0])
	}
}

// testCheckpointAtClock: the now()-relative lookup (recently_updated) is
// compared exactly at checkpoints while the clock passes its rows with no
// write: organization 3's tickets are stamped just inside the window and
// leave it over two seconds. Every cached answer must equal PostgreSQL's
// at a clock the cache may be exact at (Checkpoint's AtClock when it
// differs from PostgreSQL's own read, which runs at a later instant); a
// lookup whose reference is taken at the wrong clock must be a mismatch.
func testCheckpointAtClock(t *testing.T, d *desk) {
	ctx := ctxFor(t, time.Minute)
	_, g := d.pool(t)
	l, _ := ticketdesk.LookupByName("recently_updated")
	l.Args = func(*rand.Rand, *ticketdesk.World) []any { return []any{int64(3)} }
	if _, err := d.direct.ExecContext(ctx, `UPDATE tickets SET updated_at = now() - interval '`+ticketdesk.RecentWindow+`' + interval '1 second' + (id % 20) * interval '100 milliseconds' WHERE org_id = 3`); err != nil {
		t.Fatal(err)
	}
	// A reference 10 s ahead of the clock: the rows have left it.
	dg := gormOn(t, d.direct)
	spoiled := l
	spoiled.Name = "recently_updated_spoiled"
	spoiled.Run = func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
		if db == dg {
			return l.Clock.RunAt(ctx, db, a, time.Now().Add(10*time.Second))
		}
		return l.Run(ctx, db, a)
	}
	spoiled.Clock = &ticketdesk.LookupClock{
		RunAt: func(ctx context.Context, db *gorm.DB, a []any, at time.Time) (any, error) {
			return l.Clock.RunAt(ctx, db, a, at.Add(10*time.Second))
		},
		Changes: l.Clock.Changes,
	}
	rep, err := ticketdesk.Checkpoint(ctx, g, dg, []ticketdesk.Lookup{spoiled}, d.world, rand.New(rand.NewSource(3)), ticketdesk.CheckpointConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Mismatches) != 1 {
		t.Fatalf("a reference at the wrong clock: %d mismatches, want 1 (%+v)", len(rep.Mismatches), rep)
	}
	// The oldest first: an answer that changes at every row the clock
	// passes (the desk's own lookup, newest first, changes only when the
	// last rows leave), so that the cache's clock trailing PostgreSQL's
	// read shows.
	oldest := func(clock string, at ...any) func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
		return func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
			out := []ticketdesk.TicketRow{}
			err := db.WithContext(ctx).Table("tickets").Select("id, org_id, assignee_id, title, status, priority, updated_at").
				Where("org_id = ? AND updated_at > "+clock+" - interval '"+ticketdesk.RecentWindow+"'", append(a, at...)...).
				Order("updated_at, id").Limit(10).Find(&out).Error
			return out, err
		}
	}
	first := l
	first.Name = "recently_updated_oldest"
	first.Run = oldest("now()")
	first.Clock = &ticketdesk.LookupClock{
		RunAt: func(ctx context.Context, db *gorm.DB, a []any, at time.Time) (any, error) {
			return oldest("?::timestamptz", at)(ctx, db, a)
		},
		Changes: l.Clock.Changes,
	}
	if _, err := d.direct.ExecContext(ctx, `UPDATE tickets SET updated_at = now() - interval '`+ticketdesk.RecentWindow+`' + interval '1 second' + (id % 3000) * interval '1 millisecond' WHERE org_id = 3`); err != nil {
		t.Fatal(err)
	}
	var compared, atClock int
	var sizes []int
	for start := time.Now(); time.Since(start) < 5*time.Second; {
		rep, err := ticketdesk.Checkpoint(ctx, g, nil, []ticketdesk.Lookup{l, first}, d.world, rand.New(rand.NewSource(3)), ticketdesk.CheckpointConfig{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range rep.Mismatches {
			t.Errorf("%s: %s", m.Lookup, m.Detail)
		}
		compared += rep.Compared
		atClock += rep.AtClock
		rows, err := l.Run(ctx, g, l.Args(nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, reflect.ValueOf(rows).Len())
		time.Sleep(50 * time.Millisecond)
	}
	if sizes[0] == 0 || sizes[len(sizes)-1] != 0 {
		t.Errorf("cached answers' sizes %v: want rows at first and none once the clock passed them", sizes)
	}
	if atClock == 0 {
		t.Errorf("%d answers compared, none differed from PostgreSQL's read while the clock passed rows every few milliseconds: the cache's clock never trailed?", compared)
	}
	t.Logf("%d answers compared, %d equal to PostgreSQL only at an earlier clock; sizes %v", compared, atClock, sizes)
}
