package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/freshetdb/freshet/query"
)

// A failed read's code comes from its error's type and SQLSTATE, as
// PostgreSQL itself reports them.
func TestReadCode(t *testing.T) {
	conn := newRig(t, "CREATE TABLE t (id int PRIMARY KEY)", Config{}).conn
	ctx := context.Background()
	pgErr := func(sql string) error {
		_, err := conn.Exec(ctx, sql)
		if err == nil {
			t.Fatalf("%s: no error", sql)
		}
		return fmt.Errorf("read rows: %w", err)
	}
	dropped, column, other := pgErr("SELECT * FROM gone"), pgErr("SELECT gone FROM t"), pgErr("SELECT nosuchfunction()")
	divide, overflow := pgErr("SELECT 1/0"), pgErr("SELECT 2147483647 + 1")
	// A timed-out query closes its connection: last.
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, timeout := conn.Exec(tctx, "SELECT pg_sleep(5)")
	tests := []struct {
		name string
		err  error
		want query.Code
	}{
		{"row limit", fmt.Errorf("%w: the query selects more than 5 rows", ErrRowLimit), CodeRowLimit},
		{"deadline", timeout, CodeReadTimeout},
		{"dropped table", dropped, CodeTableDropped},
		{"dropped column", column, CodeSchemaChanged},
		{"division by zero", divide, query.CodeEvalError},
		{"overflow", overflow, query.CodeEvalError},
		{"other", other, CodeReadFailed},
		{"connection", errors.New("acquire read connection: dial tcp: refused"), CodeReadFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := readCode(tt.err); got != tt.want {
				t.Errorf("readCode(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}
