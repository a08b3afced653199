package ticketdesk

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Sizes of a seeded desk at scale 1; a larger scale multiplies the
// organizations (and with them users and labels) and the tickets.
const (
	OrgsPerScale      = 10
	UsersPerOrg       = 20
	TicketsPerScale   = 3000
	CommentsPerTicket = 2 // comments per ticket on average; they fall on about half the tickets
)

// Statuses are the statuses the seed and the writer use. StatusNever is
// one neither ever commits (the writer's rolled-back transactions use it),
// so a lookup of it must stay empty.
var Statuses = []string{"open", "pending", "blocked", "solved", "closed"}

// StatusNever is a status no committed row ever has.
const StatusNever = "archived"

// LabelNames are the labels every organization but the empty one has.
var LabelNames = []string{"bug", "feature", "question", "billing", "ui", "api", "docs", "urgent"}

// Tags are the values of tickets.tags (a text[] column).
var Tags = []string{"bug", "billing", "ui", "api", "urgent"}

// SeedEpoch is the first seeded created_at; seeded tickets are 17 minutes
// apart.
var SeedEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// SeedTicketSpacing is the time between two seeded tickets' created_at.
const SeedTicketSpacing = 17 * time.Minute

// seedSQL fills the desk from generate_series: the same rows for the same
// scale every time, generated inside PostgreSQL so scale 1 takes a
// couple of seconds. A ticket's body is a stretch of one pool of md5 hex
// (13 KB, made once): pglz finds nothing to compress within it, so every
// body is stored out of line. $1 orgs, $2 tickets, $3 users per org, $4
// the epoch and $5 comments per ticket are replaced by their values before
// the statements run.
// Organization $1+1 is the empty one: no users, labels or tickets.
var seedSQL = []string{
	`TRUNCATE sla_calendar, ticket_labels, labels, comments, tickets, users, organizations RESTART IDENTITY`,
	`INSERT INTO sla_calendar (day, business)
	 SELECT d::date, extract(isodow FROM d) < 6 FROM generate_series(date '2020-01-01', date '2029-12-31', interval '1 day') d`,
	`INSERT INTO organizations (id, name, plan, created_at)
	 SELECT o, 'org ' || o, (ARRAY['free','team','enterprise'])[1 + o % 3], $4::timestamptz - interval '400 days' + o * interval '1 day'
	 FROM generate_series(1, $1::int + 1) o`,
	`INSERT INTO users (id, org_id, name, email, created_at)
	 SELECT u, 1 + (u - 1) / $3::int, 'user ' || u, 'user' || u || '@org' || (1 + (u - 1) / $3::int) || '.example',
	        $4::timestamptz - interval '300 days' + u * interval '1 hour'
	 FROM generate_series(1, $1::int * $3::int) u`,
	`INSERT INTO labels (org_id, name, color)
	 SELECT o, l.name, '#' || substr(md5(o || l.name), 1, 6)
	 FROM generate_series(1, $1::int) o, unnest(ARRAY['bug','feature','question','billing','ui','api','docs','urgent']) AS l(name)`,
	`INSERT INTO tickets (id, org_id, assignee_id, title, status, priority, tags, body, created_at, updated_at)
	 SELECT i, org, CASE WHEN i % 5 = 0 THEN NULL ELSE (org - 1) * $3::int + 1 + (i * 13) % $3::int END,
	        'ticket ' || i || ': ' || (ARRAY['login fails','export times out','invoice wrong','page is blank','API returns 500','typo in docs'])[1 + i % 6],
	        (ARRAY['open','pending','blocked','solved','closed'])[1 + (i * 31) % 5],
	        1 + (i * 17) % 5,
	        ARRAY[(ARRAY['bug','billing','ui','api','urgent'])[1 + i % 5]],
	        'ticket ' || i || ': ' || substr(pool.text, 1 + (i * 7919) % 4000, 2048 + (i * 337) % 6000),
	        $4::timestamptz + (i - 1) * interval '17 minutes',
	        $4::timestamptz + (i - 1) * interval '17 minutes' + (i % 100) * interval '1 hour'
	 FROM generate_series(1, $2::int) i, LATERAL (SELECT 1 + (i * 7) % $1::int AS org) o,
	      (SELECT string_agg(md5(j::text), ' ') AS text FROM generate_series(1, 400) j) pool`,
	`INSERT INTO comments (id, ticket_id, author_id, body, created_at)
	 SELECT c, t.id, (t.org_id - 1) * $3::int + 1 + c % $3::int, 'comment ' || c || ' on ticket ' || t.id,
	        t.created_at + (c % 50) * interval '10 minutes'
	 FROM generate_series(1, $2::int * $5::int) c JOIN tickets t ON t.id = 1 + (c::bigint * c) % $2::int`,
	`INSERT INTO ticket_labels (ticket_id, org_id, label)
	 SELECT t.id, t.org_id, l.name
	 FROM tickets t, LATERAL (VALUES ((ARRAY['bug','feature','question','billing','ui','api','docs','urgent'])[1 + t.id % 8]),
	                                 ((ARRAY['bug','feature','question','billing','ui','api','docs','urgent'])[1 + (t.id + 3) % 8])) AS l(name)
	 WHERE t.id % 3 <> 0 AND (l.name = (ARRAY['bug','feature','question','billing','ui','api','docs','urgent'])[1 + t.id % 8] OR t.id % 4 = 0)`,
	`SELECT setval(pg_get_serial_sequence('tickets', 'id'), (SELECT max(id) FROM tickets))`,
	`SELECT setval(pg_get_serial_sequence('comments', 'id'), (SELECT max(id) FROM comments))`,
	`ANALYZE organizations, users, tickets, comments, labels, ticket_labels, sla_calendar`,
}

// Seed empties the desk's tables and fills them with deterministic rows
// proportional to scale: at scale 1, 10 organizations (and an eleventh
// with nothing in it), 200 users, 3,000 tickets with 2-8 KB bodies, about
// 6,000 comments, 80 labels and about 2,500 ticket labels; and at any
// scale 3,653 days of sla_calendar (2020-2029). The schema must
// exist (CreateSchema).
func Seed(ctx context.Context, db *sql.DB, scale int) error {
	if scale < 1 {
		return fmt.Errorf("seed ticket desk: scale %d: want at least 1", scale)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("seed ticket desk: %w", err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("seed ticket desk: %w", err)
	}
	defer tx.Rollback()
	// The sizes are whole numbers and the epoch a constant: written into
	// the text, they leave PostgreSQL nothing to infer.
	r := strings.NewReplacer("$1::int", strconv.Itoa(OrgsPerScale*scale), "$2::int", strconv.Itoa(TicketsPerScale*scale),
		"$3::int", strconv.Itoa(UsersPerOrg), "$5::int", strconv.Itoa(CommentsPerTicket), "$4::timestamptz", "'"+SeedEpoch.Format(time.RFC3339)+"'::timestamptz")
	for i, q := range seedSQL {
		if _, err := tx.ExecContext(ctx, r.Replace(q)); err != nil {
			return fmt.Errorf("seed ticket desk (step %d; did CreateSchema run?): %w", i+1, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("seed ticket desk: commit: %w", err)
	}
	return nil
}
