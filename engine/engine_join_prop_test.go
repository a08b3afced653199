package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/freshetdb/freshet/query"
)

// A LEFT JOIN of one ticket to its comments reads only that ticket's
// comments (the ON equality carries t.id = $1 to c.ticket_id), so it is
// accepted under a row limit far below the size of the comments table, and
// stays equal to PostgreSQL while comments are added, changed, deleted and
// moved between tickets and a ticket's id changes.
func TestEngineJoinPropagatedConstraint(t *testing.T) {
	const setup = `CREATE TABLE tickets (id int PRIMARY KEY, title text);
CREATE TABLE comments (id int PRIMARY KEY, ticket_id int, body text);
INSERT INTO tickets SELECT g, 'ticket ' || g FROM generate_series(1, 300) g;
INSERT INTO tickets VALUES (500, 'no comments yet');
INSERT INTO comments SELECT g, g % 300 + 1, 'comment ' || g FROM generate_series(1, 3000) g;`
	r := newRig(t, setup, Config{RowLimit: 100})
	bind := func(v int) query.Bind { return query.Bind{OID: 23, Data: []byte(fmt.Sprint(v))} }
	type sub struct {
		sql, ref string
		ordered  bool
		binds    []query.Bind
		rec      *recorder
	}
	left := "SELECT t.id, t.title, c.id, c.body FROM tickets t LEFT JOIN comments c ON c.ticket_id = t.id WHERE t.id = $1"
	subs := []*sub{
		{sql: left, binds: []query.Bind{bind(7)}},
		{sql: left, binds: []query.Bind{bind(3)}},
		{sql: left, binds: []query.Bind{bind(500)}},
		{sql: left, binds: []query.Bind{bind(1000)}},
		// Back through an inner join: c.ticket_id = $1 bounds tickets too.
		{sql: "SELECT t.title, c.id FROM tickets t JOIN comments c ON c.ticket_id = t.id WHERE c.ticket_id = $1", binds: []query.Bind{bind(7)}},
		{sql: "SELECT count(*) FROM tickets t LEFT JOIN comments c ON t.id = c.ticket_id WHERE t.id IN ($1, $2)", binds: []query.Bind{bind(3), bind(7)}},
		{sql: "SELECT t.id, c.id FROM tickets t LEFT JOIN comments c ON c.ticket_id = t.id WHERE t.id = $1 ORDER BY c.id DESC LIMIT 3",
			ref:     "SELECT t.id, c.id, dense_rank() OVER (ORDER BY c.id DESC) FROM tickets t LEFT JOIN comments c ON c.ticket_id = t.id WHERE t.id = $1 ORDER BY c.id DESC LIMIT 3",
			ordered: true, binds: []query.Bind{bind(7)}},
	}
	for _, s := range subs {
		_, s.rec = r.subscribe(s.sql, s.binds...)
		if s.ref == "" {
			s.ref = s.sql
		}
	}
	// The limit bites: the whole comments table is over it.
	_, whole := r.subscribe("SELECT t.id, c.id FROM tickets t LEFT JOIN comments c ON c.ticket_id = t.id WHERE t.title = $1",
		query.Bind{OID: 25, Data: []byte("ticket 7")})
	waitFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if st, _ := whole.state(); st == 0 {
			return fmt.Errorf("no answer yet")
		}
		return nil
	})
	if st, code, reason := whole.ending(); st != OutputRefused || code != CodeRowLimit {
		t.Fatalf("join with an unconstrained comments source: %v %s %q, want refused with %s", st, code, reason, CodeRowLimit)
	}
	recs := make([]*recorder, len(subs))
	for i, s := range subs {
		recs[i] = s.rec
	}
	waitAccepted(t, recs...)
	check := func(step string) {
		t.Helper()
		r.quiesce(30 * time.Second)
		for _, s := range subs {
			want, err := r.reference(s.ref, s.binds)
			if err != nil {
				t.Fatalf("reference %q: %v", s.ref, err)
			}
			got, err := s.rec.result(s.ordered, r.reader.Types())
			if err != nil {
				t.Fatalf("%s: %s %s: client result: %v", step, s.sql, fmtBinds(s.binds), err)
			}
			if err := sameRows(got, want, s.ordered); err != nil {
				t.Fatalf("%s: %s %s: %v", step, s.sql, fmtBinds(s.binds), err)
			}
		}
	}
	check("hydrated")
	steps := []struct{ name, sql string }{
		{"insert", "INSERT INTO comments VALUES (5001, 7, 'new on 7'), (5002, 3, 'new on 3'), (5003, 500, 'first on 500'), (5004, 9, 'elsewhere')"},
		{"update", "UPDATE comments SET body = 'edited' WHERE ticket_id = 7 AND id % 2 = 0"},
		{"delete", "DELETE FROM comments WHERE id IN (6, 5002, 5003)"},
		{"move in", "UPDATE comments SET ticket_id = 7 WHERE id IN (2, 5004)"},
		{"move out", "UPDATE comments SET ticket_id = 9 WHERE id = 5001"},
		{"move between", "UPDATE comments SET ticket_id = 3 WHERE id = 306"},
		{"to null and back", "BEGIN; UPDATE comments SET ticket_id = NULL WHERE id = 606; UPDATE comments SET ticket_id = 500 WHERE id = 906; COMMIT"},
		{"key change", "UPDATE comments SET id = id + 10000 WHERE ticket_id = 7 AND id < 1000"},
		{"parent key change", "UPDATE tickets SET id = 1000 WHERE id = 3"},
		{"children follow", "UPDATE comments SET ticket_id = 1000 WHERE ticket_id = 3"},
		{"parent back", "BEGIN; UPDATE tickets SET id = 3 WHERE id = 1000; INSERT INTO comments VALUES (5005, 3, 'back'); UPDATE comments SET ticket_id = 3 WHERE id = 2; COMMIT"},
		{"rolled back", "BEGIN; DELETE FROM comments WHERE ticket_id = 7; ROLLBACK"},
		{"all of 7 gone", "DELETE FROM comments WHERE ticket_id = 7"},
		{"ticket gone", "DELETE FROM tickets WHERE id = 500"},
	}
	for _, st := range steps {
		r.exec(st.sql)
		check(st.name)
	}
}
