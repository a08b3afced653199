package pgwal

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
)

func TestOperations(t *testing.T) {
	for _, proto := range []int{1, 2} {
		t.Run(map[int]string{1: "proto1", 2: "proto2"}[proto], func(t *testing.T) {
			db := pgtest.NewDB(t)
			conn := connect(t, db.DSN)
			exec(t, conn,
				`CREATE TABLE parent (id serial PRIMARY KEY, n numeric, ts timestamptz, note text)`,
				`CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent)`)
			cfg := testConfig(t, db.DSN)
			cfg.ProtoVersion = proto
			r := openReader(t, cfg)
			exec(t, conn,
				`INSERT INTO parent (n, ts, note) VALUES (1.50, '2024-02-29 23:59:59.123456+00', 'it''s'), ('NaN', 'infinity', NULL)`,
				`UPDATE parent SET note = 'x' WHERE id = 1`,
				`DELETE FROM parent WHERE id = 2`,
				`INSERT INTO child VALUES (1, 1)`,
				`TRUNCATE parent, child RESTART IDENTITY CASCADE`,
				`SELECT pg_logical_emit_message(false, 'app', 'hello')`,
				`BEGIN; SELECT pg_logical_emit_message(true, 'app', 'in txn'); INSERT INTO child VALUES (7, NULL); COMMIT`,
			)
			want := [][]string{
				{"insert parent new(1,1.50,2024-02-29 23:59:59.123456+00,it's)", "insert parent new(2,NaN,infinity,<null>)"},
				{"update parent new(1,1.50,2024-02-29 23:59:59.123456+00,x)"},
				{"delete parent old(2,<absent>,<absent>,<absent>)"},
				{"insert child new(1,1)"},
				{"truncate parent child cascade=true restart=true"},
				{`message app "hello" transactional=false`},
				{`message app "in txn" transactional=true`, "insert child new(7,<null>)"},
			}
			for i, w := range want {
				txn := nextTxn(t, r, 30*time.Second)
				got := userChanges(txn.Changes)
				if len(got) != len(w) {
					var d []string
					for _, c := range got {
						d = append(d, describe(c))
					}
					t.Fatalf("transaction %d: got %d changes %q, want %q", i, len(got), d, w)
				}
				for j := range w {
					if g := describe(got[j]); g != w[j] {
						t.Errorf("transaction %d change %d = %s, want %s", i, j, g, w[j])
					}
				}
				r.Ack(txn.CommitLSN)
			}
		})
	}
}

func TestRelationChangesMidStream(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := connect(t, db.DSN)
	exec(t, conn, `CREATE TABLE t (id int PRIMARY KEY, a text)`)
	r := openReader(t, testConfig(t, db.DSN))
	exec(t, conn,
		`INSERT INTO t VALUES (1, 'one')`,
		`ALTER TABLE t ADD COLUMN b int`,
		`INSERT INTO t VALUES (2, 'two', 22)`,
		`ALTER TABLE t DROP COLUMN a`,
		`INSERT INTO t VALUES (3, 33)`)
	wantCols := [][]string{{"id", "a"}, {"id", "a", "b"}, {"id", "b"}}
	wantRows := []string{"(1,one)", "(2,two,22)", "(3,33)"}
	for i := range wantRows {
		txn := nextTxn(t, r, 30*time.Second)
		var rel *change.Relation
		for _, c := range txn.Changes {
			if c.Op == change.OpRelation {
				rel = c.Rel
			}
		}
		if rel == nil {
			t.Fatalf("transaction %d: no relation change before its insert", i)
		}
		var cols []string
		for _, c := range rel.Columns {
			cols = append(cols, c.Name)
		}
		if !reflect.DeepEqual(cols, wantCols[i]) {
			t.Errorf("transaction %d: relation columns %v, want %v", i, cols, wantCols[i])
		}
		ins := userChanges(txn.Changes)
		if len(ins) != 1 || rowString(ins[0].New) != wantRows[i] {
			t.Fatalf("transaction %d: changes %v, want one insert %s", i, ins, wantRows[i])
		}
		r.Ack(txn.CommitLSN)
	}
}

func TestToastUnchanged(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := connect(t, db.DSN)
	exec(t, conn,
		`CREATE TABLE big (id int PRIMARY KEY, n int, doc text)`,
		`ALTER TABLE big ALTER COLUMN doc SET STORAGE EXTERNAL`,
		`CREATE TABLE bigfull (id int PRIMARY KEY, n int, doc text)`,
		`ALTER TABLE bigfull ALTER COLUMN doc SET STORAGE EXTERNAL`,
		`ALTER TABLE bigfull REPLICA IDENTITY FULL`)
	r := openReader(t, testConfig(t, db.DSN))
	doc := strings.Repeat("0123456789", 1000) // 10 kB, stored out of line
	for _, tbl := range []string{"big", "bigfull"} {
		if _, err := conn.Exec(context.Background(), `INSERT INTO `+tbl+` VALUES (1, 1, $1)`, doc); err != nil {
			t.Fatal(err)
		}
		exec(t, conn, `UPDATE `+tbl+` SET n = 2 WHERE id = 1`)
	}
	for _, tbl := range []string{"big", "bigfull"} {
		ins := userChanges(nextTxn(t, r, 30*time.Second).Changes)
		if got := ins[0].New[2]; got.Kind != change.Text || got.String() != doc {
			t.Fatalf("%s insert doc = %v (%d bytes), want the 10 kB text", tbl, got.Kind, len(got.Data))
		}
		upd := userChanges(nextTxn(t, r, 30*time.Second).Changes)
		if len(upd) != 1 || upd[0].Op != change.OpUpdate {
			t.Fatalf("%s: got %v, want one update", tbl, upd)
		}
		got := upd[0].New[2]
		switch tbl {
		case "big":
			if got.Kind != change.Unchanged {
				t.Errorf("big: unchanged TOASTed doc has kind %v, want unchanged", got.Kind)
			}
		case "bigfull":
			if got.Kind != change.Text || got.String() != doc {
				t.Errorf("bigfull: unchanged TOASTed doc = %v (%d bytes), want it filled from the old row", got.Kind, len(got.Data))
			}
		}
		if n := upd[0].New[1].String(); n != "2" {
			t.Errorf("%s: n = %q, want 2", tbl, n)
		}
	}
}

