// Package servetest runs a real `freshet serve` for tests anywhere in the
// module (the read cache's, the ticket desk's, the demo's): cmd/freshet is
// built once per test process and started against a test database on a
// free port, with fast heartbeats and lag frames, and stopped when the
// test ends.
package servetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds cmd/freshet once per test process and returns its path,
// os.TempDir()/freshet-test-bin/freshet-<hash of the binary>. Each build
// lands under a unique name and is renamed into place, so packages testing
// at once never see a half-written binary, and test processes building
// different sources (two worktrees, or a test that changed the code) never
// run each other's binary. Binaries unused for two hours are removed.
func Binary() (string, error) {
	buildOnce.Do(func() {
		dir := filepath.Join(os.TempDir(), "freshet-test-bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = fmt.Errorf("build cmd/freshet: %w", err)
			return
		}
		f, err := os.CreateTemp(dir, "build-*")
		if err != nil {
			buildErr = fmt.Errorf("build cmd/freshet: %w", err)
			return
		}
		f.Close()
		partial := f.Name()
		if out, err := exec.Command("go", "build", "-o", partial, "github.com/freshetdb/freshet/cmd/freshet").CombinedOutput(); err != nil {
			os.Remove(partial)
			buildErr = fmt.Errorf("go build cmd/freshet: %v\n%s", err, out)
			return
		}
		sum, err := fileHash(partial)
		if err != nil {
			os.Remove(partial)
			buildErr = fmt.Errorf("build cmd/freshet: %w", err)
			return
		}
		binPath = filepath.Join(dir, "freshet-"+sum)
		if err := os.Rename(partial, binPath); err != nil {
			os.Remove(partial)
			buildErr = fmt.Errorf("build cmd/freshet: %w", err)
			return
		}
		now := time.Now()
		os.Chtimes(binPath, now, now) // in use: not swept for two hours
		sweep(dir, binPath, now.Add(-2*time.Hour))
	})
	return binPath, buildErr
}

// fileHash is the first 16 hex digits of a file's SHA-256.
func fileHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// sweep removes the binaries in dir last built or used before cutoff,
// except keep.
func sweep(dir, keep string, cutoff time.Time) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if p == keep || !strings.HasPrefix(e.Name(), "freshet") {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			os.Remove(p)
		}
	}
}

// Options says what to serve.
type Options struct {
	// DSN is the database to follow.
	DSN string
	// Slot names the replication slot and the publication (a test
	// database's name makes a unique one).
	Slot string
	// Args are more flags for `freshet serve`; Env more environment
	// variables (KEY=value). Unless they set a token (--token or
	// FRESHET_S2S_TOKEN), the server runs with --insecure: it listens on
	// loopback only.
	Args []string
	Env  []string
	// Binary is the freshet binary to run; empty: cmd/freshet built from
	// this module (Binary()). A benchmark sets it to alternate an old
	// build with the new one.
	Binary string
}

var notSlot = regexp.MustCompile(`[^a-z0-9_]`)

// SlotFor returns a replication slot name for a test database: prefix and
// the database's name in lower case, other characters as underscores, at
// most 60 bytes.
func SlotFor(prefix, dbName string) string {
	slot := prefix + notSlot.ReplaceAllString(strings.ToLower(dbName), "_")
	return slot[:min(len(slot), 60)]
}

// Server is a running `freshet serve`.
type Server struct {
	DSN  string
	Addr string // host:port of the HTTP server
	URL  string // its s2s endpoint, ws://host:port/s2s/v1
	t    testing.TB
	bin  string
	args []string
	env  []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	out  *output
}

// output is what the process prints: written by exec's copying goroutine
// while a test may read it.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// Start starts `freshet serve` as opts say, heartbeats and lag frames
// every 100 ms, and waits until /readyz answers 200. The server is
// stopped when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Binary == "" {
		if _, err := Binary(); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := []string{"serve", "--dsn", opts.DSN, "--listen", addr, "--slot", opts.Slot, "--publication", opts.Slot,
		"--heartbeat", "100ms", "--lag-interval", "100ms", "--shutdown-timeout", "2s"}
	if !hasToken(opts) {
		args = append(args, "--insecure")
	}
	s := &Server{DSN: opts.DSN, Addr: addr, URL: "ws://" + addr + "/s2s/v1", t: t, bin: opts.Binary,
		args: append(args, opts.Args...), env: append(os.Environ(), opts.Env...)}
	s.launch()
	t.Cleanup(s.Stop)
	return s
}

// hasToken reports whether opts give the server a token.
func hasToken(opts Options) bool {
	for _, a := range opts.Args {
		if a == "--token" || strings.HasPrefix(a, "--token=") {
			return true
		}
	}
	for _, kv := range opts.Env {
		if k, v, _ := strings.Cut(kv, "="); k == "FRESHET_S2S_TOKEN" && v != "" {
			return true
		}
	}
	return os.Getenv("FRESHET_S2S_TOKEN") != ""
}

// launch starts the process and waits for it to be ready.
func (s *Server) launch() {
	s.t.Helper()
	bin := s.bin
	if bin == "" {
		bin, _ = Binary()
	}
	cmd := exec.Command(bin, s.args...)
	out := &output{}
	cmd.Env, cmd.Stdout, cmd.Stderr = s.env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.mu.Lock()
	s.out = out
	err := cmd.Start()
	if err == nil {
		s.cmd = cmd
	}
	s.mu.Unlock()
	if err != nil {
		s.t.Fatalf("start freshet serve: %v", err)
	}
	Eventually(s.t, 60*time.Second, func() string {
		resp, err := http.Get("http://" + s.Addr + "/readyz")
		if err != nil {
			return "freshet serve is not ready: " + err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("freshet serve is not ready (%d); it printed:\n%s", resp.StatusCode, s.Log())
		}
		return ""
	})
}

// Pid is the server process's id (0 when it is not running), for a
// benchmark that reads the server's CPU time from /proc.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Log returns what the server printed since it was last started.
func (s *Server) Log() string {
	s.mu.Lock()
	out := s.out
	s.mu.Unlock()
	return out.String()
}

// take returns the running process and forgets it.
func (s *Server) take() *exec.Cmd {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := s.cmd
	s.cmd = nil
	return cmd
}

// Kill stops the server with SIGKILL and waits for it to exit.
func (s *Server) Kill() {
	if cmd := s.take(); cmd != nil {
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// Stop stops the server with SIGTERM (it closes every socket with 1001),
// or SIGKILL if it has not exited 5 s later.
func (s *Server) Stop() {
	cmd := s.take()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-exited
	}
}

// Restart kills the server and starts it again on the same address and
// slot.
func (s *Server) Restart() { s.Kill(); s.launch() }

// RestartGracefully stops the server with SIGTERM and starts it again.
func (s *Server) RestartGracefully() { s.Stop(); s.launch() }

// Freeze suspends the server (SIGSTOP); Thaw resumes it (SIGCONT).
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server.
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Signal(sig)
	}
}

// Eventually calls cond every 20 ms until it returns "", and fails the
// test with cond's last message if wait passes first.
func Eventually(t testing.TB, wait time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", wait, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Ctx returns a context for one test step: a minute, then cancelled.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
