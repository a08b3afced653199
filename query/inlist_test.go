package query

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
	"github.com/jackc/pgx/v5"
)

// TestInListCommonType: an untyped bind in an IN list takes the list's
// common type, as PostgreSQL resolves it (select_common_type over the
// left side and the items that are not columns), not the column's. Each
// case runs on PostgreSQL too, with the same binds, and Compile must
// accept exactly what the server accepts, with the same rows.
func TestInListCommonType(t *testing.T) {
	conn, cat := testDB(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `INSERT INTO users (id, name, age) VALUES (1, 'a', 12), (2, 'b', 16), (3, 'c', 15), (4, 'd', 99)`); err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Catalog = cat
	four := make([]byte, 4)
	binary.BigEndian.PutUint32(four, 16)
	eight := make([]byte, 8)
	binary.BigEndian.PutUint64(eight, 16)
	text := func(s string) Bind { return Bind{Data: []byte(s)} }
	tests := []struct {
		name    string
		sql     string
		binds   []Bind
		wantOID uint32 // the type $1 is resolved to; 0 when refused
	}{
		{"int8 bind among the items", "SELECT id FROM users WHERE age IN (12, $1, 15, $2)",
			[]Bind{text("9000000000"), {OID: change.OIDInt8, Data: []byte("16")}}, change.OIDInt8},
		{"int8 literal among the items", "SELECT id FROM users WHERE age IN (12, $1, 9000000000)",
			[]Bind{text("16")}, change.OIDInt8},
		{"int4 items only", "SELECT id FROM users WHERE age IN (12, $1, 15)",
			[]Bind{text("16")}, change.OIDInt4},
		{"int4 items only, too big", "SELECT id FROM users WHERE age IN (12, $1, 15)",
			[]Bind{text("9000000000")}, 0},
		{"numeric literal", "SELECT id FROM users WHERE age IN (12, $1, 15.5)",
			[]Bind{text("16.0")}, change.OIDNumeric},
		{"4-byte binary where int8 is due", "SELECT id FROM users WHERE age IN (12, $1, 15, $2)",
			[]Bind{{Format: FormatBinary, Data: four}, {OID: change.OIDInt8, Data: []byte("16")}}, 0},
		{"8-byte binary where int8 is due", "SELECT id FROM users WHERE age IN (12, $1, 15, $2)",
			[]Bind{{Format: FormatBinary, Data: eight}, {OID: change.OIDInt8, Data: []byte("16")}}, change.OIDInt8},
		{"4-byte binary with int4 items", "SELECT id FROM users WHERE age IN (12, $1, 15)",
			[]Bind{{Format: FormatBinary, Data: four}}, change.OIDInt4},
		{"a column among the items", "SELECT id FROM users WHERE age IN (small, $1, 9000000000)",
			[]Bind{text("16")}, change.OIDInt8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := make([][]byte, len(tt.binds))
			oids := make([]uint32, len(tt.binds))
			formats := make([]int16, len(tt.binds))
			for i, b := range tt.binds {
				vals[i], oids[i], formats[i] = b.Data, b.OID, int16(b.Format)
			}
			res := conn.PgConn().ExecParams(ctx, tt.sql+" ORDER BY id", vals, oids, formats, nil).Read()
			pgAccepts := res.Err == nil
			p, r, err := Compile(ctx, tt.sql, tt.binds, opts)
			if err != nil {
				t.Fatal(err)
			}
			if (r == nil) != pgAccepts {
				t.Fatalf("Compile refusal = %v; PostgreSQL's error = %v: they must agree", r, res.Err)
			}
			if r != nil {
				if tt.wantOID != 0 || r.Code != CodeBind && r.Code != CodeType {
					t.Fatalf("Compile refused %v, want $1 read as %d", r, tt.wantOID)
				}
				return
			}
			if tt.wantOID == 0 {
				t.Fatalf("Compile accepted (and PostgreSQL too), want both to refuse")
			}
			if got := p.ParamOIDs[0]; got != tt.wantOID {
				t.Fatalf("$1 resolved to OID %d, want %d", got, tt.wantOID)
			}
			// The plan keeps the rows PostgreSQL returns.
			got := readAllUsers(t, conn, p)
			var want []string
			for _, row := range res.Rows {
				want = append(want, string(row[0]))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("plan keeps ids %v, PostgreSQL returns %v", got, want)
			}
		})
	}
}

// readAllUsers reads every row of users as p's source holds it and
// returns the ids of those p's filter keeps, in id order.
func readAllUsers(t *testing.T, conn *pgx.Conn, p *Plan) []string {
	t.Helper()
	var cols []string
	for _, c := range p.Sources[0].Columns {
		cols = append(cols, c.Name)
	}
	res := conn.PgConn().ExecParams(context.Background(), "SELECT "+strings.Join(cols, ", ")+" FROM users ORDER BY id", nil, nil, nil, nil).Read()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	rows, _ := decodeRows(t, p, res, 0)
	var ids []string
	for _, row := range rows {
		if p.Eval(row) == True {
			ids = append(ids, fmt.Sprint(row[0][0]))
		}
	}
	return ids
}

// An empty typed array is typed all the same: PostgreSQL resolves
// x = ANY($1) from the array's element type whatever its elements, so
// float8 = ANY('{}'::text[]) is an error there and must be refused here
// (the differential soak's seed 1796172057725376585 had it accepted,
// because the types were compared element by element only). Whatever the
// engine accepts, PostgreSQL must accept too.
func TestAnyEmptyArrayType(t *testing.T) {
	conn, cat := testDB(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `CREATE TABLE anyt (k int PRIMARY KEY, f float8, n int4, s text, b bool)`); err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Catalog = cat
	arrays := map[string]uint32{"text[]": 1009, "int4[]": 1007, "int8[]": 1016, "float8[]": 1022, "bool[]": 1000}
	refused := 0
	for _, col := range []string{"f", "n", "s", "b"} {
		for name, oid := range arrays {
			for _, data := range []string{"{}", "{NULL}"} {
				for _, form := range []string{"%s = ANY($1)", "%s <> ALL($1)", "%s < ANY($1)"} {
					sql := "SELECT k FROM anyt WHERE " + fmt.Sprintf(form, col)
					res := conn.PgConn().ExecParams(ctx, sql, [][]byte{[]byte(data)}, []uint32{oid}, nil, nil).Read()
					p, r, err := Compile(ctx, sql, []Bind{{OID: oid, Data: []byte(data)}}, opts)
					if err != nil {
						t.Fatal(err)
					}
					if p != nil && res.Err != nil {
						t.Errorf("%s with $1 = %s::%s: accepted, where PostgreSQL says %v", sql, data, name, res.Err)
					}
					if r != nil {
						refused++
					}
				}
			}
		}
	}
	if refused == 0 {
		t.Fatalf("nothing refused: the cases lost their mismatched types")
	}
}
