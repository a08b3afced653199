package ticketdesk_test

import (
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/freshetdb/freshet/ticketdesk"
)

// TestWriterKinds runs the writer's whole mix for a short while: every
// kind of change commits at least once (a rollback rolls back), and the
// rolled-back changes left nothing behind.
func TestWriterKinds(t *testing.T) {
	_, db := seeded(t)
	ctx := ctxFor(t, time.Minute)
	w, err := ticketdesk.LoadWorld(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	wr := ticketdesk.NewWriter(db, w, ticketdesk.WriterConfig{Workers: 2, Seed: 1})
	// One of each first, so a short run cannot miss a rare kind.
	r := rand.New(rand.NewSource(1))
	for _, k := range ticketdesk.Kinds {
		if err := wr.One(ctx, k, r); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	run, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	if err := wr.Run(run); err != nil {
		t.Fatal(err)
	}
	st := wr.Stats()
	for _, k := range ticketdesk.Kinds {
		ks := st.Kinds[k]
		switch {
		case k == ticketdesk.KindRollback && (ks.RolledBack < 2 || ks.Committed != 0):
			t.Errorf("%s: %+v, want rolled back at least twice and never committed", k, ks)
		case k != ticketdesk.KindRollback && ks.Committed < 2:
			t.Errorf("%s: %+v, want committed at least twice", k, ks)
		}
	}
	if st.Committed < 50 {
		t.Errorf("committed %d transactions in 2 s, want at least 50", st.Committed)
	}
	t.Logf("writer: %d committed, %d rolled back, %d errors %v (last: %s)", st.Committed, st.RolledBack, st.Errors, st.ErrorCodes, st.LastError)
	var coded int64
	for _, n := range st.ErrorCodes {
		coded += n
	}
	if coded != st.Errors {
		t.Errorf("errors by code %v add up to %d, want %d", st.ErrorCodes, coded, st.Errors)
	}
	// A failure is counted with its SQLSTATE and the writer goes on.
	if _, err := db.ExecContext(ctx, `ALTER TABLE comments ADD CONSTRAINT no_comments CHECK (false) NOT VALID`); err != nil {
		t.Fatal(err)
	}
	if err := wr.One(ctx, ticketdesk.KindComment, r); err == nil {
		t.Fatal("a comment against a CHECK (false) committed")
	}
	if got := wr.Stats(); got.Kinds[ticketdesk.KindComment].Errors != st.Kinds[ticketdesk.KindComment].Errors+1 || got.ErrorCodes["23514"] != st.ErrorCodes["23514"]+1 {
		t.Errorf("after a check violation: comment %+v, codes %v; want one more error, counted as 23514", got.Kinds[ticketdesk.KindComment], got.ErrorCodes)
	}
	if _, err := db.ExecContext(ctx, `ALTER TABLE comments DROP CONSTRAINT no_comments`); err != nil {
		t.Fatal(err)
	}
	if err := wr.One(ctx, ticketdesk.KindComment, r); err != nil {
		t.Fatalf("a comment after the constraint went: %v", err)
	}
	var left int64
	if err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM tickets WHERE status = $1) + (SELECT count(*) FROM comments WHERE body = $2)`,
		ticketdesk.StatusNever, ticketdesk.RolledBackComment).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("rows left by rolled-back transactions = %d, want 0", left)
	}
	var emptyOrg int64
	db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM tickets WHERE org_id = $1) + (SELECT count(*) FROM users WHERE org_id = $1)`, w.EmptyOrg).Scan(&emptyOrg)
	if emptyOrg != 0 {
		t.Fatalf("rows in the empty organization = %d, want 0", emptyOrg)
	}
	// Rate: a paced writer stays near its rate (a loose bound: the
	// machine is shared).
	paced := ticketdesk.NewWriter(db, w, ticketdesk.WriterConfig{Rate: 20, Seed: 2})
	run2, stop2 := context.WithTimeout(ctx, time.Second)
	defer stop2()
	paced.Run(run2)
	if n := paced.Stats().Committed + paced.Stats().RolledBack + paced.Stats().Errors; n > 30 {
		t.Fatalf("paced at 20/s for 1 s: %d transactions, want at most 30", n)
	}
}

// TestWriterShowsInCache subscribes every per-ticket lookup of a hot set
// of tickets and every per-organization lookup, runs the whole mix on the
// hot set, and then verifies the same keys: each change (including a
// title change that leaves the TOASTed body alone, a move, a rename seen
// through a join, a cascaded delete) reached the cached entries.
func TestWriterShowsInCache(t *testing.T) {
	d := newDesk(t)
	_, g := d.pool(t)
	ctx := ctxFor(t, 2*time.Minute)
	const hot = 15
	var fixed []ticketdesk.Lookup
	for _, name := range []string{"ticket_by_id", "latest_comments", "count_comments", "ticket_labels", "ticket_assignee"} {
		l, _ := ticketdesk.LookupByName(name)
		for id := int64(1); id <= hot; id++ {
			fixed = append(fixed, withArgs(l, id))
		}
	}
	for _, name := range []string{"unassigned", "count_open", "assigned_with_user", "org_page"} {
		l, _ := ticketdesk.LookupByName(name)
		for _, org := range d.world.Orgs {
			args := l.Args(rand.New(rand.NewSource(org)), d.world)
			args[0] = org
			fixed = append(fixed, withArgs(l, args...))
		}
	}
	verify := func(what string) ticketdesk.VerifyReport {
		t.Helper()
		rep, err := ticketdesk.Verify(ctx, g, nil, fixed, d.world, rand.New(rand.NewSource(1)), ticketdesk.VerifyConfig{Settle: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range rep.Mismatches {
			t.Errorf("%s: %s %v: %s", what, m.Lookup, m.Args, m.Detail)
		}
		return rep
	}
	verify("before writing")
	mix := ticketdesk.DefaultMix()
	mix[ticketdesk.KindDelete] = 1 // a few of the hot set, not all of it
	wr := ticketdesk.NewWriter(d.direct, d.world, ticketdesk.WriterConfig{Rate: 200, Workers: 2, Seed: 3, Hot: hot, Mix: mix})
	run, stop := context.WithTimeout(ctx, 3*time.Second)
	defer stop()
	wr.Run(run)
	st := wr.Stats()
	t.Logf("writer on %d hot tickets: %d committed, %d rolled back, %d errors (last: %s)", hot, st.Committed, st.RolledBack, st.Errors, st.LastError)
	if st.Errors > st.Committed/10 {
		t.Errorf("errors %d against %d committed: the hot set ran out?", st.Errors, st.Committed)
	}
	for _, k := range []ticketdesk.Kind{ticketdesk.KindTouch, ticketdesk.KindMove, ticketdesk.KindRename, ticketdesk.KindAssignee, ticketdesk.KindDelete} {
		if st.Kinds[k].Committed == 0 {
			t.Errorf("%s committed none in 3 s", k)
		}
	}
	rep := verify("after writing")
	served := 0
	for _, lr := range rep.Lookups {
		served += lr.Routes[ticketdesk.RouteCache]
	}
	if served < len(fixed)/2 {
		t.Errorf("%d of %d reads after writing served from the cache, want most", served, len(fixed))
	}
}

// withArgs returns l with fixed arguments.
func withArgs(l ticketdesk.Lookup, args ...any) ticketdesk.Lookup {
	l.Args = func(*rand.Rand, *ticketdesk.World) []any { return args }
	return l
}
