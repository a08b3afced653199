package shape_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/internal/servetest"
)

var npmOnce sync.Once
var npmErr error

// npmCI installs the Node tests' pinned dependencies (package-lock.json)
// once per test process.
func npmCI(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("nodetest")
	if err != nil {
		t.Fatal(err)
	}
	npmOnce.Do(func() {
		if _, err := exec.LookPath("npm"); err != nil {
			npmErr = err
			return
		}
		// node --test's --test-concurrency and --test-force-exit, which
		// TestElectricClient passes, are in Node.js 20.14 and later.
		ver, err := exec.Command("node", "--version").Output()
		if err != nil {
			npmErr = err
			return
		}
		v := strings.TrimSpace(string(ver))
		var major, minor int
		if _, err := fmt.Sscanf(v, "v%d.%d", &major, &minor); err != nil || major < 20 || (major == 20 && minor < 14) {
			npmErr = errorf("Node.js %s is too old: the Node tests need 20.14 or later (make node says how to get it)", v)
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			npmErr = errorf("npm ci in %s: %v\n%s", dir, err, out)
		}
	})
	if npmErr != nil {
		t.Fatalf("the Node tests need Node.js and npm (apt-get install nodejs npm): %v", npmErr)
	}
	return dir
}

type strErr string

func (e strErr) Error() string { return string(e) }

func errorf(format string, a ...any) error { return strErr(sprintf(format, a...)) }

// TestElectricClient runs the Node tests (shape/nodetest/test/*.test.mjs):
// the real @electric-sql/client, pinned in package-lock.json, against a
// real `freshet serve` and PostgreSQL. The tests reach a control endpoint
// here to SIGKILL and restart the server mid-stream.
func TestElectricClient(t *testing.T) {
	dir := npmCI(t)
	db := pgtest.NewDB(t)
	data := t.TempDir()
	srv := servetest.Start(t, servetest.Options{DSN: db.DSN, Slot: servetest.SlotFor("shn_", db.Name),
		Args: []string{"--shape-data-dir", data, "--shape-chunk-bytes", "10000",
			"--shape-allow-deletion", "--shape-long-poll", "20s", "--shape-retention", "1m",
			"--shape-max-age", "1", "--shape-stale-age", "3"}}) // a retention of 1m needs responses cached for less (shape.Config.CacheLife)
	// Electric's root: GET / is 200 with an empty body, other unknown
	// paths 404.
	for path, want := range map[string]int{"/": 200, "/nope": 404} {
		res, err := http.Get("http://" + srv.Addr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != want || (want == 200 && len(b) != 0) {
			t.Errorf("GET %s: %d %q, want %d", path, res.StatusCode, b, want)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ctl := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/kill-restart":
			srv.Restart()
		case "/restart":
			srv.RestartGracefully()
		default:
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("ok"))
	})}
	go ctl.Serve(ln)
	t.Cleanup(func() { ctl.Close() })
	args := []string{"--test", "--test-concurrency=1", "--test-reporter=spec", "--test-force-exit"}
	if f := os.Getenv("SHAPE_NODE_TESTS"); f != "" {
		args = append(args, strings.Fields(f)...)
	} else {
		args = append(args, "test/")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "FRESHET_URL=http://"+srv.Addr, "DATABASE_URL="+db.DSN, "CONTROL_URL=http://"+ln.Addr().String())
	var buf strings.Builder
	var w io.Writer = &buf
	if testing.Verbose() {
		w = io.MultiWriter(&buf, os.Stderr)
	}
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Run()
	out := buf.String()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("the Node tests failed (%v); the server printed:\n%s", err, tailOf(srv.Log(), 4000))
	}
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
