package query

import (
	"context"
	"testing"

	"github.com/freshetdb/freshet/change"
)

// TestLiteralInput checks that an untyped literal compared with a column is
// read as PostgreSQL reads it (in a TimeZone=UTC session), or refused:
// never read differently, never accepted where the server would reject it.
func TestLiteralInput(t *testing.T) {
	conn, cat := testDB(t)
	ctx := context.Background()
	opts := DefaultOptions()
	opts.Catalog = cat
	cases := []struct {
		col, typ string
		lits     []string
	}{
		{"age", "int4", []string{"5", " 5 ", "+5", "-0", "1_000", "0x10", "5.0", "1e3", "", "2147483648"}},
		{"small", "int2", []string{"32767", "32768", "-32768"}},
		{"id", "int8", []string{"9223372036854775807", "9223372036854775808", "007"}},
		{"score", "numeric", []string{"1e3", "-0.00", ".5", "5.", "NaN", "nan", "Infinity", "-inf", "1_000.5", " 1.5 ", "0x1F"}},
		{"rating", "float8", []string{"1e3", "NaN", "inf", "-Infinity", "1e-400", "1e400", "0x10", " 2.5 ", "4.9e-324"}},
		{"ratio", "float4", []string{"0.1", "3.4e38", "3.5e38", "1e-46", "NaN"}},
		{"active", "bool", []string{"t", "true", "yes", "on", "1", "f", "off", "no", "0", "TRUE", " true ", "tru", "y", "of"}},
		{"uid", "uuid", []string{"A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", "a0eebc999c0b4ef8bb6d6bb9bd380a11", "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11", "x"}},
		{"data", "bytea", []string{`\x00ff`, `\xDEADbeef`, `abc`, `\\`, `\001`, `\x0`}},
		{"born", "date", []string{"2024-01-01", "2024-1-1", "20240101", "Jan 1 2024", "1/2/2024", "2024-02-30", "infinity", "-infinity", "0044-03-15 BC", "epoch", "today", "2024-01-01 10:00"}},
		{"wake", "time", []string{"10:00", "10:00:00.1234567", "24:00", "24:00:01", "allballs", "10:00 PM", "now", "10:00+02"}},
		{"wake_tz", "timetz", []string{"10:00+02", "10:00", "10:00:00-05:30", "10:00 UTC"}},
		{"local_ts", "timestamp", []string{"2024-01-01", "2024-01-01 10:00", "2024-01-01T10:00:00", "2024-01-01 10:00+02", "epoch", "now", "today", "infinity", "2024-01-01 24:00:00", "294277-01-01"}},
		{"created_at", "timestamptz", []string{"2024-01-01", "2024-01-01 10:00", "2024-01-01 10:00+02", "2024-01-01T10:00:00Z", "2024-01-01 10:00:00.5-07:30", "2024-01-01 10:00 UTC", "2024-01-01 10:00 Europe/Paris", "now", "-infinity", "1999-12-31 23:59:59.9999995"}},
		{"dur", "interval", []string{"1 hour", "1 mon", "1 year 2 mons", "P1D", "1 day ago", "-1 days +02:00", "1.5 days", "2 weeks", "00:00:00.0000005", "1 millennium", "@ 1 minute"}},
		{"name", "text", []string{"x", "", "é"}},
		{"code", "bpchar", []string{"ab", "ab   ", "abcdef"}},
	}
	var accepted, refused int
	defer func() {
		t.Logf("%d literals accepted (and read as PostgreSQL reads them), %d refused", accepted, refused)
	}()
	for _, tc := range cases {
		var oid uint32
		if err := conn.QueryRow(ctx, "SELECT $1::regtype::oid", tc.typ).Scan(&oid); err != nil {
			t.Fatal(err)
		}
		for _, lit := range tc.lits {
			p, r, err := Compile(ctx, "SELECT id FROM users WHERE "+tc.col+" = "+quote(lit), nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			res := conn.PgConn().ExecParams(ctx, "SELECT ($1::text)::"+tc.typ+"::text", [][]byte{[]byte(lit)}, nil, nil, nil).Read()
			if r != nil {
				refused++
				continue // refused: always safe
			}
			accepted++
			if res.Err != nil {
				t.Errorf("%s = %q: accepted, but PostgreSQL rejects the literal: %v", tc.col, lit, res.Err)
				continue
			}
			want, err := change.DecodeOID(oid, change.Value{Kind: change.Text, Data: res.Rows[0][0]}, nil)
			if err != nil {
				t.Fatalf("decode server's %s: %v", res.Rows[0][0], err)
			}
			cons := p.Constraints(0)
			c := cons[len(cons)-1]
			if c.Kind != ConstraintIn || len(c.Values) != 1 {
				t.Errorf("%s = %q: constraint %s, want one value", tc.col, lit, describeConstraint(c))
				continue
			}
			if string(AppendKey(nil, oid, c.Values[0])) != string(AppendKey(nil, oid, want)) {
				t.Errorf("%s = %q: read as %s, PostgreSQL reads %s", tc.col, lit, fmtValue(c.Values[0]), res.Rows[0][0])
			}
		}
	}
}
