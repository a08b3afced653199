package stdlib_test

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/freshetdb/freshet/readcache"
	"github.com/jmoiron/sqlx"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

const schema = `
CREATE TABLE users (id int PRIMARY KEY, name text NOT NULL, team text);
CREATE TABLE tickets (id int PRIMARY KEY, title text NOT NULL, status text NOT NULL, owner_id int REFERENCES users(id), points numeric(6,2));
INSERT INTO users SELECT i, 'user ' || i, CASE WHEN i % 2 = 0 THEN 'red' ELSE 'blue' END FROM generate_series(1, 20) i;
INSERT INTO tickets SELECT i, 'ticket ' || i, CASE WHEN i % 3 = 0 THEN 'closed' ELSE 'open' END, 1 + i % 20, i * 1.25 FROM generate_series(1, 150) i;
`

type Ticket struct {
	ID      int `gorm:"primaryKey"`
	Title   string
	Status  string
	OwnerID *int
	Points  *string
}

type userRow struct {
	ID   int     `db:"id" bun:"id,pk"`
	Name string  `db:"name" bun:"name"`
	Team *string `db:"team" bun:"team"`
}

type joined struct {
	Title string `db:"title"`
	Name  string `db:"name"`
}

func TestSqlx(t *testing.T) {
	e := newEnv(t, schema, nil)
	db := sqlx.NewDb(e.sqlDB, "pgx")
	ctx := context.Background()
	var u userRow
	get := func() error { return db.GetContext(ctx, &u, "SELECT id, name, team FROM users WHERE id = $1", 3) }
	e.warm(get)
	e.hit(get)
	e.exec("UPDATE users SET name = 'carol' WHERE id = 3")
	e.fresh(func() (string, error) { err := get(); return u.Name, err }, "carol")

	queries := []struct {
		name string
		sql  string
		args []any
	}{
		{"ordered", "SELECT id, name, team FROM users WHERE team = $1 ORDER BY name DESC", []any{"red"}},
		{"limited", "SELECT id, name, team FROM users ORDER BY id LIMIT 5 OFFSET 2", nil},
		{"nulls", "SELECT id, name, team FROM users WHERE team IS NOT NULL ORDER BY id", nil},
	}
	for _, q := range queries {
		t.Run(q.name, func(t *testing.T) {
			var got, want []userRow
			e.warm(func() error { got = nil; return db.SelectContext(ctx, &got, q.sql, q.args...) })
			if err := db.SelectContext(readcache.ViaPostgres(ctx), &want, q.sql, q.args...); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) || len(got) == 0 {
				t.Fatalf("cached = %+v\nPostgreSQL = %+v", got, want)
			}
		})
	}
	t.Run("join", func(t *testing.T) {
		const q = "SELECT t.title, u.name FROM tickets t JOIN users u ON u.id = t.owner_id WHERE t.id <= $1 ORDER BY t.id"
		var got, want []joined
		e.warm(func() error { got = nil; return db.SelectContext(ctx, &got, q, 5) })
		if err := db.SelectContext(readcache.ViaPostgres(ctx), &want, q, 5); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || len(got) != 5 {
			t.Fatalf("cached = %+v\nPostgreSQL = %+v", got, want)
		}
		e.exec("UPDATE users SET name = 'owner two' WHERE id = 2")
		e.fresh(func() (string, error) {
			var rows []joined
			err := db.SelectContext(ctx, &rows, q, 5)
			if err != nil || len(rows) == 0 {
				return "", err
			}
			return rows[0].Name, nil
		}, "owner two")
	})
}

