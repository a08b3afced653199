package ticketdesk

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/freshetdb/freshet/readcache"
)

// World is what the lookups and the writer draw their arguments from: the
// seeded desk's id ranges and known keys. It is read once (LoadWorld) and
// never changes; rows the writer adds or deletes later are found by
// range (an id drawn from a range may name a deleted ticket, which a
// lookup must then find missing, fresh as ever).
type World struct {
	// Orgs are the organizations that have users, labels and tickets;
	// EmptyOrg has none and the writer never gives it any.
	Orgs     []int64 `json:"orgs"`
	EmptyOrg int64   `json:"empty_org"`
	// UsersByOrg lists each organization's users.
	UsersByOrg map[int64][]int64 `json:"users_by_org"`
	// MaxTicketID and MaxCommentID are the largest ids when the world was
	// loaded (ids start at 1).
	MaxTicketID  int64 `json:"max_ticket_id"`
	MaxCommentID int64 `json:"max_comment_id"`
	// Emails are some users' emails, to look users up by a unique column.
	Emails []string `json:"emails"`
	// First and Last bound the tickets' created_at when loaded.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

// LoadWorld reads the World of a seeded desk. It reads PostgreSQL even
// through a cached pool (readcache.ViaPostgres).
func LoadWorld(ctx context.Context, db *sql.DB) (*World, error) {
	ctx = readcache.ViaPostgres(ctx)
	w := &World{UsersByOrg: map[int64][]int64{}}
	var first, last sql.NullTime
	err := db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0), min(created_at), max(created_at) FROM tickets`).Scan(&w.MaxTicketID, &first, &last)
	if err != nil {
		return nil, fmt.Errorf("load ticket desk world (seeded? run Seed): %w", err)
	}
	if w.MaxTicketID == 0 {
		return nil, fmt.Errorf("load ticket desk world: no tickets: run Seed first")
	}
	w.First, w.Last = first.Time.UTC(), last.Time.UTC()
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM comments`).Scan(&w.MaxCommentID); err != nil {
		return nil, fmt.Errorf("load ticket desk world: %w", err)
	}
	rows, err := db.QueryContext(ctx, `SELECT o.id, u.id, u.email FROM organizations o LEFT JOIN users u ON u.org_id = o.id ORDER BY o.id, u.id`)
	if err != nil {
		return nil, fmt.Errorf("load ticket desk world: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var org int64
		var user sql.NullInt64
		var email sql.NullString
		if err := rows.Scan(&org, &user, &email); err != nil {
			return nil, fmt.Errorf("load ticket desk world: %w", err)
		}
		if !user.Valid {
			if w.EmptyOrg == 0 {
				w.EmptyOrg = org
			}
			continue
		}
		if len(w.UsersByOrg[org]) == 0 {
			w.Orgs = append(w.Orgs, org)
		}
		w.UsersByOrg[org] = append(w.UsersByOrg[org], user.Int64)
		if user.Int64%7 == 1 {
			w.Emails = append(w.Emails, email.String)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load ticket desk world: %w", err)
	}
	if len(w.Orgs) == 0 || w.EmptyOrg == 0 || len(w.Emails) == 0 {
		return nil, fmt.Errorf("load ticket desk world: want organizations with users and one without (%d and %d): run Seed first", len(w.Orgs), w.EmptyOrg)
	}
	return w, nil
}
