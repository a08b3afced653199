package engine

import (
	"context"
	"flag"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/query"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

var benchRows = flag.Int("bench.rows", 200_000, "rows read by BenchmarkHydrate")

// BenchmarkHydrate measures a hydration read (REPEATABLE READ snapshot,
// the rendered query, every value decoded exactly and encoded as the core
// holds it: readHeld, what the engine runs for a single-table view)
// against PostgreSQL's own COPY (query) TO STDOUT of the same rows, which
// only moves text. Both report rows/s.
//
// "typed" is the read into query.Rows of typed values (what a join's
// reads still give); "wire" is the read's statement with rows dropped
// undecoded; "interleaved" alternates a read and a COPY and reports their
// ratio, steadier than comparing read and copy run a few seconds apart on
// a shared machine ("interleaved-typed" likewise for the typed read).
//
//	go test ./engine/ -run '^$' -bench Hydrate -benchtime 5x
func BenchmarkHydrate(b *testing.B) {
	ctx := context.Background()
	db := pgtest.NewDB(b)
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE TABLE orders (id int8 PRIMARY KEY, customer int4 NOT NULL, status text,
		total numeric(12,2), placed timestamptz, paid bool, note text);
		INSERT INTO orders SELECT g, g %% 1000, (ARRAY['new','paid','shipped'])[1 + g %% 3], (g %% 100000) / 100.0,
			'2024-01-01'::timestamptz + g * interval '1 minute', g %% 2 = 0, CASE WHEN g %% 5 = 0 THEN NULL ELSE 'note ' || g END
		FROM generate_series(1, %d) g;
		ANALYZE orders`, *benchRows)); err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, db.DSN)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	opts := query.DefaultOptions()
	opts.Catalog = query.NewPGCatalog(pool)
	plan, refusal, err := query.Compile(ctx, "SELECT id, customer, status, total, placed, paid, note FROM orders WHERE id > $1",
		[]query.Bind{{OID: 20, Data: []byte("0")}}, opts)
	if err != nil || refusal != nil {
		b.Fatalf("compile: %v %v", err, refusal)
	}
	sql := plan.Render(query.RenderOptions{Columns: query.SelectNeeded})
	args, oids, formats := plan.Args()
	req := ReadRequest{ID: 1, Plan: plan, Sources: []int{0}, SQL: sql, Args: args, ArgOIDs: oids, ArgFormats: formats}
	rd := &reader{pool: pool, log: newAppliedLog(), timeout: time.Minute}

	readHeld := func(b *testing.B) int64 {
		_, rows, _, err := rd.readHeld(ctx, req, appliedMark{})
		if err != nil {
			b.Fatal(err)
		}
		return int64(len(rows))
	}
	readTyped := func(b *testing.B) int64 {
		_, rows, _, err := rd.read(ctx, req, appliedMark{})
		if err != nil {
			b.Fatal(err)
		}
		return int64(len(rows))
	}
	for _, r := range []struct {
		name string
		read func(*testing.B) int64
	}{{"read", readHeld}, {"typed", readTyped}} {
		b.Run(r.name, func(b *testing.B) {
			var n int64
			for b.Loop() {
				n += r.read(b)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "rows/s")
		})
	}
	b.Run("wire", func(b *testing.B) {
		// The read's statement through the same protocol and result
		// formats, rows received and dropped: the floor under the read,
		// what decoding adds to.
		cols, _ := readColumns(req)
		resultFormats := resultFormats(cols)
		var n int
		for b.Loop() {
			c, err := pool.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			rr := c.Conn().PgConn().ExecParams(ctx, sql, args, oids, formats, resultFormats)
			for rr.NextRow() {
				n++
			}
			_, err = rr.Close()
			c.Release()
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "rows/s")
	})
	// The same statement with its bind inlined: COPY takes no parameters.
	copySQL := "COPY (SELECT id, customer, status, total, placed, paid, note FROM orders WHERE id > 0) TO STDOUT"
	copyRows := func(b *testing.B) int64 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Release()
		tag, err := c.Conn().PgConn().CopyTo(ctx, io.Discard, copySQL)
		if err != nil {
			b.Fatal(err)
		}
		return tag.RowsAffected()
	}
	b.Run("copy", func(b *testing.B) {
		var n int64
		for b.Loop() {
			n += copyRows(b)
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "rows/s")
	})
	for _, r := range []struct {
		name string
		read func(*testing.B) int64
	}{{"interleaved", readHeld}, {"interleaved-typed", readTyped}} {
		b.Run(r.name, func(b *testing.B) { interleave(b, r.read, copyRows) })
	}
}

// interleave runs a read and a COPY in turn, so both see the same load on
// a shared machine, and reports their rates and ratio (read/copy is the
// figure to quote).
func interleave(b *testing.B, read, copyRows func(*testing.B) int64) {
	var readRows, copied int64
	var readTime, copyTime time.Duration
	for b.Loop() {
		start := time.Now()
		readRows += read(b)
		readTime += time.Since(start)
		start = time.Now()
		copied += copyRows(b)
		copyTime += time.Since(start)
	}
	readRate := float64(readRows) / readTime.Seconds()
	copyRate := float64(copied) / copyTime.Seconds()
	b.ReportMetric(readRate, "read-rows/s")
	b.ReportMetric(copyRate, "copy-rows/s")
	b.ReportMetric(readRate/copyRate, "read/copy")
}

// BenchmarkReadOpen measures what opening a read costs: "bare" only takes
// the snapshot (what reads did before schema changes were checked);
// "named" also locks the table first (a read of named columns: the rest of
// its check is in the SELECT's own result description); "star" also reads
// the table's shape from the catalog (a read of a query with *). Each
// iteration opens and rolls back one read transaction of each kind, in
// turn; the ratios are to bare.
//
//	go test ./engine/ -run '^$' -bench ReadOpen -benchtime 2000x
func BenchmarkReadOpen(b *testing.B) {
	ctx := context.Background()
	pool := newPool(b)
	if _, err := pool.Exec(ctx, `CREATE TABLE items (id int PRIMARY KEY, name text, qty int)`); err != nil {
		b.Fatal(err)
	}
	opts := query.DefaultOptions()
	opts.Catalog = query.NewPGCatalog(pool)
	compile := func(sql string) *query.Plan {
		plan, refusal, err := query.Compile(ctx, sql, nil, opts)
		if err != nil || refusal != nil {
			b.Fatalf("compile: %v %v", err, refusal)
		}
		return plan
	}
	named := compile("SELECT id, name FROM items WHERE qty = 1")
	kinds := []ReadRequest{
		{Plan: named}, // no sources: no lock, no shape query
		{Plan: named, Sources: []int{0}},
		{Plan: compile("SELECT * FROM items WHERE qty = 1"), Sources: []int{0}},
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	pc := conn.Conn().PgConn()
	var sum [3]time.Duration
	b.ResetTimer()
	for range b.N {
		for k, req := range kinds {
			start := time.Now()
			if _, err := beginSnapshot(ctx, pc, req); err != nil {
				b.Fatal(err)
			}
			sum[k] += time.Since(start)
			if err := pc.Exec(ctx, "ROLLBACK").Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(sum[0].Microseconds())/float64(b.N), "bare-µs/op")
	b.ReportMetric(float64(sum[1])/float64(sum[0]), "named/bare")
	b.ReportMetric(float64(sum[2])/float64(sum[0]), "star/bare")
}

// BenchmarkSubscribeCheck measures what checking a plan against
// PostgreSQL now (checkPlan: one catalog query) adds to a subscribe,
// beside compiling the same SQL from the catalog's cache, for one table
// and for a join of two.
//
//	go test ./engine/ -run '^$' -bench SubscribeCheck -benchtime 2000x
func BenchmarkSubscribeCheck(b *testing.B) {
	ctx := context.Background()
	pool := newPool(b)
	if _, err := pool.Exec(ctx, `CREATE TABLE items (id int PRIMARY KEY, name text, qty int);
CREATE TABLE tags (id int PRIMARY KEY, item int, tag text)`); err != nil {
		b.Fatal(err)
	}
	opts := query.DefaultOptions()
	opts.Catalog = query.NewPGCatalog(pool)
	e := &Engine{pool: pool, catalog: opts.Catalog, cfg: Config{ReadTimeout: time.Minute, Query: opts}}
	for _, bc := range []struct{ name, sql string }{
		{"one", "SELECT id, name FROM items WHERE qty = 1"},
		{"join", "SELECT i.id, t.tag FROM items i JOIN tags t ON t.item = i.id WHERE i.qty = 1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var compile, check time.Duration
			for range b.N {
				start := time.Now()
				plan, refusal, err := query.Compile(ctx, bc.sql, nil, opts)
				if err != nil || refusal != nil {
					b.Fatalf("compile: %v %v", err, refusal)
				}
				compile += time.Since(start)
				start = time.Now()
				code, reason, err := e.checkPlan(ctx, plan)
				if err != nil || code != "" {
					b.Fatalf("check: %v %s %s", err, code, reason)
				}
				check += time.Since(start)
			}
			b.ReportMetric(float64(compile.Microseconds())/float64(b.N), "compile-µs/op")
			b.ReportMetric(float64(check.Microseconds())/float64(b.N), "check-µs/op")
		})
	}
}
