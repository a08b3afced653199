package pgxcache_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/internal/rctest"
	"github.com/freshetdb/freshet/readcache/pgxcache"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const typesSchema = `
CREATE TABLE types (
	id int PRIMARY KEY, i2 int2, i4 int4, i8 int8, num numeric(12,4), f4 float4, f8 float8, b bool,
	t text, vc varchar(20), d date, ts timestamp, tstz timestamptz, iv interval,
	j json, jb jsonb, by bytea, u uuid, ta text[], ia int4[]);
INSERT INTO types VALUES
	(1, -32768, 2147483647, -9223372036854775808, 12345678.1234, 1.5, 0.1, true,
	 'héllo', 'vc', '2024-02-29', '2024-05-01 10:00:00.123456', '2024-05-01 10:00:00.5+02',
	 '1 day 02:03:04', '{"a": [1, 2]}', '{"b": {"c": null}}', '\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
	 '{red,"a b",NULL}', '{1,2,3}'),
	(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
	(3, 0, 0, 0, -0.0001, 'Infinity', '-1e-300', false, '', '', '-infinity', '1999-12-31 23:59:59', '0001-01-01 00:00:00+00',
	 '-1 mons', '[]', '"s"', '\x', '00000000-0000-0000-0000-000000000000', '{}', '{-1}');
`

// TestScanTypesPgx: rows.Values() and pgx.RowToMap of every common type
// read from the cache equal a live pgx read's.
func TestScanTypesPgx(t *testing.T) {
	ctx := rctest.Ctx(t)
	db := pgtest.NewDB(t)
	admin, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, typesSchema); err != nil {
		t.Fatal(err)
	}
	srv := rctest.Start(t, db.DSN, db.Name)
	pp, err := pgxpool.New(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg := readcache.DefaultConfig()
	cfg.URL, cfg.Logger = srv.URL, quiet()
	pool, err := pgxcache.New(pp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	cols := []string{"i2", "i4", "i8", "num", "f4", "f8", "b", "t", "vc", "d", "ts", "tstz", "iv", "j", "jb", "by", "u", "ta", "ia"}
	for _, col := range cols {
		t.Run(col, func(t *testing.T) {
			q := fmt.Sprintf("SELECT %s FROM types ORDER BY id", col)
			read := func(ctx context.Context) ([]map[string]any, error) {
				rows, err := pool.Query(ctx, q)
				if err != nil {
					return nil, err
				}
				return pgx.CollectRows(rows, pgx.RowToMap)
			}
			var got []map[string]any
			rctest.Eventually(t, 30*time.Second, func() string {
				h := pool.Cache().Stats().Hits
				var err error
				if got, err = read(ctx); err != nil {
					return err.Error()
				}
				if pool.Cache().Stats().Hits == h {
					return "not a hit"
				}
				return ""
			})
			want, err := read(readcache.ViaPostgres(ctx))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("cached %#v\nlive   %#v", got, want)
			}
		})
	}
}
