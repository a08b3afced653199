package ticketdesk

import (
	"context"
	"database/sql"
	"fmt"
)

// Tables are the desk's tables, parents first.
var Tables = []string{"organizations", "users", "tickets", "comments", "labels", "ticket_labels", "sla_calendar"}

// schemaSQL creates the desk. Every table has a primary key (the engine
// needs one to follow rows); a ticket's comments and labels go with it
// (ON DELETE CASCADE), and a label renamed in place is renamed on its
// tickets too (ON UPDATE CASCADE). tickets.body is large (2-8 KB of
// incompressible text in the seed) so that PostgreSQL stores it out of
// line (TOAST) and an update that leaves it alone streams it as unchanged.
// sla_calendar (one row a day, 2020 to 2029) is reference data the writer
// never changes: larger than RowLimit and still, so the lookup over the cap
// compares the same answer on both sides.
const schemaSQL = `
CREATE TABLE IF NOT EXISTS organizations (
	id         bigint PRIMARY KEY,
	name       text NOT NULL,
	plan       text NOT NULL,
	created_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS users (
	id         bigint PRIMARY KEY,
	org_id     bigint NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
	name       text NOT NULL,
	email      text NOT NULL UNIQUE,
	created_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS tickets (
	id          bigserial PRIMARY KEY,
	org_id      bigint NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
	assignee_id bigint REFERENCES users(id) ON DELETE SET NULL,
	title       text NOT NULL,
	status      text NOT NULL,
	priority    int NOT NULL,
	tags        text[] NOT NULL DEFAULT '{}',
	body        text NOT NULL,
	created_at  timestamptz NOT NULL,
	updated_at  timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS tickets_org_id ON tickets (org_id);
CREATE INDEX IF NOT EXISTS tickets_created_at ON tickets (created_at);
CREATE TABLE IF NOT EXISTS comments (
	id         bigserial PRIMARY KEY,
	ticket_id  bigint NOT NULL REFERENCES tickets(id) ON DELETE CASCADE,
	author_id  bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
	body       text NOT NULL,
	created_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS comments_ticket_id ON comments (ticket_id);
CREATE TABLE IF NOT EXISTS labels (
	org_id bigint NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
	name   text NOT NULL,
	color  text NOT NULL,
	PRIMARY KEY (org_id, name)
);
CREATE TABLE IF NOT EXISTS ticket_labels (
	ticket_id bigint NOT NULL REFERENCES tickets(id) ON DELETE CASCADE,
	org_id    bigint NOT NULL,
	label     text NOT NULL,
	PRIMARY KEY (ticket_id, org_id, label),
	FOREIGN KEY (org_id, label) REFERENCES labels(org_id, name) ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE TABLE IF NOT EXISTS sla_calendar (
	day      date PRIMARY KEY,
	business boolean NOT NULL
);
`

// CreateSchema creates the desk's tables and indexes where they are
// missing; running it again changes nothing.
func CreateSchema(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, schemaSQL); err != nil {
		return fmt.Errorf("create ticket desk schema: %w", err)
	}
	return nil
}

// DropSchema drops the desk's tables (and their rows) if they exist.
func DropSchema(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `DROP TABLE IF EXISTS sla_calendar, ticket_labels, labels, comments, tickets, users, organizations CASCADE`); err != nil {
		return fmt.Errorf("drop ticket desk schema: %w", err)
	}
	return nil
}
