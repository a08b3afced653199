package pgwal

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.DSN = "postgres://u@localhost/db"
	tests := []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; "" = valid
	}{
		{"default", func(c *Config) {}, ""},
		{"zero defaults", func(c *Config) { *c = Config{DSN: c.DSN} }, ""},
		{"no DSN", func(c *Config) { c.DSN = "" }, "DSN is empty"},
		{"bad DSN", func(c *Config) { c.DSN = "postgres://u@host:notaport/db" }, "DSN"},
		{"upper-case slot", func(c *Config) { c.Slot = "Freshet" }, "lower-case letters, digits and underscores"},
		{"dash in slot", func(c *Config) { c.Slot = "a-b" }, "lower-case letters"},
		{"long slot", func(c *Config) { c.Slot = strings.Repeat("a", 64) }, "1 to 63"},
		{"63-byte slot", func(c *Config) { c.Slot = strings.Repeat("a", 63) }, ""},
		{"long publication", func(c *Config) { c.Publication = strings.Repeat("p", 64) }, "at most 63 bytes"},
		{"publication with capitals", func(c *Config) { c.Publication = "MyPub" }, ""},
		{"empty table", func(c *Config) { c.Tables = []string{"a", " "} }, "empty name"},
		{"proto 3", func(c *Config) { c.ProtoVersion = 3 }, "1 or 2"},
		{"negative heartbeat", func(c *Config) { c.HeartbeatInterval = -time.Second }, "HeartbeatInterval"},
		{"negative status", func(c *Config) { c.StatusInterval = -time.Second }, "StatusInterval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mod(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// openErr opens a reader that must fail and returns the error.
func openErr(t *testing.T, cfg Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := Open(ctx, cfg)
	if err == nil {
		r.Close()
		t.Fatal("Open succeeded, want an error")
	}
	t.Logf("Open: %v", err)
	return err
}

func wantErr(t *testing.T, err error, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}

func TestSetupWalLevelReplica(t *testing.T) {
	c := startCluster(t, map[string]string{"wal_level": "replica"})
	err := openErr(t, testConfig(t, c.DSN("postgres")))
	wantErr(t, err, `wal_level is "replica"`, "ALTER SYSTEM SET wal_level = logical", "restart")
}

func TestSetupMissingWithoutCreate(t *testing.T) {
	db := pgtest.NewDB(t)
	cfg := testConfig(t, db.DSN)
	cfg.Create = false
	wantErr(t, openErr(t, cfg), `publication "freshet" does not exist`, "pass Create")
	conn := connect(t, db.DSN)
	exec(t, conn, `CREATE PUBLICATION freshet FOR ALL TABLES`)
	wantErr(t, openErr(t, cfg), `replication slot "freshet" does not exist`, "pass Create")
}

func TestSetupNoReplicationPrivilege(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := connect(t, db.DSN)
	exec(t, conn, `DROP ROLE IF EXISTS norepl`, `CREATE ROLE norepl LOGIN`)
	t.Cleanup(func() { exec(t, connect(t, db.DSN), `DROP ROLE norepl`) })
	cfg := testConfig(t, roleDSN(db.DSN, "norepl"))
	wantErr(t, openErr(t, cfg), `role "norepl" lacks the REPLICATION attribute`, "ALTER ROLE norepl REPLICATION")
}

// roleDSN returns dsn with its user replaced by role.
func roleDSN(dsn, role string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		panic(err)
	}
	u.User = url.User(role)
	return u.String()
}

func TestSetupMustBeOwner(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := connect(t, db.DSN)
	exec(t, conn, `DROP ROLE IF EXISTS repl_notowner`, `CREATE ROLE repl_notowner LOGIN REPLICATION`,
		`CREATE TABLE owned (id int PRIMARY KEY)`,
		`GRANT CREATE ON DATABASE `+db.Name+` TO repl_notowner`)
	t.Cleanup(func() {
		exec(t, connect(t, db.DSN), `DROP OWNED BY repl_notowner`, `DROP ROLE repl_notowner`)
	})
	cfg := testConfig(t, roleDSN(db.DSN, "repl_notowner"))
	cfg.Tables = []string{"owned"}
	err := openErr(t, cfg)
	wantErr(t, err, "does not own the tables", "must be owner", "OWNER TO")

	cfg.Tables = nil
	wantErr(t, openErr(t, cfg), "only a superuser can publish ALL TABLES")
	assertNothingLeft(t, db.DSN)
}

// assertNothingLeft checks that failed set-ups left no slot or publication.
func assertNothingLeft(t *testing.T, dsn string) {
	t.Helper()
	conn := connect(t, dsn)
	var slots, pubs int
	if err := conn.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM pg_replication_slots WHERE database = current_database()), (SELECT count(*) FROM pg_publication)`).Scan(&slots, &pubs); err != nil {
		t.Fatal(err)
	}
	if slots != 0 || pubs != 0 {
		t.Errorf("after failed set-ups: %d slots and %d publications left, want none", slots, pubs)
	}
}

func TestSetupSlotsExhausted(t *testing.T) {
	c := startCluster(t, map[string]string{"max_replication_slots": "1"})
	conn := connect(t, c.DSN("postgres"))
	exec(t, conn, `SELECT pg_create_logical_replication_slot('taken', 'pgoutput')`)
	err := openErr(t, testConfig(t, c.DSN("postgres")))
	wantErr(t, err, "all 1 replication slots (max_replication_slots) are in use", "pg_drop_replication_slot")
	// The publication made before the slot was refused is gone again.
	var pubs int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_publication`).Scan(&pubs); err != nil {
		t.Fatal(err)
	}
	if pubs != 0 {
		t.Errorf("%d publications left after the failed set-up, want 0", pubs)
	}
}

