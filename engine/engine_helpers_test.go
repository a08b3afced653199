package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/pgwal"
	"github.com/freshetdb/freshet/query"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// waitFor polls fn every step until it returns nil or wait passes.
func waitFor(t testing.TB, wait, step time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", wait, err)
		}
		time.Sleep(step)
	}
}

// newPool opens a fresh database and a pool on it, closed when t ends.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	db := pgtest.NewDB(t)
	pool, err := pgxpool.New(context.Background(), db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	// Registered after pgtest's drop of the database, so run before it.
	t.Cleanup(pool.Close)
	return pool
}

// rig is an engine following a test database through a real pgwal.Reader.
type rig struct {
	t      testing.TB
	db     *pgtest.DB
	conn   *pgx.Conn     // for writes and reference queries
	reader *pgwal.Reader // nil when the engine follows the bus (newBusRig)
	types  change.TypeResolver
	e      *Engine
}

var slotName = regexp.MustCompile(`[^a-z0-9_]`)

// newRig opens a database, runs setup (DDL) in it, and starts a reader and
// an engine on it. cfg's Source, ReadDSN, Types and Logger are filled in.
func newRig(t testing.TB, setup string, cfg Config) *rig {
	t.Helper()
	ctx := context.Background()
	db := pgtest.NewDB(t)
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if setup != "" {
		if _, err := conn.Exec(ctx, setup); err != nil {
			t.Fatalf("setup: %v", err)
		}
	}
	rcfg := pgwal.DefaultConfig()
	rcfg.DSN = db.DSN
	rcfg.Create = true
	slot := "e_" + slotName.ReplaceAllString(strings.ToLower(db.Name), "_")
	if len(slot) > 60 {
		slot = slot[:60]
	}
	rcfg.Slot = slot
	rcfg.Publication = slot
	rcfg.HeartbeatInterval = 50 * time.Millisecond
	rcfg.StatusInterval = 200 * time.Millisecond
	rcfg.Logger = quietLogger()
	// Small fragments, so that ordinary test transactions span several.
	rcfg.Decoder.FragmentChanges = 64
	rd, err := pgwal.Open(ctx, rcfg)
	if err != nil {
		t.Fatalf("open reader: %v", err)
	}
	if tap, ok := cfg.Source.(*ackTap); ok {
		tap.Source = rd
	} else {
		cfg.Source = rd
	}
	cfg.ReadDSN = db.DSN
	cfg.Types = rd.Types()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	e, err := Open(ctx, cfg)
	if err != nil {
		rd.Close()
		t.Fatalf("open engine: %v", err)
	}
	// Registered after pgtest's drop of the database, so run before it.
	t.Cleanup(func() {
		e.Close()
		rd.Close()
	})
	return &rig{t: t, db: db, conn: conn, reader: rd, types: rd.Types(), e: e}
}

// ackTap passes the rig's reader through to the engine (give it as
// Config.Source: newRig fills in Source) and calls onAck with every
// position the engine acknowledges, on the engine's goroutine: what a lag
// frame vouches for (s2s.Tap), every output before it handed to the sinks.
// onEvent (when not nil) sees every event the engine is handed, on the
// engine's goroutine, before the engine applies it.
type ackTap struct {
	Source
	onAck   func(change.LSN)
	onEvent func(change.Event)
}

// Next implements Source.
func (a *ackTap) Next(ctx context.Context) (change.Event, error) {
	ev, err := a.Source.Next(ctx)
	if err == nil && a.onEvent != nil {
		a.onEvent(ev)
	}
	return ev, err
}

// Beat passes the engine's request for a heartbeat on (Beater), as
// s2s.Tap does.
func (a *ackTap) Beat() {
	if b, ok := a.Source.(Beater); ok {
		b.Beat()
	}
}

// Ack implements Source.
func (a *ackTap) Ack(lsn change.LSN) {
	if a.onAck != nil {
		a.onAck(lsn)
	}
	a.Source.Ack(lsn)
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// exec runs statements on the rig's connection.
func (r *rig) exec(sql string, args ...any) {
	r.t.Helper()
	if _, err := r.conn.Exec(context.Background(), sql, args...); err != nil {
		r.t.Fatalf("exec %q: %v", sql, err)
	}
}

// quiesce waits until the engine has applied everything PostgreSQL has
// written so far and no read is pending or queued.
func (r *rig) quiesce(wait time.Duration) {
	r.t.Helper()
	ctx := context.Background()
	var text string
	if err := r.conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&text); err != nil {
		r.t.Fatalf("read WAL position: %v", err)
	}
	lsn, err := change.ParseLSN(text)
	if err != nil {
		r.t.Fatalf("read WAL position: %v", err)
	}
	waitFor(r.t, wait, 5*time.Millisecond, func() error {
		st, err := r.e.Stats(ctx)
		if err != nil {
			return err
		}
		if st.Position < lsn {
			return fmt.Errorf("engine at %s, PostgreSQL at %s", st.Position, lsn)
		}
		if st.PendingReads > 0 || st.Queued > 0 || st.Recompiling > 0 {
			return fmt.Errorf("%d reads pending, %d queued, %d subscriptions compiling again", st.PendingReads, st.Queued, st.Recompiling)
		}
		return nil
	})
}

