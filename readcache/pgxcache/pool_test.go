package pgxcache_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/internal/rctest"
	"github.com/freshetdb/freshet/readcache/pgxcache"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// DBTX is the interface sqlc generates for pgx.
type DBTX interface {
	Exec(context.Context, string, ...interface{}) (pgconn.CommandTag, error)
	Query(context.Context, string, ...interface{}) (pgx.Rows, error)
	QueryRow(context.Context, string, ...interface{}) pgx.Row
}

// Queries is written the way sqlc writes it for pgx.
type Queries struct{ db DBTX }

type Item struct {
	ID    int32
	Name  string
	Price pgtype.Numeric
	Tags  []string
	At    pgtype.Timestamptz
}

const getItem = `SELECT id, name, price, tags, at FROM items WHERE id = $1`

func (q *Queries) GetItem(ctx context.Context, id int32) (Item, error) {
	row := q.db.QueryRow(ctx, getItem, id)
	var i Item
	err := row.Scan(&i.ID, &i.Name, &i.Price, &i.Tags, &i.At)
	return i, err
}

const listItems = `SELECT id, name, price, tags, at FROM items WHERE price > $1 ORDER BY price DESC, id LIMIT $2`

func (q *Queries) ListItems(ctx context.Context, min string, limit int32) ([]Item, error) {
	rows, err := q.db.Query(ctx, listItems, min, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var items []Item
	for rows.Next() {
		var i Item
		if err := rows.Scan(&i.ID, &i.Name, &i.Price, &i.Tags, &i.At); err != nil {
			return nil, err
		}
		items = append(items, i)
	}
	return items, rows.Err()
}

const countItems = `SELECT count(*) FROM items WHERE name LIKE $1`

func (q *Queries) CountItems(ctx context.Context, pattern string) (int64, error) {
	var n int64
	err := q.db.QueryRow(ctx, countItems, pattern).Scan(&n)
	return n, err
}

const setName = `UPDATE items SET name = $2 WHERE id = $1`

func (q *Queries) SetName(ctx context.Context, id int32, name string) error {
	_, err := q.db.Exec(ctx, setName, id, name)
	return err
}

const itemsSchema = `
CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, price numeric(10,2), tags text[], at timestamptz);
INSERT INTO items SELECT i, 'item ' || i, i * 0.75, ARRAY['t' || (i % 3), 'x'], '2024-01-01 00:00:00+00'::timestamptz + i * interval '1 hour'
FROM generate_series(1, 200) i;
CREATE TABLE makers (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO makers SELECT i, 'maker ' || i FROM generate_series(1, 10) i;
ALTER TABLE items ADD COLUMN maker_id int REFERENCES makers(id);
UPDATE items SET maker_id = 1 + id % 10;
`

type ItemMaker struct {
	ItemName  string
	MakerName string
}

const listItemMakers = `SELECT i.name, m.name FROM items i JOIN makers m ON m.id = i.maker_id WHERE i.id <= $1 ORDER BY i.id`

func (q *Queries) ListItemMakers(ctx context.Context, maxID int32) ([]ItemMaker, error) {
	rows, err := q.db.Query(ctx, listItemMakers, maxID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var items []ItemMaker
	for rows.Next() {
		var i ItemMaker
		if err := rows.Scan(&i.ItemName, &i.MakerName); err != nil {
			return nil, err
		}
		items = append(items, i)
	}
	return items, rows.Err()
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// env is a real database with schema, a real freshet serve following it,
// a plain pgx connection for writes, the pgx pool (its statements to
// PostgreSQL counted) and the wrapper over it.
type env struct {
	admin *pgx.Conn
	pp    *pgxpool.Pool
	pool  *pgxcache.Pool
	cfg   readcache.Config
	stmts *pgtest.StatementCounter
}

func newEnv(t testing.TB, schema string, tweak func(*pgxpool.Config)) *env {
	t.Helper()
	ctx := rctest.Ctx(t)
	db := pgtest.NewDB(t)
	admin, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	if _, err := admin.Exec(ctx, schema); err != nil {
		t.Fatal(err)
	}
	srv := rctest.Start(t, db.DSN, db.Name)
	pcfg, err := pgxpool.ParseConfig(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{admin: admin, stmts: &pgtest.StatementCounter{}, cfg: readcache.DefaultConfig()}
	pcfg.ConnConfig.Tracer = e.stmts
	if tweak != nil {
		tweak(pcfg)
	}
	if e.pp, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		t.Fatal(err)
	}
	e.cfg.URL, e.cfg.Logger = srv.URL, quiet()
	if e.pool, err = pgxcache.New(e.pp, e.cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.pool.Close)
	return e
}

func TestSqlcPgx(t *testing.T) {
	ctx := rctest.Ctx(t)
	e := newEnv(t, itemsSchema, nil)
	admin, pp, pool, stmts, cfg := e.admin, e.pp, e.pool, e.stmts, e.cfg
	q := &Queries{db: pool}
	qPG := &Queries{db: pp}
	cache := pool.Cache()

	warm := func(read func() error) { t.Helper(); rctest.WarmHit(t, cache, read) }
	get := func() error { _, err := q.GetItem(ctx, 5); return err }
	warm(get)
	n0 := stmts.Count()
	if err := get(); err != nil || stmts.Count() != n0 {
		t.Fatalf("hit: err %v, statements to PostgreSQL %d, want 0", err, stmts.Count()-n0)
	}

	// Equal to PostgreSQL: point, ordered+limited, count.
	for name, read := range map[string]func(q *Queries) (any, error){
		"get":   func(q *Queries) (any, error) { return q.GetItem(ctx, 7) },
		"list":  func(q *Queries) (any, error) { return q.ListItems(ctx, "100", 25) },
		"count": func(q *Queries) (any, error) { return q.CountItems(ctx, "item 1%") },
		"join":  func(q *Queries) (any, error) { return q.ListItemMakers(ctx, 12) },
	} {
		var got any
		warm(func() error { var err error; got, err = read(q); return err })
		want, err := read(qPG)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: cached %+v\nwant %+v", name, got, want)
		}
	}

	// A change reaches the cache with no statement sent to PostgreSQL.
	if _, err := admin.Exec(ctx, "UPDATE items SET name = 'renamed' WHERE id = 5"); err != nil {
		t.Fatal(err)
	}
	n0 = stmts.Count()
	rctest.Eventually(t, 20*time.Second, func() string {
		it, err := q.GetItem(ctx, 5)
		if err != nil {
			return err.Error()
		}
		if it.Name != "renamed" {
			return fmt.Sprintf("name = %q, want renamed", it.Name)
		}
		return ""
	})
	if d := stmts.Count() - n0; d != 0 {
		t.Fatalf("statements to PostgreSQL while the change arrived = %d, want 0", d)
	}

	// Routes both ways.
	n0 = stmts.Count()
	if _, err := q.GetItem(readcache.ViaPostgres(ctx), 5); err != nil || stmts.Count() != n0+1 {
		t.Fatalf("ViaPostgres: err %v, statements %d, want 1", err, stmts.Count()-n0)
	}
	pool.SetRoute(readcache.RoutePostgres)
	h := cache.Stats().Hits
	if _, err := q.GetItem(readcache.ViaCache(ctx), 5); err != nil || cache.Stats().Hits != h+1 {
		t.Fatalf("ViaCache on a postgres pool: err %v, hits %d, want %d", err, cache.Stats().Hits, h+1)
	}
	pool.SetRoute(readcache.RouteDefault)

	// A transaction's reads go to PostgreSQL.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n0 = stmts.Count()
	if _, err := (&Queries{db: tx}).GetItem(ctx, 5); err != nil || stmts.Count() == n0 {
		t.Fatalf("read in a transaction: err %v, statements %d, want 1", err, stmts.Count()-n0)
	}
	tx.Rollback(ctx)

	// Read-your-writes.
	if err := q.SetName(ctx, 5, "mine"); err != nil {
		t.Fatal(err)
	}
	if it, err := q.GetItem(ctx, 5); err != nil || it.Name != "mine" {
		t.Fatalf("read after write = %q, %v; want mine", it.Name, err)
	}
	if got := cache.Stats().Postgres["after_write"]; got != 1 {
		t.Fatalf("after_write reads = %d, want 1", got)
	}

	// pgx helpers over cached rows.
	type named struct {
		ID   int32
		Name string
	}
	collect := func(ctx context.Context) ([]named, error) {
		rows, err := pool.Query(ctx, "SELECT id, name FROM items WHERE id < $1 ORDER BY id", 4)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowToStructByName[named])
	}
	time.Sleep(cfg.ReadYourWrites)
	var got []named
	warm(func() error { var err error; got, err = collect(ctx); return err })
	want, err := collect(readcache.ViaPostgres(ctx))
	if err != nil || !reflect.DeepEqual(got, want) || len(got) != 3 {
		t.Fatalf("CollectRows: cached %+v, want %+v (%v)", got, want, err)
	}
}