func TestBun(t *testing.T) {
	e := newEnv(t, schema, nil)
	bdb := bun.NewDB(e.sqlDB, pgdialect.New())
	ctx := context.Background()
	type User struct {
		bun.BaseModel `bun:"table:users"`
		userRow
	}
	var u User
	get := func() error { return bdb.NewSelect().Model(&u).Where("id = ?", 4).Scan(ctx) }
	e.warm(get)
	e.hit(get)
	e.exec("UPDATE users SET team = NULL WHERE id = 4")
	e.fresh(func() (string, error) {
		u = User{}
		err := get()
		if u.Team == nil {
			return "<nil>", err
		}
		return *u.Team, err
	}, "<nil>")
	var got, want []User
	e.warm(func() error {
		got = nil
		return bdb.NewSelect().Model(&got).Where("team = ?", "blue").Order("id DESC").Limit(3).Scan(ctx)
	})
	if err := bdb.NewSelect().Model(&want).Where("team = ?", "blue").Order("id DESC").Limit(3).Scan(readcache.ViaPostgres(ctx)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || len(got) != 3 {
		t.Fatalf("cached = %+v\nPostgreSQL = %+v", got, want)
	}
}

// ormReads are the reads and the write each library makes in its own way
// over the tickets and users of schema.
type ormReads struct {
	get    func(ctx context.Context, id int) (string, error)                 // a ticket's title
	list   func(ctx context.Context, status string, n int) ([]string, error) // titles by points DESC, id, at most n
	count  func(ctx context.Context, status string) (int64, error)
	join   func(ctx context.Context, maxID int) ([]string, error) // "title/owner" by ticket id
	rename func(ctx context.Context, id int, title string) error  // a write through the library
	inTx   func(ctx context.Context, id int) (string, error)      // a ticket's title read in a transaction
}

// TestORMs runs the list against every library on database/sql:
// a hit sends nothing to PostgreSQL; ordered, limited, counted and joined
// results equal PostgreSQL's; a committed change reaches the cache with no
// statement sent; a transaction bypasses; the route flags work both ways;
// a write through the library is read back (read-your-writes).
func TestORMs(t *testing.T) {
	for _, lib := range []struct {
		name string
		open func(t *testing.T, db *sql.DB) ormReads
	}{
		{"gorm", gormReads}, {"sqlx", sqlxReads}, {"bun", bunReads}, {"sqlc", sqlcReads}, {"ent", entReads},
	} {
		t.Run(lib.name, func(t *testing.T) {
			e := newEnv(t, schema, func(c *readcache.Config) { c.ReadYourWrites = 300 * time.Millisecond })
			r := lib.open(t, e.sqlDB)
			ctx := context.Background()
			cache := e.conn.Cache()
			get := func(ctx context.Context) func() error {
				return func() error { _, err := r.get(ctx, 7); return err }
			}
			e.warm(get(ctx))
			e.hit(get(ctx))

			for name, read := range map[string]func(ctx context.Context) (any, error){
				"ordered+limited": func(ctx context.Context) (any, error) { return r.list(ctx, "open", 10) },
				"counted":         func(ctx context.Context) (any, error) { return r.count(ctx, "closed") },
				"joined":          func(ctx context.Context) (any, error) { return r.join(ctx, 5) },
			} {
				var got any
				e.warm(func() error { var err error; got, err = read(ctx); return err })
				want, err := read(readcache.ViaPostgres(ctx))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) || fmt.Sprint(want) == "[]" || fmt.Sprint(want) == "0" {
					t.Fatalf("%s: cached %v, PostgreSQL %v", name, got, want)
				}
			}

			e.exec("UPDATE tickets SET title = 'changed' WHERE id = 7")
			e.fresh(func() (string, error) { return r.get(ctx, 7) }, "changed")
			e.exec("UPDATE users SET name = 'owner two' WHERE id = 2")
			e.fresh(func() (string, error) {
				rows, err := r.join(ctx, 5)
				if err != nil || len(rows) == 0 {
					return "", err
				}
				return rows[0], nil
			}, "ticket 1/owner two")
			// The rows the change left alone were kept decoded, not re-read.
			if got, want := fmt.Sprint(r.join(ctx, 5)), fmt.Sprint(r.join(readcache.ViaPostgres(ctx), 5)); got != want {
				t.Fatalf("joined after the change: cached %s, PostgreSQL %s", got, want)
			}

			tx := cache.Stats().Postgres["transaction"]
			if title, err := r.inTx(ctx, 7); err != nil || title != "changed" {
				t.Fatalf("read in a transaction = %q, %v; want changed", title, err)
			}
			if got := cache.Stats().Postgres["transaction"]; got != tx+1 {
				t.Fatalf("reads to PostgreSQL in a transaction = %d, want %d", got, tx+1)
			}
			// A committed transaction (GORM's and bun's commit even a read)
			// starts the read-your-writes window: wait it out.
			e.warm(get(ctx))

			// Route flags, both ways.
			stmts := e.stmts.Count()
			if _, err := r.get(readcache.ViaPostgres(ctx), 7); err != nil || e.stmts.Count() != stmts+1 {
				t.Fatalf("ViaPostgres: err %v, statements to PostgreSQL %d, want 1", err, e.stmts.Count()-stmts)
			}
			e.conn.SetRoute(readcache.RoutePostgres)
			stmts = e.stmts.Count()
			if _, err := r.get(ctx, 7); err != nil || e.stmts.Count() != stmts+1 {
				t.Fatalf("pool route postgres: err %v, statements to PostgreSQL %d, want 1", err, e.stmts.Count()-stmts)
			}
			e.hit(get(readcache.ViaCache(ctx)))
			e.conn.SetRoute(readcache.RouteDefault)
			e.hit(get(ctx))

			// Read-your-writes.
			aw := cache.Stats().Postgres["after_write"]
			if err := r.rename(ctx, 7, "mine"); err != nil {
				t.Fatal(err)
			}
			if title, err := r.get(ctx, 7); err != nil || title != "mine" {
				t.Fatalf("read after write = %q, %v; want mine", title, err)
			}
			if got := cache.Stats().Postgres["after_write"]; got != aw+1 {
				t.Fatalf("reads to PostgreSQL after a write = %d, want %d", got, aw+1)
			}
		})
	}
}

