package pgxcache_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/internal/rctest"
	"github.com/jackc/pgx/v5/pgtype"
)

// BenchmarkRead compares reads through the pgx wrapper served from the
// cache with the same reads on the pgx pool over loopback (a point lookup
// and a 100-row ordered read, one reader and 16), reporting latency
// percentiles (p50-ns, p99-ns) and reads/s. The targets are sqlc's: int32,
// string, pgtype.Numeric, time.Time.
//
//	go test ./readcache/pgxcache/ -run '^$' -bench BenchmarkRead -benchmem -benchtime 2s
func BenchmarkRead(b *testing.B) {
	ctx := context.Background()
	pool := newEnv(b, rctest.BenchSchema, nil).pool
	for _, q := range rctest.BenchQueries {
		read := func(ctx context.Context) error {
			rows, err := pool.Query(ctx, q.SQL, q.Arg)
			if err != nil {
				return err
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				var id int32
				var name string
				var bal pgtype.Numeric
				var up time.Time
				if err := rows.Scan(&id, &name, &bal, &up); err != nil {
					return err
				}
				n++
			}
			if n != q.Rows {
				return fmt.Errorf("%s: %d rows, want %d", q.Name, n, q.Rows)
			}
			return rows.Err()
		}
		rctest.WarmHit(b, pool.Cache(), func() error { return read(ctx) })
		for _, via := range []string{"cache", "postgres"} {
			c := ctx
			if via == "postgres" {
				c = readcache.ViaPostgres(ctx)
			}
			for _, readers := range []int{1, 16} {
				b.Run(fmt.Sprintf("%s/%s/readers=%d", q.Name, via, readers), func(b *testing.B) {
					rctest.Measure(b, readers, func() error { return read(c) })
				})
			}
		}
	}
}
