package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/ticketdesk"
	"github.com/freshetdb/freshet/wire"
)

// demoClusterReplicas is how many `freshet serve --source nats://...`
// replicas `freshet demo cluster` starts.
const demoClusterReplicas = 3

// demoClusterSlot is the relay's slot and publication.
const demoClusterSlot = "freshet_demo_cluster"

// demoCluster implements `freshet demo cluster` (make demo-cluster): the
// whole demo with the engine scaled out (docs/scale-out.md). It starts
// PostgreSQL (unless --dsn), Debian's nats-server with JetStream, one
// `freshet relay` and three `freshet serve --source nats://...` replicas,
// each its own process, then runs the ticket desk on read caches that
// route between the replicas. Ctrl-C stops everything it started.
func (m *Main) demoCluster(ctx context.Context, cfg *demoConfig) error {
	natsBin, err := exec.LookPath("nats-server")
	if err != nil {
		return errors.New("demo cluster: nats-server is not installed: run `apt-get install nats-server` (make demo-cluster does)")
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo cluster: find this program: %w", err)
	}
	dir, err := os.MkdirTemp("", "freshet-demo-cluster-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if cfg.DSN == "" {
		m.say("starting a throwaway PostgreSQL...")
		c, err := pgtest.Start(pgtest.Options{})
		if err != nil {
			return fmt.Errorf("start a throwaway PostgreSQL: %w", err)
		}
		defer func() {
			m.say("stopping PostgreSQL and removing %s", c.Dir)
			c.Stop()
		}()
		cfg.DSN = c.DSN("postgres")
	} else {
		defer dropSlot(m.Stderr, cfg.DSN, demoClusterSlot, slog.Default())
	}
	if _, db, err := openDirect(cfg.DSN); err != nil {
		return err
	} else {
		seeded, err := ensureSeeded(ctx, db, cfg.Scale)
		db.Close()
		if err != nil {
			return quiet(ctx, err)
		}
		if seeded {
			m.say("created the ticket desk and seeded it (scale %d)", cfg.Scale)
		}
	}

	var procs demoProcs
	defer procs.stop()
	busAddr, err := demoFreeAddr()
	if err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(busAddr)
	if err := procs.start(dir, "nats-server", nil, natsBin, "-js", "-sd", filepath.Join(dir, "jetstream"), "-a", host, "-p", port); err != nil {
		return err
	}
	busURL := "nats://" + busAddr
	if err := demoWait(ctx, 30*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", busAddr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}); err != nil {
		return fmt.Errorf("nats-server did not start (log: %s): %w", filepath.Join(dir, "nats-server.log"), err)
	}
	m.say("nats-server (JetStream) at %s", busURL)
	if err := procs.start(dir, "relay", nil, self, "relay", "--dsn", cfg.DSN, "--bus", busURL, "--slot", demoClusterSlot,
		"--publication", demoClusterSlot, "--heartbeat", "100ms", "--log-level", "warn"); err != nil {
		return err
	}
	tok := make([]byte, 16)
	rand.Read(tok)
	cfg.Token = hex.EncodeToString(tok)
	var urls []string
	for i := range demoClusterReplicas {
		addr, err := demoFreeAddr()
		if err != nil {
			return err
		}
		name := fmt.Sprintf("replica-%c", 'a'+i)
		if err := procs.start(dir, name, []string{"FRESHET_S2S_TOKEN=" + cfg.Token, "GOMAXPROCS=1"}, self, "serve", "--dsn", cfg.DSN,
			"--source", busURL, "--slot", demoClusterSlot, "--publication", demoClusterSlot, "--listen", addr, "--row-limit", strconv.Itoa(ticketdesk.RowLimit), "--lag-interval", "200ms",
			"--log-level", "warn"); err != nil {
			return err
		}
		if err := demoWait(ctx, time.Minute, func() bool {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}); err != nil {
			return fmt.Errorf("%s did not get ready (log: %s): %w", name, filepath.Join(dir, name+".log"), err)
		}
		urls = append(urls, "ws://"+addr+wire.Path)
		m.say("%s at %s", name, urls[len(urls)-1])
	}
	m.say("logs in %s (removed on exit)", dir)
	cfg.FreshetURL = strings.Join(urls, ",")
	return m.demoRun(ctx, cfg)
}

// demoProcs are the processes the cluster demo started.
type demoProcs struct {
	mu    sync.Mutex
	cmds  []*exec.Cmd
	names []string
}

func (p *demoProcs) start(dir, name string, env []string, bin string, args ...string) error {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The children die with the demo, however it ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	logf.Close()
	p.mu.Lock()
	p.cmds, p.names = append(p.cmds, cmd), append(p.names, name)
	p.mu.Unlock()
	return nil
}

// stop ends the processes in the reverse order of their start: SIGTERM,
// then SIGKILL after 5 s.
func (p *demoProcs) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.cmds) - 1; i >= 0; i-- {
		cmd := p.cmds[i]
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
	p.cmds, p.names = nil, nil
}

func demoFreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// demoWait polls ok every 50 ms until it holds, ctx ends or wait passes.
func demoWait(ctx context.Context, wait time.Duration, ok func() bool) error {
	deadline := time.Now().Add(wait)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v", wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