func gormReads(t *testing.T, db *sql.DB) ormReads {
	gdb, err := gorm.Open(postgres.New(postgres.Config{Conn: db}), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	first := func(g *gorm.DB, id int) (string, error) {
		var tk Ticket
		err := g.First(&tk, id).Error
		return tk.Title, err
	}
	return ormReads{
		get: func(ctx context.Context, id int) (string, error) { return first(gdb.WithContext(ctx), id) },
		list: func(ctx context.Context, status string, n int) ([]string, error) {
			var ts []string
			err := gdb.WithContext(ctx).Model(&Ticket{}).Where("status = ?", status).Order("points DESC").Order("id").Limit(n).Pluck("title", &ts).Error
			return ts, err
		},
		count: func(ctx context.Context, status string) (int64, error) {
			var n int64
			err := gdb.WithContext(ctx).Model(&Ticket{}).Where("status = ?", status).Count(&n).Error
			return n, err
		},
		join: func(ctx context.Context, maxID int) ([]string, error) {
			var rows []joined
			err := gdb.WithContext(ctx).Table("tickets t").Select("t.title, u.name").Joins("JOIN users u ON u.id = t.owner_id").
				Where("t.id <= ?", maxID).Order("t.id").Scan(&rows).Error
			return joinedStrings(rows), err
		},
		rename: func(ctx context.Context, id int, title string) error {
			return gdb.WithContext(ctx).Model(&Ticket{}).Where("id = ?", id).Update("title", title).Error
		},
		inTx: func(ctx context.Context, id int) (title string, err error) {
			err = gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error { title, err = first(tx, id); return err })
			return title, err
		},
	}
}

func joinedStrings(rows []joined) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, r.Title+"/"+r.Name)
	}
	return out
}

const joinSQL = "SELECT t.title, u.name FROM tickets t JOIN users u ON u.id = t.owner_id WHERE t.id <= $1 ORDER BY t.id"

func sqlxReads(t *testing.T, db *sql.DB) ormReads {
	x := sqlx.NewDb(db, "pgx")
	get := func(ctx context.Context, q sqlx.QueryerContext, id int) (string, error) {
		var title string
		err := sqlx.GetContext(ctx, q, &title, "SELECT title FROM tickets WHERE id = $1", id)
		return title, err
	}
	return ormReads{
		get: func(ctx context.Context, id int) (string, error) { return get(ctx, x, id) },
		list: func(ctx context.Context, status string, n int) ([]string, error) {
			var ts []string
			err := x.SelectContext(ctx, &ts, "SELECT title FROM tickets WHERE status = $1 ORDER BY points DESC, id LIMIT $2", status, n)
			return ts, err
		},
		count: func(ctx context.Context, status string) (n int64, err error) {
			err = x.GetContext(ctx, &n, "SELECT count(*) FROM tickets WHERE status = $1", status)
			return n, err
		},
		join: func(ctx context.Context, maxID int) ([]string, error) {
			var rows []joined
			err := x.SelectContext(ctx, &rows, joinSQL, maxID)
			return joinedStrings(rows), err
		},
		rename: func(ctx context.Context, id int, title string) error {
			_, err := x.ExecContext(ctx, "UPDATE tickets SET title = $1 WHERE id = $2", title, id)
			return err
		},
		inTx: func(ctx context.Context, id int) (string, error) {
			tx, err := x.BeginTxx(ctx, nil)
			if err != nil {
				return "", err
			}
			defer tx.Rollback()
			return get(ctx, tx, id)
		},
	}
}

