package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func TestNewDB(t *testing.T) {
	ctx := context.Background()
	db := NewDB(t)
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var walLevel, tz, name string
	if err := conn.QueryRow(ctx, "SELECT current_setting('wal_level'), current_setting('TimeZone'), current_database()").Scan(&walLevel, &tz, &name); err != nil {
		t.Fatal(err)
	}
	if walLevel != "logical" {
		t.Errorf("wal_level = %q, want logical", walLevel)
	}
	if tz != "UTC" {
		t.Errorf("TimeZone = %q, want UTC", tz)
	}
	if name != db.Name {
		t.Errorf("current_database() = %q, want %q", name, db.Name)
	}
}

func TestDatabasesAreSeparate(t *testing.T) {
	a, b := NewDB(t), NewDB(t)
	if a.Name == b.Name || a.DSN == b.DSN {
		t.Fatalf("two NewDB calls gave the same database %q", a.Name)
	}
}

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u@h:5/postgres?sslmode=disable", "postgres://u@h:5/x?sslmode=disable"},
		{"host=h port=5 dbname=postgres user=u", "host=h port=5 user=u dbname=x"},
	} {
		if got := withDatabase(tc.in, "x"); got != tc.want {
			t.Errorf("withDatabase(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