// subscribe subscribes sql in rows mode with a recorder.
func (r *rig) subscribe(sql string, binds ...query.Bind) (SubID, *recorder) {
	r.t.Helper()
	rec := newRecorder()
	id, refusal, err := r.e.Subscribe(context.Background(), sql, binds, ModeRows, rec)
	if err != nil {
		r.t.Fatalf("subscribe %q: %v", sql, err)
	}
	if refusal != nil {
		r.t.Fatalf("subscribe %q: refused: %v", sql, refusal)
	}
	return id, rec
}

// reference runs sql on PostgreSQL and returns its rows in text form
// (NULL as nil), in PostgreSQL's order.
func (r *rig) reference(sql string, binds []query.Bind) ([][]*string, error) {
	res := r.conn.PgConn().ExecParams(context.Background(), sql, bindValues(binds), bindOIDs(binds), bindFormats(binds), nil).Read()
	if res.Err != nil {
		return nil, res.Err
	}
	out := make([][]*string, len(res.Rows))
	for i, row := range res.Rows {
		out[i] = make([]*string, len(row))
		for j, v := range row {
			if v != nil {
				s := string(v)
				out[i][j] = &s
			}
		}
	}
	return out, nil
}

// recorder is a Sink that keeps the state a client would hold: the
// Accepted result with every Delta applied.
type recorder struct {
	mu       sync.Mutex
	outs     []Output
	status   OutputKind // Accepted, Refused or Ended once known
	reason   string
	code     query.Code // of a Refused or Ended
	columns  []query.Output
	rows     map[Key][]any
	order    []Key
	count    int64
	lsn      change.LSN
	problems []string // outputs that make no sense for a client
}

func newRecorder() *recorder { return &recorder{rows: map[Key][]any{}} }

// Send implements Sink.
func (c *recorder) Send(out Output) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.outs = append(c.outs, out)
	if c.status == OutputRefused || c.status == OutputEnded {
		c.problems = append(c.problems, fmt.Sprintf("%s after %s", out.Kind, c.status))
		return
	}
	switch out.Kind {
	case OutputAccepted:
		if c.status != 0 {
			c.problems = append(c.problems, "accepted twice")
		}
		c.status = OutputAccepted
		c.columns = out.Columns
		c.lsn = out.LSN
		c.count = out.Count
		c.order = c.order[:0]
		for _, r := range out.Rows {
			if _, dup := c.rows[r.Key]; dup {
				c.problems = append(c.problems, fmt.Sprintf("accepted key %x twice", r.Key))
			}
			c.rows[r.Key] = r.Values
			c.order = append(c.order, r.Key)
		}
	case OutputDelta:
		if c.status != OutputAccepted {
			c.problems = append(c.problems, "delta before accepted")
		}
		if out.LSN <= c.lsn {
			c.problems = append(c.problems, fmt.Sprintf("delta at %s not after %s", out.LSN, c.lsn))
		}
		c.lsn = out.LSN
		if err := checkMoves(c.order, out); err != nil {
			c.problems = append(c.problems, err.Error())
		}
		for _, k := range out.Removed {
			if _, ok := c.rows[k]; !ok {
				c.problems = append(c.problems, fmt.Sprintf("removed key %x not held", k))
			}
			delete(c.rows, k)
		}
		for _, r := range out.Rows {
			c.rows[r.Key] = r.Values
		}
		c.count = out.Count
		if out.Order != nil {
			c.order = slices.Clone(out.Order)
		}
	case OutputTouched:
		c.lsn = out.LSN
	case OutputRefused, OutputEnded:
		c.status = out.Kind
		c.reason = out.Reason
		c.code = out.Code
	}
}

// state returns the recorder's status and reason.
func (c *recorder) state() (OutputKind, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status, c.reason
}

// ending returns the recorder's status with the code and reason of a
// Refused or Ended.
func (c *recorder) ending() (st OutputKind, code query.Code, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status, c.code, c.reason
}

