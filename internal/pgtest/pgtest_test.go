package pgtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func TestNewDB(t *testing.T) {
	ctx := context.Background()
	db := NewDB(t)
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var walLevel, tz, name string
	if err := conn.QueryRow(ctx, "SELECT current_setting('wal_level'), current_setting('TimeZone'), current_database()").Scan(&walLevel, &tz, &name); err != nil {
		t.Fatal(err)
	}
	if walLevel != "logical" {
		t.Errorf("wal_level = %q, want logical", walLevel)
	}
	if tz != "UTC" {
		t.Errorf("TimeZone = %q, want UTC", tz)
	}
	if name != db.Name {
		t.Errorf("current_database() = %q, want %q", name, db.Name)
	}
}

func TestDatabasesAreSeparate(t *testing.T) {
	a, b := NewDB(t), NewDB(t)
	if a.Name == b.Name || a.DSN == b.DSN {
		t.Fatalf("two NewDB calls gave the same database %q", a.Name)
	}
}

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u@h:5/postgres?sslmode=disable", "postgres://u@h:5/x?sslmode=disable"},
		{"host=h port=5 dbname=postgres user=u", "host=h port=5 user=u dbname=x"},
	} {
		if got := withDatabase(tc.in, "x"); got != tc.want {
			t.Errorf("withDatabase(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// deadPid returns the pid of a process that has exited.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestSweepSparesReusedPids: a stale cluster directory's postmaster.pid
// may name a pid the kernel has since given to another process; the sweep
// removes the directory and kills only a postgres serving it. Killing the
// named pid unchecked once SIGKILLed a test binary running beside the sweep
// (CI: cmd/freshet "signal: killed" as ticketdesk's tests started).
func TestSweepSparesReusedPids(t *testing.T) {
	bystander := exec.Command("sleep", "60")
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { bystander.Wait(); close(exited) }()
	defer bystander.Process.Kill()
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, pid int) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("owner.pid", deadPid(t))
	write("data/postmaster.pid", bystander.Process.Pid)
	sweepStale()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the stale directory is still there (%v)", err)
	}
	// SIGKILL lands when the target is next scheduled, so give a wrong
	// kill time to show.
	select {
	case <-exited:
		t.Fatalf("the sweep killed pid %d, which is not a postgres serving the stale directory", bystander.Process.Pid)
	case <-time.After(2 * time.Second):
	}
}

// TestSweepKillsStalePostmaster: a postmaster whose owner is gone (the
// owner's pid names a dead process) is killed by the next sweep.
func TestSweepKillsStalePostmaster(t *testing.T) {
	c, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := os.WriteFile(filepath.Join(c.Dir, "owner.pid"), []byte(strconv.Itoa(deadPid(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	sweepStale()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stale cluster's postmaster still runs 10 s after the sweep")
	}
}
