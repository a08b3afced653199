package engine

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

// BenchmarkSemiJoinChange measures single-row changes to an IN (subquery)
// subscription over 100,000 tickets in 1,000 organizations (100 tickets
// each, every other organization on the plan the subquery keeps), on the
// core alone: a ticket of a kept organization changing status (one row of
// the result changes), a ticket moving to another organization (it leaves
// or enters), an organization changing plan (its 100 tickets enter or
// leave in one delta), and an organization changing a column the query
// does not read (nothing changes). ns/op is the whole transaction: apply,
// settle, the delta. The not_in cases keep the same tickets through NOT
// IN (SELECT id FROM orgs WHERE plan = 'free').
func BenchmarkSemiJoinChange(b *testing.B) {
	const orgs, perOrg = 1_000, 100
	queries := []struct{ name, sql string }{
		{"in", "SELECT id, status FROM tickets WHERE org IN (SELECT id FROM orgs WHERE plan = 'pro')"},
		{"not_in", "SELECT id, status FROM tickets WHERE org NOT IN (SELECT id FROM orgs WHERE plan = 'free')"},
	}
	for _, q := range queries {
		for _, kind := range []string{"ticket_status", "ticket_moves", "org_plan", "org_other"} {
			b.Run(q.name+"/"+kind, func(b *testing.B) {
				h := newHarness(b, CoreOptions{})
				h.createTable("orgs", []string{"id int4 pk", "plan text", "name text"})
				h.createTable("tickets", []string{"id int4 pk", "org int4", "status text"})
				orgRel, ticketRel := h.tables["orgs"].rel, h.tables["tickets"].rel
				bc := &benchCore{core: NewCore(CoreOptions{}), cat: h.cat}
				plan := bc.compile(b, q.sql)
				bc.subscribe(b, []*query.Plan{plan})
				plans := make([]string, orgs)
				orgRow := func(id int) change.Row {
					return change.Row{txt(strconv.Itoa(id)), txt(plans[id]), txt("org-" + strconv.Itoa(id))}
				}
				ticketOrg := make([]int, orgs*perOrg)
				ticketRow := func(id int, status string) change.Row {
					return change.Row{txt(strconv.Itoa(id)), txt(strconv.Itoa(ticketOrg[id])), txt(status)}
				}
				var chs []change.Change
				for id := range orgs {
					plans[id] = []string{"pro", "free"}[id%2]
					chs = append(chs, change.Change{Op: change.OpInsert, Rel: orgRel, New: orgRow(id)})
				}
				bc.txn(chs)
				bc.core.Ready()
				chs = chs[:0]
				for id := range orgs * perOrg {
					ticketOrg[id] = id % orgs
					chs = append(chs, change.Change{Op: change.OpInsert, Rel: ticketRel, New: ticketRow(id, "open")})
					if id%10_000 == 9_999 {
						bc.txn(chs)
						bc.core.Ready()
						chs = chs[:0]
					}
				}
				if got := bc.core.Stats().HeldRows; got < orgs*perOrg/2 {
					b.Fatalf("%d rows held after loading, want at least %d", got, orgs*perOrg/2)
				}
				rng := rand.New(rand.NewPCG(1, 2))
				b.ReportAllocs()
				start := cpuTime()
				b.ResetTimer()
				for b.Loop() {
					var ch change.Change
					switch kind {
					case "ticket_status":
						id := rng.IntN(orgs*perOrg/2) * 2 // org id%1000 even: pro
						ch = change.Change{Op: change.OpUpdate, Rel: ticketRel, New: ticketRow(id, strconv.Itoa(rng.IntN(1000)))}
					case "ticket_moves":
						id := rng.IntN(orgs * perOrg)
						ticketOrg[id] = rng.IntN(orgs)
						ch = change.Change{Op: change.OpUpdate, Rel: ticketRel, New: ticketRow(id, "open")}
					case "org_plan":
						id := rng.IntN(orgs)
						plans[id] = map[string]string{"pro": "free", "free": "pro"}[plans[id]]
						ch = change.Change{Op: change.OpUpdate, Rel: orgRel, New: orgRow(id)}
					default:
						id := rng.IntN(orgs)
						ch = change.Change{Op: change.OpUpdate, Rel: orgRel, New: change.Row{txt(strconv.Itoa(id)), txt(plans[id]), txt(strconv.Itoa(rng.IntN(1000)))}}
					}
					bc.txn([]change.Change{ch})
					bc.core.Ready()
				}
				reportCPU(b, start)
			})
		}
	}
}

// TestBenchSubqueryPostgres (FRESHET_SUBQUERY_BENCH=1) times on PostgreSQL
// the reads an IN (subquery) subscription saves over BenchmarkSemiJoinChange's
// data: the whole result (50,000 of 100,000 tickets), and one
// organization's tickets by an index (what a page of one organization
// reads).
func TestBenchSubqueryPostgres(t *testing.T) {
	if os.Getenv("FRESHET_SUBQUERY_BENCH") == "" {
		t.Skip("set FRESHET_SUBQUERY_BENCH=1 to time the subquery reads on PostgreSQL")
	}
	pool := newPool(t)
	execAll(t, pool,
		"CREATE TABLE orgs (id int4 PRIMARY KEY, plan text, name text)",
		"CREATE TABLE tickets (id int4 PRIMARY KEY, org int4, status text)",
		"INSERT INTO orgs SELECT g, CASE WHEN g % 2 = 0 THEN 'pro' ELSE 'free' END, 'org-' || g FROM generate_series(0, 999) g",
		"INSERT INTO tickets SELECT g, g % 1000, 'open' FROM generate_series(0, 99999) g",
		"CREATE INDEX ON tickets (org)",
		"VACUUM ANALYZE orgs, tickets")
	for _, sql := range []string{
		"SELECT id, status FROM tickets WHERE org IN (SELECT id FROM orgs WHERE plan = 'pro')",
		"SELECT id, status FROM tickets WHERE org NOT IN (SELECT id FROM orgs WHERE plan = 'free')",
		"SELECT id, status FROM tickets WHERE org IN (SELECT id FROM orgs WHERE plan = 'pro' AND id = 42)",
	} {
		median, least := timeRead(t, pool, sql)
		t.Logf("median %v (min %v): %s", median, least, sql)
	}
}
