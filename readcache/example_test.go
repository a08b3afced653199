package readcache_test

import (
	"context"
	"fmt"

	"github.com/freshetdb/freshet/readcache"
	"github.com/jackc/pgx/v5/pgtype"
)

// Reads that must see PostgreSQL as it is now, whatever the pool says.
func ExampleViaPostgres() {
	ctx := readcache.ViaPostgres(context.Background())
	fmt.Println(readcache.RouteOf(ctx))
	fmt.Println(readcache.RouteOf(readcache.ViaCache(ctx)))
	fmt.Println(readcache.Resolve(readcache.RouteDefault, readcache.RoutePostgres))
	// Output:
	// postgres
	// cache
	// postgres
}

// Which statements the cache answers, and which go to PostgreSQL.
func ExampleIsSelect() {
	for _, sql := range []string{
		"SELECT id, title FROM tickets WHERE status = $1 ORDER BY id",
		"SELECT * FROM tickets WHERE id = $1 FOR UPDATE",
		"UPDATE tickets SET status = 'closed' WHERE id = $1",
	} {
		fmt.Println(readcache.IsSelect(sql))
	}
	// Output:
	// true
	// false
	// false
}

// Two reads share a cache entry exactly when their SQL and binds match.
func ExampleAppendKey() {
	m := pgtype.NewMap()
	const q = "SELECT * FROM tickets WHERE id = $1 AND status = $2"
	key := func(args ...any) string {
		b := readcache.AppendKey(nil, q)
		for _, a := range args {
			b, _ = readcache.AppendArg(b, m, a)
		}
		return string(b)
	}
	fmt.Println(key(42, "open") == key(int64(42), "open"))
	fmt.Println(key(42, "open") == key(43, "open"))
	// Output:
	// true
	// false
}

// A cache with no URL sends every read to PostgreSQL: the same program
// runs with and without Freshet.
func ExampleOpen() {
	cfg := readcache.DefaultConfig() // cfg.URL = "ws://localhost:7070/s2s/v1"
	c, err := readcache.Open(cfg)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	_, reason := c.Read(context.Background(), "SELECT 1", nil)
	fmt.Println(c.Enabled(), reason)
	// Output:
	// false disabled
}
