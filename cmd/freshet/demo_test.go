package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/internal/servetest"
	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/ticketdesk"
)

func TestParseDemoFlags(t *testing.T) {
	tests := []struct {
		name  string
		sub   string
		args  []string
		check func(*demoConfig) string
		bad   string // substring of the usage error
	}{
		{name: "defaults", check: func(c *demoConfig) string {
			if c.DSN != "" || c.FreshetURL != "" || c.Slot != "freshet_demo" || c.Listen != "127.0.0.1:0" || c.Scale != 1 ||
				c.Rate != 50 || c.Readers != 16 || c.ReadRate != 2000 || c.Keys != 32 || c.Verify != time.Second ||
				c.Settle != 3*time.Second || c.Duration != 0 || c.Plain || c.Seed == 0 || c.Writers != 2 || c.Hot != 0 {
				return fmt.Sprintf("%+v", *c)
			}
			return ""
		}},
		{name: "mix", args: []string{"--mix", "status=3, comment=1"}, check: func(c *demoConfig) string {
			mix, _ := parseMix(c.Mix)
			if len(mix) != 2 || mix[ticketdesk.KindStatus] != 3 || mix[ticketdesk.KindComment] != 1 {
				return fmt.Sprint(mix)
			}
			return ""
		}},
		{name: "migrate kind then flags", sub: "migrate", args: []string{"drop", "--load", "2s"}, check: func(c *demoConfig) string {
			if c.Kind != "drop" || c.Load != 2*time.Second || c.Readers != 16 {
				return fmt.Sprintf("%+v", *c)
			}
			return ""
		}},
		{name: "bench", sub: "bench", args: []string{"--concurrency", "4", "--duration", "1s"}, check: func(c *demoConfig) string {
			if c.Concurrency != 4 || c.Duration != time.Second || c.Rate != 50 {
				return fmt.Sprintf("%+v", *c)
			}
			return ""
		}},
		{name: "unknown kind of change", args: []string{"--mix", "explode=1"}, bad: "unknown kind"},
		{name: "bad weight", args: []string{"--mix", "status=-1"}, bad: "whole number"},
		{name: "bad scale", args: []string{"--scale", "0"}, bad: "--scale"},
		{name: "seed needs dsn", sub: "seed", bad: "no database given"},
		{name: "serve needs dsn", sub: "serve", bad: "no database given"},
		{name: "migrate needs a kind", sub: "migrate", bad: "name the change"},
		{name: "migrate unknown kind", sub: "migrate", args: []string{"rename"}, bad: "want widen, new-type or drop"},
		{name: "argument", args: []string{"extra"}, bad: "unexpected argument"},
		{name: "lag samples", sub: "lag", args: []string{"--samples", "0"}, bad: "--samples"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("FRESHET_DEMO_DSN", "")
			var out, errOut bytes.Buffer
			m := &Main{Stdout: &out, Stderr: &errOut}
			cfg, err := m.parseDemoFlags(tt.sub, tt.args)
			if tt.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tt.bad) {
					t.Fatalf("error = %v, want one mentioning %q", err, tt.bad)
				}
				if _, ok := err.(usageError); !ok {
					t.Errorf("error is %T, want a usageError (exit status 2)", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(cfg); msg != "" {
				t.Errorf("config not as expected: %s", msg)
			}
		})
	}
}

// scenarioConfig is the scenario tests' load: sixteen readers, the whole
// writer mix.
// scenarioLoad is the scenario tests' readers and writer rate: sixteen
// readers and 40 writes a second, a quarter of that under the race
// detector.
func scenarioLoad() []string {
	if raceEnabled {
		return []string{"--readers", "4", "--rate", "10"}
	}
	return []string{"--readers", "16", "--rate", "40"}
}

// slow scales a test's time budget: three times under the race detector.
func slow(d time.Duration) time.Duration {
	if raceEnabled {
		return 3 * d
	}
	return d
}

