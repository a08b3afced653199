package stdlib_test

import (
	"context"
	"database/sql"
	"log"
	"os"

	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/stdlib"
	"github.com/jmoiron/sqlx"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// GORM on the cache: open the *sql.DB with the driver, hand it to GORM.
func Example_gorm() {
	cfg := readcache.DefaultConfig()
	cfg.URL = "ws://localhost:7070/s2s/v1" // freshet serve
	cfg.Token = os.Getenv("FRESHET_TOKEN")
	db, err := stdlib.Open("postgres://app@localhost:5432/app", cfg)
	if err != nil {
		log.Fatal(err)
	}
	gdb, err := gorm.Open(postgres.New(postgres.Config{Conn: db}), &gorm.Config{})
	if err != nil {
		log.Fatal(err)
	}
	type Ticket struct {
		ID     int
		Title  string
		Status string
	}
	var open []Ticket
	gdb.Where("status = ?", "open").Order("id").Limit(20).Find(&open) // from memory after the first read
	var t Ticket
	gdb.WithContext(readcache.ViaPostgres(context.Background())).First(&t, 42) // always PostgreSQL
	log.Printf("stats: %+v", stdlib.CacheOf(db).Stats())
}

// sqlx on the cache, configured from the environment: sql.Open("freshet",
// dsn) reads FRESHET_URL and FRESHET_TOKEN.
func Example_sqlx() {
	db, err := sql.Open(stdlib.DriverName, "postgres://app@localhost:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	x := sqlx.NewDb(db, "pgx")
	var titles []string
	if err := x.Select(&titles, "SELECT title FROM tickets WHERE status = $1 ORDER BY id", "open"); err != nil {
		log.Fatal(err)
	}
}
