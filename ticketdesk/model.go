package ticketdesk

import "time"

// Organization is a row of organizations.
type Organization struct {
	ID        int64     `gorm:"primaryKey" json:"id"`
	Name      string    `json:"name"`
	Plan      string    `json:"plan"`
	CreatedAt time.Time `json:"created_at"`
}

// User is a row of users.
type User struct {
	ID        int64     `gorm:"primaryKey" json:"id"`
	OrgID     int64     `json:"org_id"`
	Name      string    `json:"name"`
	Email     string    `json:"email"`
	CreatedAt time.Time `json:"created_at"`
}

// Ticket is a row of tickets, body included.
type Ticket struct {
	ID         int64     `gorm:"primaryKey" json:"id"`
	OrgID      int64     `json:"org_id"`
	AssigneeID *int64    `json:"assignee_id"`
	Title      string    `json:"title"`
	Status     string    `json:"status"`
	Priority   int       `json:"priority"`
	Tags       string    `json:"tags"` // PostgreSQL's text form of the text[], e.g. {bug}
	Body       string    `json:"body"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// TicketRow is a ticket without its body and tags: what lists show.
type TicketRow struct {
	ID         int64     `json:"id"`
	OrgID      int64     `json:"org_id"`
	AssigneeID *int64    `json:"assignee_id"`
	Title      string    `json:"title"`
	Status     string    `json:"status"`
	Priority   int       `json:"priority"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Comment is a row of comments.
type Comment struct {
	ID        int64     `gorm:"primaryKey" json:"id"`
	TicketID  int64     `json:"ticket_id"`
	AuthorID  int64     `json:"author_id"`
	Body      string    `json:"body"`
	CreatedAt time.Time `json:"created_at"`
}

// Label is a row of labels; its key is (OrgID, Name).
type Label struct {
	OrgID int64  `gorm:"primaryKey" json:"org_id"`
	Name  string `gorm:"primaryKey" json:"name"`
	Color string `json:"color"`
}

// TicketLabel is a row of ticket_labels.
type TicketLabel struct {
	TicketID int64  `gorm:"primaryKey" json:"ticket_id"`
	OrgID    int64  `gorm:"primaryKey" json:"org_id"`
	Label    string `gorm:"primaryKey" json:"label"`
}