func scenarioConfig(t *testing.T, dsn, slot string) *demoConfig {
	t.Helper()
	cfg, err := (&Main{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}).parseDemoFlags("", append([]string{
		"--dsn", dsn, "--slot", slot, "--seed", "42", "--hot", "300", "--keys", "8"}, scenarioLoad()...))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// openTestStack opens the demo's stack on a fresh database.
func openTestStack(t *testing.T, ctx context.Context, cfg *demoConfig) (*demoStack, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	m := &Main{Stdout: logs, Stderr: logs}
	st, err := m.openStack(ctx, cfg)
	if err != nil {
		t.Fatalf("open the demo: %v\n%s", err, logs)
	}
	t.Cleanup(st.Close)
	return st, logs
}

// checkAnswers fails the test for every mismatch: a cached answer that
// never equalled PostgreSQL's, a lookup that must stay empty and did not,
// a read routed against its lookup's expectation.
func checkAnswers(t *testing.T, what string, mms []ticketdesk.Mismatch) {
	t.Helper()
	for _, mm := range mms {
		t.Errorf("%s: %s", what, formatMismatch(mm))
	}
}

// TestDemoScenario runs `freshet demo serve`: sixteen readers (four under
// the race detector) under the whole writer mix for 15 s (longer if the verifier has not finished two
// passes by then), reading /stats on the desk's port as it goes, then
// stops it as Ctrl-C would. It must end with zero mismatches (serve exits
// 1 otherwise), having answered reads from memory.
func TestDemoScenario(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), slow(3*time.Minute))
	defer cancel()
	run, stop := context.WithCancel(ctx)
	defer stop()
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	m := &Main{Stdout: stdout, Stderr: stderr}
	done := make(chan error, 1)
	go func() {
		done <- m.Run(run, append([]string{"demo", "serve", "--dsn", db.DSN, "--slot", db.Name,
			"--seed", "42", "--hot", "300", "--keys", "8", "--plain", "--checkpoint-every", "3s"}, scenarioLoad()...))
	}()
	// The desk's address is printed once everything runs.
	var desk string
	for desk == "" {
		select {
		case err := <-done:
			t.Fatalf("demo serve ended early: %v\n%s%s", err, stderr, stdout)
		case <-time.After(100 * time.Millisecond):
		}
		if _, rest, ok := strings.Cut(stderr.String(), "backend is at "); ok {
			desk, _, _ = strings.Cut(rest, " ")
		}
	}
	var stats struct {
		Uptime   float64                              `json:"uptime_seconds"`
		Writer   ticketdesk.WriterStats               `json:"writer"`
		Readers  struct{ Reads int64 }                `json:"readers"`
		Routes   struct{ Cache struct{ Hits int64 } } `json:"routes"`
		Verifier struct {
			Passes      int64                 `json:"passes"`
			Compared    int64                 `json:"compared"`
			Mismatches  []ticketdesk.Mismatch `json:"mismatches"`
			Checkpoints struct {
				Count      int64 `json:"count"`
				Compared   int64 `json:"compared"`
				Mismatches int   `json:"mismatches"`
			} `json:"checkpoints"`
		} `json:"verifier"`
	}
	for stats.Uptime < 15 || stats.Verifier.Passes < 2 || stats.Verifier.Checkpoints.Count < 2 {
		select {
		case err := <-done:
			t.Fatalf("demo serve ended early: %v\n%s%s", err, stderr, stdout)
		case <-ctx.Done():
			t.Fatalf("the verifier did not finish two passes: %+v\n%s%s", stats, stderr, stdout)
		case <-time.After(time.Second):
		}
		resp, err := http.Get(desk + "/stats")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&stats)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("decode /stats: %v", err)
		}
	}
	if stats.Writer.Committed == 0 || stats.Readers.Reads == 0 || stats.Routes.Cache.Hits == 0 || stats.Verifier.Compared == 0 {
		t.Errorf("/stats: %+v, want commits, reads, cache hits and comparisons", stats)
	}
	// Every exact checkpoint (writer paused, cache past the WAL position)
	// found every answer equal.
	if cp := stats.Verifier.Checkpoints; cp.Compared == 0 || cp.Mismatches != 0 {
		t.Errorf("/stats checkpoints: %+v, want answers compared and no mismatch", cp)
	}
	checkAnswers(t, "scenario", stats.Verifier.Mismatches)
	if resp, err := http.Get(desk + "/lookups"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /lookups on the desk: %v %v", resp, err)
	}
	stop() // Ctrl-C
	if err := <-done; err != nil {
		t.Fatalf("demo serve: %v\n%s%s", err, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	final := lines[len(lines)-1]
	t.Logf("%d lines; %s", len(lines), final)
	if !strings.HasPrefix(final, "final: ") || !strings.Contains(final, " mismatches=0") || len(lines) < 10 {
		t.Errorf("output ends with %q after %d lines, want a final line with mismatches=0 after one line a second", final, len(lines))
	}
	if !strings.Contains(stderr.String(), "dropped slot and publication") {
		t.Errorf("the slot was not dropped on exit:\n%s", stderr)
	}
}

// TestDemoCtrlC runs `freshet demo` as `make demo` does (a throwaway
// PostgreSQL of its own) until a few lines are printed, then stops it as
// Ctrl-C would: a clean exit, and the server's directory removed.
func TestDemoCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster of its own")
	}
	ctx, cancel := context.WithTimeout(context.Background(), slow(2*time.Minute))
	defer cancel()
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- (&Main{Stdout: stdout, Stderr: stderr}).Run(ctx, []string{"demo", "--readers", "4", "--rate", "20"})
	}()
	for strings.Count(stdout.String(), "t=") < 3 {
		select {
		case err := <-done:
			t.Fatalf("demo stopped early: %v\n%s%s", err, stderr, stdout)
		case <-time.After(100 * time.Millisecond):
		}
	}
	cancel() // Ctrl-C
	if err := <-done; err != nil {
		t.Fatalf("demo: %v, want a clean exit on Ctrl-C\n%s%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout.String(), "final: ") {
		t.Errorf("no final line:\n%s", stdout)
	}
	_, rest, ok := strings.Cut(stderr.String(), "stopping PostgreSQL and removing ")
	if !ok {
		t.Fatalf("the throwaway server was not stopped:\n%s", stderr)
	}
	dir, _, _ := strings.Cut(rest, "\n")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after the demo (stat: %v)", dir, err)
	}
}

