package pgwal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// checkFor polls fn every step until it returns nil or wait passes.
func checkFor(t testing.TB, wait, step time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(wait)
	var err error
	for {
		if err = fn(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", wait, err)
		}
		time.Sleep(step)
	}
}

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testLogger logs to the test and to buf (which may be nil).
func testLogger(t testing.TB, buf io.Writer) *slog.Logger {
	w := io.Writer(tWriter{t})
	if buf != nil {
		w = io.MultiWriter(w, buf)
	}
	return slog.New(dupKeyHandler{Handler: slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}), t: t})
}

// dupKeyHandler fails the test when a log line would carry one key twice
// (as "slot=x slot=x" once did: the Reader's logger carries the slot).
type dupKeyHandler struct {
	slog.Handler
	t    testing.TB
	keys []string // keys added by With
}

func (h dupKeyHandler) WithAttrs(as []slog.Attr) slog.Handler {
	keys := slices.Clone(h.keys)
	for _, a := range as {
		keys = append(keys, a.Key)
	}
	return dupKeyHandler{Handler: h.Handler.WithAttrs(as), t: h.t, keys: keys}
}

func (h dupKeyHandler) WithGroup(name string) slog.Handler {
	return dupKeyHandler{Handler: h.Handler.WithGroup(name), t: h.t}
}

func (h dupKeyHandler) Handle(ctx context.Context, r slog.Record) error {
	seen := map[string]bool{}
	for _, k := range h.keys {
		seen[k] = true
	}
	r.Attrs(func(a slog.Attr) bool {
		if seen[a.Key] {
			h.t.Errorf("log line %q carries key %q twice", r.Message, a.Key)
		}
		seen[a.Key] = true
		return true
	})
	return h.Handler.Handle(ctx, r)
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// testConfig is DefaultConfig for db with heartbeats off and fast status
// updates.
func testConfig(t testing.TB, dsn string) Config {
	cfg := DefaultConfig()
	cfg.DSN = dsn
	cfg.Create = true
	cfg.HeartbeatInterval = 0
	cfg.StatusInterval = 100 * time.Millisecond
	cfg.Logger = testLogger(t, nil)
	return cfg
}

func openReader(t testing.TB, cfg Config) *Reader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func exec(t testing.TB, conn *pgx.Conn, sqls ...string) {
	t.Helper()
	for _, sql := range sqls {
		if _, err := conn.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// nextTxn returns the next whole transaction (its fragments' changes
// joined), skipping heartbeats, acknowledging nothing.
func nextTxn(t testing.TB, r *Reader, wait time.Duration) *change.Txn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var whole *change.Txn
	for {
		ev, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		txn, ok := ev.(*change.Txn)
		if !ok {
			continue
		}
		if whole == nil {
			cp := *txn
			cp.Changes = append([]change.Change(nil), txn.Changes...)
			whole = &cp
		} else {
			if txn.CommitLSN != whole.CommitLSN {
				t.Fatalf("fragment of %v inside %v", txn.CommitLSN, whole.CommitLSN)
			}
			whole.Changes = append(whole.Changes, txn.Changes...)
		}
		if txn.Last {
			whole.Last = true
			return whole
		}
	}
}

// userChanges drops relation changes.
func userChanges(cs []change.Change) []change.Change {
	var out []change.Change
	for _, c := range cs {
		if c.Op != change.OpRelation {
			out = append(out, c)
		}
	}
	return out
}

// describe renders a change compactly: op table new(...) old(...).
func describe(c change.Change) string {
	var b strings.Builder
	b.WriteString(c.Op.String())
	switch c.Op {
	case change.OpTruncate:
		for _, r := range c.Truncate.Rels {
			b.WriteString(" " + r.Table)
		}
		fmt.Fprintf(&b, " cascade=%v restart=%v", c.Truncate.Cascade, c.Truncate.RestartIdentity)
		return b.String()
	case change.OpMessage:
		fmt.Fprintf(&b, " %s %q transactional=%v", c.Message.Prefix, c.Message.Content, c.Message.Transactional)
		return b.String()
	}
	if c.Rel != nil {
		b.WriteString(" " + c.Rel.Table)
	}
	if c.Old != nil {
		b.WriteString(" old" + rowString(c.Old))
	}
	if c.New != nil {
		b.WriteString(" new" + rowString(c.New))
	}
	return b.String()
}

func rowString(r change.Row) string {
	parts := make([]string, len(r))
	for i, v := range r {
		switch v.Kind {
		case change.Text:
			parts[i] = v.String()
		default:
			parts[i] = "<" + v.Kind.String() + ">"
		}
	}
	return "(" + strings.Join(parts, ",") + ")"
}

// slotFlush reads the slot's confirmed_flush_lsn.
func slotFlush(t testing.TB, conn *pgx.Conn, slot string) change.LSN {
	t.Helper()
	var s *string
	if err := conn.QueryRow(context.Background(), `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&s); err != nil {
		t.Fatalf("read confirmed_flush_lsn: %v", err)
	}
	if s == nil {
		return 0
	}
	l, err := change.ParseLSN(*s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// startCluster starts a dedicated cluster with extra settings, for tests
// that change server settings. It is skipped under FRESHET_TEST_DSN.
func startCluster(t testing.TB, settings map[string]string) *pgtest.Cluster {
	t.Helper()
	if pgtest.Shared() == nil {
		t.Skip("needs its own cluster; not available under " + pgtest.EnvDSN)
	}
	c, err := pgtest.Start(pgtest.Options{Settings: settings})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

var errNotYet = errors.New("not yet")

// currentLSN reads pg_current_wal_lsn().
func currentLSN(t testing.TB, conn *pgx.Conn) change.LSN {
	t.Helper()
	var s string
	if err := conn.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	l, err := change.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
