package stdlib_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/internal/rctest"
	"github.com/jackc/pgx/v5"
)

// TestOrderedUnderRandomWrites: ordered results (ORDER BY on an output
// column, on a column the query does not output, DESC, NULLS FIRST, with
// and without LIMIT and OFFSET), kept by the deltas' moves form
// (wire.DeltaOrderMoves, which the cache asks for), equal PostgreSQL's
// answers exactly after every round of random writes, every read of them a
// hit, and no entry dropped and subscribed again (a delta the cache could
// not apply drops its entry, and a fresh subscription would hide the
// error).
func TestOrderedUnderRandomWrites(t *testing.T) {
	var setup strings.Builder
	setup.WriteString("CREATE TABLE items (id int PRIMARY KEY, grp int NOT NULL, score int NOT NULL, name text COLLATE \"C\");\n")
	rng := rand.New(rand.NewSource(7))
	const rows = 200
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(&setup, "INSERT INTO items VALUES (%d, %d, %d, %s);\n", i, rng.Intn(3), rng.Intn(60), randName(rng))
	}
	e := newEnv(t, setup.String(), func(c *readcache.Config) { c.MaxLag = time.Minute })
	type q struct {
		sql  string
		args []any
	}
	queries := []q{
		{"SELECT id, name FROM items WHERE grp = $1 ORDER BY score, id", []any{0}},
		{"SELECT id, name FROM items WHERE grp = $1 ORDER BY score, id", []any{1}},
		{"SELECT id, score FROM items ORDER BY score DESC, id LIMIT 15 OFFSET 3", nil},
		{"SELECT id, name, score FROM items ORDER BY name NULLS FIRST, id LIMIT 25", nil},
		{"SELECT id, name FROM items WHERE score < $1 ORDER BY name DESC, id", []any{30}},
		{"SELECT id, grp FROM items WHERE grp = $1 ORDER BY id", []any{2}},
		{"SELECT name, id FROM items ORDER BY score, grp DESC, id LIMIT 40", nil},
	}
	ctx := context.Background()
	cached := func(x q) (string, error) { return readText(e.sqlDB.QueryContext(ctx, x.sql, x.args...)) }
	reference := func(x q) (string, error) {
		rs, err := e.admin.Query(ctx, x.sql, append([]any{pgx.QueryExecModeSimpleProtocol}, x.args...)...)
		if err != nil {
			return "", err
		}
		defer rs.Close()
		var b strings.Builder
		for rs.Next() {
			for i, v := range rs.RawValues() {
				if i > 0 {
					b.WriteByte(',')
				}
				if v == nil {
					b.WriteString("NULL")
				} else {
					b.Write(v)
				}
			}
			b.WriteByte(';')
		}
		return b.String(), rs.Err()
	}
	for _, x := range queries {
		e.warm(func() error { _, err := cached(x); return err })
	}
	cache := e.conn.Cache()
	misses := cache.Stats().Misses
	next := rows + 1
	for round := 0; round < 12; round++ {
		for txn := 0; txn < 1+rng.Intn(3); txn++ {
			var b strings.Builder
			b.WriteString("BEGIN;")
			for range 1 + rng.Intn(12) {
				id := 1 + rng.Intn(next-1)
				switch rng.Intn(6) {
				case 0, 1:
					fmt.Fprintf(&b, "UPDATE items SET score = %d WHERE id = %d;", rng.Intn(60), id)
				case 2:
					fmt.Fprintf(&b, "UPDATE items SET name = %s WHERE id = %d;", randName(rng), id)
				case 3:
					fmt.Fprintf(&b, "UPDATE items SET grp = %d WHERE id = %d;", rng.Intn(3), id)
				case 4:
					fmt.Fprintf(&b, "INSERT INTO items VALUES (%d, %d, %d, %s);", next, rng.Intn(3), rng.Intn(60), randName(rng))
					next++
				case 5:
					fmt.Fprintf(&b, "DELETE FROM items WHERE id = %d;", id)
				}
			}
			b.WriteString("COMMIT;")
			e.exec(b.String())
		}
		var lsnText string
		if err := e.admin.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsnText); err != nil {
			t.Fatal(err)
		}
		want := parseLSN(t, lsnText)
		rctest.Eventually(t, 30*time.Second, func() string {
			if p, ok := cache.Position(); !ok || p < want {
				return fmt.Sprintf("cache at %x, want %s", p, lsnText)
			}
			return ""
		})
		for _, x := range queries {
			var got string
			e.hit(func() error { var err error; got, err = cached(x); return err })
			ref, err := reference(x)
			if err != nil {
				t.Fatal(err)
			}
			if got != ref {
				t.Fatalf("round %d: %s %v:\ncache      %s\npostgresql %s", round, x.sql, x.args, got, ref)
			}
		}
	}
	if got := cache.Stats().Misses; got != misses {
		t.Fatalf("misses = %d after warming, want %d: an entry was dropped and subscribed again", got, misses)
	}
}

func randName(rng *rand.Rand) string {
	if rng.Intn(8) == 0 {
		return "NULL"
	}
	return "'n" + strconv.Itoa(rng.Intn(40)) + "'"
}

func parseLSN(t *testing.T, s string) uint64 {
	t.Helper()
	hi, lo, ok := strings.Cut(s, "/")
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("LSN %q", s)
	}
	return h<<32 | l
}

// readText reads rows as text, NULL for SQL NULL, each row ended by ';'.
func readText(rs *sql.Rows, err error) (string, error) {
	if err != nil {
		return "", err
	}
	defer rs.Close()
	cols, err := rs.Columns()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rs.Next() {
		if err := rs.Scan(ptrs...); err != nil {
			return "", err
		}
		for i, v := range vals {
			if i > 0 {
				b.WriteByte(',')
			}
			if !v.Valid {
				b.WriteString("NULL")
			} else {
				b.WriteString(v.String)
			}
		}
		b.WriteByte(';')
	}
	return b.String(), rs.Err()
}
