package pgxcache_test

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/internal/rctest"
	"github.com/freshetdb/freshet/readcache/pgxcache"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
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
	pool := newEnv(t, typesSchema, nil).pool
	cols := []string{"i2", "i4", "i8", "num", "f4", "f8", "b", "t", "vc", "d", "ts", "tstz", "iv", "j", "jb", "by", "u", "ta", "ia"}
	for _, col := range cols {
		t.Run(col, func(t *testing.T) {
			q := fmt.Sprintf("SELECT %s FROM types ORDER BY id", col)
			got, want := rowMaps(t, pool, q)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("cached %#v\nlive   %#v", got, want)
			}
			// Typed targets: the kept value where the target has its
			// type, pgx's decoding otherwise; NULLs and errors alike.
			for _, mk := range scanTargets[col] {
				scan := func(ctx context.Context) (string, string) {
					rows, err := pool.Query(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					defer rows.Close()
					fd := rows.FieldDescriptions()[0]
					meta := fmt.Sprint(fd.Name, " ", fd.DataTypeOID, " ", fd.TypeModifier)
					var out []string
					for rows.Next() {
						d := mk()
						if err := rows.Scan(d); err != nil {
							out = append(out, "error: "+err.Error())
							continue
						}
						out = append(out, deref(d))
					}
					return fmt.Sprint(out, rows.Err()), meta
				}
				h := pool.Cache().Stats().Hits
				got, gotMeta := scan(ctx)
				if pool.Cache().Stats().Hits != h+1 {
					t.Fatalf("%T: not read from the cache", mk())
				}
				want, wantMeta := scan(readcache.ViaPostgres(ctx))
				if got != want || gotMeta != wantMeta {
					t.Errorf("%T: cached %s (%s)\nlive   %s (%s)", mk(), got, gotMeta, want, wantMeta)
				}
			}
		})
	}
}

var scanTargets = map[string][]func() any{
	"i2":   {func() any { return new(int16) }, func() any { return new(*int16) }, func() any { return new(int64) }},
	"i4":   {func() any { return new(int32) }, func() any { return new(int64) }, func() any { return new(string) }},
	"i8":   {func() any { return new(int64) }, func() any { return new(pgtype.Int8) }},
	"num":  {func() any { return new(string) }, func() any { return new(float64) }, func() any { return new(pgtype.Numeric) }},
	"f4":   {func() any { return new(float32) }, func() any { return new(float64) }},
	"f8":   {func() any { return new(float64) }, func() any { return new(*float64) }},
	"b":    {func() any { return new(bool) }, func() any { return new(pgtype.Bool) }},
	"t":    {func() any { return new(string) }, func() any { return new(*string) }, func() any { return new([]byte) }},
	"vc":   {func() any { return new(string) }, func() any { return new(pgtype.Text) }},
	"d":    {func() any { return new(time.Time) }, func() any { return new(pgtype.Date) }},
	"ts":   {func() any { return new(time.Time) }, func() any { return new(pgtype.Timestamp) }},
	"tstz": {func() any { return new(time.Time) }, func() any { return new(*time.Time) }, func() any { return new(pgtype.Timestamptz) }},
	"u":    {func() any { return new(string) }, func() any { return new(pgtype.UUID) }},
}

// deref prints what v points at, through every pointer.
func deref(v any) string {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "nil"
		}
		rv = rv.Elem()
	}
	return fmt.Sprintf("%#v", rv.Interface())
}

// TestRegisteredTypesPgx: types a pool registers on its connections
// (AfterConnect: an enum, an array of it, a composite) decode from the
// cache as a live read decodes them, also from concurrent readers (whose
// type maps must not share the enum codec's member cache).
func TestRegisteredTypesPgx(t *testing.T) {
	ctx := rctest.Ctx(t)
	pool := newEnv(t, `CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
		CREATE TYPE pair AS (a int, b text);
		CREATE TABLE custom (id int PRIMARY KEY, m mood, ms mood[], p pair);
		INSERT INTO custom VALUES (1, 'happy', '{sad,ok}', ROW(7, 'seven')), (2, NULL, NULL, NULL), (3, 'sad', '{}', ROW(NULL, 'x'));`,
		func(pcfg *pgxpool.Config) {
			pcfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
				for _, name := range []string{"mood", "_mood", "pair"} {
					typ, err := c.LoadType(ctx, name)
					if err != nil {
						return err
					}
					c.TypeMap().RegisterType(typ)
				}
				return nil
			}
		}).pool
	const q = "SELECT id, m, ms, p FROM custom ORDER BY id"
	got, want := rowMaps(t, pool, q)
	if _, isMap := want[0]["p"].(map[string]any); !isMap {
		t.Fatalf("live read of the composite = %#v, want a map (the registered codec)", want[0]["p"])
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("cached %#v\nlive   %#v", got, want)
	}
	// The concurrent reads start once the cache serves their query (its
	// first reads go to PostgreSQL while the subscription hydrates, so a
	// cold start would make the hit count a race with the hydration),
	// and a round counts only when every read is a hit; a round may miss
	// when the machine stalls the lag frames past MaxLag, so up to five.
	const readers, reads = 8, 50
	const cq = "SELECT m, ms FROM custom ORDER BY id"
	scan := func(ctx context.Context) error {
		rows, err := pool.Query(ctx, cq)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m *string
			var ms []string
			if err := rows.Scan(&m, &ms); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	rctest.WarmHit(t, pool.Cache(), func() error { return scan(ctx) })
	for round := 1; ; round++ {
		before := pool.Cache().Stats().Hits
		var wg sync.WaitGroup
		for range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range reads {
					if err := scan(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		hits := pool.Cache().Stats().Hits - before
		if hits == readers*reads {
			break
		}
		if round == 5 {
			t.Fatalf("round %d: %d of %d concurrent reads served from the cache, want all (none of 5 rounds had all): stats %+v, err %v",
				round, hits, readers*reads, pool.Cache().Stats(), pool.Cache().Err())
		}
		t.Logf("round %d: %d of %d concurrent reads from the cache; again", round, hits, readers*reads)
	}
}

// rowMaps reads q as maps (pgx.RowToMap) from the cache, once it serves
// it, and from PostgreSQL.
func rowMaps(t *testing.T, pool *pgxcache.Pool, q string) (cached, live []map[string]any) {
	t.Helper()
	read := func(ctx context.Context) ([]map[string]any, error) {
		rows, err := pool.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowToMap)
	}
	ctx := context.Background()
	rctest.WarmHit(t, pool.Cache(), func() error { var err error; cached, err = read(ctx); return err })
	live, err := read(readcache.ViaPostgres(ctx))
	if err != nil {
		t.Fatal(err)
	}
	return cached, live
}
