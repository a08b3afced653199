package query

import (
	"context"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
)

func num(t *testing.T, s string) change.Numeric {
	t.Helper()
	n, err := change.ParseNumeric(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAppendKeyEquality(t *testing.T) {
	tests := []struct {
		name  string
		oid   uint32
		a, b  any
		equal bool
	}{
		{"numeric scale", change.OIDNumeric, num(t, "1.0"), num(t, "1.00"), true},
		{"numeric zero", change.OIDNumeric, num(t, "0"), num(t, "-0.000"), true},
		{"numeric differ", change.OIDNumeric, num(t, "1.01"), num(t, "1.1"), false},
		{"numeric NaN", change.OIDNumeric, num(t, "NaN"), num(t, "NaN"), true},
		{"float zero", change.OIDFloat8, 0.0, math.Copysign(0, -1), true},
		{"float NaN", change.OIDFloat8, math.NaN(), -math.NaN(), true},
		{"float4 widened", change.OIDFloat4, 0.1, float64(float32(0.1)), true},
		{"float8 not widened", change.OIDFloat8, 0.1, float64(float32(0.1)), false},
		{"bpchar padding", change.OIDBPChar, "ab  ", "ab", true},
		{"text padding", change.OIDText, "ab  ", "ab", false},
		{"interval month", change.OIDInterval, change.Interval{Months: 1}, change.Interval{Days: 30}, true},
		{"interval day", change.OIDInterval, change.Interval{Days: 1}, change.Interval{Micros: 86400e6}, true},
		{"interval differ", change.OIDInterval, change.Interval{Days: 1}, change.Interval{Micros: 86400e6 - 1}, false},
		{"timetz zones", change.OIDTimetz, change.TimeTZ{Micros: 12 * 3600e6}, change.TimeTZ{Micros: 13 * 3600e6, Offset: 3600}, false},
		{"int and null", change.OIDInt4, int64(0), nil, false},
		{"nulls", change.OIDInt4, nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ka, kb := string(AppendKey(nil, tt.oid, tt.a)), string(AppendKey(nil, tt.oid, tt.b))
			if (ka == kb) != tt.equal {
				t.Fatalf("keys equal = %v, want %v (%q, %q)", ka == kb, tt.equal, ka, kb)
			}
			if tt.a != nil && tt.b != nil {
				if c := CompareValues(tt.oid, tt.a, tt.b); (c == 0) != tt.equal {
					t.Fatalf("CompareValues = %d, want equal %v", c, tt.equal)
				}
			}
		})
	}
}

// A numeric with a huge coefficient keys in linear time.
func TestNumericKeyHuge(t *testing.T) {
	c, _ := new(big.Int).SetString("1"+strings.Repeat("0", 200000), 10)
	a := change.Numeric{Coef: c}
	b := change.Numeric{Coef: big.NewInt(1), Exp: 200000}
	if string(AppendKey(nil, change.OIDNumeric, a)) != string(AppendKey(nil, change.OIDNumeric, b)) {
		t.Fatal("1e200000 written two ways keys differently")
	}
}

// TestBinaryBinds sends each value in PostgreSQL's own binary form (read
// back from the server) and checks Compile decodes it to the value its
// text form decodes to.
func TestBinaryBinds(t *testing.T) {
	conn, cat := testDB(t)
	ctx := context.Background()
	opts := DefaultOptions()
	opts.Catalog = cat
	cases := []struct{ col, typ, lit string }{
		{"id", "int8", "42"}, {"age", "int4", "-7"}, {"small", "int2", "3"}, {"score", "numeric", "12345678901234567890.125"},
		{"score", "numeric", "NaN"}, {"rating", "float8", "-0"}, {"ratio", "float4", "0.1"}, {"active", "bool", "true"},
		{"name", "text", "héllo"}, {"code", "bpchar", "ab"}, {"uid", "uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{"data", "bytea", `\x00ff`}, {"born", "date", "0044-03-15 BC"}, {"born", "date", "infinity"},
		{"wake", "time", "23:59:59.999999"}, {"wake_tz", "timetz", "12:00:00+05:30"}, {"created_at", "timestamptz", "2024-02-29 12:34:56.789+00"},
		{"local_ts", "timestamp", "-infinity"}, {"dur", "interval", "1 year 2 mons -3 days 04:05:06.7"},
	}
	for _, tc := range cases {
		t.Run(tc.typ+"/"+tc.lit, func(t *testing.T) {
			var oid uint32
			if err := conn.QueryRow(ctx, "SELECT $1::regtype::oid", tc.typ).Scan(&oid); err != nil {
				t.Fatal(err)
			}
			res := conn.PgConn().ExecParams(ctx, "SELECT $1::"+tc.typ, [][]byte{[]byte(tc.lit)}, nil, nil, []int16{1}).Read()
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			bin := res.Rows[0][0]
			sql := "SELECT id FROM users WHERE " + tc.col + " = $1"
			pb, r, err := Compile(ctx, sql, []Bind{{OID: oid, Format: FormatBinary, Data: bin}}, opts)
			if err != nil || r != nil {
				t.Fatalf("binary: %v %v", err, r)
			}
			pt, r, err := Compile(ctx, sql, []Bind{{OID: oid, Data: []byte(tc.lit)}}, opts)
			if err != nil || r != nil {
				t.Fatalf("text: %v %v", err, r)
			}
			if CompareValues(oid, pb.Params()[0], pt.Params()[0]) != 0 || pb.Key != pt.Key {
				t.Fatalf("binary bind decodes to %v, text to %v", fmtValue(pb.Params()[0]), fmtValue(pt.Params()[0]))
			}
		})
	}
}

// An enum bind sent with the enum's own OID (as drivers that describe
// statements send it) is read against the enum column; another OID is
// refused naming the parameter.
func TestEnumBind(t *testing.T) {
	opts := DefaultOptions()
	opts.Catalog = snapshotCatalog(t)
	users := snapshotCatalog(t)[[2]string{"public", "users"}]
	c, _ := users.Column("feeling")
	for _, tc := range []struct {
		oid  uint32
		code Code
	}{{c.TypeOID, ""}, {0, ""}, {c.TypeOID + 1000, CodeBind}} {
		p, r, err := Compile(context.Background(), "SELECT id FROM users WHERE feeling = $1 OR feeling IN ($1, 'sad')", []Bind{{OID: tc.oid, Data: []byte("ok")}}, opts)
		if err != nil {
			t.Fatal(err)
		}
		var got Code
		if r != nil {
			got = r.Code
			if r.Param != 1 {
				t.Errorf("refusal names $%d, want $1", r.Param)
			}
		}
		if got != tc.code {
			t.Fatalf("OID %d: refusal %v, want %q", tc.oid, r, tc.code)
		}
		if p != nil && p.Params()[0] != "ok" {
			t.Fatalf("OID %d: param = %v, want ok", tc.oid, p.Params()[0])
		}
	}
}
