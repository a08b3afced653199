package stdlib_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/freshetdb/freshet/readcache"
	"github.com/jackc/pgx/v5/pgtype"
)

const typesSchema = `
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE types (
	id int PRIMARY KEY, i2 int2, i4 int4, i8 int8, num numeric(12,4), f4 float4, f8 float8, b bool,
	t text, vc varchar(20), ch char(5), d date, ts timestamp, tstz timestamptz, iv interval,
	j json, jb jsonb, by bytea, u uuid, ta text[], ia int4[], m mood);
INSERT INTO types VALUES
	(1, -32768, 2147483647, -9223372036854775808, 12345678.1234, 1.5, 0.1, true,
	 'héllo "q" \ x', 'vc', 'ab', '2024-02-29', '2024-05-01 10:00:00.123456', '2024-05-01 10:00:00.5+02',
	 '1 day 02:03:04', '{"a": [1, 2]}', '{"b": {"c": null}}', '\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
	 '{red,"a b",NULL}', '{1,2,3}', 'happy'),
	(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
	(3, 0, 0, 0, -0.0001, 'Infinity', '-1e-300', false, '', '', '', '-infinity', '1999-12-31 23:59:59', '0001-01-01 00:00:00+00',
	 '-1 mons', '[]', '"s"', '\x', '00000000-0000-0000-0000-000000000000', '{}', '{-1}', 'sad');
`

type jsonDoc map[string]any

func (d *jsonDoc) Scan(src any) error {
	if src == nil {
		*d = nil
		return nil
	}
	b, ok := src.([]byte)
	if !ok {
		s, _ := src.(string)
		b = []byte(s)
	}
	return json.Unmarshal(b, d)
}

// TestScanTypes scans every common column type into the usual Go targets,
// once from the cache and once from PostgreSQL, and wants the same values.
func TestScanTypes(t *testing.T) {
	e := newEnv(t, typesSchema, nil)
	m := pgtype.NewMap()
	targets := map[string][]func() any{
		"i2":   {func() any { return new(sql.NullInt16) }, func() any { return new(*int16) }, func() any { return new(any) }},
		"i4":   {func() any { return new(sql.NullInt32) }, func() any { return new(*int) }, func() any { return new(any) }},
		"i8":   {func() any { return new(sql.NullInt64) }, func() any { return new(*int64) }, func() any { return new(any) }},
		"num":  {func() any { return new(sql.NullString) }, func() any { return new(sql.NullFloat64) }, func() any { return new(pgtype.Numeric) }, func() any { return new(any) }},
		"f4":   {func() any { return new(sql.NullFloat64) }, func() any { return new(*float32) }, func() any { return new(any) }},
		"f8":   {func() any { return new(sql.NullFloat64) }, func() any { return new(sql.NullString) }, func() any { return new(any) }},
		"b":    {func() any { return new(sql.NullBool) }, func() any { return new(*bool) }, func() any { return new(any) }},
		"t":    {func() any { return new(sql.NullString) }, func() any { return new(*string) }, func() any { return new([]byte) }, func() any { return new(any) }},
		"vc":   {func() any { return new(sql.NullString) }, func() any { return new(any) }},
		"ch":   {func() any { return new(sql.NullString) }, func() any { return new(any) }},
		"d":    {func() any { return new(sql.NullTime) }, func() any { return new(pgtype.Date) }, func() any { return new(any) }},
		"ts":   {func() any { return new(sql.NullTime) }, func() any { return new(pgtype.Timestamp) }, func() any { return new(any) }},
		"tstz": {func() any { return new(sql.NullTime) }, func() any { return new(*time.Time) }, func() any { return new(pgtype.Timestamptz) }, func() any { return new(any) }},
		"iv":   {func() any { return new(sql.NullString) }, func() any { return new(pgtype.Interval) }, func() any { return new(any) }},
		"j":    {func() any { return new([]byte) }, func() any { return new(jsonDoc) }, func() any { return new(any) }},
		"jb":   {func() any { return new([]byte) }, func() any { return new(jsonDoc) }, func() any { return new(sql.NullString) }, func() any { return new(any) }},
		"by":   {func() any { return new([]byte) }, func() any { return new(any) }},
		"u":    {func() any { return new(sql.NullString) }, func() any { return new(pgtype.UUID) }, func() any { return new(any) }},
		"ta":   {func() any { return new(sql.NullString) }, func() any { v := new([]*string); return m.SQLScanner(v) }, func() any { return new(any) }},
		"ia":   {func() any { v := new([]int32); return m.SQLScanner(v) }, func() any { return new(any) }},
		"m":    {func() any { return new(sql.NullString) }, func() any { return new(*string) }, func() any { return new(any) }},
	}
	ctx := context.Background()
	for col, makers := range targets {
		t.Run(col, func(t *testing.T) {
			q := fmt.Sprintf("SELECT %s FROM types ORDER BY id", col)
			e.warm(func() error {
				rows, err := e.sqlDB.QueryContext(ctx, q)
				if err != nil {
					return err
				}
				return rows.Close()
			})
			for k, mk := range makers {
				read := func(ctx context.Context) ([]any, []string, error) {
					rows, err := e.sqlDB.QueryContext(ctx, q)
					if err != nil {
						return nil, nil, err
					}
					defer rows.Close()
					cts, _ := rows.ColumnTypes()
					n, nOK := cts[0].Length()
					p, sc, psOK := cts[0].DecimalSize()
					meta := []string{cts[0].Name(), cts[0].DatabaseTypeName(), fmt.Sprint(cts[0].ScanType()),
						fmt.Sprint("length ", n, nOK), fmt.Sprint("decimal ", p, sc, psOK)}
					var out []any
					for rows.Next() {
						d := mk()
						if err := rows.Scan(d); err != nil {
							out = append(out, "scan error: "+err.Error())
							continue
						}
						out = append(out, d)
					}
					return out, meta, rows.Err()
				}
				hits := e.conn.Cache().Stats().Hits
				got, gotMeta, err := read(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if e.conn.Cache().Stats().Hits != hits+1 {
					t.Fatalf("target %d: not read from the cache", k)
				}
				want, wantMeta, err := read(readcache.ViaPostgres(ctx))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(gotMeta, wantMeta) {
					t.Errorf("target %d: column = %v, want %v", k, gotMeta, wantMeta)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("target %T: cached = %s\nwant %s", mk(), dump(got), dump(want))
				}
			}
		})
	}
}

func dump(vs []any) string {
	s := ""
	for _, v := range vs {
		rv := reflect.ValueOf(v)
		for rv.Kind() == reflect.Pointer && !rv.IsNil() {
			rv = rv.Elem()
		}
		s += fmt.Sprintf("%#v; ", rv)
	}
	return s
}
