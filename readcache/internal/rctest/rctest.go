package rctest

import (
	"bytes"
	"context"
	"fmt"
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

// Binary builds cmd/freshet once per test process and returns its path:
// always the same file (os.TempDir()/freshet-readcache-bin/freshet),
// replaced by rename, so runs leave one binary behind, not one each.
func Binary() (string, error) {
	buildOnce.Do(func() {
		dir := filepath.Join(os.TempDir(), "freshet-readcache-bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		tmp, err := os.CreateTemp(dir, "build-*")
		if err != nil {
			buildErr = err
			return
		}
		tmp.Close()
		out, err := exec.Command("go", "build", "-o", tmp.Name(), "github.com/freshetdb/freshet/cmd/freshet").CombinedOutput()
		if err != nil {
			os.Remove(tmp.Name())
			buildErr = fmt.Errorf("go build cmd/freshet: %v\n%s", err, out)
			return
		}
		binPath = filepath.Join(dir, "freshet")
		if err := os.Rename(tmp.Name(), binPath); err != nil {
			os.Remove(tmp.Name())
			buildErr = err
		}
	})
	return binPath, buildErr
}

// Server is a running `freshet serve`.
type Server struct {
	t    testing.TB
	DSN  string
	Addr string // host:port
	URL  string // ws://host:port/s2s/v1
	args []string
	env  []string
	cmd  *exec.Cmd
	log  *bytes.Buffer
	mu   sync.Mutex
}

var slotChars = regexp.MustCompile(`[^a-z0-9_]`)

// Start runs freshet serve following dsn (database name) with fast
// heartbeats and lag frames; env adds environment variables.
func Start(t testing.TB, dsn, dbName string, env ...string) *Server {
	t.Helper()
	if _, err := Binary(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	slot := "rc_" + slotChars.ReplaceAllString(strings.ToLower(dbName), "_")
	if len(slot) > 60 {
		slot = slot[:60]
	}
	s := &Server{t: t, DSN: dsn, Addr: addr, URL: "ws://" + addr + "/s2s/v1",
		args: []string{"serve", "--dsn", dsn, "--listen", addr, "--slot", slot, "--publication", slot,
			"--heartbeat", "100ms", "--lag-interval", "100ms", "--shutdown-timeout", "2s"},
		env: append(os.Environ(), env...)}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	bin, _ := Binary()
	s.mu.Lock()
	s.log = &bytes.Buffer{}
	cmd := exec.Command(bin, s.args...)
	cmd.Env = s.env
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		s.t.Fatal(err)
	}
	s.cmd = cmd
	s.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + s.Addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("freshet serve did not become ready: %s", s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Log returns what the server printed.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// Kill kills the server with SIGKILL and waits for it.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// Restart starts the server again on the same address and slot.
func (s *Server) Restart() { s.Kill(); s.start() }

// Stop ends the server (SIGTERM, then SIGKILL).
func (s *Server) Stop() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// Eventually polls cond every 20 ms until it returns "" or wait passes,
// then fails with its last message.
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

// Ctx returns a context for a test step.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Freeze stops the server (SIGSTOP); Thaw resumes it.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server (SIGCONT).
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Signal(sig)
	}
}

// RestartGracefully stops the server with SIGTERM (it closes every socket
// with 1001) and starts it again.
func (s *Server) RestartGracefully() { s.Stop(); s.start() }
