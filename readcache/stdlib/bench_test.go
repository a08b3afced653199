package stdlib_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/readcache"
)

const benchSchema = `
CREATE TABLE accounts (id int PRIMARY KEY, name text NOT NULL, balance numeric(12,2) NOT NULL, updated timestamptz NOT NULL);
INSERT INTO accounts SELECT i, 'account ' || i, i * 10.5, '2024-01-01 00:00:00+00'::timestamptz + i * interval '1 minute'
FROM generate_series(1, 10000) i;
`

// BenchmarkRead compares a read served from the cache with the same read
// from PostgreSQL over loopback, through database/sql, one reader and 16.
// It reports latency percentiles (p50-ns, p99-ns) and reads/s.
//
//	go test ./readcache/stdlib/ -run '^$' -bench BenchmarkRead -benchmem -benchtime 2s
func BenchmarkRead(b *testing.B) {
	e := newEnv(b, benchSchema, nil)
	type account struct {
		ID      int
		Name    string
		Balance string
		Updated time.Time
	}
	queries := []struct {
		name string
		sql  string
		arg  any
		rows int
	}{
		{"point", "SELECT id, name, balance, updated FROM accounts WHERE id = $1", 42, 1},
		{"100rows", "SELECT id, name, balance, updated FROM accounts WHERE id > $1 ORDER BY updated DESC LIMIT 100", 5000, 100},
	}
	for _, q := range queries {
		read := func(ctx context.Context) error {
			rows, err := e.sqlDB.QueryContext(ctx, q.sql, q.arg)
			if err != nil {
				return err
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				var a account
				if err := rows.Scan(&a.ID, &a.Name, &a.Balance, &a.Updated); err != nil {
					return err
				}
				n++
			}
			if n != q.rows {
				b.Fatalf("%s: %d rows, want %d", q.name, n, q.rows)
			}
			return rows.Err()
		}
		e.warm(func() error { return read(context.Background()) })
		for _, via := range []string{"cache", "postgres"} {
			ctx := context.Background()
			if via == "postgres" {
				ctx = readcache.ViaPostgres(ctx)
			}
			for _, readers := range []int{1, 16} {
				b.Run(q.name+"/"+via+"/readers="+itoa(readers), func(b *testing.B) {
					lat := make([][]time.Duration, readers)
					var wg sync.WaitGroup
					per := b.N/readers + 1
					b.ReportAllocs()
					b.ResetTimer()
					start := time.Now()
					for r := 0; r < readers; r++ {
						wg.Add(1)
						go func(r int) {
							defer wg.Done()
							l := make([]time.Duration, 0, per)
							for i := 0; i < per; i++ {
								t0 := time.Now()
								if err := read(ctx); err != nil {
									b.Error(err)
									return
								}
								l = append(l, time.Since(t0))
							}
							lat[r] = l
						}(r)
					}
					wg.Wait()
					el := time.Since(start)
					b.StopTimer()
					all := slices.Concat(lat...)
					slices.Sort(all)
					if len(all) == 0 {
						return
					}
					b.ReportMetric(float64(all[len(all)/2].Nanoseconds()), "p50-ns")
					b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds()), "p99-ns")
					b.ReportMetric(float64(len(all))/el.Seconds(), "reads/s")
				})
			}
		}
	}
}

func itoa(n int) string {
	if n == 1 {
		return "1"
	}
	return "16"
}