// TestDemoEngineRestart kills a separate `freshet serve` with SIGKILL in
// the middle of the scenario and starts it again: while it is gone the
// read cache sends reads to PostgreSQL, once it is back the reads are
// answered from memory again, and the verifier never finds a mismatch.
func TestDemoEngineRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it as a subprocess")
	}
	db := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), slow(3*time.Minute))
	defer cancel()
	cfg := scenarioConfig(t, db.DSN, db.Name)
	// Seed first, so the engine starts on a seeded desk.
	if _, sqlDB, err := openDirect(db.DSN); err != nil {
		t.Fatal(err)
	} else {
		_, err := ensureSeeded(ctx, sqlDB, cfg.Scale)
		sqlDB.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	srv := servetest.Start(t, servetest.Options{DSN: db.DSN, Slot: servetest.SlotFor("demo", db.Name),
		Args: []string{"--row-limit", fmt.Sprint(ticketdesk.RowLimit), "--log-level", "warn"},
		Env:  []string{"FRESHET_S2S_TOKEN=restart-token"}})
	cfg.FreshetURL, cfg.Token = srv.URL, "restart-token"
	st, logs := openTestStack(t, ctx, cfg)
	ld, err := st.startLoad(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Stop()
	r := rand.New(rand.NewSource(2))
	var mms []ticketdesk.Mismatch
	verifyFor := func(d time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(d); time.Now().Before(deadline); {
			rep, err := ld.VerifyOnce(ctx, r, cfg.Settle)
			if err != nil {
				t.Fatalf("verify: %v\n%s\nserve:\n%s", err, logs, srv.Log())
			}
			mms = append(mms, rep.Mismatches...)
		}
	}
	// checkpoint compares every lookup exactly, with the writer paused.
	checkpoint := func(when string) {
		t.Helper()
		rep, err := ld.CheckpointOnce(ctx, r)
		if err != nil {
			t.Fatalf("checkpoint %s: %v\n%s\nserve:\n%s", when, err, logs, srv.Log())
		}
		if rep.Compared == 0 {
			t.Fatalf("checkpoint %s compared nothing", when)
		}
		checkAnswers(t, "checkpoint "+when, rep.Mismatches)
	}
	verifyFor(5 * time.Second)
	checkpoint("before the kill")
	before := st.cache.Stats()
	if before.Hits == 0 {
		t.Fatalf("no read was answered from memory before the restart: %+v", before)
	}

	srv.Kill()
	verifyFor(2 * time.Second) // the engine is gone: reads go to PostgreSQL
	down := st.cache.Stats()
	if d := down.Postgres["disconnected"] - before.Postgres["disconnected"]; d == 0 {
		t.Errorf("no read went to PostgreSQL as disconnected while the engine was down: %v", down.Postgres)
	}
	srv.Restart()
	// Back: the cache reconnects, resubscribes, and answers from memory.
	deadline := time.Now().Add(30 * time.Second)
	for st.cache.Stats().Hits == down.Hits {
		if time.Now().After(deadline) {
			t.Fatalf("the cache never answered from memory after the restart: %+v\nserve:\n%s", st.cache.Stats(), srv.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	verifyFor(5 * time.Second)
	checkpoint("after the restart")
	ld.Stop()
	checkAnswers(t, "restart", mms)
	after := st.cache.Stats()
	t.Logf("writer %s; cache hits %d -> %d (down) -> %d, postgres %v", writerLine(ld.writerStats()), before.Hits, down.Hits, after.Hits, after.Postgres)
}

// TestDemoMigrate runs each kind of schema change under load: the
// verifier agrees before, and after, with zero mismatches.
func TestDemoMigrate(t *testing.T) {
	for _, kind := range []string{"widen", "new-type", "drop"} {
		t.Run(kind, func(t *testing.T) {
			db := pgtest.NewDB(t)
			ctx, cancel := context.WithTimeout(context.Background(), slow(3*time.Minute))
			defer cancel()
			cfg := scenarioConfig(t, db.DSN, db.Name)
			cfg.Kind, cfg.Load = kind, 3*time.Second
			st, logs := openTestStack(t, ctx, cfg)
			res, err := (&Main{Stdout: logs, Stderr: logs}).runMigration(ctx, st, cfg)
			if err != nil {
				t.Fatalf("%v\n%s", err, logs)
			}
			checkAnswers(t, kind, res.Mismatches)
			if res.Checkpoints != 2 {
				t.Errorf("%d exact checkpoints, want one before the change and one after", res.Checkpoints)
			}
			for name, how := range res.GoneRoutes {
				if !strings.HasPrefix(how, "failed like PostgreSQL") {
					t.Errorf("%s after the drop: %s, want it to fail as PostgreSQL does", name, how)
				}
			}
			t.Logf("%d passes before, %d after; served from memory before %v, after %v; routes after %v; gone %v", res.Before, res.After,
				pick(res.WatchBefore, migrations[kind].watch), pick(res.WatchAfter, migrations[kind].watch), res.RoutesAfter, res.GoneRoutes)
		})
	}
}

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestDashboardGolden pins what a person sees: the dashboard, the plain
// line, the final summary and a mismatch with both answers, for a fixed
// snapshot.
func TestDashboardGolden(t *testing.T) {
	sn := &snapshot{
		Uptime: 72 * time.Second, Readers: 16, Reads: 138402, ReadErrs: 0, WritesPS: 49, ReadsPS: 1986, CachePS: 1490,
		Writer: ticketdesk.WriterStats{Committed: 3412, RolledBack: 142},
		Cache:  readcache.Stats{Hits: 131720, Misses: 1123, Postgres: map[string]int64{"refused": 35000, "lag": 12, "route": 0}, Entries: 734, Subscriptions: 734, Connected: 2},
		PGPS:   map[string]float64{"refused": 490, "lag": 4, "timeout": 2},
		HitNow: 0.75, HitTotal: 0.7913, EngineLag: 42,
		C2C:    latencySummary{N: 200, Total: 341, P50: 610 * time.Microsecond, P99: 3100 * time.Microsecond},
		Passes: 70, Compared: 1680, Retried: 12,
		Checkpoints: 7, CPCompared: 196, CPLSN: "0/3A4F1C8", CPWait: 412 * time.Millisecond, CPMost: 870 * time.Millisecond,
	}
	var b strings.Builder
	sn.Render(&b, "freshet demo: ticket desk at http://127.0.0.1:41735   engine ws://127.0.0.1:35261/s2s/v1")
	b.WriteString(sn.Line() + "\n")
	b.WriteString("final: " + sn.Summary() + "\n")
	b.WriteString(formatMismatch(ticketdesk.Mismatch{Lookup: "org_page", Args: []any{3, 20}, Kind: "answer",
		Cached: []map[string]any{{"id": 7, "status": "open"}, {"id": 9, "status": "open"}},
		Direct: []map[string]any{{"id": 7, "status": "open"}, {"id": 9, "status": "closed"}},
		Detail: "the cached answer differed from PostgreSQL's for 3s"}) + "\n")
	golden := filepath.Join("testdata", "demo_dashboard.golden")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("dashboard changed (go test -run TestDashboardGolden -update to accept):\n got:\n%s\nwant:\n%s", got, want)
	}
}
