package ticketdesk

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Kind is a kind of change the Writer makes.
type Kind string

// The kinds of change. Each is one transaction.
const (
	KindStatus    Kind = "status"     // a ticket's status changes
	KindPriority  Kind = "priority"   // a ticket's priority changes
	KindComment   Kind = "comment"    // a new comment
	KindTicket    Kind = "new_ticket" // a new ticket with a 2-8 KB body and a label
	KindDelete    Kind = "delete"     // a ticket deleted, its comments and labels with it (cascade)
	KindMove      Kind = "move"       // a ticket moved to another organization, relabelled and reassigned
	KindRename    Kind = "rename"     // a user renamed: shows through the tickets-users join
	KindAssignee  Kind = "assignee"   // an assignee flipped to NULL, or from NULL to a user
	KindBatch     Kind = "batch"      // one transaction closing solved tickets, commenting and reprioritizing
	KindRollback  Kind = "rollback"   // changes (status StatusNever, a comment) rolled back: nothing may show
	KindTouch     Kind = "touch"      // a ticket's title changes, its TOASTed body left untouched
	KindLabelEdit Kind = "label"      // a label added to or removed from a ticket (two-column key)
)

// Kinds lists every kind of change, in a fixed order.
var Kinds = []Kind{KindStatus, KindPriority, KindComment, KindTicket, KindDelete, KindMove, KindRename,
	KindAssignee, KindBatch, KindRollback, KindTouch, KindLabelEdit}

// DefaultMix returns the default weights of the kinds of change.
func DefaultMix() map[Kind]int {
	return map[Kind]int{KindStatus: 20, KindPriority: 10, KindComment: 20, KindTicket: 6, KindDelete: 4, KindMove: 4,
		KindRename: 4, KindAssignee: 10, KindBatch: 5, KindRollback: 4, KindTouch: 10, KindLabelEdit: 5}
}

// WriterConfig configures a Writer.
type WriterConfig struct {
	// Rate is the target of transactions per second over all workers;
	// 0 writes as fast as the database allows.
	Rate float64
	// Mix weighs the kinds of change (a missing kind is never drawn);
	// nil takes DefaultMix.
	Mix map[Kind]int
	// Workers is how many transactions run at once (default 1).
	Workers int
	// Seed seeds the draws (worker i uses Seed+i).
	Seed int64
	// Hot, when positive, draws the existing tickets the changes pick
	// from ids 1..Hot (a hot set a test can watch whole). New tickets
	// still get new ids, and a batch still closes solved tickets of its
	// organization wherever they are.
	Hot int64
}

// KindStats are one kind's counters.
type KindStats struct {
	Committed  int64 `json:"committed"`
	RolledBack int64 `json:"rolled_back"`
	Errors     int64 `json:"errors"`
}

// WriterStats are a Writer's counters since it was made.
type WriterStats struct {
	Kinds map[Kind]KindStats `json:"kinds"`
	// Totals over the kinds.
	Committed  int64 `json:"committed"`
	RolledBack int64 `json:"rolled_back"`
	Errors     int64 `json:"errors"`
	// ErrorCodes counts the failed transactions by SQLSTATE (40P01 a
	// deadlock, 40001 a serialization failure, 23503 a foreign key that
	// vanished under another worker, ...; "" for an error without one).
	ErrorCodes map[string]int64 `json:"error_codes,omitempty"`
	// LastError is the most recent error's text, for a person to read.
	LastError string `json:"last_error,omitempty"`
}

type kindCounters struct{ committed, rolledBack, errors atomic.Int64 }

// Writer keeps changing the desk: one transaction at a time per worker,
// each of a kind drawn by the mix. It never touches the World's empty
// organization and never commits StatusNever. Give it a pool that reads
// PostgreSQL directly (a write through a cached pool turns that pool's
// reads to PostgreSQL for its read-your-writes window).
type Writer struct {
	db      *sql.DB
	w       *World
	cfg     WriterConfig
	kinds   []Kind
	weights []int
	total   int
	n       map[Kind]*kindCounters
	maxID   atomic.Int64
	names   atomic.Int64
	mu      sync.Mutex
	lastErr string
	codes   map[string]int64
	// gate is held shared by each of Run's transactions and exclusively
	// while paused (Pause).
	gate sync.RWMutex
}

