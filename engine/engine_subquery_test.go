package engine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/query"
)

// subqueryDDL: organizations (bigint ids) and tickets (int4 org ids, so
// the IN compares int4 with int8 as PostgreSQL does), tickets pointing at
// other tickets (a subquery of the outer query's own table), and a text
// pair of one collation.
const subqueryDDL = `
CREATE TABLE orgs (id bigint PRIMARY KEY, plan text COLLATE "C", seats int, region text COLLATE "C");
CREATE TABLE tickets (id int PRIMARY KEY, org_id int, status text COLLATE "C", parent int, region text COLLATE "C", updated int);
`

// subqueryQueries are the subscriptions TestEngineSubquery keeps, each with
// PostgreSQL's reference query when it differs (ordered ones with their tie
// groups) and whether order is checked.
var subqueryQueries = []refQuery{
	{sql: `SELECT id, status FROM tickets WHERE org_id IN (SELECT id FROM orgs WHERE plan = $1)`,
		binds: []query.Bind{{Data: []byte("pro")}}},
	{sql: `SELECT id, updated FROM tickets WHERE org_id IN (SELECT id FROM orgs WHERE plan = 'pro' OR seats > 5) AND status <> 'closed' ORDER BY updated DESC, id LIMIT 3`,
		ref: `SELECT id, updated, dense_rank() OVER (ORDER BY updated DESC, id) FROM tickets WHERE org_id IN (SELECT id FROM orgs WHERE plan = 'pro' OR seats > 5)
  AND status <> 'closed' ORDER BY updated DESC, id LIMIT 3`, ordered: true},
	{sql: `SELECT count(*) FROM tickets WHERE org_id = ANY (SELECT id FROM orgs WHERE seats > 3)`},
	{sql: `SELECT status, count(*), max(updated) FROM tickets WHERE org_id IN (SELECT id FROM orgs WHERE plan = 'free') GROUP BY status`},
	// Duplicates in the subquery: an org with many open tickets is there once.
	{sql: `SELECT id, plan FROM orgs WHERE id IN (SELECT org_id FROM tickets WHERE status = 'open')`},
	// Grouped over a subquery with duplicates: each org counted once.
	{sql: `SELECT plan, count(*), sum(seats) FROM orgs WHERE id IN (SELECT org_id FROM tickets WHERE status <> 'closed') GROUP BY plan`},
	// The outer query's own table in the subquery.
	{sql: `SELECT id FROM tickets WHERE id IN (SELECT parent FROM tickets WHERE status = 'open')`},
	// A join in FROM with a subquery beside it, and two subqueries ANDed.
	{sql: `SELECT t.id, o.plan FROM tickets t JOIN orgs o ON o.id = t.org_id WHERE t.org_id IN (SELECT id FROM orgs WHERE seats > 2)
  AND t.region IN (SELECT region FROM orgs WHERE plan = 'pro')`},
	// Constant values in the subquery bound the outer read.
	{sql: `SELECT id FROM tickets WHERE org_id IN (SELECT id FROM orgs WHERE id IN (1, 2, 3) AND plan <> 'free')`},
	{sql: `SELECT id FROM tickets WHERE org_id IN (SELECT id FROM orgs) AND updated > 50`},
	// NOT IN: the subquery empty (a NULL on the left kept), NULLs in its
	// output (nothing kept), int8 against int4 and text.
	{sql: `SELECT id, org_id FROM tickets WHERE org_id NOT IN (SELECT id FROM orgs WHERE plan = 'free')`},
	{sql: `SELECT count(*) FROM tickets WHERE org_id NOT IN (SELECT seats FROM orgs WHERE plan = 'pro')`},
	{sql: `SELECT id FROM orgs WHERE id <> ALL (SELECT org_id FROM tickets WHERE status = 'closed') ORDER BY id LIMIT 3`,
		ref: `SELECT id, dense_rank() OVER (ORDER BY id) FROM orgs WHERE id <> ALL (SELECT org_id FROM tickets WHERE status = 'closed') ORDER BY id LIMIT 3`, ordered: true},
	{sql: `SELECT id FROM tickets WHERE region NOT IN (SELECT region FROM orgs WHERE seats > 3) AND org_id IN (SELECT id FROM orgs)`},
	{sql: `SELECT status, count(*) FROM tickets WHERE parent NOT IN (SELECT parent FROM tickets WHERE status = 'pending') GROUP BY status`},
}

