package clustertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/freshetdb/freshet/bus"
	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/internal/servetest"
	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/wire"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// proc is a Freshet process the test starts, kills and restarts.
type proc struct {
	t    *testing.T
	name string
	args []string
	env  []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	out  *lockedBuf
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startProc(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, args: args, env: append(os.Environ(), env...)}
	p.start()
	t.Cleanup(p.kill)
	return p
}

func (p *proc) start() {
	p.t.Helper()
	bin, err := servetest.Binary()
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(bin, p.args...)
	out := &lockedBuf{}
	cmd.Env, cmd.Stdout, cmd.Stderr = p.env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	p.mu.Lock()
	p.cmd, p.out = cmd, out
	p.mu.Unlock()
}

// kill sends SIGKILL and waits.
func (p *proc) kill() {
	p.mu.Lock()
	cmd := p.cmd
	p.cmd = nil
	p.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
		cmd.Wait()
	}
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.out == nil {
		return ""
	}
	return p.out.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startBus runs JetStream in the test process on addr's port with its
// store in dir, fsyncing every write.
func startBus(t *testing.T, dir string, port int) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir,
		SyncAlways: true, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("bus did not start")
	}
	return s
}

const nItems, nGroups = 200, 40

// keys are the reads every cache holds: a point lookup per item and a
// list per group.
type readKey struct {
	sql   string
	param string
	key   string
}

func readKeys() []readKey {
	var out []readKey
	add := func(sql string, v int) {
		s := strconv.Itoa(v)
		out = append(out, readKey{sql: sql, param: s, key: readcache.Key(sql, []wire.Param{{OID: 23, Value: &s}})})
	}
	for i := 1; i <= nItems; i++ {
		add("SELECT id, grp, v FROM items WHERE id = $1", i)
	}
	for g := 0; g < nGroups; g++ {
		add("SELECT id, v FROM items WHERE grp = $1 ORDER BY id", g)
	}
	return out
}

func (k readKey) read(ctx context.Context, c *readcache.Cache) (*readcache.Result, readcache.Reason) {
	v := k.param
	return c.Read(ctx, k.sql, []wire.Param{{OID: 23, Value: &v}})
}