// Pause stops Run's workers from starting transactions and returns once
// none is in flight: from then until Resume the writer commits nothing
// (a verifier checkpoint compares answers with no write under way).
// One's callers are not paused.
func (wr *Writer) Pause() { wr.gate.Lock() }

// Resume lets Run's workers go on after Pause.
func (wr *Writer) Resume() { wr.gate.Unlock() }

// NewWriter returns a Writer of db drawing from w.
func NewWriter(db *sql.DB, w *World, cfg WriterConfig) *Writer {
	if cfg.Mix == nil {
		cfg.Mix = DefaultMix()
	}
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	wr := &Writer{db: db, w: w, cfg: cfg, n: map[Kind]*kindCounters{}, codes: map[string]int64{}}
	for _, k := range Kinds {
		wr.n[k] = &kindCounters{}
		if cfg.Mix[k] > 0 {
			wr.kinds = append(wr.kinds, k)
			wr.weights = append(wr.weights, cfg.Mix[k])
			wr.total += cfg.Mix[k]
		}
	}
	wr.maxID.Store(w.MaxTicketID)
	return wr
}

// Run writes until ctx ends, then returns nil. A failed transaction (a
// deadlock, a serialization failure, a foreign key that vanished under
// another worker) is counted and the next one starts; Run returns an
// error only when the mix is empty.
func (wr *Writer) Run(ctx context.Context) error {
	if wr.total == 0 {
		return errors.New("run writer: the mix gives no kind of change a positive weight")
	}
	var wg sync.WaitGroup
	for i := range wr.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wr.work(ctx, rand.New(rand.NewSource(wr.cfg.Seed+int64(i))))
		}()
	}
	wg.Wait()
	return nil
}

func (wr *Writer) work(ctx context.Context, r *rand.Rand) {
	var every time.Duration
	if wr.cfg.Rate > 0 {
		every = time.Duration(float64(time.Second) * float64(wr.cfg.Workers) / wr.cfg.Rate)
	}
	next := time.Now()
	for ctx.Err() == nil {
		if every > 0 {
			next = next.Add(every)
			if d := time.Until(next); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			} else if d < -time.Second {
				next = time.Now() // fell behind: do not burst to catch up
			}
		}
		wr.gate.RLock()
		wr.One(ctx, wr.draw(r), r)
		wr.gate.RUnlock()
	}
}

func (wr *Writer) draw(r *rand.Rand) Kind {
	n := r.Intn(wr.total)
	for i, w := range wr.weights {
		if n < w {
			return wr.kinds[i]
		}
		n -= w
	}
	return wr.kinds[len(wr.kinds)-1]
}

// One runs one transaction of kind k and counts it. It returns the error
// that failed it, if any (also counted).
func (wr *Writer) One(ctx context.Context, k Kind, r *rand.Rand) error {
	c := wr.n[k]
	if c == nil {
		return fmt.Errorf("run writer: unknown kind of change %q", k)
	}
	err := wr.txn(ctx, k, r)
	switch {
	case err == nil && k == KindRollback:
		c.rolledBack.Add(1)
	case err == nil:
		c.committed.Add(1)
	case ctx.Err() != nil:
		// Stopped mid-transaction: not the database's fault.
	default:
		c.errors.Add(1)
		var code string
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) {
			code = pe.Code
		}
		wr.mu.Lock()
		wr.lastErr = fmt.Sprintf("%s: %v", k, err)
		wr.codes[code]++
		wr.mu.Unlock()
	}
	return err
}

