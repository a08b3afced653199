package query

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(envParseChild); path != "" {
		os.Exit(parseChild(path))
	}
	pgtest.Main(m)
}

// testDB creates a database holding testdata/schema.sql and returns a
// connection to it and a catalog reading it.
func testDB(t testing.TB) (*pgx.Conn, *PGCatalog) {
	t.Helper()
	db := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	schema, err := os.ReadFile("testdata/schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, string(schema)); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	return conn, NewPGCatalog(conn)
}
