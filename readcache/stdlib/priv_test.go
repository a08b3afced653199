package stdlib_test

import (
	"context"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/readcache"
	"github.com/jackc/pgx/v5"
)

// TestIdentityQueryUnprivileged: the identity check works for an ordinary
// application role, not only a superuser.
func TestIdentityQueryUnprivileged(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	role := "app_" + strings.ToLower(strings.ReplaceAll(db.Name, "-", "_"))
	if len(role) > 60 {
		role = role[:60]
	}
	if _, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD 'pw'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(context.Background(), "DROP ROLE "+role) })
	cfg, err := pgx.ParseConfig(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = role, "pw"
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var id readcache.Identity
	if err := c.QueryRow(ctx, readcache.IdentityQuery).Scan(&id.SystemIdentifier, &id.Database); err != nil {
		t.Fatalf("identity query as %s: %v", role, err)
	}
	if id.SystemIdentifier == "" || id.Database != db.Name {
		t.Fatalf("identity = %+v, want database %q", id, db.Name)
	}
}
