package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// streamingDSN has the walsender stream any transaction past 64 kB
// (protocol 2) instead of waiting for its commit: logical_decoding_work_mem
// is a session setting the replication connection takes from the DSN.
func streamingDSN(dsn string) string { return dsn + "&logical_decoding_work_mem=64kB" }

// Under protocol 2 a large transaction arrives streamed, before its
// commit, and tail encodes it as it arrives (pgwal's StreamEncoder); the
// file it writes must be byte for byte the one protocol 1 gives, where the
// walsender sends the transaction whole after its commit: with a
// subtransaction rolled back in the middle, a small transaction committed
// while the large one streams, and a large one that aborts.
func TestTailStreamedTransactions(t *testing.T) {
	db := pgtest.NewDB(t)
	mustExec(t, db.DSN,
		"CREATE TABLE big (id int PRIMARY KEY, pad text, n numeric)",
		"CREATE PUBLICATION p FOR TABLE big",
		"SELECT pg_create_logical_replication_slot('s1', 'pgoutput')",
		"SELECT pg_create_logical_replication_slot('s2', 'pgoutput')",
	)
	ctx, cancel := context.WithTimeout(context.Background(), slow(2*time.Minute))
	defer cancel()
	a, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	for _, sql := range []string{
		"BEGIN",
		"INSERT INTO big SELECT g, repeat('a', 200), g * 1.5 FROM generate_series(1, 3000) g",
		"SAVEPOINT s",
		"INSERT INTO big SELECT g, repeat('r', 200), NULL FROM generate_series(3001, 4000) g",
		"ROLLBACK TO SAVEPOINT s",
	} {
		if _, err := a.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	mustExec(t, db.DSN,
		"INSERT INTO big VALUES (100000, 'small, committed while the big one is open', 1)",
		"BEGIN; INSERT INTO big SELECT g, repeat('x', 200), NULL FROM generate_series(200001, 203000) g; ROLLBACK",
	)
	for _, sql := range []string{
		"UPDATE big SET pad = 'updated ' || id WHERE id % 7 = 0",
		"DELETE FROM big WHERE id % 11 = 0",
		"INSERT INTO big SELECT g, repeat('b', 200), NULL FROM generate_series(4001, 6000) g",
		"COMMIT",
	} {
		if _, err := a.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	until := endLSN(t, db.DSN)

	dir := t.TempDir()
	tail := func(proto, slot string) []byte {
		t.Helper()
		out := filepath.Join(dir, slot+".jsonl")
		_, stderr, err := runMain(ctx, "tail", "--dsn", streamingDSN(db.DSN), "--slot", slot, "--publication", "p",
			"--until", until.String(), "--proto", proto, "--heartbeat", "0", "--output", out)
		if err != nil {
			t.Fatalf("tail --proto %s: %v\nstderr:\n%s", proto, err, stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	p1 := tail("1", "s1")
	p2 := tail("2", "s2")

	if streamed := streamedTxns(t, db.DSN, "s2"); streamed < 2 {
		t.Errorf("the walsender streamed %d transactions to protocol 2, want the two large ones: the test no longer covers streaming", streamed)
	}
	txns := parseLines(t, string(p1))
	var rows []int
	for _, tx := range txns {
		rows = append(rows, len(tx.Changes))
	}
	// The small insert, then the large one: 5,000 inserts, then updates
	// and deletes of the first 3,000.
	if len(txns) != 2 || rows[0] != 1 || rows[1] < 5000 {
		t.Fatalf("protocol 1 printed transactions of %v changes, want [1, >5000]", rows)
	}
	// A streamed transaction's fragments know its end LSN from the
	// first, so "end_lsn" may sit elsewhere in the object: the lines are
	// compared as JSON values.
	l1, l2 := bytes.Split(p1, []byte("\n")), bytes.Split(p2, []byte("\n"))
	if len(l1) != len(l2) {
		t.Fatalf("protocol 2 printed %d lines, protocol 1 %d", len(l2), len(l1))
	}
	for i := range l1 {
		var v1, v2 any
		if len(l1[i]) == 0 && len(l2[i]) == 0 {
			continue
		}
		if err := json.Unmarshal(l1[i], &v1); err != nil {
			t.Fatalf("protocol 1 line %d: %v", i+1, err)
		}
		if err := json.Unmarshal(l2[i], &v2); err != nil {
			t.Fatalf("protocol 2 line %d: %v", i+1, err)
		}
		if !reflect.DeepEqual(v1, v2) {
			at := firstDiffAt(l1[i], l2[i])
			t.Errorf("line %d: protocol 2 printed %d bytes, protocol 1 %d; from byte %d:\n p1: %.300s\n p2: %.300s",
				i+1, len(l2[i]), len(l1[i]), at, l1[i][at:], l2[i][at:])
		}
	}
}

// streamedTxns is how many transactions the walsender has streamed to
// slot before their commit (pg_stat_replication_slots).
func streamedTxns(t *testing.T, dsn, slot string) int {
	t.Helper()
	var n int
	queryRow(t, dsn, "SELECT stream_txns FROM pg_stat_replication_slots WHERE slot_name = $1", []any{slot}, &n)
	return n
}

func firstDiffAt(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}
