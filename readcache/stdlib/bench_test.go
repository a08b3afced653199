package stdlib_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/internal/rctest"
)

// BenchmarkRead compares a read served from the cache with the same read
// from PostgreSQL over loopback, through database/sql, one reader and 16.
// It reports latency percentiles (p50-ns, p99-ns) and reads/s. "floor" is
// the same read through database/sql from a driver that returns the
// result's rows as constants: what database/sql itself costs, below which
// no driver can go.
//
//	go test ./readcache/stdlib/ -run '^$' -bench BenchmarkRead -benchmem -benchtime 2s
func BenchmarkRead(b *testing.B) {
	e := newEnv(b, rctest.BenchSchema, nil)
	type account struct {
		ID      int
		Name    string
		Balance string
		Updated time.Time
	}
	for _, q := range rctest.BenchQueries {
		floorDB := sql.OpenDB(&floorConnector{rows: q.Rows})
		defer floorDB.Close()
		read := func(ctx context.Context) error {
			db := e.sqlDB
			if ctx.Value(floorKey{}) != nil {
				db = floorDB
			}
			rows, err := db.QueryContext(ctx, q.SQL, q.Arg)
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
			if n != q.Rows {
				return fmt.Errorf("%s: %d rows, want %d", q.Name, n, q.Rows)
			}
			return rows.Err()
		}
		e.warm(func() error { return read(context.Background()) })
		for _, via := range []string{"cache", "postgres", "floor"} {
			ctx := context.Background()
			switch via {
			case "postgres":
				ctx = readcache.ViaPostgres(ctx)
			case "floor":
				ctx = context.WithValue(ctx, floorKey{}, true)
			}
			for _, readers := range []int{1, 16} {
				b.Run(fmt.Sprintf("%s/%s/readers=%d", q.Name, via, readers), func(b *testing.B) {
					rctest.Measure(b, readers, func() error { return read(ctx) })
				})
			}
		}
	}
}

type floorKey struct{}

// floorConnector is a database/sql driver that answers every query with
// n constant rows shaped like the benchmark's accounts (int64, string,
// string, time.Time), doing no other work: the cost of database/sql.
type floorConnector struct{ rows int }

func (f *floorConnector) Connect(context.Context) (driver.Conn, error) { return &floorConn{f}, nil }
func (f *floorConnector) Driver() driver.Driver                        { return nil }

type floorConn struct{ f *floorConnector }

func (c *floorConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("floor: no Prepare") }
func (c *floorConn) Close() error                        { return nil }
func (c *floorConn) Begin() (driver.Tx, error)           { return nil, errors.New("floor: no Begin") }
func (c *floorConn) QueryContext(context.Context, string, []driver.NamedValue) (driver.Rows, error) {
	return &floorRows{n: c.f.rows}, nil
}
func (c *floorConn) CheckNamedValue(*driver.NamedValue) error { return nil }

var floorCols = []string{"id", "name", "balance", "updated"}
var floorRow = []driver.Value{int64(42), "account 42", "441.00", time.Date(2024, 1, 1, 0, 42, 0, 0, time.UTC)}

type floorRows struct{ i, n int }

func (r *floorRows) Columns() []string { return floorCols }
func (r *floorRows) Close() error      { return nil }
func (r *floorRows) Next(dest []driver.Value) error {
	if r.i >= r.n {
		return io.EOF
	}
	r.i++
	copy(dest, floorRow)
	return nil
}
