package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// syncBuffer is a bytes.Buffer safe to read while a command writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// jsonTxn is a printed transaction, read back loosely so the test pins
// what tail must print without depending on every detail of the format.
type jsonTxn struct {
	LSN     change.LSN `json:"lsn"`
	XID     uint32     `json:"xid"`
	Changes []struct {
		Op    string             `json:"op"`
		Table string             `json:"table"`
		New   map[string]*string `json:"new"`
		Old   map[string]*string `json:"old"`
		Key   map[string]*string `json:"key"`
	} `json:"changes"`
}

func parseLines(t *testing.T, out string) []jsonTxn {
	t.Helper()
	var txns []jsonTxn
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var tx jsonTxn
		if err := json.Unmarshal(sc.Bytes(), &tx); err != nil {
			t.Fatalf("line %d is not a JSON transaction: %v\n%s", len(txns)+1, err, sc.Text())
		}
		txns = append(txns, tx)
	}
	return txns
}

// summary renders a transaction's user changes as compact text, e.g.
// "insert items id=1 name=a" (relation changes are left out).
func (tx jsonTxn) summary() string {
	var parts []string
	for _, c := range tx.Changes {
		if c.Op == "relation" {
			continue
		}
		row := c.New
		if row == nil {
			row = c.Key
		}
		if row == nil {
			row = c.Old
		}
		s := c.Op + " " + c.Table
		for _, col := range []string{"id", "name", "qty"} {
			if v, ok := row[col]; ok {
				if v == nil {
					s += " " + col + "=NULL"
				} else {
					s += " " + col + "=" + *v
				}
			}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func mustExec(t *testing.T, dsn string, sqls ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, sql := range sqls {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// queryRow scans the one row sql returns into dest.
func queryRow(t *testing.T, dsn, sql string, args []any, dest ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, sql, args...).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func queryLSN(t *testing.T, dsn, sql string) change.LSN {
	t.Helper()
	var s *string
	queryRow(t, dsn, sql, nil, &s)
	if s == nil {
		return 0
	}
	l, err := change.ParseLSN(*s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// endLSN returns the current end of WAL and commits one more transaction
// past it, so a tail with --until sees the stream pass it even with
// heartbeats off.
func endLSN(t *testing.T, dsn string) change.LSN {
	t.Helper()
	l := queryLSN(t, dsn, "SELECT pg_current_wal_insert_lsn()::text")
	mustExec(t, dsn, "CREATE TABLE IF NOT EXISTS marker (id serial PRIMARY KEY)", "INSERT INTO marker DEFAULT VALUES")
	return l
}

func runMain(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errOut syncBuffer
	m := &Main{Stdout: &out, Stderr: &errOut}
	err = m.Run(ctx, args)
	return out.String(), errOut.String(), err
}

func TestTailPrintsTransactions(t *testing.T) {
	for _, proto := range []string{"1", "2"} {
		t.Run("proto"+proto, func(t *testing.T) {
			db := pgtest.NewDB(t)
			mustExec(t, db.DSN,
				"CREATE TABLE items (id int PRIMARY KEY, name text, qty int)",
				"CREATE PUBLICATION p FOR TABLE items",
				"SELECT pg_create_logical_replication_slot('s', 'pgoutput')",
				"BEGIN; INSERT INTO items VALUES (1, 'apple', 3), (2, 'pear', NULL); COMMIT",
				"UPDATE items SET qty = 4 WHERE id = 1",
				"BEGIN; INSERT INTO items VALUES (3, 'fig', 1); ROLLBACK",
				"DELETE FROM items WHERE id = 2",
				"SELECT pg_logical_emit_message(true, 'app', 'hello')",
			)
			until := endLSN(t, db.DSN)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, stderr, err := runMain(ctx, "tail", "--dsn", db.DSN, "--slot", "s", "--publication", "p",
				"--until", until.String(), "--proto", proto, "--heartbeat", "0")
			if err != nil {
				t.Fatalf("tail: %v\nstderr:\n%s", err, stderr)
			}
			txns := parseLines(t, out)
			var got []string
			for _, tx := range txns {
				got = append(got, tx.summary())
			}
			want := []string{
				"insert items id=1 name=apple qty=3; insert items id=2 name=pear qty=NULL",
				"update items id=1 name=apple qty=4",
				"delete items id=2",
				"message ",
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("printed transactions:\n%s\nwant:\n%s\noutput:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), out)
			}
			for i := 1; i < len(txns); i++ {
				if txns[i].LSN <= txns[i-1].LSN {
					t.Errorf("transaction %d lsn %v, not after %v", i, txns[i].LSN, txns[i-1].LSN)
				}
			}
			if txns[0].XID == 0 {
				t.Errorf("xid = 0, want the inserting transaction's id")
			}
		})
	}
}

func TestTailCreate(t *testing.T) {
	db := pgtest.NewDB(t)
	mustExec(t, db.DSN, "CREATE TABLE items (id int PRIMARY KEY, name text, qty int)")
	// Without --create a missing slot is an error that says what to do.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, stderr, err := runMain(ctx, "tail", "--dsn", db.DSN, "--slot", "nope", "--publication", "nope", "--heartbeat", "0")
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "--create") {
		t.Fatalf("tail on a missing slot: err = %v (exit %d), want exit 1 and a hint to use --create\nstderr:\n%s", err, exitCode(err), stderr)
	}

	// With --create, tail makes them and prints what is written after;
	// Ctrl-C (the context ending) is a clean exit.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		m := &Main{Stdout: &out, Stderr: &errOut}
		done <- m.Run(runCtx, []string{"tail", "--dsn", db.DSN, "--slot", "made", "--publication", "made",
			"--tables", "items", "--create"})
	}()
	waitFor(t, 30*time.Second, func() bool {
		return queryLSN(t, db.DSN, "SELECT max(confirmed_flush_lsn)::text FROM pg_replication_slots WHERE slot_name = 'made'") != 0
	})
	mustExec(t, db.DSN, "INSERT INTO items VALUES (7, 'kiwi', 2)")
	endLSN(t, db.DSN) // marker is not in the publication: never printed
	waitFor(t, 30*time.Second, func() bool { return strings.Contains(out.String(), "\n") })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("tail stopped with %v on Ctrl-C, want a clean exit\nstderr:\n%s", err, errOut.String())
	}
	txns := parseLines(t, out.String())
	if len(txns) != 1 || txns[0].summary() != "insert items id=7 name=kiwi qty=2" {
		t.Fatalf("printed %d transactions:\n%s\nwant the one insert into items", len(txns), out.String())
	}
}

func waitFor(t *testing.T, wait time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestTailFlagErrors(t *testing.T) {
	t.Setenv("FRESHET_DSN", "")
	dsn := "postgres://postgres@127.0.0.1:1/none"
	u, err := url.Parse(pgtest.NewDB(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	u.Path += "_missing"
	missingDB := u.String()
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string // in the error
		wantOut  string // in stderr
	}{
		{"unknown flag", []string{"tail", "--dsn", dsn, "--bogus"}, 2, "flag provided but not defined: -bogus", "--until"},
		{"no dsn", []string{"tail"}, 2, "no database given", "--dsn"},
		{"bad format", []string{"tail", "--dsn", dsn, "--format", "xml"}, 2, `--format "xml"`, "Usage: freshet tail"},
		{"bad proto", []string{"tail", "--dsn", dsn, "--proto", "3"}, 2, "--proto 3", "Usage: freshet tail"},
		{"bad until", []string{"tail", "--dsn", dsn, "--until", "12"}, 2, "--until", "Usage: freshet tail"},
		{"bad from", []string{"tail", "--dsn", dsn, "--from", "x/y"}, 2, "--from", "Usage: freshet tail"},
		{"bad heartbeat", []string{"tail", "--dsn", dsn, "--heartbeat", "soon"}, 2, "heartbeat", "Usage: freshet tail"},
		{"bad log level", []string{"tail", "--dsn", dsn, "--log-level", "loud"}, 2, "--log-level", "Usage: freshet tail"},
		{"stray argument", []string{"tail", "--dsn", dsn, "extra"}, 2, `unexpected argument "extra"`, "Usage: freshet tail"},
		{"unknown command", []string{"tial"}, 2, `unknown command "tial"`, "Commands:"},
		{"none to a file", []string{"tail", "--dsn", dsn, "--format", "none", "--output", "x.jsonl"}, 2, "--output with --format none", "Usage: freshet tail"},
		{"unreachable database", []string{"tail", "--dsn", dsn, "--heartbeat", "0"}, 1, "check that PostgreSQL is running and reachable", ""},
		{"missing database", []string{"tail", "--dsn", missingDB, "--heartbeat", "0"}, 1, "the user, password and database in it are right", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, stderr, err := runMain(ctx, tt.args...)
			if err == nil {
				t.Fatalf("freshet %v succeeded, want exit %d", tt.args, tt.wantCode)
			}
			if got := exitCode(err); got != tt.wantCode {
				t.Errorf("exit code = %d, want %d (err: %v)", got, tt.wantCode, err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %q, want it to contain %q", err, tt.wantErr)
			}
			if !strings.Contains(stderr, tt.wantOut) {
				t.Errorf("stderr = %q, want it to contain %q", stderr, tt.wantOut)
			}
		})
	}
}

func TestTailHelp(t *testing.T) {
	out, _, err := runMain(context.Background(), "tail", "-h")
	if err != nil {
		t.Fatalf("tail -h: %v, want exit 0", err)
	}
	for _, flag := range []string{"--dsn", "--slot", "--publication", "--tables", "--create", "--from", "--until", "--format", "--output", "--proto", "--binary", "--heartbeat", "--log-level"} {
		if !strings.Contains(out, strings.TrimPrefix(flag, "-")) {
			t.Errorf("tail -h does not mention %s:\n%s", flag, out)
		}
	}
}

// TestTailKillResume kills `freshet tail --output` with SIGKILL several
// times while a writer commits numbered transactions, restarts it on the
// same file each time, and checks that the file ends up holding every
// committed transaction exactly once, in commit order.
func TestTailKillResume(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it as a subprocess")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "freshet")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	db := pgtest.NewDB(t)
	mustExec(t, db.DSN,
		"CREATE TABLE seq (n int PRIMARY KEY, pad text)",
		"CREATE PUBLICATION p FOR TABLE seq",
		"SELECT pg_create_logical_replication_slot('s', 'pgoutput')",
	)
	outFile := filepath.Join(dir, "out.jsonl")

	// The writer commits numbered transactions of one row each; every
	// 25th inserts 20,000 rows, which arrive in several fragments and are
	// written in pieces, so kills also land inside a line and leave it torn.
	ctx, cancel := context.WithTimeout(context.Background(), slow(3*time.Minute))
	defer cancel()
	writerCtx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	type committed struct{ first, last int }
	var (
		mu    sync.Mutex
		txns  []committed
		werr  error
		wdone = make(chan struct{})
	)
	go func() {
		defer close(wdone)
		conn, err := pgx.Connect(ctx, db.DSN)
		if err != nil {
			werr = err
			return
		}
		defer conn.Close(context.Background())
		n := 0
		for i := 1; writerCtx.Err() == nil; i++ {
			rows := 1
			if i%25 == 0 {
				rows = 20000
			}
			_, err := conn.Exec(ctx, "INSERT INTO seq SELECT g, repeat('x', 100) FROM generate_series($1::int, $2::int) g", n+1, n+rows)
			if err != nil {
				werr = err
				return
			}
			mu.Lock()
			txns = append(txns, committed{n + 1, n + rows})
			mu.Unlock()
			n += rows
			time.Sleep(time.Millisecond)
		}
	}()
	countTxns := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(txns)
	}
	fileLines := func() int {
		b, _ := os.ReadFile(outFile)
		return bytes.Count(b, []byte("\n"))
	}

	start := func(extra ...string) (*exec.Cmd, *bytes.Buffer) {
		// The walsender streams the large transactions (protocol 2, the
		// default), so kills also land while one streams or is read back.
		args := append([]string{"tail", "--dsn", streamingDSN(db.DSN), "--slot", "s", "--publication", "p", "--output", outFile, "--heartbeat", "100ms"}, extra...)
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &stderr
	}
	const kills = 4
	for k := 0; k < kills; k++ {
		cmd, stderr := start()
		before := fileLines()
		// Let it write some transactions, then kill it mid-stream at a
		// moment unrelated to line ends.
		deadline := time.Now().Add(30 * time.Second)
		for fileLines() < before+20 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if strings.Contains(stderr.String(), "torn") {
			t.Logf("run %d cut a torn line", k+1)
		}
		if fileLines() <= before {
			t.Fatalf("run %d wrote nothing in 30s; stderr:\n%s", k+1, stderr)
		}
		t.Logf("kill %d: %d lines in the file, writer at %d transactions", k+1, fileLines(), countTxns())
	}
	// The writer keeps going while a new tail catches up and is stopped
	// with SIGTERM; then the writer stops and a last run drains to the end.
	cmd, stderr := start()
	waitFor(t, 30*time.Second, func() bool { return countTxns() > 0 && fileLines() > 0 })
	time.Sleep(300 * time.Millisecond)
	// SIGTERM (like Ctrl-C) is a clean stop: exit status 0.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tail after SIGTERM: %v, want exit status 0\nstderr:\n%s", err, stderr)
	}
	stopWriter()
	<-wdone
	if werr != nil {
		t.Fatalf("writer: %v", werr)
	}
	until := endLSN(t, db.DSN)
	cmd, stderr = start("--until", until.String())
	if err := cmd.Wait(); err != nil {
		t.Fatalf("final tail: %v\n%s", err, stderr)
	}

	if streamedTxns(t, db.DSN, "s") == 0 {
		t.Errorf("no transaction was streamed (pg_stat_replication_slots.stream_txns = 0): the test no longer covers protocol 2 streaming")
	}

	b, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	got := parseLines(t, string(b))
	if len(got) != len(txns) {
		t.Errorf("file holds %d transactions, PostgreSQL committed %d", len(got), len(txns))
	}
	for i := 0; i < len(got) && i < len(txns); i++ {
		var rows []int
		for _, c := range got[i].Changes {
			if c.Op != "insert" {
				continue
			}
			var n int
			if v := c.New["n"]; v != nil {
				fmt.Sscan(*v, &n)
			}
			rows = append(rows, n)
		}
		want := txns[i]
		if len(rows) != want.last-want.first+1 || rows[0] != want.first || rows[len(rows)-1] != want.last {
			t.Fatalf("transaction %d in the file inserts %d rows %v..., want rows %d..%d (lost, duplicated or reordered)", i+1, len(rows), rows[:min(len(rows), 3)], want.first, want.last)
		}
		if i > 0 && got[i].LSN <= got[i-1].LSN {
			t.Fatalf("transaction %d lsn %v is not after %v", i+1, got[i].LSN, got[i-1].LSN)
		}
	}
	var total int
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM seq").Scan(&total); err != nil {
		t.Fatal(err)
	}
	if want := txns[len(txns)-1].last; total != want {
		t.Errorf("PostgreSQL holds %d rows, the writer committed %d", total, want)
	}
}