func bunReads(t *testing.T, db *sql.DB) ormReads {
	bdb := bun.NewDB(db, pgdialect.New())
	type BunTicket struct {
		bun.BaseModel `bun:"table:tickets"`
		ID            int `bun:"id,pk"`
		Title         string
		Status        string
		Points        *string
	}
	get := func(ctx context.Context, db bun.IDB, id int) (string, error) {
		var tk BunTicket
		err := db.NewSelect().Model(&tk).Where("id = ?", id).Scan(ctx)
		return tk.Title, err
	}
	return ormReads{
		get: func(ctx context.Context, id int) (string, error) { return get(ctx, bdb, id) },
		list: func(ctx context.Context, status string, n int) ([]string, error) {
			var ts []string
			err := bdb.NewSelect().Model((*BunTicket)(nil)).Column("title").Where("status = ?", status).
				Order("points DESC", "id").Limit(int64(n)).Scan(ctx, &ts)
			return ts, err
		},
		count: func(ctx context.Context, status string) (int64, error) {
			n, err := bdb.NewSelect().Model((*BunTicket)(nil)).Where("status = ?", status).Count(ctx)
			return int64(n), err
		},
		join: func(ctx context.Context, maxID int) ([]string, error) {
			var rows []joined
			err := bdb.NewSelect().TableExpr("tickets AS t").ColumnExpr("t.title, u.name").Join("JOIN users AS u ON u.id = t.owner_id").
				Where("t.id <= ?", maxID).Order("t.id").Scan(ctx, &rows)
			return joinedStrings(rows), err
		},
		rename: func(ctx context.Context, id int, title string) error {
			_, err := bdb.NewUpdate().Model((*BunTicket)(nil)).Set("title = ?", title).Where("id = ?", id).Exec(ctx)
			return err
		},
		inTx: func(ctx context.Context, id int) (title string, err error) {
			err = bdb.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { title, err = get(ctx, tx, id); return err })
			return title, err
		},
	}
}

// sqlcReads are written the way sqlc writes database/sql code.
func sqlcReads(t *testing.T, db *sql.DB) ormReads {
	type DBTX interface {
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}
	get := func(ctx context.Context, db DBTX, id int32) (string, error) {
		var title string
		err := db.QueryRowContext(ctx, "-- name: GetTicket :one\nSELECT title FROM tickets WHERE id = $1", id).Scan(&title)
		return title, err
	}
	many := func(ctx context.Context, q string, scan func(*sql.Rows) (string, error), args ...any) ([]string, error) {
		rows, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		items := []string{}
		for rows.Next() {
			s, err := scan(rows)
			if err != nil {
				return nil, err
			}
			items = append(items, s)
		}
		return items, rows.Err()
	}
	return ormReads{
		get: func(ctx context.Context, id int) (string, error) { return get(ctx, db, int32(id)) },
		list: func(ctx context.Context, status string, n int) ([]string, error) {
			return many(ctx, "-- name: ListTickets :many\nSELECT title FROM tickets WHERE status = $1 ORDER BY points DESC, id LIMIT $2",
				func(r *sql.Rows) (s string, err error) { return s, r.Scan(&s) }, status, int32(n))
		},
		count: func(ctx context.Context, status string) (n int64, err error) {
			err = db.QueryRowContext(ctx, "-- name: CountTickets :one\nSELECT count(*) FROM tickets WHERE status = $1", status).Scan(&n)
			return n, err
		},
		join: func(ctx context.Context, maxID int) ([]string, error) {
			return many(ctx, joinSQL, func(r *sql.Rows) (string, error) {
				var j joined
				err := r.Scan(&j.Title, &j.Name)
				return j.Title + "/" + j.Name, err
			}, int32(maxID))
		},
		rename: func(ctx context.Context, id int, title string) error {
			_, err := db.ExecContext(ctx, "-- name: RenameTicket :exec\nUPDATE tickets SET title = $2 WHERE id = $1", int32(id), title)
			return err
		},
		inTx: func(ctx context.Context, id int) (string, error) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return "", err
			}
			defer tx.Rollback()
			return get(ctx, tx, int32(id))
		},
	}
}

