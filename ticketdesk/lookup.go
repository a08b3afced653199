package ticketdesk

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"

	"gorm.io/gorm"
)

// RowLimit is the per-entry cap the desk's expectations assume: run
// `freshet serve --row-limit 2000` (FRESHET_ROW_LIMIT=2000). The engine
// refuses (code row_limit) a subscription whose first read returns more
// rows; the lookup "largest_under_cap" returns exactly RowLimit rows and is
// served, "over_cap" returns the whole SLA calendar and is refused. Comments (ids
// 1 to 2,000 at least, at any scale) are what "largest_under_cap" reads,
// since the writer rarely changes them (only a ticket's delete does) and
// an answer the writer changes many times a second is hard to compare. The engine reads
// each table of a join whole unless the filter constrains it, so the
// users table (200 per unit of scale) must fit too: the expectations hold
// for scales 1 to 9.
const RowLimit = 2000

// Expect is what a lookup expects of the engine.
type Expect int

// The expectations.
const (
	Cached  Expect = iota // served from rows the engine keeps fresh
	Refused               // refused by the engine, so read from PostgreSQL
)

func (e Expect) String() string {
	if e == Refused {
		return "refused"
	}
	return "cached"
}

// MarshalText writes "cached" or "refused".
func (e Expect) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// Lookup is one read the desk's handlers make, with what it expects of
// the engine.
type Lookup struct {
	// Name is the lookup's route: GET /lookups/{Name}.
	Name string
	// Expect is Cached or Refused; Code is the engine's refusal code when
	// Refused (docs/queries.md); Why says why in a sentence.
	Expect Expect
	Code   string
	Why    string
	// Empty marks a lookup whose result must stay empty whatever the
	// writer does (Verify counts a non-empty answer as a mismatch).
	Empty bool
	// Args draws the lookup's arguments.
	Args func(r *rand.Rand, w *World) []any
	// Run reads through db (the cache or PostgreSQL, as db's pool and
	// context say). Its result marshals to JSON deterministically: rows
	// are ordered by the query or sorted before they are returned.
	Run func(ctx context.Context, db *gorm.DB, args []any) (any, error)
	// Clock is set for a lookup whose query compares a column with now():
	// its answer changes as the clock passes rows, and the engine's answer
	// is exact at the database clock of its last heartbeat, not at the
	// instant PostgreSQL reads (docs/queries.md, "Time"). Checkpoint uses
	// it to compare exactly.
	Clock *LookupClock
}

// LookupClock lets a verifier ask PostgreSQL for a clocked lookup's answer
// at a given clock.
type LookupClock struct {
	// RunAt reads the lookup's query with now() replaced by at: PostgreSQL's
	// answer in a transaction started at that instant.
	RunAt func(ctx context.Context, db *gorm.DB, args []any, at time.Time) (any, error)
	// Changes lists the clocks in (lo, hi] at which the answer can change
	// while the data do not: between two of them (and lo), RunAt answers
	// the same.
	Changes func(ctx context.Context, db *gorm.DB, args []any, lo, hi time.Time) ([]time.Time, error)
}

// RecentWindow is how far back the lookup recently_updated looks.
const RecentWindow = "30 seconds"

// recentlyUpdated is the lookup recently_updated read at clock (SQL: now()
// or a parameter standing for it).
func recentlyUpdated(ctx context.Context, db *gorm.DB, org int64, clock string, at ...any) (any, error) {
	args := append([]any{org}, at...)
	return find[TicketRow](db.WithContext(ctx).Table("tickets").Select(rowCols).
		Where("org_id = ? AND updated_at > "+clock+" - interval '"+RecentWindow+"'", args...).Order("updated_at DESC, id").Limit(10))
}

// LookupByName returns the lookup named name, or false.
func LookupByName(name string) (Lookup, bool) {
	for _, l := range Lookups() {
		if l.Name == name {
			return l, true
		}
	}
	return Lookup{}, false
}

// draws
func org(r *rand.Rand, w *World) int64 { return w.Orgs[r.Intn(len(w.Orgs))] }

// ticket draws an id among the loaded tickets and a few past them (new
// tickets, or none).
func ticket(r *rand.Rand, w *World) int64 { return 1 + r.Int63n(w.MaxTicketID+w.MaxTicketID/20+1) }

