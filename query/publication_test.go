package query

import (
	"context"
	"testing"
)

// TestSystemAndUnpublishedTables: system catalogs are refused outright
// (a superuser DSN would otherwise ship pg_authid's password hashes and
// pg_statistic's sampled values), and tables the publication does not
// carry are refused retryable (their answers would never be updated), on
// PostgreSQL with a real publication.
func TestSystemAndUnpublishedTables(t *testing.T) {
	conn, cat := testDB(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `
CREATE SCHEMA secret;
CREATE TABLE secret.vault (id bigint PRIMARY KEY, v text);
CREATE TABLE public.pg_mine (id int PRIMARY KEY);
CREATE VIEW v_users AS SELECT * FROM users;
CREATE MATERIALIZED VIEW mv_users AS SELECT id FROM users;
CREATE TABLE parts (id int, k int, PRIMARY KEY (id, k)) PARTITION BY RANGE (k);
CREATE TABLE parts_a PARTITION OF parts FOR VALUES FROM (0) TO (10);
CREATE PUBLICATION qh FOR TABLE users, orders, items, public.pg_mine;
CREATE PUBLICATION qh_leaf FOR TABLE parts;
CREATE PUBLICATION qh_root FOR TABLE parts WITH (publish_via_partition_root = true);`); err != nil {
		t.Fatal(err)
	}
	pubs := map[string]*PGPublication{}
	for _, name := range []string{"qh", "qh_leaf", "qh_root", "missing"} {
		pubs[name] = NewPGPublication(conn, name)
		if _, err := pubs[name].Load(ctx); err != nil {
			t.Fatal(err)
		}
	}
	withPub := func(name string, path ...string) Options {
		o := DefaultOptions()
		o.Catalog = cat
		o.Publication = pubs[name]
		if len(path) > 0 {
			o.SearchPath = path
		}
		return o
	}
	qh := withPub("qh")
	tests := []struct {
		sql       string
		opts      Options
		want      Code
		retryable bool
	}{
		{"SELECT oid, rolname, rolpassword FROM pg_catalog.pg_authid", qh, CodeSystemTable, false},
		{"SELECT oid, rolname, rolpassword FROM pg_authid", qh, CodeSystemTable, false},
		{"SELECT oid, rolname FROM pg_authid", withPub("qh", "pg_catalog", "public"), CodeSystemTable, false},
		{"SELECT * FROM pg_catalog.pg_statistic", qh, CodeSystemTable, false},
		{"SELECT count(*) FROM pg_catalog.pg_class", qh, CodeSystemTable, false},
		{"SELECT oid FROM pg_class", qh, CodeSystemTable, false},
		{"SELECT * FROM information_schema.tables", qh, CodeSystemTable, false},
		{"SELECT * FROM pg_toast.pg_toast_1260", qh, CodeSystemTable, false},
		{"SELECT * FROM pg_temp.scratch", qh, CodeSystemTable, false},
		{"SELECT u.id FROM users u JOIN pg_catalog.pg_authid a ON a.oid = u.id", qh, CodeSystemTable, false},
		{"SELECT * FROM secret.vault", qh, CodeNotPublished, true},
		{`SELECT * FROM "secret"."vault"`, qh, CodeNotPublished, true},
		{"SELECT * FROM SECRET.VAULT", qh, CodeNotPublished, true},
		{"SELECT count(*) FROM secret.vault", qh, CodeNotPublished, true},
		{"SELECT u.id, v.v FROM users u JOIN secret.vault v ON v.id = u.id", qh, CodeNotPublished, true},
		{"SELECT u.id FROM users u LEFT JOIN secret.vault v ON v.id = u.id", qh, CodeNotPublished, true},
		{"SELECT * FROM skus", qh, CodeNotPublished, true}, // public, outside the publication
		{"SELECT * FROM users", qh, "", false},
		{"SELECT * FROM users", withPub("missing"), CodeNotPublished, true},
		{"SELECT * FROM pg_mine", qh, CodeSystemTable, false},
		{"SELECT * FROM public.pg_mine", qh, "", false},
		{"SELECT * FROM v_users", qh, CodeUnknownTable, true},
		{"SELECT * FROM mv_users", qh, CodeUnknownTable, true},
		// Partitions: the stream carries the leaves' changes, or the
		// root's under publish_via_partition_root.
		{"SELECT * FROM parts", withPub("qh_leaf"), CodeNotPublished, true},
		{"SELECT * FROM parts_a", withPub("qh_leaf"), "", false},
		{"SELECT * FROM parts", withPub("qh_root"), "", false},
		{"SELECT * FROM parts_a", withPub("qh_root"), CodeNotPublished, true},
		// Without a publication (the library's default) only system
		// schemas are refused.
		{"SELECT * FROM secret.vault", DefaultOptions(), "", false},
		{"SELECT * FROM pg_catalog.pg_authid", DefaultOptions(), CodeSystemTable, false},
	}
	for _, tt := range tests {
		t.Run(tt.sql, func(t *testing.T) {
			if tt.opts.Catalog == nil {
				tt.opts.Catalog = cat
			}
			r := wantRefusal(t, tt.sql, tt.opts, tt.want)
			if r != nil && r.Retryable != tt.retryable {
				t.Fatalf("Retryable = %v, want %v (%v)", r.Retryable, tt.retryable, r)
			}
		})
	}
	// The publication grows: a table missing from what was read makes
	// the publication be read again (by a read that begins after the
	// query asked, waiting for reloadEvery to pass since the last one), so
	// a query right after the ALTER is accepted, with no sleep between.
	if _, err := conn.Exec(ctx, `ALTER PUBLICATION qh ADD TABLE secret.vault`); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, "SELECT * FROM secret.vault", qh, "")
}
