package engine

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/query"
)

// syncBuffer is a bytes.Buffer safe for the engine's goroutines to log to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Values PostgreSQL rejects when the first read runs (issue 10 item 12)
// refuse the subscription read_failed, not retryable (the same query
// would fail the same way: a read cache must not retry it forever), and
// the warning logged names the SQLSTATE and the tables, never the value.
func TestEngineReadRejectedValues(t *testing.T) {
	logs := &syncBuffer{}
	r := newRig(t, `CREATE TABLE vals (id int PRIMARY KEY, f float8, s text, a int4[]);
INSERT INTO vals VALUES (1, 1.5, 'x', '{1}');`, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	tests := []struct {
		name, sql, literal string
		bind               query.Bind
		state              string
	}{
		{"float8 out of range", "SELECT id FROM vals WHERE f = $1", "1e400", query.Bind{OID: 701, Data: []byte("1e400")}, "22003"},
		{"text with byte 0xFF", "SELECT id FROM vals WHERE s = $1", "qz\xffqz", query.Bind{OID: 25, Data: []byte("qz\xffqz")}, "22021"},
		{"text with NUL", "SELECT id FROM vals WHERE s = $1", "qz\x00qz", query.Bind{OID: 25, Data: []byte("qz\x00qz")}, "22021"},
		{"int4[] past 2^31-1", "SELECT id FROM vals WHERE a = $1", "2147483648", query.Bind{OID: 1007, Data: []byte("{2147483648}")}, "22003"},
		{"literal out of range", "SELECT id FROM vals WHERE f = '1e400'::float8", "1e400", query.Bind{}, "22003"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var binds []query.Bind
			if tt.bind.OID != 0 {
				binds = []query.Bind{tt.bind}
			}
			rec := newRecorder()
			_, refusal, err := r.e.Subscribe(context.Background(), tt.sql, binds, ModeRows, rec)
			if err != nil {
				t.Fatal(err)
			}
			if refusal != nil {
				t.Logf("refused before the read: %s: %s", refusal.Code, refusal.Message)
				// The query layer caught the value before any read: its
				// refusal must not invite a retry either.
				if refusal.Retryable {
					t.Errorf("refused before the read (%s: %s) retryable, want not retryable", refusal.Code, refusal.Message)
				}
				return
			}
			waitFor(t, 30*time.Second, 5*time.Millisecond, func() error {
				if st, _ := rec.state(); st == 0 {
					return fmt.Errorf("no answer yet")
				}
				return nil
			})
			st, code, reason := rec.ending()
			rec.mu.Lock()
			retryable := rec.outs[len(rec.outs)-1].Retryable
			rec.mu.Unlock()
			if st != OutputRefused || code != CodeReadFailed || retryable {
				t.Fatalf("answer = %v %q retryable %v (%s), want refused %q not retryable", st, code, retryable, reason, CodeReadFailed)
			}
			if !strings.Contains(reason, tt.state) {
				t.Errorf("reason %q does not name SQLSTATE %s", reason, tt.state)
			}
			var line string
			waitFor(t, 10*time.Second, 5*time.Millisecond, func() error {
				for _, l := range strings.Split(logs.String(), "\n") {
					if strings.Contains(l, "hydration read failed") && strings.Contains(l, "sqlstate="+tt.state) && strings.Contains(l, "public.vals") {
						line = l
						return nil
					}
				}
				return fmt.Errorf("no warning with sqlstate=%s for public.vals in:\n%s", tt.state, logs.String())
			})
			for _, bad := range []string{tt.literal, "qz", "SELECT", "0xff", "0x00", "err="} {
				if strings.Contains(line, bad) {
					t.Errorf("warning %q holds the value %q", line, bad)
				}
			}
		})
	}
}
