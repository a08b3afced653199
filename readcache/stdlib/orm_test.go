package stdlib_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

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

func TestGORM(t *testing.T) {
	e := newEnv(t, schema, nil)
	gdb, err := gorm.Open(postgres.New(postgres.Config{Conn: e.sqlDB}), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first := func(id int) (Ticket, error) {
		var tk Ticket
		err := gdb.WithContext(ctx).First(&tk, id).Error
		return tk, err
	}
	e.warm(func() error { _, err := first(7); return err })
	e.hit(func() error { _, err := first(7); return err })

	e.exec("UPDATE tickets SET title = 'changed' WHERE id = 7")
	e.fresh(func() (string, error) { tk, err := first(7); return tk.Title, err }, "changed")

	// Ordered, limited and counted results equal PostgreSQL's.
	var open, openPG []Ticket
	e.warm(func() error {
		return gdb.Where("status = ?", "open").Order("points DESC").Limit(10).Find(&open).Error
	})
	if err := gdb.WithContext(readcache.ViaPostgres(ctx)).Where("status = ?", "open").Order("points DESC").Limit(10).Find(&openPG).Error; err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(open, openPG) || len(open) != 10 {
		t.Fatalf("cached ordered read = %+v\nwant %+v", open, openPG)
	}
	var n, nPG int64
	e.warm(func() error { return gdb.Model(&Ticket{}).Where("status = ?", "closed").Count(&n).Error })
	gdb.WithContext(readcache.ViaPostgres(ctx)).Model(&Ticket{}).Where("status = ?", "closed").Count(&nPG)
	if n != nPG || n == 0 {
		t.Fatalf("cached count = %d, PostgreSQL says %d", n, nPG)
	}
	e.exec("UPDATE tickets SET status = 'closed' WHERE id = 1")
	e.fresh(func() (string, error) {
		var n int64
		err := gdb.Model(&Ticket{}).Where("status = ?", "closed").Count(&n).Error
		return fmt.Sprint(n), err
	}, fmt.Sprint(nPG+1))

	// A transaction bypasses the cache.
	tx0 := e.conn.Cache().Stats().Postgres["transaction"]
	err = gdb.Transaction(func(tx *gorm.DB) error {
		var tk Ticket
		return tx.First(&tk, 7).Error
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.conn.Cache().Stats().Postgres["transaction"]; got != tx0+1 {
		t.Fatalf("reads to PostgreSQL for a transaction = %d, want %d", got, tx0+1)
	}

	// Read-your-writes: a write through the pool sends the next read to
	// PostgreSQL, which sees it.
	if err := gdb.Model(&Ticket{}).Where("id = ?", 7).Update("title", "mine").Error; err != nil {
		t.Fatal(err)
	}
	aw := e.conn.Cache().Stats().Postgres["after_write"]
	tk, err := first(7)
	if err != nil || tk.Title != "mine" {
		t.Fatalf("read after write = %q, %v; want %q", tk.Title, err, "mine")
	}
	if got := e.conn.Cache().Stats().Postgres["after_write"]; got != aw+1 {
		t.Fatalf("reads to PostgreSQL after a write = %d, want %d", got, aw+1)
	}
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