// result returns the client's result in text form: the rows in order when
// ordered is set (following the last Order), else in any order; for a
// count (one column with no source), one row holding Count.
func (c *recorder) result(ordered bool, types change.TypeResolver) ([][]*string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.problems) > 0 {
		return nil, fmt.Errorf("bad outputs: %s", strings.Join(c.problems, "; "))
	}
	if len(c.columns) == 1 && c.columns[0].Source == -1 {
		if len(c.rows) == 0 {
			// LIMIT 0 or an OFFSET past the one row.
			return nil, nil
		}
		s := fmt.Sprint(c.count)
		return [][]*string{{&s}}, nil
	}
	var keys []Key
	if ordered {
		keys = c.order
		if len(keys) != len(c.rows) {
			return nil, fmt.Errorf("order lists %d keys, %d rows held", len(keys), len(c.rows))
		}
	} else {
		for k := range c.rows {
			keys = append(keys, k)
		}
	}
	out := make([][]*string, 0, len(keys))
	for _, k := range keys {
		vals, ok := c.rows[k]
		if !ok {
			return nil, fmt.Errorf("order lists key %x, not held", k)
		}
		if len(vals) != len(c.columns) {
			return nil, fmt.Errorf("row %x has %d values, %d columns", k, len(vals), len(c.columns))
		}
		row := make([]*string, len(vals))
		for j, v := range vals {
			if v == nil {
				continue
			}
			s, err := change.FormatOID(c.columns[j].TypeOID, v, types)
			if err != nil {
				return nil, fmt.Errorf("format %s: %w", c.columns[j].Name, err)
			}
			row[j] = &s
		}
		out = append(out, row)
	}
	return out, nil
}

// fmtRows prints rows for a failure message.
func fmtRows(rows [][]*string) string {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString("  (")
		for j, v := range r {
			if j > 0 {
				b.WriteString(", ")
			}
			if v == nil {
				b.WriteString("NULL")
			} else {
				fmt.Fprintf(&b, "%q", *v)
			}
		}
		b.WriteString(")\n")
	}
	return b.String()
}

func rowString(r []*string) string { return fmtRows([][]*string{r}) }

// sameRows compares a client's result with PostgreSQL's. Without order,
// both are compared as multisets. With order, each of PostgreSQL's rows
// ends with an extra column, its tie group (dense_rank() over the ORDER BY
// keys): rows of one group are compared as multisets, groups in order.
func sameRows(got, want [][]*string, ordered bool) error {
	var rank []string
	if ordered {
		rank = make([]string, len(want))
		trimmed := make([][]*string, len(want))
		for i, r := range want {
			if len(r) == 0 || r[len(r)-1] == nil {
				return fmt.Errorf("reference row %d has no tie group column", i)
			}
			rank[i] = *r[len(r)-1]
			trimmed[i] = r[:len(r)-1]
		}
		want = trimmed
	}
	if len(got) != len(want) {
		return fmt.Errorf("got %d rows, want %d\ngot:\n%swant:\n%s", len(got), len(want), fmtRows(got), fmtRows(want))
	}
	if !ordered {
		if err := sameMultiset(got, want); err != nil {
			return fmt.Errorf("%w\ngot:\n%swant:\n%s", err, fmtRows(got), fmtRows(want))
		}
		return nil
	}
	for i := 0; i < len(want); {
		j := i + 1
		for j < len(want) && rank[j] == rank[i] {
			j++
		}
		if err := sameMultiset(got[i:j], want[i:j]); err != nil {
			return fmt.Errorf("rows %d..%d: %w\ngot:\n%swant:\n%s", i, j-1, err, fmtRows(got), fmtRows(want))
		}
		i = j
	}
	return nil
}

func sameMultiset(got, want [][]*string) error {
	a := make([]string, len(got))
	b := make([]string, len(want))
	for i := range got {
		a[i] = rowString(got[i])
	}
	for i := range want {
		b[i] = rowString(want[i])
	}
	slices.Sort(a)
	slices.Sort(b)
	for i := range a {
		if a[i] != b[i] {
			return fmt.Errorf("got row %s want row %s", strings.TrimSpace(a[i]), strings.TrimSpace(b[i]))
		}
	}
	return nil
}

// bindValues, bindOIDs and bindFormats split binds into ExecParams's
// arguments.
func bindValues(bs []query.Bind) [][]byte {
	out := make([][]byte, len(bs))
	for i, b := range bs {
		out[i] = b.Data
	}
	return out
}

func bindOIDs(bs []query.Bind) []uint32 {
	out := make([]uint32, len(bs))
	for i, b := range bs {
		out[i] = b.OID
	}
	return out
}

func bindFormats(bs []query.Bind) []int16 {
	out := make([]int16, len(bs))
	for i, b := range bs {
		out[i] = int16(b.Format)
	}
	return out
}