func TestSetupSlotCreateFailsDropsPublication(t *testing.T) {
	// The pre-check passes (one slot free) but creation races with another
	// client that takes the last slot: simulated by a slot name that is
	// valid for us but already used as a physical slot.
	db := pgtest.NewDB(t)
	conn := connect(t, db.DSN)
	exec(t, conn, `SELECT pg_create_physical_replication_slot('phys_`+db.Name[:10]+`')`)
	t.Cleanup(func() { exec(t, connect(t, db.DSN), `SELECT pg_drop_replication_slot('phys_`+db.Name[:10]+`')`) })
	cfg := testConfig(t, db.DSN)
	cfg.Slot = "phys_" + db.Name[:10]
	err := openErr(t, cfg)
	wantErr(t, err, "is a physical slot, not a logical one")
	var pubs int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_publication`).Scan(&pubs); err != nil {
		t.Fatal(err)
	}
	if pubs != 0 {
		t.Errorf("%d publications left after the failed set-up, want 0", pubs)
	}
}

func TestSetupWalSendersExhausted(t *testing.T) {
	c := startCluster(t, map[string]string{"max_wal_senders": "1"})
	cfg := testConfig(t, c.DSN("postgres"))
	cfg.Slot = "first"
	openReader(t, cfg)
	cfg.Slot = "second"
	err := openErr(t, cfg)
	wantErr(t, err, "all 1 WAL senders (max_wal_senders) are in use", "raise max_wal_senders")
}

func TestSetupWalSendersExhaustedAtConnect(t *testing.T) {
	// The pre-check can pass and the connection still be refused when
	// another client takes the last sender in between.
	err := explainConnectError(&pgconnErr53300)
	wantErr(t, err, "all WAL senders are in use", "max_wal_senders")
}

func TestSetupKeylessWarning(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := connect(t, db.DSN)
	exec(t, conn,
		`CREATE TABLE keyed (id int PRIMARY KEY)`,
		`CREATE TABLE nokey (v int)`,
		`CREATE TABLE nothing (id int PRIMARY KEY)`, `ALTER TABLE nothing REPLICA IDENTITY NOTHING`,
		`CREATE TABLE full_ident (v int)`, `ALTER TABLE full_ident REPLICA IDENTITY FULL`)
	var logs logBuffer
	cfg := testConfig(t, db.DSN)
	cfg.Logger = testLogger(t, &logs)
	openReader(t, cfg)
	out := logs.String()
	for _, want := range []string{
		"published table public.nokey has no primary key or replica identity index",
		"published table public.nothing has REPLICA IDENTITY NOTHING",
		"PostgreSQL will refuse UPDATE and DELETE on it",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	for _, quiet := range []string{"public.keyed", "public.full_ident"} {
		if strings.Contains(out, "published table "+quiet) {
			t.Errorf("log warns about %s, which has a replica identity", quiet)
		}
	}
	// The warning's claim holds on PostgreSQL: updates of such a table fail.
	for _, table := range []string{"nokey", "nothing"} {
		_, err := conn.Exec(context.Background(), `UPDATE `+table+` SET id = id`)
		if table == "nokey" {
			_, err = conn.Exec(context.Background(), `UPDATE nokey SET v = v`)
		}
		if err == nil || !strings.Contains(err.Error(), "does not have a replica identity") {
			t.Errorf("UPDATE %s: err = %v, want PostgreSQL's replica identity refusal", table, err)
		}
	}
}

var pgconnErr53300 = pgconn.PgError{Code: "53300", Message: "number of requested standby connections exceeds max_wal_senders (currently 1)"}