// TestCluster is the scenario of docs/scale-out.md, "Proof": three
// replicas behind one relay and three read caches holding 240 keys each
// under a steady writer; a replica is SIGKILLed, then the relay, then the
// bus restarts from its store, then a fourth replica starts.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: PostgreSQL, a bus, a relay and four replicas")
	}
	db := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE TABLE items (id int PRIMARY KEY, grp int NOT NULL, v bigint NOT NULL);
		CREATE TABLE marks (id int PRIMARY KEY);
		INSERT INTO items SELECT i, i % 40, 0 FROM generate_series(1, 200) i`); err != nil {
		t.Fatal(err)
	}
	var sysID, dbName string
	if err := conn.QueryRow(ctx, readcache.IdentityQuery).Scan(&sysID, &dbName); err != nil {
		t.Fatal(err)
	}
	slot := servetest.SlotFor("r_", db.Name)
	dir := t.TempDir()

	busAddr := freeAddr(t)
	_, portS, _ := net.SplitHostPort(busAddr)
	busPort, _ := strconv.Atoi(portS)
	bs := startBus(t, filepath.Join(dir, "bus"), busPort)
	defer func() { bs.Shutdown() }()
	busURL := "nats://" + busAddr

	// The control tail on a slot of its own, and the relay: both slots
	// exist before the writer starts.
	ctlFile := filepath.Join(dir, "ctl.jsonl")
	startProc(t, "control tail", nil, "tail", "--dsn", db.DSN, "--slot", "ctl_"+slot[2:], "--publication", "ctl_"+slot[2:],
		"--create", "--output", ctlFile, "--heartbeat", "0")
	relayHTTP := freeAddr(t)
	relayArgs := []string{"relay", "--dsn", db.DSN, "--bus", busURL, "--slot", slot, "--publication", slot,
		"--heartbeat", "100ms", "--stats-interval", "0", "--listen", relayHTTP}
	relay := startProc(t, "relay", nil, relayArgs...)
	servetest.Eventually(t, time.Minute, func() string {
		var n int
		conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE active AND slot_name IN ($1, $2)`, slot, "ctl_"+slot[2:]).Scan(&n)
		if n != 2 {
			return fmt.Sprintf("slots not both active (%d); relay printed:\n%s", n, relay.log())
		}
		return ""
	})

	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)}
	var urls []string
	for _, a := range addrs {
		urls = append(urls, "ws://"+a+"/s2s/v1")
	}
	replica := func(i int) *proc {
		p := startProc(t, "replica "+string(rune('A'+i)), []string{"GOMAXPROCS=1"}, "serve", "--dsn", db.DSN, "--source", busURL,
			"--slot", slot, "--publication", slot, "--listen", addrs[i], "--lag-interval", "100ms", "--shutdown-timeout", "2s", "--insecure", "--bus-replay", "2s")
		servetest.Eventually(t, time.Minute, func() string {
			resp, err := http.Get("http://" + addrs[i] + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return ""
				}
			}
			return fmt.Sprintf("%s not ready; it printed:\n%s\nthe relay printed:\n%s", p.name, p.log(), relay.log())
		})
		return p
	}
	reps := []*proc{replica(0), replica(1), replica(2)}

	// The writer.
	var writes atomic.Int64
	// The writer stops between transactions (a context cancelled in the
	// middle of one could leave its COMMIT to land after the reference
	// read at the end).
	var stopping atomic.Bool
	wctx := ctx
	stopWriter := func() { stopping.Store(true) }
	writerDone := make(chan error, 1)
	wconn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer wconn.Close(context.Background())
	go func() {
		for !stopping.Load() {
			b := &pgx.Batch{}
			b.Queue("BEGIN")
			n := 1 + rand.IntN(3)
			if rand.IntN(50) == 0 {
				n = 40
			}
			for range n {
				b.Queue(`UPDATE items SET v = v + 1, grp = $2 WHERE id = $1`, 1+rand.IntN(nItems), rand.IntN(nGroups))
			}
			b.Queue("COMMIT")
			if err := wconn.SendBatch(wctx, b).Close(); err != nil {
				writerDone <- err
				return
			}
			writes.Add(1)
			time.Sleep(time.Duration(4+rand.IntN(8)) * time.Millisecond)
		}
		writerDone <- nil
	}()

	// Three read caches (three backends), each reading every key in a
	// loop; every result's position must never go back for a key.
	keys := readKeys()
	const nCaches = 3
	var caches []*readcache.Cache
	for range nCaches {
		cfg := readcache.DefaultConfig()
		cfg.URL = strings.Join(urls, ",")
		cfg.DeadAfter = time.Second
		cfg.MaxLag = 3 * time.Second
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) // D is down until step 4
		c, err := readcache.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Verify(readcache.Identity{SystemIdentifier: sysID, Database: dbName}, nil)
		caches = append(caches, c)
	}
	var backwards atomic.Int64
	var firstBack atomic.Pointer[string]
	rctx, stopReaders := context.WithCancel(ctx)
	var rwg sync.WaitGroup
	for ci, c := range caches {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			last := make([]change.LSN, len(keys))
			for rctx.Err() == nil {
				for ki, k := range keys {
					res, why := k.read(rctx, c)
					if why != readcache.ReasonNone {
						continue
					}
					l, _ := change.ParseLSN(res.LSN)
					if l < last[ki] {
						if backwards.Add(1) == 1 {
							msg := fmt.Sprintf("cache %d key %q went from %v back to %v", ci, k.key, last[ki], l)
							firstBack.Store(&msg)
						}
					}
					last[ki] = max(last[ki], l)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	allHit := func(what string) {
		t.Helper()
		servetest.Eventually(t, time.Minute, func() string {
			for ci, c := range caches {
				for _, k := range keys {
					if _, why := k.read(ctx, c); why != readcache.ReasonNone {
						return fmt.Sprintf("%s: cache %d reads %q from PostgreSQL (%v)", what, ci, k.key, why)
					}
				}
			}
			return ""
		})
	}
	assignment := func() [nCaches]map[string]string {
		var a [nCaches]map[string]string
		for ci, c := range caches {
			a[ci] = map[string]string{}
			for _, k := range keys {
				a[ci][k.key] = c.EngineOf(k.key)
			}
		}
		return a
	}
	// Identical queries share a view: every cache sends a key to the same
	// engine, and the three engines share the keys.
	allHit("warm up")
	a0 := assignment()
	per := map[string]int{}
	for _, k := range keys {
		for ci := 1; ci < nCaches; ci++ {
			if a0[ci][k.key] != a0[0][k.key] {
				t.Fatalf("caches 0 and %d send %q to %s and %s", ci, k.key, a0[0][k.key], a0[ci][k.key])
			}
		}
		per[a0[0][k.key]]++
	}
	for _, u := range urls[:3] {
		if per[u] == 0 {
			t.Fatalf("engine %s holds no key: %v", u, per)
		}
	}
	t.Logf("keys per engine: %v", per)

	// 1. SIGKILL replica B: only its keys move, and come back as hits.
	reps[1].kill()
	servetest.Eventually(t, time.Minute, func() string {
		for _, c := range caches {
			for _, k := range keys {
				if c.EngineOf(k.key) == urls[1] {
					return "keys still on the dead replica"
				}
			}
		}
		return ""
	})
	allHit("after replica B died")
	a1 := assignment()
	moved := 0
	for ci := range caches {
		for k, was := range a0[ci] {
			if now := a1[ci][k]; now != was {
				if was != urls[1] {
					t.Fatalf("cache %d moved %q from %s (alive) to %s", ci, k, was, now)
				}
				moved++
			}
		}
	}
	if moved != nCaches*per[urls[1]] {
		t.Fatalf("%d keys moved, want B's %d in each of %d caches", moved, per[urls[1]], nCaches)
	}

	// 2. SIGKILL the relay, start it again 2 s later.
	relay.kill()
	time.Sleep(2 * time.Second)
	relay.start()
	allHit("after the relay restarted")

	// 3. Restart the bus from its store.
	bs.Shutdown()
	bs.WaitForShutdown()
	bs = startBus(t, filepath.Join(dir, "bus"), busPort)
	allHit("after the bus restarted")

	// 4. Start replica D: it takes only its share.
	a2 := assignment()
	reps = append(reps, replica(3))
	servetest.Eventually(t, time.Minute, func() string {
		for _, c := range caches {
			for _, k := range keys {
				if c.EngineOf(k.key) == urls[3] {
					return ""
				}
			}
		}
		return "no key on replica D"
	})
	allHit("after replica D started")
	a3 := assignment()
	for ci := range caches {
		for k, was := range a2[ci] {
			if now := a3[ci][k]; now != was && now != urls[3] {
				t.Fatalf("cache %d moved %q from %s to %s, not to the new replica", ci, k, was, now)
			}
		}
	}

	// Quiesce: stop the writer, mark the end, and wait until the control
	// tail and every cache have it.
	stopWriter()
	if err := <-writerDone; err != nil {
		t.Fatalf("writer: %v", err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO marks VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	servetest.Eventually(t, time.Minute, func() string {
		b, _ := os.ReadFile(ctlFile)
		if !bytes.Contains(b, []byte(`"table":"marks"`)) {
			return "the control tail has not written the end mark"
		}
		return ""
	})
	// Every result equals PostgreSQL's, read in one snapshot.
	want := map[string]string{}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		rows, err := tx.Query(ctx, k.sql, k.param)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		for rows.Next() {
			vals, _ := rows.Values()
			fmt.Fprintln(&sb, vals...)
		}
		rows.Close()
		want[k.key] = sb.String()
	}
	tx.Rollback(ctx)
	servetest.Eventually(t, time.Minute, func() string {
		for ci, c := range caches {
			for _, k := range keys {
				res, why := k.read(ctx, c)
				if why != readcache.ReasonNone {
					return fmt.Sprintf("cache %d: %q read from PostgreSQL (%v)", ci, k.key, why)
				}
				var sb strings.Builder
				for _, r := range res.Rows {
					vals := make([]any, len(r))
					for i, v := range r {
						vals[i] = string(v)
					}
					fmt.Fprintln(&sb, vals...)
				}
				if sb.String() != want[k.key] {
					return fmt.Sprintf("cache %d: %q = %q, PostgreSQL says %q", ci, k.key, sb.String(), want[k.key])
				}
			}
		}
		return ""
	})
	stopReaders()
	rwg.Wait()
	if n := backwards.Load(); n > 0 {
		t.Fatalf("%d reads went back in time; the first: %s", n, *firstBack.Load())
	}

	// The stream holds every committed transaction exactly once, in
	// order, on one chain: the control tail's transactions.
	ctl := controlTxns(t, ctlFile)
	onBus := busTxns(t, busURL, sysID, slot)
	if len(ctl) != len(onBus) {
		t.Fatalf("the control tail has %d transactions, the bus %d", len(ctl), len(onBus))
	}
	for i := range ctl {
		if ctl[i] != onBus[i] {
			t.Fatalf("transaction %d: control tail at %v, bus at %v", i, ctl[i], onBus[i])
		}
	}
	if want := int(writes.Load()) + 1; len(onBus) != want {
		t.Fatalf("the bus holds %d transactions, the writer committed %d and the end mark 1", len(onBus), want-1)
	}
	// The relay's counters: the restarted relay's own session, and no new
	// epoch (nothing here lost messages).
	resp, err := http.Get("http://" + relayHTTP + "/stats")
	if err != nil {
		t.Fatalf("relay /stats: %v", err)
	}
	var rs struct {
		Messages  int64 `json:"messages"`
		NewEpochs int64 `json:"new_epochs"`
	}
	json.NewDecoder(resp.Body).Decode(&rs)
	resp.Body.Close()
	if rs.Messages == 0 || rs.NewEpochs != 0 {
		t.Fatalf("relay /stats: %+v, want messages and no new epoch", rs)
	}
	t.Logf("%d writer transactions, %d on the bus and the control tail; %d keys moved in cache 0", writes.Load(), len(onBus), caches[0].Moved())
}

// controlTxns returns the commit LSNs of the transactions with row
// changes the control tail wrote.
func controlTxns(t *testing.T, path string) []change.LSN {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []change.LSN
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var line struct {
			LSN     string `json:"lsn"`
			Changes []struct {
				Op string `json:"op"`
			} `json:"changes"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("control tail line: %v", err)
		}
		for _, c := range line.Changes {
			if c.Op == "insert" || c.Op == "update" || c.Op == "delete" {
				l, _ := change.ParseLSN(line.LSN)
				out = append(out, l)
				break
			}
		}
	}
	return out
}

// busTxns walks the whole stream, checks its chain, and returns the
// commit LSNs of its transactions with row changes.
func busTxns(t *testing.T, url, sysID, slot string) []change.LSN {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	st, err := js.Stream(ctx, bus.StreamName(sysID, slot))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := st.Info(ctx)
	var out []change.LSN
	var prev bus.Pos
	var epoch uint64
	rows := false
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		raw, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		m, err := bus.DecodeMessage(raw.Data, nil)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		if seq == info.State.FirstSeq {
			epoch = m.Epoch
		} else if m.Epoch != epoch {
			t.Fatalf("message %d starts a new epoch: nothing here loses messages", seq)
		} else if m.Prev != prev {
			t.Fatalf("message %d follows %v, the message before it is at %v", seq, m.Prev, prev)
		}
		if !prev.Less(m.Pos()) && seq != info.State.FirstSeq {
			t.Fatalf("message %d at %v does not come after %v", seq, m.Pos(), prev)
		}
		prev = m.Pos()
		for _, e := range m.Events {
			if e.Txn == nil {
				continue
			}
			if e.Txn.Fragment == 0 {
				rows = false
			}
			for _, c := range e.Txn.Changes {
				if c.Op == change.OpInsert || c.Op == change.OpUpdate || c.Op == change.OpDelete {
					rows = true
				}
			}
			if e.Txn.Last && rows {
				out = append(out, e.Txn.CommitLSN)
			}
		}
	}
	return out
}

// TestShapeOrigin: replicas serving the shape API route each shape to one
// origin (--shape-peers); when the origin dies, the shape's next choice
// answers the old handle 409 with its own, and serves it.
func TestShapeOrigin(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: PostgreSQL, a bus, a relay and three replicas")
	}
	db := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE TABLE items (id int PRIMARY KEY, grp int NOT NULL, v bigint NOT NULL);
		INSERT INTO items SELECT i, i % 40, 0 FROM generate_series(1, 50) i`); err != nil {
		t.Fatal(err)
	}
	slot := servetest.SlotFor("o_", db.Name)
	dir := t.TempDir()
	busAddr := freeAddr(t)
	_, portS, _ := net.SplitHostPort(busAddr)
	busPort, _ := strconv.Atoi(portS)
	bs := startBus(t, filepath.Join(dir, "bus"), busPort)
	defer bs.Shutdown()
	busURL := "nats://" + busAddr
	relay := startProc(t, "relay", nil, "relay", "--dsn", db.DSN, "--bus", busURL, "--slot", slot, "--publication", slot,
		"--heartbeat", "100ms", "--stats-interval", "0")
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	var peers []string
	for _, a := range addrs {
		peers = append(peers, "http://"+a)
	}
	var reps []*proc
	for i, a := range addrs {
		p := startProc(t, "replica "+string(rune('A'+i)), []string{"GOMAXPROCS=1"}, "serve", "--dsn", db.DSN, "--source", busURL,
			"--slot", slot, "--publication", slot, "--listen", a, "--lag-interval", "100ms", "--shutdown-timeout", "2s", "--insecure",
			"--shape-data-dir", filepath.Join(dir, "shapes", strconv.Itoa(i)),
			"--shape-peers", strings.Join(peers, ","), "--shape-self", peers[i])
		reps = append(reps, p)
	}
	for i, a := range addrs {
		servetest.Eventually(t, time.Minute, func() string {
			resp, err := http.Get("http://" + a + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return ""
				}
			}
			return fmt.Sprintf("%s not ready; it printed:\n%s\nthe relay printed:\n%s", reps[i].name, reps[i].log(), relay.log())
		})
	}
	// get follows redirects and returns the response and the address
	// that answered.
	get := func(u string) (*http.Response, string) {
		var last string
		c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			last = req.URL.Host
			return nil
		}}
		resp, err := c.Get(u)
		if err != nil {
			// The origin just died and the others do not know yet.
			return &http.Response{Status: err.Error(), Header: http.Header{}}, last
		}
		if last == "" {
			last = resp.Request.URL.Host
		}
		resp.Body.Close()
		return resp, last
	}
	// Every replica sends the shape to one origin, with one handle.
	var origin, handle, offset string
	servetest.Eventually(t, time.Minute, func() string {
		origin, handle = "", ""
		for _, a := range addrs {
			resp, by := get("http://" + a + "/v1/shape?table=items&offset=-1")
			if resp.StatusCode != http.StatusOK {
				return fmt.Sprintf("GET from %s: %s", a, resp.Status)
			}
			h := resp.Header.Get("electric-handle")
			if origin == "" {
				origin, handle, offset = by, h, resp.Header.Get("electric-offset")
			} else if by != origin || h != handle {
				return fmt.Sprintf("GET from %s answered by %s with handle %s; from the first replica by %s with %s", a, by, h, origin, handle)
			}
		}
		return ""
	})
	// The origin dies: the shape's next choice answers the old handle
	// 409 with its own.
	for i, a := range addrs {
		if a == origin {
			reps[i].kill()
		}
	}
	var other string
	for _, a := range addrs {
		if a != origin {
			other = a
		}
	}
	var newOrigin, newHandle string
	servetest.Eventually(t, time.Minute, func() string {
		resp, by := get("http://" + other + "/v1/shape?table=items&handle=" + handle + "&offset=" + offset)
		if resp.StatusCode != http.StatusConflict {
			return fmt.Sprintf("old handle after the origin died: %s from %s, want 409", resp.Status, by)
		}
		newOrigin, newHandle = by, resp.Header.Get("electric-handle")
		return ""
	})
	if newOrigin == origin || newHandle == "" || newHandle == handle {
		t.Fatalf("after failover: origin %s handle %q, before %s %q", newOrigin, newHandle, origin, handle)
	}
	for _, a := range addrs {
		if a == origin {
			continue
		}
		resp, by := get("http://" + a + "/v1/shape?table=items&offset=-1")
		if resp.StatusCode != 200 || by != newOrigin || resp.Header.Get("electric-handle") != newHandle {
			t.Fatalf("GET from %s after failover: %s from %s handle %q, want 200 from %s handle %q", a, resp.Status, by, resp.Header.Get("electric-handle"), newOrigin, newHandle)
		}
	}
}

