package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
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
				c.Settle != 3*time.Second || c.Duration != 0 || c.Plain || c.Seed == 0 {
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
func scenarioConfig(t *testing.T, dsn, slot string) *demoConfig {
	t.Helper()
	cfg, err := (&Main{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}).parseDemoFlags("", []string{
		"--dsn", dsn, "--slot", slot, "--readers", "16", "--rate", "40", "--seed", "42"})
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
// never equalled PostgreSQL's, or a lookup that must stay empty and did
// not. Misrouted reads are listed apart (the answers agreed).
func checkAnswers(t *testing.T, what string, mms []ticketdesk.Mismatch) {
	t.Helper()
	for _, mm := range mms {
		if mm.Kind == "route" && knownRefused[mm.Lookup] {
			t.Logf("%s: %s refused by the engine (known gap, /work/notes/demo-gaps.md): %s", what, mm.Lookup, mm.Detail)
			continue
		}
		t.Errorf("%s: %s", what, formatMismatch(mm))
	}
}

// knownRefused are lookups the ticket desk expects cached that the engine
// refuses today: a LEFT JOIN whose right side has no constraint of its
// own is read whole, over the row limit.
var knownRefused = map[string]bool{"ticket_comments": true, "empty_org_left_join": true}

// TestDemoScenario runs sixteen readers under the whole writer mix for a
// fixed time with the verifier passing again and again: zero mismatches,
// and most reads answered from memory.
func TestDemoScenario(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := scenarioConfig(t, db.DSN, db.Name)
	st, logs := openTestStack(t, ctx, cfg)
	ld, err := st.startLoad(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Stop()
	r := rand.New(rand.NewSource(1))
	var mms []ticketdesk.Mismatch
	passes := 0
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); passes++ {
		rep, err := ld.VerifyOnce(ctx, r, cfg.Settle)
		if err != nil {
			t.Fatalf("verify: %v\n%s", err, logs)
		}
		mms = append(mms, rep.Mismatches...)
	}
	ld.Stop()
	checkAnswers(t, "scenario", mms)
	ws, cs := ld.writerStats(), st.cache.Stats()
	var reads int64
	for i := range ld.reads {
		reads += ld.reads[i].n.Load()
	}
	t.Logf("%d verifier passes; writer %s; %d reads, cache %d hits %d misses, postgres %v", passes, writerLine(ws), reads, cs.Hits, cs.Misses, cs.Postgres)
	if passes < 2 || ws.Committed == 0 || cs.Hits == 0 {
		t.Errorf("the scenario did too little to prove anything: %d passes, %d commits, %d cache hits", passes, ws.Committed, cs.Hits)
	}
	for _, k := range ticketdesk.Kinds {
		if s := ws.Kinds[k]; s.Committed+s.RolledBack == 0 {
			t.Logf("writer: no %s change was made in this run", k)
		}
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
	bin := filepath.Join(t.TempDir(), "freshet")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	db := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
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
	addr := freePort(t)
	var serveLog syncBuffer
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "serve", "--dsn", db.DSN, "--listen", addr, "--slot", db.Name, "--publication", db.Name,
			"--heartbeat", "100ms", "--lag-interval", "200ms", "--row-limit", fmt.Sprint(ticketdesk.RowLimit), "--log-level", "warn")
		cmd.Env = append(cmd.Environ(), "FRESHET_S2S_TOKEN=restart-token")
		cmd.Stderr = &serveLog
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return cmd
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("freshet serve never became ready:\n%s", serveLog.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	srv := start()
	defer func() {
		srv.Process.Kill()
		srv.Wait()
	}()
	cfg.FreshetURL, cfg.Token = "ws://"+addr+"/s2s/v1", "restart-token"
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
				t.Fatalf("verify: %v\n%s\nserve:\n%s", err, logs, serveLog.String())
			}
			mms = append(mms, rep.Mismatches...)
		}
	}
	verifyFor(5 * time.Second)
	before := st.cache.Stats()
	if before.Hits == 0 {
		t.Fatalf("no read was answered from memory before the restart: %+v", before)
	}

	if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	srv.Wait()
	verifyFor(2 * time.Second) // the engine is gone: reads go to PostgreSQL
	down := st.cache.Stats()
	if d := down.Postgres["disconnected"] - before.Postgres["disconnected"]; d == 0 {
		t.Errorf("no read went to PostgreSQL as disconnected while the engine was down: %v", down.Postgres)
	}
	srv = start()
	// Back: the cache reconnects, resubscribes, and answers from memory.
	deadline := time.Now().Add(30 * time.Second)
	for st.cache.Stats().Hits == down.Hits {
		if time.Now().After(deadline) {
			t.Fatalf("the cache never answered from memory after the restart: %+v\nserve:\n%s", st.cache.Stats(), serveLog.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	verifyFor(5 * time.Second)
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
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cfg := scenarioConfig(t, db.DSN, db.Name)
			cfg.Kind, cfg.Load = kind, 3*time.Second
			st, logs := openTestStack(t, ctx, cfg)
			res, err := (&Main{Stdout: logs, Stderr: logs}).runMigration(ctx, st, cfg)
			if err != nil {
				t.Fatalf("%v\n%s", err, logs)
			}
			checkAnswers(t, kind, res.Mismatches)
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
