package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
)

// deskSchema is the demo's database: a small ticket desk.
const deskSchema = `
CREATE TABLE IF NOT EXISTS organizations (
	id         serial PRIMARY KEY,
	name       text NOT NULL UNIQUE,
	plan       text NOT NULL DEFAULT 'free',
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS tickets (
	id         bigserial PRIMARY KEY,
	org_id     int NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
	title      text NOT NULL,
	status     text NOT NULL DEFAULT 'open',
	priority   int NOT NULL DEFAULT 3,
	opened_at  timestamptz NOT NULL DEFAULT now(),
	closed_at  timestamptz
);
CREATE TABLE IF NOT EXISTS comments (
	id         bigserial PRIMARY KEY,
	ticket_id  bigint NOT NULL REFERENCES tickets(id) ON DELETE CASCADE,
	author     text NOT NULL,
	body       text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);
`

var (
	deskOrgs    = []string{"Acme Corp", "Globex", "Initech", "Umbrella", "Hooli"}
	deskAuthors = []string{"ana", "bo", "chen", "dara", "eli", "fumi"}
	deskTitles  = []string{
		"Cannot log in", "Invoice shows the wrong amount", "Export to CSV times out",
		"Dark mode please", "Password reset mail never arrives", "Dashboard is slow",
		"Webhook fires twice", "Typo on the pricing page",
	}
	deskBodies = []string{
		"Looking into it.", "Can you send a screenshot?", "Reproduced on staging.",
		"Fix is deployed, please check.", "Still happening for us.", "Thanks, works now!",
	}
)

// deskWriter is the demo's writer: it plays a help desk's users, committing
// a mix of inserts, updates, deletes, multi-row transactions and the odd
// rollback at a gentle pace, so that tail has something to show.
type deskWriter struct {
	conn     *pgx.Conn
	rnd      *rand.Rand
	interval time.Duration // pause between transactions
	logger   *slog.Logger

	committed int // transactions committed so far
}

// newDeskWriter connects to dsn and creates the schema and a few
// organizations if they are missing.
func newDeskWriter(ctx context.Context, dsn string, interval time.Duration, logger *slog.Logger) (*deskWriter, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect writer: %w", err)
	}
	if _, err := conn.Exec(ctx, deskSchema); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("create demo schema: %w", err)
	}
	return &deskWriter{
		conn:     conn,
		rnd:      rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)),
		interval: interval,
		logger:   logger,
	}, nil
}

// Seed inserts the organizations in one multi-row transaction.
func (w *deskWriter) Seed(ctx context.Context) error {
	return pgx.BeginFunc(ctx, w.conn, func(tx pgx.Tx) error {
		for i, name := range deskOrgs {
			plan := []string{"free", "team", "enterprise"}[i%3]
			if _, err := tx.Exec(ctx, `INSERT INTO organizations (name, plan) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, name, plan); err != nil {
				return fmt.Errorf("seed organizations: %w", err)
			}
		}
		return nil
	})
}

// Run commits transactions until ctx ends.
func (w *deskWriter) Run(ctx context.Context) error {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := w.Step(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// errRollback makes a step's transaction roll back on purpose.
var errRollback = errors.New("rolled back on purpose")

// Step commits (or, now and then, rolls back) one transaction.
func (w *deskWriter) Step(ctx context.Context) error {
	var (
		what string
		step func(context.Context, pgx.Tx) error
	)
	switch n := w.rnd.IntN(100); {
	case n < 30 || w.committed < 2:
		what, step = "open a ticket", w.openTicket
	case n < 55:
		what, step = "comment and move a ticket along", w.comment
	case n < 70:
		what, step = "close a ticket", w.closeTicket
	case n < 80:
		what, step = "reprioritize a batch of tickets", w.reprioritize
	case n < 92:
		what, step = "delete a comment", w.deleteComment
	default:
		what, step = "open a ticket, then change our mind (rollback)", func(ctx context.Context, tx pgx.Tx) error {
			if err := w.openTicket(ctx, tx); err != nil {
				return err
			}
			return errRollback
		}
	}
	err := pgx.BeginFunc(ctx, w.conn, func(tx pgx.Tx) error { return step(ctx, tx) })
	switch {
	case errors.Is(err, errRollback):
		w.logger.Debug("writer", "did", what)
		return nil
	case err != nil:
		return fmt.Errorf("writer: %s: %w", what, err)
	}
	w.committed++
	w.logger.Debug("writer", "did", what)
	return nil
}

func (w *deskWriter) openTicket(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `INSERT INTO tickets (org_id, title, priority)
		SELECT id, $2, $3 FROM organizations ORDER BY id OFFSET $1 LIMIT 1`,
		w.rnd.IntN(len(deskOrgs)), deskTitles[w.rnd.IntN(len(deskTitles))], 1+w.rnd.IntN(4))
	return err
}

func (w *deskWriter) comment(ctx context.Context, tx pgx.Tx) error {
	var id int64
	err := tx.QueryRow(ctx, `SELECT id FROM tickets WHERE status <> 'closed' ORDER BY random() LIMIT 1`).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return w.openTicket(ctx, tx)
	} else if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO comments (ticket_id, author, body) VALUES ($1, $2, $3)`,
		id, deskAuthors[w.rnd.IntN(len(deskAuthors))], deskBodies[w.rnd.IntN(len(deskBodies))]); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE tickets SET status = 'pending' WHERE id = $1`, id)
	return err
}

func (w *deskWriter) closeTicket(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `UPDATE tickets SET status = 'closed', closed_at = now()
		WHERE id = (SELECT id FROM tickets WHERE status <> 'closed' ORDER BY opened_at LIMIT 1)`)
	return err
}

func (w *deskWriter) reprioritize(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `UPDATE tickets SET priority = 1 + (priority % 4)
		WHERE id IN (SELECT id FROM tickets WHERE status <> 'closed' ORDER BY id DESC LIMIT 3)`)
	return err
}

func (w *deskWriter) deleteComment(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `DELETE FROM comments WHERE id = (SELECT min(id) FROM comments)`)
	return err
}

// Close closes the writer's connection.
func (w *deskWriter) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return w.conn.Close(ctx)
}