func TestAckNeverPastAcked(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := connect(t, db.DSN)
	exec(t, conn, `CREATE TABLE t (id int PRIMARY KEY)`)
	cfg := testConfig(t, db.DSN)
	r := openReader(t, cfg)
	start := slotFlush(t, conn, cfg.Slot)
	for i := 1; i <= 3; i++ {
		exec(t, conn, fmt.Sprintf(`INSERT INTO t VALUES (%d)`, i))
	}
	var txns []*change.Txn
	for i := 0; i < 3; i++ {
		txns = append(txns, nextTxn(t, r, 30*time.Second))
	}
	// Delivered but unacknowledged: the slot must not move, however long
	// we wait and however many keepalives pass.
	exec(t, conn, `SELECT pg_switch_wal()`) // makes the server send keepalives with a later WAL end
	time.Sleep(500 * time.Millisecond)      // several status intervals: the property is that nothing moves
	if got := slotFlush(t, conn, cfg.Slot); got > start {
		t.Fatalf("confirmed_flush_lsn = %v before any Ack, want at most %v", got, start)
	}
	r.Ack(txns[0].CommitLSN)
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if got := slotFlush(t, conn, cfg.Slot); got != txns[0].CommitLSN {
			return fmt.Errorf("confirmed_flush_lsn = %v, want %v", got, txns[0].CommitLSN)
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond)
	if got := slotFlush(t, conn, cfg.Slot); got != txns[0].CommitLSN {
		t.Fatalf("confirmed_flush_lsn = %v with txns 2 and 3 unacknowledged, want %v", got, txns[0].CommitLSN)
	}
	// Everything acknowledged and nothing pending: the idle slot follows
	// the server's WAL end instead of pinning WAL.
	r.Ack(txns[2].CommitLSN)
	exec(t, conn, `CREATE TABLE unpublished_activity (x int)`) // WAL with no published change
	end := currentLSN(t, conn)
	checkFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		if got := slotFlush(t, conn, cfg.Slot); got < end-1 {
			return fmt.Errorf("idle slot confirmed_flush_lsn = %v, want it to reach about %v", got, end)
		}
		return nil
	})
}

func TestStartLSNResumesAfterIt(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := connect(t, db.DSN)
	exec(t, conn, `CREATE TABLE t (id int PRIMARY KEY)`)
	cfg := testConfig(t, db.DSN)
	r := openReader(t, cfg)
	for i := 1; i <= 3; i++ {
		exec(t, conn, fmt.Sprintf(`INSERT INTO t VALUES (%d)`, i))
	}
	var commits []change.LSN
	for i := 0; i < 3; i++ {
		commits = append(commits, nextTxn(t, r, 30*time.Second).CommitLSN)
	}
	r.Close() // nothing acknowledged: the slot still holds all three
	if got := slotFlush(t, conn, cfg.Slot); got >= commits[0] {
		t.Fatalf("confirmed_flush_lsn = %v after Close without Ack, want before %v", got, commits[0])
	}
	cfg.StartLSN = commits[1]
	r2 := openReader(t, cfg)
	txn := nextTxn(t, r2, 30*time.Second)
	if txn.CommitLSN != commits[2] {
		t.Fatalf("first transaction after StartLSN %v commits at %v, want %v", cfg.StartLSN, txn.CommitLSN, commits[2])
	}
	if got := rowString(userChanges(txn.Changes)[0].New); got != "(3)" {
		t.Fatalf("row %s, want (3)", got)
	}
}

func TestBinaryMode(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := connect(t, db.DSN)
	exec(t, conn, `CREATE TABLE t (id int PRIMARY KEY, s text)`)
	cfg := testConfig(t, db.DSN)
	cfg.Binary = true
	r := openReader(t, cfg)
	exec(t, conn, `INSERT INTO t VALUES (258, 'hi')`)
	ins := userChanges(nextTxn(t, r, 30*time.Second).Changes)
	if len(ins) != 1 {
		t.Fatalf("got %d changes, want 1", len(ins))
	}
	id, s := ins[0].New[0], ins[0].New[1]
	if id.Kind != change.Binary || string(id.Data) != "\x00\x00\x01\x02" {
		t.Errorf("id = %v %x, want binary 00000102", id.Kind, id.Data)
	}
	if s.Kind != change.Binary || string(s.Data) != "hi" {
		t.Errorf("s = %v %q, want binary \"hi\"", s.Kind, s.Data)
	}
}