// IN and NOT IN subquery subscriptions stay equal to PostgreSQL's own answer after
// each of many random writes to both tables: organizations changing plan
// (their tickets move in and out), the last matching organization leaving,
// tickets changing organization, NULLs on both sides, keys changing,
// several changes in one transaction.
func TestEngineSubquery(t *testing.T) {
	r := newRig(t, subqueryDDL, Config{})
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 17))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	org := func(id int) string {
		return fmt.Sprintf("(%d, %s, %s, %s)", id, pick("'pro'", "'free'", "'team'", "NULL"),
			pick("1", "3", "4", "6", "NULL"), pick("'eu'", "'us'", "NULL"))
	}
	orgID := func() string { return pick("1", "2", "3", "4", "5", "6", "7", "NULL") }
	ticket := func(id int) string {
		return fmt.Sprintf("(%d, %s, %s, %s, %s, %d)", id, orgID(), pick("'open'", "'closed'", "'pending'", "NULL"),
			pick("1", "2", "3", "4", "5", "NULL"), pick("'eu'", "'us'", "NULL"), rng.IntN(100))
	}
	var ins []string
	for id := 1; id <= 5; id++ {
		ins = append(ins, org(id))
	}
	r.exec("INSERT INTO orgs VALUES " + strings.Join(ins, ", "))
	ins = ins[:0]
	for id := 1; id <= 25; id++ {
		ins = append(ins, ticket(id))
	}
	r.exec("INSERT INTO tickets VALUES " + strings.Join(ins, ", "))
	recs := make([]*recorder, len(subqueryQueries))
	for i, q := range subqueryQueries {
		_, recs[i] = r.subscribe(q.sql, q.binds...)
	}
	waitAccepted(t, recs...)
	checkAll := func(step string) {
		t.Helper()
		checkRefs(t, r, seed, step, subqueryQueries, recs)
	}
	checkAll("hydrated")
	nextOrg, nextTicket := 10, 100
	for step := range 100 {
		var sql string
		switch k := rng.IntN(10); {
		case k < 2:
			// An organization changes plan or seats: its tickets move.
			sql = fmt.Sprintf("UPDATE orgs SET plan = %s, seats = %s WHERE id = %s", pick("'pro'", "'free'", "'team'", "NULL"), pick("2", "4", "8", "NULL"), orgID())
		case k < 3:
			sql = fmt.Sprintf("DELETE FROM orgs WHERE id %% 3 = %d", rng.IntN(3))
		case k < 4:
			sql = "INSERT INTO orgs VALUES " + org(rng.IntN(8)) + " ON CONFLICT (id) DO NOTHING"
		case k < 5:
			// A key changes: the old id's tickets lose their org.
			to := nextOrg % 8
			sql = fmt.Sprintf("UPDATE orgs SET id = %d WHERE id = %s AND NOT EXISTS (SELECT 1 FROM orgs WHERE id = %d)", to, orgID(), to)
			nextOrg++
		case k < 7:
			sql = fmt.Sprintf("UPDATE tickets SET org_id = %s, status = %s, parent = %s, updated = %d WHERE id %% 7 = %d",
				orgID(), pick("'open'", "'closed'", "NULL"), pick("1", "2", "6", "NULL"), rng.IntN(100), rng.IntN(7))
		case k < 8:
			sql = "INSERT INTO tickets VALUES " + ticket(nextTicket)
			nextTicket++
		case k < 9:
			sql = fmt.Sprintf("DELETE FROM tickets WHERE id %% 9 = %d", rng.IntN(9))
		default:
			// Both tables in one transaction; an org out and back in.
			sql = fmt.Sprintf("BEGIN; UPDATE orgs SET plan = 'free' WHERE id = %[1]s; INSERT INTO tickets VALUES %[2]s; UPDATE orgs SET plan = 'pro' WHERE id = %[1]s; UPDATE tickets SET region = %[3]s WHERE id %% 5 = %[4]d; COMMIT",
				orgID(), ticket(nextTicket), pick("'eu'", "'us'", "NULL"), rng.IntN(5))
			nextTicket++
		}
		r.exec(sql)
		checkAll(fmt.Sprintf("step %d (%s)", step, sql))
	}
}