func i64(a any) int64 {
	switch v := a.(type) {
	case int64:
		return v
	case int:
		return int64(v)
	case float64: // from JSON
		return int64(v)
	}
	panic(fmt.Sprintf("ticketdesk: argument %v (%T): want an integer", a, a))
}

// first maps "no row" to a nil result: a missing row is an answer.
func first[T any](tx *gorm.DB, dst *T) (any, error) {
	err := tx.Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return dst, nil
}

func find[T any](tx *gorm.DB) ([]T, error) {
	out := []T{}
	if err := tx.Find(&out).Error; err != nil {
		return nil, err
	}
	return out, nil
}

// rowCols are TicketRow's columns.
const rowCols = "id, org_id, assignee_id, title, status, priority, updated_at"

// CalendarDay is a day of the SLA calendar.
type CalendarDay struct {
	Day      time.Time `json:"day"`
	Business bool      `json:"business"`
}

// CommentStamp is a comment without its body.
type CommentStamp struct {
	ID        int64     `json:"id"`
	TicketID  int64     `json:"ticket_id"`
	AuthorID  int64     `json:"author_id"`
	CreatedAt time.Time `json:"created_at"`
}

// Assignee is a ticket with its assignee's name (an inner join).
type Assignee struct {
	ID       int64  `json:"id"`
	Title    string `json:"title"`
	Priority int    `json:"priority"`
	Assignee string `json:"assignee"`
}

// LabelOf is one label of a ticket with its color (a join on the
// labels' two-column key).
type LabelOf struct {
	TicketID int64  `json:"ticket_id"`
	Name     string `json:"name"`
	Color    string `json:"color"`
}

// OrgLabel is an organization with one of its labels, or with none (a
// left join).
type OrgLabel struct {
	OrgID   int64   `json:"org_id"`
	OrgName string  `json:"org_name"`
	Label   *string `json:"label"`
}

// TicketAssignee is a ticket with its assignee, or with none (a left
// join).
type TicketAssignee struct {
	ID       int64   `json:"id"`
	Status   string  `json:"status"`
	UserID   *int64  `json:"user_id"`
	UserName *string `json:"user_name"`
}

// TicketComment is a ticket with one of its comments, or with none (a
// left join).
type TicketComment struct {
	ID          int64   `json:"id"`
	Status      string  `json:"status"`
	CommentID   *int64  `json:"comment_id"`
	CommentBody *string `json:"comment_body"`
}

// StatusCount is one group of a GROUP BY.
type StatusCount struct {
	Status string `json:"status"`
	N      int64  `json:"n"`
}

// AssigneeLoad is one row of the leaderboard: an assignee and how many
// of the organization's unclosed tickets they hold.
type AssigneeLoad struct {
	AssigneeID int64 `json:"assignee_id"`
	Tickets    int64 `json:"tickets"`
}

// LeaderboardSize is how many assignees the lookup leaderboard returns.
const LeaderboardSize = 5

// Latest is the newest updated_at of an organization's tickets.
type Latest struct {
	Latest *time.Time `json:"latest"`
}

