package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/freshetdb/freshet/query"
)

// TestEnginePublication: with Config.Publication, a query on a table the
// publication does not carry is refused not_published (retryable: its
// answer would never be updated), system catalogs are refused outright,
// a table removed from the publication ends its subscriptions, and one
// added is served once the catalog check has read the publication again.
func TestEnginePublication(t *testing.T) {
	r := newRig(t, `
CREATE TABLE a (id int PRIMARY KEY, v int);
CREATE TABLE b (id int PRIMARY KEY, v int);
CREATE SCHEMA secret;
CREATE TABLE secret.vault (id int PRIMARY KEY, hash text);
INSERT INTO a VALUES (1, 1), (2, 2);
INSERT INTO b VALUES (1, 10);
INSERT INTO secret.vault VALUES (1, 'SCRAM-SHA-256$4096:...');
CREATE PUBLICATION qh_pub FOR TABLE a;`, Config{CatalogCheckInterval: 50 * time.Millisecond, Publication: "qh_pub"})
	ctx := context.Background()
	refused := func(sql string) *query.Refusal {
		t.Helper()
		_, ref, err := r.e.Subscribe(ctx, sql, nil, ModeRows, newRecorder())
		if err != nil {
			t.Fatalf("subscribe %q: %v", sql, err)
		}
		return ref
	}
	for _, tt := range []struct {
		sql       string
		code      query.Code
		retryable bool
	}{
		{"SELECT id, v FROM b", query.CodeNotPublished, true},
		{"SELECT count(*) FROM secret.vault", query.CodeNotPublished, true},
		{"SELECT a.id, s.hash FROM a JOIN secret.vault s ON s.id = a.id", query.CodeNotPublished, true},
		{"SELECT oid, rolname, rolpassword FROM pg_catalog.pg_authid", query.CodeSystemTable, false},
		{"SELECT oid, rolname, rolpassword FROM pg_authid", query.CodeSystemTable, false},
		{"SELECT * FROM pg_catalog.pg_statistic", query.CodeSystemTable, false},
	} {
		ref := refused(tt.sql)
		if ref == nil || ref.Code != tt.code || ref.Retryable != tt.retryable {
			t.Errorf("subscribe %q: refusal %+v, want %s (retryable %v)", tt.sql, ref, tt.code, tt.retryable)
		}
	}
	_, recA := r.subscribe("SELECT id, v FROM a")
	waitAccepted(t, recA)

	r.exec("ALTER PUBLICATION qh_pub DROP TABLE a")
	waitEnded(t, recA, "SELECT id, v FROM a", query.CodeNotPublished)
	if st, _, reason := recA.ending(); st != OutputEnded || reason != `table public.a was removed from publication "qh_pub": its changes no longer reach Freshet` {
		t.Errorf("ended %v: %q", st, reason)
	}

	r.exec("ALTER PUBLICATION qh_pub ADD TABLE b")
	var recB *recorder
	waitFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		rec := newRecorder()
		_, ref, err := r.e.Subscribe(ctx, "SELECT id, v FROM b", nil, ModeRows, rec)
		if err != nil {
			t.Fatal(err)
		}
		if ref != nil {
			return fmt.Errorf("still refused: %v", ref)
		}
		recB = rec
		return nil
	})
	waitAccepted(t, recB)
}