// TestNewEpochRehydrates: the stream is deleted under a running relay and
// replica (a bus that lost what it held). The relay makes it anew in a new
// epoch; the replica sees the chain break, closes its connections (4001)
// and starts a new engine; the read cache resubscribes, and every result
// is PostgreSQL's again, writes made across the break included.
func TestNewEpochRehydrates(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: PostgreSQL, a bus, a relay and a replica")
	}
	db := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE TABLE items (id int PRIMARY KEY, grp int NOT NULL, v bigint NOT NULL);
		INSERT INTO items SELECT i, i % 40, 0 FROM generate_series(1, 200) i`); err != nil {
		t.Fatal(err)
	}
	var sysID, dbName string
	if err := conn.QueryRow(ctx, readcache.IdentityQuery).Scan(&sysID, &dbName); err != nil {
		t.Fatal(err)
	}
	slot := servetest.SlotFor("e_", db.Name)
	dir := t.TempDir()
	bs := startBus(t, filepath.Join(dir, "bus"), -1)
	defer bs.Shutdown()
	busURL := bs.ClientURL()
	relay := startProc(t, "relay", nil, "relay", "--dsn", db.DSN, "--bus", busURL, "--slot", slot, "--publication", slot,
		"--heartbeat", "100ms", "--stats-interval", "0")
	addr := freeAddr(t)
	rep := startProc(t, "replica", []string{"GOMAXPROCS=1"}, "serve", "--dsn", db.DSN, "--source", busURL, "--slot", slot,
		"--listen", addr, "--lag-interval", "100ms", "--shutdown-timeout", "2s", "--insecure")
	servetest.Eventually(t, time.Minute, func() string {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return ""
			}
		}
		return fmt.Sprintf("replica not ready; it printed:\n%s\nthe relay printed:\n%s", rep.log(), relay.log())
	})
	cfg := readcache.DefaultConfig()
	cfg.URL = "ws://" + addr + "/s2s/v1"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := readcache.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Verify(readcache.Identity{SystemIdentifier: sysID, Database: dbName}, nil)
	keys := readKeys()
	check := func(what string) {
		t.Helper()
		servetest.Eventually(t, time.Minute, func() string {
			// Every key is read at once first (each miss subscribes and
			// waits for its answer), so the hydrations run together.
			var wg sync.WaitGroup
			for _, k := range keys {
				wg.Add(1)
				go func() { defer wg.Done(); k.read(ctx, c) }()
			}
			wg.Wait()
			first := ""
			for _, k := range keys {
				res, why := k.read(ctx, c)
				if why != readcache.ReasonNone {
					if first == "" {
						first = fmt.Sprintf("%s: %q read from PostgreSQL (%v)", what, k.key, why)
					}
					continue
				}
				rows, err := conn.Query(ctx, k.sql, k.param)
				if err != nil {
					t.Fatal(err)
				}
				var want, got strings.Builder
				for rows.Next() {
					vals, _ := rows.Values()
					fmt.Fprintln(&want, vals...)
				}
				rows.Close()
				for _, r := range res.Rows {
					vals := make([]any, len(r))
					for i, v := range r {
						vals[i] = string(v)
					}
					fmt.Fprintln(&got, vals...)
				}
				if got.String() != want.String() && first == "" {
					first = fmt.Sprintf("%s: %q = %q, PostgreSQL says %q", what, k.key, got.String(), want.String())
				}
			}
			return first
		})
	}
	write := func(n int) {
		for range n {
			if _, err := conn.Exec(ctx, `UPDATE items SET v = v + 1, grp = $2 WHERE id = $1`, 1+rand.IntN(nItems), rand.IntN(nGroups)); err != nil {
				t.Fatal(err)
			}
		}
	}
	began := time.Now()
	write(50)
	check("before the break")
	t.Logf("%v: results exact before the break", time.Since(began).Round(time.Millisecond))

	// The bus loses the stream; writes go on across the break.
	nc, err := nats.Connect(busURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := js.DeleteStream(ctx, bus.StreamName(sysID, slot)); err != nil {
		t.Fatal(err)
	}
	write(50)
	servetest.Eventually(t, time.Minute, func() string {
		resp, err := http.Get("http://" + addr + "/stats")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		var st struct {
			Generation int `json:"generation"`
		}
		json.NewDecoder(resp.Body).Decode(&st)
		if st.Generation < 2 {
			write(1)
			return fmt.Sprintf("the replica is still on engine %d; it printed:\n%s\nthe relay printed:\n%s", st.Generation, rep.log(), relay.log())
		}
		return ""
	})
	t.Logf("%v: the replica started a new engine", time.Since(began).Round(time.Millisecond))
	write(50)
	check("after the new epoch")
	t.Logf("%v: results exact after the new epoch", time.Since(began).Round(time.Millisecond))
}
