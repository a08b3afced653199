package ticketdesk_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/internal/servetest"
	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/ticketdesk"
	"github.com/freshetdb/freshet/ticketdesk/desktest"
	_ "github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

var (
	update = flag.Bool("update", false, "rewrite testdata/lookups.golden")
	scale  = flag.Int("scale", 1, "scale of the desks the tests seed (the expectations hold for 1 to 9)")
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// seeded returns a fresh database with the desk at scale 1 and a plain
// pool on it.
func seeded(t *testing.T) (*pgtest.DB, *sql.DB) {
	t.Helper()
	ctx := ctxFor(t, time.Duration(*scale)*time.Minute)
	pdb := pgtest.NewDB(t)
	db, err := sql.Open("pgx", pdb.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := ticketdesk.CreateSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := ticketdesk.Seed(ctx, db, *scale); err != nil {
		t.Fatal(err)
	}
	return pdb, db
}

func gormOn(t testing.TB, db *sql.DB) *gorm.DB {
	t.Helper()
	g, err := gorm.Open(postgres.New(postgres.Config{Conn: db}), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// desk is a seeded database, a freshet serve following it with the
// desk's row limit, and a cached pool on it.
type desk struct {
	pdb    *pgtest.DB
	direct *sql.DB
	srv    *desktest.Server
	world  *ticketdesk.World
}

func newDesk(t *testing.T) *desk {
	t.Helper()
	pdb, db := seeded(t)
	srv := desktest.Serve(t, pdb.DSN, pdb.Name, "--row-limit", fmt.Sprint(ticketdesk.RowLimit))
	w, err := ticketdesk.LoadWorld(ctxFor(t, time.Minute), db)
	if err != nil {
		t.Fatal(err)
	}
	return &desk{pdb: pdb, direct: db, srv: srv, world: w}
}

func (d *desk) pool(t *testing.T) (*desktest.Pool, *gorm.DB) {
	p := desktest.Open(t, d.pdb.DSN, d.srv.URL, nil)
	return p, gormOn(t, p.DB)
}

func TestSchemaAndSeed(t *testing.T) {
	if *scale != 1 {
		t.Skip("counts are checked at scale 1")
	}
	ctx := ctxFor(t, 2*time.Minute)
	_, db := seeded(t)
	if err := ticketdesk.CreateSchema(ctx, db); err != nil {
		t.Fatalf("CreateSchema again: %v", err)
	}
	digest := func() string {
		var parts []string
		for _, tbl := range ticketdesk.Tables {
			var n int64
			var h string
			q := fmt.Sprintf(`SELECT count(*), coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '') FROM %s t`, tbl)
			if err := db.QueryRowContext(ctx, q).Scan(&n, &h); err != nil {
				t.Fatal(err)
			}
			parts = append(parts, fmt.Sprintf("%s=%d/%s", tbl, n, h))
		}
		return strings.Join(parts, " ")
	}
	first := digest()
	if err := ticketdesk.Seed(ctx, db, 1); err != nil {
		t.Fatal(err)
	}
	if again := digest(); again != first {
		t.Fatalf("second seed = %s\nwant the same rows as the first: %s", again, first)
	}
	counts := map[string]int64{}
	for _, tbl := range ticketdesk.Tables {
		var n int64
		db.QueryRowContext(ctx, "SELECT count(*) FROM "+tbl).Scan(&n)
		counts[tbl] = n
	}
	want := map[string][2]int64{"organizations": {11, 11}, "users": {200, 200}, "tickets": {3000, 3000},
		"comments": {6000, 6000}, "labels": {80, 80}, "ticket_labels": {1500, 3000}, "sla_calendar": {3653, 3653}}
	for tbl, w := range want {
		if counts[tbl] < w[0] || counts[tbl] > w[1] {
			t.Errorf("%s rows = %d, want %d..%d", tbl, counts[tbl], w[0], w[1])
		}
	}
	// Bodies are 2-8 KB and stored out of line (TOAST), uncompressed.
	var minLen, maxLen, inline int64
	if err := db.QueryRowContext(ctx, `SELECT min(octet_length(body)), max(octet_length(body)),
		count(*) FILTER (WHERE pg_column_size(body) < 1000) FROM tickets`).Scan(&minLen, &maxLen, &inline); err != nil {
		t.Fatal(err)
	}
	if minLen < 1900 || maxLen > 8192 || inline > 0 {
		t.Errorf("body sizes %d..%d bytes, %d compressed below 1000: want 2-8 KB, incompressible", minLen, maxLen, inline)
	}
	var toastBytes int64
	if err := db.QueryRowContext(ctx, `SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE relname = 'tickets'`).Scan(&toastBytes); err != nil || toastBytes < 1<<20 {
		t.Errorf("tickets' TOAST table holds %d bytes (%v), want the bodies (megabytes)", toastBytes, err)
	}
	// Every table has a primary key.
	var keyless []string
	rows, _ := db.QueryContext(ctx, `SELECT c.relname FROM pg_class c WHERE c.relname = ANY($1) AND NOT EXISTS
		(SELECT FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'p')`, "{"+strings.Join(ticketdesk.Tables, ",")+"}")
	for rows.Next() {
		var s string
		rows.Scan(&s)
		keyless = append(keyless, s)
	}
	if len(keyless) > 0 {
		t.Errorf("tables without a primary key: %v", keyless)
	}
	w, err := ticketdesk.LoadWorld(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Orgs) != 10 || w.EmptyOrg != 11 || w.MaxTicketID != 3000 {
		t.Errorf("world: %d orgs, empty org %d, max ticket %d; want 10, 11, 3000", len(w.Orgs), w.EmptyOrg, w.MaxTicketID)
	}
	// A ticket's delete takes its comments and labels along.
	if _, err := db.ExecContext(ctx, `DELETE FROM tickets WHERE id = 4`); err != nil {
		t.Fatal(err)
	}
	var left int64
	db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM comments WHERE ticket_id = 4) + (SELECT count(*) FROM ticket_labels WHERE ticket_id = 4)`).Scan(&left)
	if left != 0 {
		t.Errorf("comments and labels left after deleting ticket 4: %d, want 0", left)
	}
	if err := ticketdesk.DropSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	var tables int64
	db.QueryRowContext(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables)
	if tables != 0 {
		t.Errorf("tables after DropSchema = %d, want 0", tables)
	}
}

// TestQuietDesk runs the tests that need a desk and a freshet serve but
// no writer on one of each (starting them is most of each test's time).
func TestQuietDesk(t *testing.T) {
	d := newDesk(t)
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *desk)
	}{
		{"Lookups", testLookups}, // first: it counts reads on a desk nobody wrote to
		{"Handler", testHandler},
		{"VerifyFindsMismatch", testVerifyFindsMismatch},
		{"CheckpointFindsMismatch", testCheckpointFindsMismatch},
		{"VerifyFindsMisroute", testVerifyFindsMisroute},
		{"VerifyCapacityRefusal", testVerifyCapacityRefusal},
		{"CheckpointAtClock", testCheckpointAtClock}, // last: it writes
	} {
		if !t.Run(tc.name, func(t *testing.T) { tc.run(t, d) }) {
			return
		}
	}
}

// testLookups reads every lookup through the cache and PostgreSQL: the
// answers agree, a Cached lookup is then served with no statement sent to
// PostgreSQL, a Refused one is refused with its stated code. The SQL GORM
// renders is pinned in testdata/lookups.golden.
func testLookups(t *testing.T, d *desk) {
	p, g := d.pool(t)
	ctx := ctxFor(t, 2*time.Minute)
	ls := ticketdesk.Lookups()
	if len(ls) < 20 {
		t.Fatalf("%d lookups, want at least 20", len(ls))
	}
	var golden strings.Builder
	seen := map[string]bool{}
	for _, l := range ls {
		if seen[l.Name] {
			t.Fatalf("two lookups named %q", l.Name)
		}
		seen[l.Name] = true
		r := rand.New(rand.NewSource(1))
		args := l.Args(r, d.world)
		sqlText, err := ticketdesk.SQLOf(l, args)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&golden, "%s\t%s\t%s\n\t%s\n", l.Name, l.Expect, l.Code, sqlText)
		t.Run(l.Name, func(t *testing.T) {
			read := func() (any, error) { return l.Run(ctx, g, args) }
			want, err := l.Run(readcache.ViaPostgres(ctx), g, args)
			if err != nil {
				t.Fatal(err)
			}
			wantJSON, _ := json.Marshal(want)
			if l.Empty && string(wantJSON) != "[]" {
				t.Fatalf("PostgreSQL's answer = %s, want none", wantJSON)
			}
			switch l.Expect {
			case ticketdesk.Cached:
				servetest.Eventually(t, 30*time.Second, func() string {
					before := p.Cache.Stats()
					if _, err := read(); err != nil {
						return err.Error()
					}
					after := p.Cache.Stats()
					if after.Hits+after.Misses == before.Hits+before.Misses {
						return fmt.Sprintf("read not served from the cache: %+v (refusal %q)", after.Postgres, p.Refusals.Code(sqlText))
					}
					return ""
				})
				hits, stmts := p.Cache.Stats().Hits, p.Statements()
				got, err := read()
				if err != nil {
					t.Fatal(err)
				}
				if h := p.Cache.Stats().Hits; h != hits+1 {
					t.Fatalf("hits = %d, want %d", h, hits+1)
				}
				if n := p.Statements(); n != stmts {
					t.Fatalf("statements sent to PostgreSQL by a cached read = %d, want 0", n-stmts)
				}
				if gotJSON, _ := json.Marshal(got); string(gotJSON) != string(wantJSON) {
					t.Fatalf("cached answer = %.600s\nPostgreSQL's = %.600s", gotJSON, wantJSON)
				}
			case ticketdesk.Refused:
				servetest.Eventually(t, 30*time.Second, func() string {
					if _, err := read(); err != nil {
						return err.Error()
					}
					if code := p.Refusals.Code(sqlText); code == "" {
						return fmt.Sprintf("no refusal recorded yet (stats %+v)", p.Cache.Stats())
					}
					return ""
				})
				if code := p.Refusals.Code(sqlText); code != l.Code {
					t.Fatalf("refusal code = %q, want %q", code, l.Code)
				}
				refused, stmts := p.Cache.Stats().Postgres["refused"], p.Statements()
				got, err := read()
				if err != nil {
					t.Fatal(err)
				}
				if n := p.Cache.Stats().Postgres["refused"]; n != refused+1 {
					t.Fatalf("reads refused = %d, want %d", n, refused+1)
				}
				if n := p.Statements(); n != stmts+1 {
					t.Fatalf("statements sent to PostgreSQL by a refused read = %d, want 1", n-stmts)
				}
				if gotJSON, _ := json.Marshal(got); string(gotJSON) != string(wantJSON) {
					t.Fatalf("answer = %.600s\nPostgreSQL's = %.600s", gotJSON, wantJSON)
				}
			}
		})
	}
	path := filepath.Join("testdata", "lookups.golden")
	if *update {
		if err := os.WriteFile(path, []byte(golden.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if golden.String() != string(want) {
		t.Fatalf("rendered SQL =\n%s\nwant (testdata/lookups.golden; -update rewrites it)\n%s", golden.String(), want)
	}
}

// BenchmarkSeed seeds a desk at scale 1 (b.N times, into one database).
func BenchmarkSeed(b *testing.B) {
	pdb := pgtest.NewDB(b)
	db, err := sql.Open("pgx", pdb.DSN)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := ticketdesk.CreateSchema(ctx, db); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := ticketdesk.Seed(ctx, db, *scale); err != nil {
			b.Fatal(err)
		}
	}
}
