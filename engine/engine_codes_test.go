package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/freshetdb/freshet/query"
)

// A failed read's code and retryable flag come from its error's type and
// SQLSTATE, as PostgreSQL itself reports them: text PostgreSQL rejects in
// the query's binds (invalid UTF-8: 0xFF, NUL) or an integrity violation
// (23) would happen again, so it is not retryable; a row raising in an
// expression is eval_error, retryable (a write may change the row).
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
	dropped, column, other := pgErr("SELECT * FROM gone"), pgErr("SELECT gone FROM t"), pgErr("SELEC 1")
	// A column retyped under a plan: its comparison's operator is gone.
	operator := pgErr("SELECT 1 WHERE 'a'::text >= 1.5::float8")
	divide, overflow := pgErr("SELECT 1/0"), pgErr("SELECT 2147483647 + 1")
	float, array, unique := pgErr("SELECT '1e400'::float8"), pgErr("SELECT '{2147483648}'::int4[]"), pgErr("INSERT INTO t VALUES (1), (1)")
	text := func(data string) error {
		res := conn.PgConn().ExecParams(ctx, "SELECT $1::text", [][]byte{[]byte(data)}, []uint32{25}, nil, nil).Read()
		if res.Err == nil {
			t.Fatalf("text %q: no error", data)
		}
		return fmt.Errorf("read rows: %w", res.Err)
	}
	badByte, nul := text("a\xffb"), text("a\x00b")
	// A timed-out query closes its connection: last.
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, timeout := conn.Exec(tctx, "SELECT pg_sleep(5)")
	tests := []struct {
		name      string
		err       error
		want      query.Code
		retryable bool
	}{
		{"row limit", fmt.Errorf("%w: the query selects more than 5 rows", ErrRowLimit), CodeRowLimit, false},
		{"deadline", timeout, CodeReadTimeout, true},
		{"dropped table", dropped, CodeTableDropped, true},
		{"dropped column", column, CodeSchemaChanged, true},
		{"retyped column", operator, CodeSchemaChanged, true},
		{"division by zero", divide, query.CodeEvalError, true},
		{"overflow", overflow, query.CodeEvalError, true},
		{"float8 out of range", float, query.CodeEvalError, true},
		{"int4[] out of range", array, query.CodeEvalError, true},
		{"text with 0xFF", badByte, CodeReadFailed, false},
		{"text with NUL", nul, CodeReadFailed, false},
		{"unique violation", unique, CodeReadFailed, false},
		{"other", other, CodeReadFailed, true},
		{"connection", errors.New("acquire read connection: dial tcp: refused"), CodeReadFailed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := readCode(tt.err); got != tt.want {
				t.Errorf("readCode(%v) = %q, want %q", tt.err, got, tt.want)
			}
			f := classifyRead(tt.err)
			if f.Code != tt.want || f.Retryable != tt.retryable || f.Reason != "read failed: "+tt.err.Error() {
				t.Errorf("classifyRead(%v) = %+v, want code %q retryable %v and the error as reason", tt.err, f, tt.want, tt.retryable)
			}
		})
	}
}