// Stats returns the counters.
func (wr *Writer) Stats() WriterStats {
	s := WriterStats{Kinds: map[Kind]KindStats{}}
	for k, c := range wr.n {
		ks := KindStats{Committed: c.committed.Load(), RolledBack: c.rolledBack.Load(), Errors: c.errors.Load()}
		s.Kinds[k] = ks
		s.Committed += ks.Committed
		s.RolledBack += ks.RolledBack
		s.Errors += ks.Errors
	}
	wr.mu.Lock()
	s.LastError = wr.lastErr
	if len(wr.codes) > 0 {
		s.ErrorCodes = make(map[string]int64, len(wr.codes))
		for c, n := range wr.codes {
			s.ErrorCodes[c] = n
		}
	}
	wr.mu.Unlock()
	return s
}

func (wr *Writer) txn(ctx context.Context, k Kind, r *rand.Rand) error {
	tx, err := wr.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := wr.change(ctx, tx, k, r); err != nil {
		return err
	}
	if k == KindRollback {
		return tx.Rollback()
	}
	return tx.Commit()
}

// pick returns a live ticket at or after a drawn id (wrapping around),
// outside the empty organization, within the hot set if there is one.
func (wr *Writer) pick(ctx context.Context, tx *sql.Tx, r *rand.Rand) (id, org int64, err error) {
	upto := wr.maxID.Load()
	if wr.cfg.Hot > 0 {
		upto = wr.cfg.Hot
	}
	from := 1 + r.Int63n(upto)
	err = tx.QueryRowContext(ctx, `(SELECT id, org_id FROM tickets WHERE id >= $1 AND id <= $3 AND org_id <> $2 ORDER BY id LIMIT 1)
		UNION ALL (SELECT id, org_id FROM tickets WHERE id <= $3 AND org_id <> $2 ORDER BY id LIMIT 1) LIMIT 1`, from, wr.w.EmptyOrg, upto).Scan(&id, &org)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, errors.New("no tickets left to change")
	}
	return id, org, err
}

func (wr *Writer) user(r *rand.Rand, org int64) int64 {
	us := wr.w.UsersByOrg[org]
	return us[r.Intn(len(us))]
}

func (wr *Writer) org(r *rand.Rand) int64 { return wr.w.Orgs[r.Intn(len(wr.w.Orgs))] }

