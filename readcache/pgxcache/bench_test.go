package pgxcache_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/internal/rctest"
	"github.com/freshetdb/freshet/readcache/pgxcache"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkPoint compares a point lookup through the pgx wrapper served
// from the cache with the same read on the pgx pool over loopback.
//
//	go test ./readcache/pgxcache/ -run '^$' -bench BenchmarkPoint -benchmem -benchtime 2s
func BenchmarkPoint(b *testing.B) {
	ctx := context.Background()
	db := pgtest.NewDB(b)
	admin, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `CREATE TABLE accounts (id int PRIMARY KEY, name text NOT NULL, balance numeric(12,2) NOT NULL, updated timestamptz NOT NULL);
		INSERT INTO accounts SELECT i, 'account ' || i, i * 10.5, now() FROM generate_series(1, 10000) i;`); err != nil {
		b.Fatal(err)
	}
	srv := rctest.Start(b, db.DSN, db.Name)
	pp, err := pgxpool.New(ctx, db.DSN)
	if err != nil {
		b.Fatal(err)
	}
	cfg := readcache.DefaultConfig()
	cfg.URL, cfg.Logger = srv.URL, quiet()
	pool, err := pgxcache.New(pp, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	const q = "SELECT id, name, balance, updated FROM accounts WHERE id = $1"
	read := func(ctx context.Context) error {
		var id int32
		var name string
		var bal pgtype.Numeric
		var up time.Time
		return pool.QueryRow(ctx, q, 42).Scan(&id, &name, &bal, &up)
	}
	rctest.Eventually(b, 30*time.Second, func() string {
		h := pool.Cache().Stats().Hits
		if err := read(ctx); err != nil {
			return err.Error()
		}
		if pool.Cache().Stats().Hits == h {
			return "not a hit yet"
		}
		return ""
	})
	for _, via := range []string{"cache", "postgres"} {
		c := ctx
		if via == "postgres" {
			c = readcache.ViaPostgres(ctx)
		}
		b.Run(via, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				t0 := time.Now()
				if err := read(c); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			el := time.Since(start)
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
			b.ReportMetric(float64(len(lat))/el.Seconds(), "reads/s")
		})
	}
}
