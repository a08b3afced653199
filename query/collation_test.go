package query

import (
	"context"
	"testing"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// In a database whose default collation is not bytewise (ICU "en"), text
// equality and LIKE stay supported while ordering, ranges and ORDER BY on
// text are refused; columns declared COLLATE "C" keep everything.
func TestNonBytewiseDatabaseCollation(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	admin, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	name := db.Name + "_icu"
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" LOCALE_PROVIDER icu ICU_LOCALE 'en' LOCALE 'C.UTF-8' TEMPLATE template0"); err != nil {
		t.Skipf("cannot create an ICU database here: %v", err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	cfg, err := pgx.ParseConfig(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE w (id int PRIMARY KEY, s text, c text COLLATE "C")`); err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Catalog = NewPGCatalog(conn)
	for _, tc := range []struct {
		sql  string
		want Code
	}{
		{"SELECT id FROM w WHERE s = 'a'", ""},
		{"SELECT id FROM w WHERE s IN ('a', 'b') AND s LIKE 'a%'", ""},
		{"SELECT id FROM w WHERE s < 'b'", CodeCollation},
		{"SELECT id FROM w WHERE s BETWEEN 'a' AND 'b'", CodeCollation},
		{"SELECT id FROM w ORDER BY s", CodeCollation},
		{"SELECT id FROM w WHERE s ILIKE 'a%'", CodeCollation},
		{"SELECT id FROM w WHERE c < 'b' ORDER BY c", ""},
		{"SELECT id FROM w WHERE c ILIKE 'a%'", ""},
	} {
		_, r, err := Compile(ctx, tc.sql, nil, opts)
		if err != nil {
			t.Fatal(err)
		}
		var got Code
		if r != nil {
			got = r.Code
		}
		if got != tc.want {
			t.Errorf("%s: refusal %v, want %q", tc.sql, r, tc.want)
		}
	}
}
