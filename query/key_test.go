package query

import (
	"context"
	"testing"
)

// Subscriptions that read the same rows share a view: the same query
// written differently, with binds equal under =, gets one Key.
func TestKeySharing(t *testing.T) {
	opts := DefaultOptions()
	opts.Catalog = snapshotCatalog(t)
	key := func(sql string, binds ...Bind) PlanKey {
		t.Helper()
		p, r, err := Compile(context.Background(), sql, binds, opts)
		if err != nil || r != nil {
			t.Fatalf("compile %s: %v %v", sql, err, r)
		}
		return p.Key
	}
	same := [][2]string{
		{"select id from users where id=1", `SELECT "id"  FROM "public"."users" WHERE "id" = 1`},
		{"SELECT id FROM users WHERE score = $1", "SELECT id FROM public.users WHERE score = $1"},
	}
	if a, b := key(same[0][0]), key(same[0][1]); a != b {
		t.Errorf("%q and %q have different keys", same[0][0], same[0][1])
	}
	a := key(same[1][0], Bind{Data: []byte("1.50")})
	b := key(same[1][1], Bind{Data: []byte("1.5")})
	if a != b {
		t.Errorf("numeric binds 1.50 and 1.5 give different keys")
	}
	if c := key(same[1][0], Bind{Data: []byte("1.51")}); c == a {
		t.Errorf("binds 1.50 and 1.51 give the same key")
	}
	if key("SELECT id FROM users WHERE id = 1") == key("SELECT id FROM users WHERE id = 2") {
		t.Errorf("different constants give the same key")
	}
	if key("SELECT id FROM users ORDER BY id LIMIT 10") == key("SELECT id FROM users ORDER BY id LIMIT 11") {
		t.Errorf("different limits give the same key")
	}
}
