package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options tune a cluster started by Start.
type Options struct {
	// Settings are extra postgresql.conf lines (name -> value), applied
	// after the defaults.
	Settings map[string]string
	// Log, when set, receives the server log path once it is known.
	Log func(path string)
}

// Cluster is a running throwaway PostgreSQL server.
type Cluster struct {
	Dir     string // the temporary directory holding data and log
	Port    int
	BinDir  string
	Version int // server major version

	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	cred    *syscall.Credential
	stop    sync.Once
}

// DefaultSettings are the postgresql.conf settings every cluster gets.
var DefaultSettings = map[string]string{
	"wal_level":                 "logical",
	"max_replication_slots":     "64",
	"max_wal_senders":           "64",
	"max_connections":           "300",
	"fsync":                     "off",
	"full_page_writes":          "off",
	"synchronous_commit":        "on",
	"TimeZone":                  "'UTC'",
	"log_timezone":              "'UTC'",
	"listen_addresses":          "'127.0.0.1'",
	"unix_socket_directories":   "''",
	"shared_buffers":            "128MB",
	"logical_decoding_work_mem": "64MB",
	"max_wal_size":              "4GB",
	"wal_sender_timeout":        "60s",
	"log_min_messages":          "warning",
	"logging_collector":         "off",
}

const dirPrefix = "freshet-pgtest-"

// FindBinDir returns the directory holding initdb and postgres.
func FindBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("postgres"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if isFile(filepath.Join(dir, "initdb")) && isFile(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(matches, func(i, j int) bool { return versionOf(matches[i]) > versionOf(matches[j]) })
	for _, dir := range matches {
		if isFile(filepath.Join(dir, "initdb")) && isFile(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", errors.New("PostgreSQL server binaries (initdb, postgres) not found on PATH, via pg_config --bindir, or under /usr/lib/postgresql/*/bin; install them with: apt-get install -y postgresql")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Start initializes and starts a new cluster. Stop it with Stop.
func Start(opts Options) (*Cluster, error) {
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	sweepStale()
	c := &Cluster{BinDir: bin, done: make(chan struct{})}
	c.cred, err = serverCredential()
	if err != nil {
		return nil, err
	}
	c.Dir, err = os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("make cluster directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		c.removeDir()
		return nil, err
	}
	data := filepath.Join(c.Dir, "data")
	if c.cred != nil {
		if err := os.Chown(c.Dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			c.removeDir()
			return nil, fmt.Errorf("give %s to the postgres user: %w", c.Dir, err)
		}
	}
	initdb := c.command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C.UTF-8", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		// Older servers or images without C.UTF-8: fall back to C.
		initdb = c.command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
			"--encoding=UTF8", "--locale=C", "--no-sync")
		if out2, err2 := initdb.CombinedOutput(); err2 != nil {
			c.removeDir()
			return nil, fmt.Errorf("initdb: %v\n%s\n%s", err2, out, out2)
		}
	}
	c.Version = serverVersion(bin)

	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			c.removeDir()
			return nil, err
		}
		if lastErr = c.startServer(data, port, opts); lastErr == nil {
			return c, nil
		}
		c.done = make(chan struct{})
	}
	c.removeDir()
	return nil, lastErr
}

func (c *Cluster) startServer(data string, port int, opts Options) error {
	settings := map[string]string{}
	for k, v := range DefaultSettings {
		settings[k] = v
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	settings["port"] = strconv.Itoa(port)
	var conf bytes.Buffer
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&conf, "%s = %s\n", k, settings[k])
	}
	confPath := filepath.Join(data, "freshet.conf")
	if err := os.WriteFile(confPath, conf.Bytes(), 0o644); err != nil {
		return err
	}
	main := filepath.Join(data, "postgresql.conf")
	b, err := os.ReadFile(main)
	if err != nil {
		return err
	}
	if !bytes.Contains(b, []byte("include 'freshet.conf'")) {
		b = append(b, []byte("\ninclude 'freshet.conf'\n")...)
		if err := os.WriteFile(main, b, 0o644); err != nil {
			return err
		}
	}
	if c.cred != nil {
		_ = os.Chown(confPath, int(c.cred.Uid), int(c.cred.Gid))
	}
	logPath := filepath.Join(c.Dir, "server.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if opts.Log != nil {
		opts.Log(logPath)
	}
	cmd := c.command(filepath.Join(c.BinDir, "postgres"), "-D", data)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	logFile.Close()
	c.cmd = cmd
	c.Port = port
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-c.done:
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres exited at start (%v):\n%s", c.waitErr, tail(log, 2000))
		case <-ctx.Done():
			c.kill()
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres did not accept connections within 60s: %v\n%s", err, tail(log, 2000))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// command builds a command that runs as the server's OS user.
func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if c.cred != nil {
		cmd.SysProcAttr.Credential = c.cred
		cmd.Env = append(os.Environ(), "HOME="+c.Dir)
	}
	cmd.Dir = c.Dir
	return cmd
}

// serverCredential returns the postgres user's credential when running as
// root, and nil otherwise.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, errors.New("running as root, and PostgreSQL refuses to run as root, but there is no 'postgres' OS user to run it as; create one with: useradd --system postgres")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func serverVersion(bin string) int {
	out, err := exec.Command(filepath.Join(bin, "postgres"), "--version").Output()
	if err != nil {
		return 0
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.Atoi(strings.SplitN(f[len(f)-1], ".", 2)[0])
	return v
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// DSN returns a connection string for the named database as the superuser.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// LogPath is the server's log file.
func (c *Cluster) LogPath() string { return filepath.Join(c.Dir, "server.log") }

// Stop shuts the server down (fast shutdown, then SIGKILL after 10s) and
// removes its directory.
func (c *Cluster) Stop() error {
	c.stop.Do(func() {
		if c.cmd != nil && c.cmd.Process != nil {
			_ = c.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-c.done:
			case <-time.After(10 * time.Second):
				c.kill()
			}
		}
		c.removeDir()
	})
	return nil
}

func (c *Cluster) kill() {
	if c.cmd != nil && c.cmd.Process != nil {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
}

func (c *Cluster) removeDir() {
	if c.Dir != "" {
		_ = os.RemoveAll(c.Dir)
	}
}

// sweepStale removes directories left by earlier test processes that died
// without cleaning up (their postmaster died with them through Pdeathsig).
func sweepStale() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range matches {
		b, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			if pm, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
				if p, err := strconv.Atoi(strings.SplitN(string(pm), "\n", 2)[0]); err == nil && servesDir(p, filepath.Join(dir, "data")) {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
			}
			_ = os.RemoveAll(dir)
		}
	}
}

// servesDir reports whether process pid is a postgres server started on
// data directory data. A stale postmaster.pid names a process that is
// normally long gone (Pdeathsig killed it with its owner), and the kernel
// reuses pids (pid_max is 32,768 here): killing the pid unchecked once
// killed an unrelated test binary running beside the sweep.
func servesDir(pid int, data string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-D" && filepath.Clean(args[i+1]) == filepath.Clean(data) {
			return filepath.Base(args[0]) == "postgres"
		}
	}
	return false
}