// entReads query through ent's SQL layer (entgo.io/ent/dialect/sql): the
// builders and the driver ent's generated clients call, producing the SQL
// they send (quoted, table-qualified columns; LIMIT 2 for a Get).
func entReads(t *testing.T, db *sql.DB) ormReads {
	drv := entsql.OpenDB(dialect.Postgres, db)
	b := entsql.Dialect(dialect.Postgres)
	strs := func(ctx context.Context, q dialect.Driver, sel *entsql.Selector) ([]string, error) {
		query, args := sel.Query()
		var rows entsql.Rows
		if err := q.Query(ctx, query, args, &rows); err != nil {
			return nil, err
		}
		defer rows.Close()
		out := []string{}
		if err := entsql.ScanSlice(rows, &out); err != nil {
			return nil, err
		}
		return out, nil
	}
	get := func(ctx context.Context, q dialect.Driver, id int) (string, error) {
		tk := entsql.Table("tickets")
		ts, err := strs(ctx, q, b.Select(tk.C("title")).From(tk).Where(entsql.EQ(tk.C("id"), id)).Limit(2))
		if err != nil || len(ts) != 1 {
			return "", fmt.Errorf("ent get %d: %d rows, %v", id, len(ts), err)
		}
		return ts[0], nil
	}
	return ormReads{
		get: func(ctx context.Context, id int) (string, error) { return get(ctx, drv, id) },
		list: func(ctx context.Context, status string, n int) ([]string, error) {
			tk := entsql.Table("tickets")
			return strs(ctx, drv, b.Select(tk.C("title")).From(tk).Where(entsql.EQ(tk.C("status"), status)).
				OrderBy(entsql.Desc(tk.C("points")), tk.C("id")).Limit(n))
		},
		count: func(ctx context.Context, status string) (int64, error) {
			tk := entsql.Table("tickets")
			query, args := b.Select(entsql.Count("*")).From(tk).Where(entsql.EQ(tk.C("status"), status)).Query()
			var rows entsql.Rows
			if err := drv.Query(ctx, query, args, &rows); err != nil {
				return 0, err
			}
			defer rows.Close()
			var n []int64
			if err := entsql.ScanSlice(rows, &n); err != nil || len(n) != 1 {
				return 0, fmt.Errorf("ent count: %v rows, %v", n, err)
			}
			return n[0], nil
		},
		join: func(ctx context.Context, maxID int) ([]string, error) {
			tk, u := entsql.Table("tickets").As("t"), entsql.Table("users").As("u")
			query, args := b.Select(tk.C("title"), u.C("name")).From(tk).Join(u).On(tk.C("owner_id"), u.C("id")).
				Where(entsql.LTE(tk.C("id"), maxID)).OrderBy(tk.C("id")).Query()
			var rows entsql.Rows
			if err := drv.Query(ctx, query, args, &rows); err != nil {
				return nil, err
			}
			defer rows.Close()
			var js []joined
			if err := entsql.ScanSlice(rows, &js); err != nil {
				return nil, err
			}
			return joinedStrings(js), nil
		},
		rename: func(ctx context.Context, id int, title string) error {
			query, args := b.Update("tickets").Set("title", title).Where(entsql.EQ("id", id)).Query()
			var res sql.Result
			return drv.Exec(ctx, query, args, &res)
		},
		inTx: func(ctx context.Context, id int) (string, error) {
			tx, err := drv.Tx(ctx)
			if err != nil {
				return "", err
			}
			defer tx.Rollback()
			return get(ctx, &txDriver{tx}, id)
		},
	}
}

// txDriver lets an ent transaction stand where a driver is read from.
type txDriver struct{ tx dialect.Tx }

func (d *txDriver) Exec(ctx context.Context, query string, args, v any) error {
	return d.tx.Exec(ctx, query, args, v)
}
func (d *txDriver) Query(ctx context.Context, query string, args, v any) error {
	return d.tx.Query(ctx, query, args, v)
}
func (d *txDriver) Tx(context.Context) (dialect.Tx, error) { return d.tx, nil }
func (d *txDriver) Close() error                           { return nil }
func (d *txDriver) Dialect() string                        { return dialect.Postgres }