// change makes kind k's changes in tx.
func (wr *Writer) change(ctx context.Context, tx *sql.Tx, k Kind, r *rand.Rand) error {
	exec := func(q string, args ...any) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}
	switch k {
	case KindTicket:
		org := wr.org(r)
		var assignee any
		if r.Intn(4) > 0 {
			assignee = wr.user(r, org)
		}
		var id int64
		err := tx.QueryRowContext(ctx, `INSERT INTO tickets (org_id, assignee_id, title, status, priority, tags, body, created_at, updated_at)
			VALUES ($1, $2, $3, 'open', $4, ARRAY[$5], $6, now(), now()) RETURNING id`,
			org, assignee, "new: "+Tags[r.Intn(len(Tags))]+" problem", 1+r.Intn(5), Tags[r.Intn(len(Tags))], Body(r)).Scan(&id)
		if err != nil {
			return err
		}
		for cur := wr.maxID.Load(); id > cur && !wr.maxID.CompareAndSwap(cur, id); cur = wr.maxID.Load() {
		}
		return exec(`INSERT INTO ticket_labels (ticket_id, org_id, label) VALUES ($1, $2, $3)`, id, org, LabelNames[r.Intn(len(LabelNames))])
	case KindRename:
		u := wr.user(r, wr.org(r))
		return exec(`UPDATE users SET name = $2 WHERE id = $1`, u, fmt.Sprintf("user %d (renamed %d)", u, wr.names.Add(1)))
	case KindBatch:
		org := wr.org(r)
		if err := exec(`UPDATE tickets SET status = 'closed', updated_at = now()
			WHERE id IN (SELECT id FROM tickets WHERE org_id = $1 AND status = 'solved' ORDER BY id LIMIT 5)`, org); err != nil {
			return err
		}
		id, torg, err := wr.pick(ctx, tx, r)
		if err != nil {
			return err
		}
		for i := range 3 {
			if err := exec(`INSERT INTO comments (ticket_id, author_id, body, created_at) VALUES ($1, $2, $3, now())`,
				id, wr.user(r, torg), fmt.Sprintf("batch comment %d", i+1)); err != nil {
				return err
			}
		}
		return exec(`UPDATE tickets SET priority = 1 + priority % 5, updated_at = now() WHERE id = $1`, id)
	}
	id, org, err := wr.pick(ctx, tx, r)
	if err != nil {
		return err
	}
	switch k {
	case KindStatus:
		return exec(`UPDATE tickets SET status = $2, updated_at = now() WHERE id = $1`, id, Statuses[r.Intn(len(Statuses))])
	case KindPriority:
		return exec(`UPDATE tickets SET priority = $2, updated_at = now() WHERE id = $1`, id, 1+r.Intn(5))
	case KindComment:
		return exec(`INSERT INTO comments (ticket_id, author_id, body, created_at) VALUES ($1, $2, $3, now())`,
			id, wr.user(r, org), "a comment: "+strings.Repeat("thanks ", 1+r.Intn(20)))
	case KindDelete:
		return exec(`DELETE FROM tickets WHERE id = $1`, id)
	case KindMove:
		to := wr.org(r)
		for to == org && len(wr.w.Orgs) > 1 {
			to = wr.org(r)
		}
		if err := exec(`DELETE FROM ticket_labels WHERE ticket_id = $1`, id); err != nil {
			return err
		}
		if err := exec(`UPDATE tickets SET org_id = $2, assignee_id = $3, updated_at = now() WHERE id = $1`, id, to, wr.user(r, to)); err != nil {
			return err
		}
		return exec(`INSERT INTO ticket_labels (ticket_id, org_id, label) VALUES ($1, $2, $3)`, id, to, LabelNames[r.Intn(len(LabelNames))])
	case KindAssignee:
		return exec(`UPDATE tickets SET assignee_id = CASE WHEN assignee_id IS NULL THEN $2::bigint END, updated_at = now() WHERE id = $1`,
			id, wr.user(r, org))
	case KindRollback:
		if err := exec(`UPDATE tickets SET status = $2, updated_at = now() WHERE id = $1`, id, StatusNever); err != nil {
			return err
		}
		return exec(`INSERT INTO comments (ticket_id, author_id, body, created_at) VALUES ($1, $2, $3, now())`,
			id, wr.user(r, org), RolledBackComment)
	case KindTouch:
		return exec(`UPDATE tickets SET title = $2, updated_at = now() WHERE id = $1`, id, fmt.Sprintf("ticket %d: retitled %d", id, r.Intn(1000)))
	case KindLabelEdit:
		label := LabelNames[r.Intn(len(LabelNames))]
		return exec(`WITH gone AS (DELETE FROM ticket_labels WHERE ticket_id = $1 AND org_id = $2 AND label = $3 RETURNING 1)
			INSERT INTO ticket_labels (ticket_id, org_id, label) SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT FROM gone)`, id, org, label)
	}
	return fmt.Errorf("run writer: unknown kind of change %q", k)
}

// RolledBackComment is the body of the comment every KindRollback
// transaction inserts and rolls back: no committed comment has it.
const RolledBackComment = "this comment was rolled back"

// Body returns a ticket body of 2-8 KB drawn by r: words of random hex,
// which PostgreSQL cannot compress, so the value is stored out of line
// (TOAST), like the seed's.
func Body(r *rand.Rand) string {
	var b strings.Builder
	n := 2048 + r.Intn(6*1024)
	for b.Len() < n {
		fmt.Fprintf(&b, "%08x ", r.Uint32())
	}
	return b.String()
}