// Lookups returns every lookup the desk makes, in a fixed order.
func Lookups() []Lookup {
	const pageSize = 20
	return []Lookup{
		{
			Name: "ticket_by_id", Why: "point lookup by primary key; the body is TOASTed",
			Args: func(r *rand.Rand, w *World) []any { return []any{ticket(r, w)} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				var t Ticket
				return first(db.WithContext(ctx).First(&t, i64(a[0])), &t)
			},
		},
		{
			Name: "label_by_key", Why: "point lookup by the two-column primary key (org_id, name)",
			Args: func(r *rand.Rand, w *World) []any { return []any{org(r, w), LabelNames[r.Intn(len(LabelNames))]} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				var l Label
				return first(db.WithContext(ctx).Where("org_id = ? AND name = ?", i64(a[0]), a[1]).Take(&l), &l)
			},
		},
		{
			Name: "user_by_email", Why: "point lookup by a unique column that is not the key",
			Args: func(r *rand.Rand, w *World) []any { return []any{w.Emails[r.Intn(len(w.Emails))]} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				var u User
				return first(db.WithContext(ctx).Where("email = ?", a[0]).Take(&u), &u)
			},
		},
		{
			Name: "unassigned", Why: "IS NULL: the writer flips assignees to NULL and back",
			Args: func(r *rand.Rand, w *World) []any { return []any{org(r, w)} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[TicketRow](db.WithContext(ctx).Table("tickets").Select(rowCols).
					Where("org_id = ? AND assignee_id IS NULL", i64(a[0])).Order("id"))
			},
		},
		{
			Name: "blocked_or_urgent", Why: "OR of two columns",
			Args: func(r *rand.Rand, w *World) []any { return []any{org(r, w), "blocked", 5} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[TicketRow](db.WithContext(ctx).Table("tickets").Select(rowCols).
					Where("org_id = ? AND (status = ? OR priority >= ?)", i64(a[0]), a[1], i64(a[2])).Order("id"))
			},
		},
		{
			Name: "not_closed_not_low", Why: "<> and NOT IN",
			Args: func(r *rand.Rand, w *World) []any { return []any{org(r, w), "closed", []int64{1, 2}} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[TicketRow](db.WithContext(ctx).Table("tickets").Select(rowCols).
					Where("org_id = ? AND status <> ? AND priority NOT IN ?", i64(a[0]), a[1], ints(a[2])).Order("id"))
			},
		},
		{
			Name: "priority_any", Why: "= ANY of an array bind (the way a team avoids IN-list expansion)",
			Args: func(r *rand.Rand, w *World) []any { return []any{org(r, w), "{4,5}"} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[TicketRow](db.WithContext(ctx).Table("tickets").Select(rowCols).
					Where("org_id = ? AND priority = ANY(?::int[])", i64(a[0]), a[1]).Order("id"))
			},
		},
		{
			Name: "created_between", Why: "a time range on a timestamptz column",
			Args: func(r *rand.Rand, w *World) []any {
				span := w.Last.Sub(w.First)
				from := w.First.Add(time.Duration(r.Int63n(int64(span) + 1))).Truncate(time.Hour)
				return []any{from, from.Add(12 * time.Hour)}
			},
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[TicketRow](db.WithContext(ctx).Table("tickets").Select(rowCols).
					Where("created_at >= ? AND created_at < ?", a[0], a[1]).Order("created_at, id"))
			},
		},
		{
			Name: "tickets_in_100", Why: "an IN list of 100 ids (some deleted or not yet made)",
			Args: func(r *rand.Rand, w *World) []any {
				ids := make([]int64, 100)
				for i := range ids {
					ids[i] = ticket(r, w)
				}
				return []any{ids}
			},
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[TicketRow](db.WithContext(ctx).Table("tickets").Select(rowCols).
					Where("id IN ?", ints(a[0])).Order("id"))
			},
		},
		{
			Name: "empty_org_tickets", Why: "must stay empty: the writer never touches the empty organization", Empty: true,
			Args: func(r *rand.Rand, w *World) []any { return []any{w.EmptyOrg} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[TicketRow](db.WithContext(ctx).Table("tickets").Select(rowCols).
					Where("org_id = ?", i64(a[0])).Order("id"))
			},
		},
		{
			Name: "never_status", Why: "must stay empty: only rolled-back transactions set this status", Empty: true,
			Args: func(r *rand.Rand, w *World) []any { return []any{StatusNever} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[TicketRow](db.WithContext(ctx).Table("tickets").Select(rowCols).
					Where("status = ?", a[0]).Order("id"))
			},
		},
		{
			Name: "largest_under_cap", Why: fmt.Sprintf("%d comments, exactly the per-entry cap (serve --row-limit %d)", RowLimit, RowLimit),
			Args: func(r *rand.Rand, w *World) []any {
				lo := 1 + r.Int63n(max(1, w.MaxCommentID-RowLimit+1))
				return []any{lo, lo + RowLimit - 1}
			},
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[CommentStamp](db.WithContext(ctx).Model(&Comment{}).Select("id, ticket_id, author_id, created_at").
					Where("id BETWEEN ? AND ?", i64(a[0]), i64(a[1])).Order("id"))
			},
		},
		{
			Name: "over_cap", Expect: Refused, Code: "row_limit",
			Why:  fmt.Sprintf("the SLA calendar, 3,653 days: more rows than the per-entry cap (serve --row-limit %d)", RowLimit),
			Args: func(r *rand.Rand, w *World) []any { return []any{"2020-01-01"} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[CalendarDay](db.WithContext(ctx).Table("sla_calendar").Select("day, business").
					Where("day >= ?", a[0]).Order("day"))
			},
		},
		{
			Name: "org_page", Why: "ORDER BY ... LIMIT ... OFFSET: a page of an organization's tickets",
			Args: func(r *rand.Rand, w *World) []any { return []any{org(r, w), r.Intn(4) * pageSize} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[TicketRow](db.WithContext(ctx).Table("tickets").Select(rowCols).
					Where("org_id = ?", i64(a[0])).Order("priority DESC, id").Limit(pageSize).Offset(int(i64(a[1]))))
			},
		},
		{
			Name: "latest_comments", Why: "ORDER BY ... DESC LIMIT: a ticket's newest comments",
			Args: func(r *rand.Rand, w *World) []any { return []any{ticket(r, w)} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[Comment](db.WithContext(ctx).Where("ticket_id = ?", i64(a[0])).
					Order("created_at DESC, id DESC").Limit(10))
			},
		},
		{
			Name: "count_open", Why: "COUNT(*) with a filter",
			Args: func(r *rand.Rand, w *World) []any { return []any{org(r, w), "open"} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				var n int64
				err := db.WithContext(ctx).Model(&Ticket{}).Where("org_id = ? AND status = ?", i64(a[0]), a[1]).Count(&n).Error
				return n, err
			},
		},
		{
			Name: "count_comments", Why: "COUNT(*) of a ticket's comments (new comments, cascaded deletes)",
			Args: func(r *rand.Rand, w *World) []any { return []any{ticket(r, w)} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				var n int64
				err := db.WithContext(ctx).Model(&Comment{}).Where("ticket_id = ?", i64(a[0])).Count(&n).Error
				return n, err
			},
		},
		{
			Name: "assigned_with_user", Why: "inner join tickets to users: renames show through the join",
			Args: func(r *rand.Rand, w *World) []any { return []any{org(r, w), 4} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[Assignee](db.WithContext(ctx).Table("tickets").
					Select("tickets.id, tickets.title, tickets.priority, users.name AS assignee").
					Joins("JOIN users ON users.id = tickets.assignee_id").
					Where("tickets.org_id = ? AND tickets.priority >= ?", i64(a[0]), i64(a[1])).Order("tickets.id"))
			},
		},
		{
			Name: "ticket_labels", Why: "inner join on a two-column key (org_id, name)",
			Args: func(r *rand.Rand, w *World) []any { return []any{ticket(r, w)} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[LabelOf](db.WithContext(ctx).Table("ticket_labels").
					Select("ticket_labels.ticket_id, labels.name, labels.color").
					Joins("JOIN labels ON labels.org_id = ticket_labels.org_id AND labels.name = ticket_labels.label").
					Where("ticket_labels.ticket_id = ?", i64(a[0])).Order("labels.name"))
			},
		},
		{
			Name: "empty_org_labels", Why: "left join whose right side stays empty: one row, NULL label",
			Args: func(r *rand.Rand, w *World) []any { return []any{w.EmptyOrg} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[OrgLabel](db.WithContext(ctx).Table("organizations").
					Select("organizations.id AS org_id, organizations.name AS org_name, labels.name AS label").
					Joins("LEFT JOIN labels ON labels.org_id = organizations.id").
					Where("organizations.id = ?", i64(a[0])).Order("labels.name"))
			},
		},
		{
			Name: "ticket_assignee", Why: "left join: a ticket with its assignee, or NULL while unassigned",
			Args: func(r *rand.Rand, w *World) []any { return []any{ticket(r, w)} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[TicketAssignee](db.WithContext(ctx).Table("tickets").
					Select("tickets.id, tickets.status, users.id AS user_id, users.name AS user_name").
					Joins("LEFT JOIN users ON users.id = tickets.assignee_id").
					Where("tickets.id = ?", i64(a[0])))
			},
		},
		{
			Name: "ticket_with_comments", Why: "left join a ticket to its comments: the comments read is bounded by the ticket's id through the ON equality",
			Args: func(r *rand.Rand, w *World) []any { return []any{ticket(r, w)} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[TicketComment](db.WithContext(ctx).Table("tickets").
					Select("tickets.id, tickets.status, comments.id AS comment_id, comments.body AS comment_body").
					Joins("LEFT JOIN comments ON comments.ticket_id = tickets.id").
					Where("tickets.id = ?", i64(a[0])).Order("comments.id"))
			},
		},
		{
			Name: "distinct_statuses", Why: "DISTINCT: a count of rows kept per status, a status gone when its last ticket leaves it",
			Args: func(r *rand.Rand, w *World) []any { return []any{org(r, w)} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				out := []string{}
				err := db.WithContext(ctx).Model(&Ticket{}).Distinct("status").Where("org_id = ?", i64(a[0])).Order("status").Pluck("status", &out).Error
				return out, err
			},
		},
		{
			Name: "status_counts", Why: "GROUP BY with COUNT(*): a count kept per status, ordered by the key",
			Args: func(r *rand.Rand, w *World) []any { return []any{org(r, w)} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[StatusCount](db.WithContext(ctx).Model(&Ticket{}).Select("status, count(*) AS n").
					Where("org_id = ?", i64(a[0])).Group("status").Order("status"))
			},
		},
		{
			Name: "leaderboard", Why: fmt.Sprintf("top-N groups: the %d assignees holding the most tickets not closed, ORDER BY count(*) DESC then the key, a total order; status changes, closing batches, moves and reassignments move assignees up and down", LeaderboardSize),
			Args: func(r *rand.Rand, w *World) []any { return []any{org(r, w), "closed"} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[AssigneeLoad](db.WithContext(ctx).Model(&Ticket{}).Select("assignee_id, count(*) AS tickets").
					Where("org_id = ? AND status <> ? AND assignee_id IS NOT NULL", i64(a[0]), a[1]).
					Group("assignee_id").Order("count(*) DESC, assignee_id").Limit(LeaderboardSize))
			},
		},
		{
			Name: "latest_update", Why: "MAX of a timestamp: the organization's values kept in a tree, so a deleted or moved newest ticket brings the next",
			Args: func(r *rand.Rand, w *World) []any { return []any{org(r, w)} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[Latest](db.WithContext(ctx).Model(&Ticket{}).Select("max(updated_at) AS latest").
					Where("org_id = ?", i64(a[0])))
			},
		},
		{
			Name: "recently_updated", Why: "a now()-relative window: the organization's tickets updated in the last " + RecentWindow + ", newest first; rows leave as the database's clock passes them, with no write",
			Args: func(r *rand.Rand, w *World) []any { return []any{org(r, w)} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return recentlyUpdated(ctx, db, i64(a[0]), "now()")
			},
			Clock: &LookupClock{
				RunAt: func(ctx context.Context, db *gorm.DB, a []any, at time.Time) (any, error) {
					return recentlyUpdated(ctx, db, i64(a[0]), "?::timestamptz", at)
				},
				Changes: func(ctx context.Context, db *gorm.DB, a []any, lo, hi time.Time) ([]time.Time, error) {
					// A row leaves when the clock reaches its updated_at
					// plus the window (updated_at > clock - window).
					out := []time.Time{}
					err := db.WithContext(ctx).Raw("SELECT DISTINCT updated_at + interval '"+RecentWindow+"' AS t FROM tickets WHERE org_id = ? AND updated_at + interval '"+RecentWindow+"' > ? AND updated_at + interval '"+RecentWindow+"' <= ? ORDER BY 1",
						i64(a[0]), lo, hi).Scan(&out).Error
					return out, err
				},
			},
		},
		{
			Name: "tagged", Why: "the array operator @>: tickets carrying a tag",
			Args: func(r *rand.Rand, w *World) []any { return []any{org(r, w), "{" + Tags[r.Intn(len(Tags))] + "}"} },
			Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
				return find[TicketRow](db.WithContext(ctx).Table("tickets").Select(rowCols).
					Where("org_id = ? AND tags @> ?", i64(a[0]), a[1]).Order("id"))
			},
		},
	}
}

// ints reads an []int64 argument (or the []any JSON gives).
func ints(a any) []int64 {
	switch v := a.(type) {
	case []int64:
		return v
	case []any:
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = i64(x)
		}
		return out
	}
	panic(fmt.Sprintf("ticketdesk: argument %v (%T): want a list of integers", a, a))
}
