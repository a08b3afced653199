package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
)

// clockQueries are the subscriptions TestEngineClock keeps while
// PostgreSQL's clock passes the rows.
var clockQueries = []struct {
	sql string
	// moves: the clock must change this result, with no write.
	moves bool
}{
	{sql: `SELECT id, kind FROM ev WHERE at > now() - interval '2 seconds'`, moves: true},
	{sql: `SELECT id FROM ev WHERE at <= CURRENT_TIMESTAMP`, moves: true},
	{sql: `SELECT count(*) FROM ev WHERE at BETWEEN now() - interval '1 second' AND now() + interval '500 milliseconds'`, moves: true},
	{sql: `SELECT kind, count(*), max(at) FROM ev WHERE at < now() GROUP BY kind`, moves: true},
	{sql: `SELECT id, at FROM ev WHERE at > now() - interval '2 seconds' AND kind <> 'c' ORDER BY at LIMIT 3`, moves: true},
	{sql: `SELECT id FROM ev WHERE day < CURRENT_DATE`},
	{sql: `SELECT id FROM ev WHERE day >= CURRENT_DATE - 1 AND lts > LOCALTIMESTAMP - interval '3 seconds'`, moves: true},
}

// Rows leave and enter results as PostgreSQL's clock passes them, with no
// write: rows are inserted a little in the past and the future of the
// database's now(), and every result the subscribers are given (each
// Accepted and Delta, at the clock it carries, the heartbeat's now()) is
// compared with PostgreSQL's answer to the query with now() replaced by
// that clock's literal. The data do not change, so PostgreSQL can be
// asked afterwards.
func TestEngineClock(t *testing.T) {
	r := newRig(t, `CREATE TABLE ev (id int PRIMARY KEY, at timestamptz, day date, lts timestamp, kind text)`, Config{})
	ctx := context.Background()
	var now time.Time
	if err := r.conn.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	// Rows every 250 ms from 1.5 s ago to 3 s ahead, a NULL among them.
	var vals []string
	for i := 0; i < 19; i++ {
		off := time.Duration(i-6) * 250 * time.Millisecond
		at := fmt.Sprintf("'%s'::timestamptz + interval '%d milliseconds'", now.UTC().Format("2006-01-02 15:04:05.999999Z07:00"), off.Milliseconds())
		if i == 9 {
			at = "NULL"
		}
		vals = append(vals, fmt.Sprintf("(%d, %s, current_date + %d, (%s)::timestamp, '%c')", i, at, i%3-1, at, 'a'+rune(i%3)))
	}
	r.exec("SET TimeZone = 'UTC'")
	r.exec("INSERT INTO ev VALUES " + strings.Join(vals, ", "))
	recs := make([]*recorder, len(clockQueries))
	for i, q := range clockQueries {
		_, recs[i] = r.subscribe(q.sql)
	}
	waitAccepted(t, recs...)
	// No writes: the heartbeats (every 50 ms) carry the clock past every row.
	time.Sleep(4 * time.Second)
	r.quiesce(30 * time.Second)
	for i, q := range clockQueries {
		rec := recs[i]
		rec.mu.Lock()
		outs := append([]Output(nil), rec.outs...)
		rec.mu.Unlock()
		replay := newRecorder()
		deltas := 0
		var last change.Timestamp
		for _, o := range outs {
			replay.Send(o)
			if o.Kind != OutputAccepted && o.Kind != OutputDelta {
				t.Fatalf("%s: %s: %s", q.sql, o.Kind, o.Reason)
			}
			if o.Clock.Micros == 0 {
				t.Fatalf("%s: %s at %s carries no clock", q.sql, o.Kind, o.LSN)
			}
			if o.Clock.Cmp(last) < 0 {
				t.Errorf("%s: clock went back: %v after %v", q.sql, o.Clock, last)
			}
			last = o.Clock
			if o.Kind == OutputDelta {
				deltas++
			}
			ref := atClock(q.sql, o.Clock)
			want, err := r.reference(ref, nil)
			if err != nil {
				t.Fatalf("reference %q: %v", ref, err)
			}
			got, err := replay.result(false, r.reader.Types())
			if err != nil {
				t.Fatalf("%s: %v", q.sql, err)
			}
			if err := sameRows(got, want, false); err != nil {
				t.Errorf("%s, %s at %s (clock %s):\n%v\nfreshet:\n%sPostgreSQL (%s):\n%s", q.sql, o.Kind, o.LSN, fmtClock(o.Clock), err, fmtRows(got), ref, fmtRows(want))
			}
		}
		if q.moves && deltas == 0 {
			t.Errorf("%s: no delta while the clock passed its rows", q.sql)
		}
		t.Logf("%s: %d deltas", q.sql, deltas)
	}
}

func fmtClock(c change.Timestamp) string {
	s, _ := change.FormatOID(change.OIDTimestamptz, c, nil)
	return s
}

// atClock is sql with its time functions replaced by the clock's value,
// as PostgreSQL evaluates them in a transaction started at it (TimeZone
// UTC).
func atClock(sql string, c change.Timestamp) string {
	ts := fmtClock(c)
	return strings.NewReplacer(
		"now()", "'"+ts+"'::timestamptz",
		"transaction_timestamp()", "'"+ts+"'::timestamptz",
		"CURRENT_TIMESTAMP", "'"+ts+"'::timestamptz",
		"LOCALTIMESTAMP", "'"+ts+"'::timestamptz::timestamp",
		"CURRENT_DATE", "'"+ts+"'::timestamptz::date",
	).Replace(sql)
}
