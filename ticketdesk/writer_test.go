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
	t.Logf("writer: %d committed, %d rolled back, %d errors (last: %s)", st.Committed, st.RolledBack, st.Errors, st.LastError)
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
