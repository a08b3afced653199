package shape_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/internal/servetest"
	"github.com/freshetdb/freshet/shape"
	"github.com/jackc/pgx/v5"
)

// The benchmarks of docs/benchmarks.md, run by hand (they take minutes
// and a quiet machine): SHAPE_BENCH=1 go test -run TestBench -v ./shape.
// They report figures; they assert nothing about time.

func benchOnly(t *testing.T) {
	if os.Getenv("SHAPE_BENCH") == "" {
		t.Skip("set SHAPE_BENCH=1 to run the shape benchmarks")
	}
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// fetchAll follows a shape from -1 until up-to-date with a plain HTTP
// client, returning rows received and bytes.
func fetchAll(t *testing.T, base, table string) (int, int64) {
	off, h := "-1", ""
	rows, n := 0, int64(0)
	client := &http.Client{Timeout: 5 * time.Minute}
	buf := make([]byte, 256<<10)
	for i := 0; i < 100000; i++ {
		u := base + "/v1/shape?table=" + table + "&offset=" + off
		if h != "" {
			u += "&handle=" + h
		}
		res, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode == 503 {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			time.Sleep(100 * time.Millisecond) // as the client retries
			continue
		}
		if res.StatusCode != 200 {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			t.Fatalf("GET %s: %d %s", u, res.StatusCode, b)
		}
		// The body is read through one reused buffer, each row counted,
		// as COPY's side counts its bytes: the client does not keep
		// 10 MiB responses (a real client parses them as they come).
		got, c, err := countRows(res.Body, buf)
		res.Body.Close()
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		n += got
		rows += c
		h, off = res.Header.Get("electric-handle"), res.Header.Get("electric-offset")
		if _, ok := res.Header["Electric-Up-To-Date"]; ok {
			return rows, n
		}
	}
	t.Fatal("never up-to-date")
	return 0, 0
}

var insertMark = []byte(`"operation":"insert"`)

// countRows reads r to its end through buf, counting insert messages
// bigEnv is an env with the table `big` of SHAPE_BENCH_ROWS rows (a
// million by default): id int PRIMARY KEY, title text, n int, at
// timestamptz.
func bigEnv(t *testing.T, cfg func(*shape.Config)) (*env, int) {
	n := 1_000_000
	if s := os.Getenv("SHAPE_BENCH_ROWS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	e := newEnv(t, fmt.Sprintf(`CREATE TABLE big (id int PRIMARY KEY, title text, n int, at timestamptz);
		INSERT INTO big SELECT i, 'title of row ' || i, i %% 1000, '2026-01-01'::timestamptz + i * interval '1 second' FROM generate_series(1, %d) i; ANALYZE big`, n), cfg)
	return e, n
}

// (a mark split between two reads is counted once).
func countRows(r io.Reader, buf []byte) (int64, int, error) {
	var n int64
	rows, keep := 0, 0
	for {
		m, err := r.Read(buf[keep:])
		n += int64(m)
		end := keep + m
		rows += bytes.Count(buf[:end], insertMark)
		// Keep the last len(mark)-1 bytes: a mark that straddles the
		// boundary is whole in the next window, and one that ended in
		// the kept bytes is shorter than the mark, so not counted twice.
		keep = min(end, len(insertMark)-1)
		copy(buf, buf[end-keep:end])
		if err == io.EOF {
			return n, rows, nil
		}
		if err != nil {
			return n, rows, err
		}
	}
}

func TestBenchInitialSync(t *testing.T) {
	benchOnly(t)
	e, n := bigEnv(t, func(c *shape.Config) { c.LongPoll = 20 * time.Second })
	ctx := context.Background()
	copyRows := func() (time.Duration, int64) {
		var b int64
		start := time.Now()
		if _, err := e.conn.PgConn().CopyTo(ctx, &countWriter{n: &b}, `COPY (SELECT id, title, n, at FROM big) TO STDOUT`); err != nil {
			t.Fatal(err)
		}
		return time.Since(start), b
	}
	// COPY of the same rows, same run, before the cold sync and beside
	// each warm one.
	copyDur, copyBytes := copyRows()
	start := time.Now()
	rows, bytes := fetchAll(t, e.url, "big")
	cold := time.Since(start)
	if rows != n {
		t.Fatalf("cold sync: %d rows, want %d", rows, n)
	}
	t.Logf("initial sync of %d rows, cold (shape created, hydrated, snapshot written): %v, %d bytes of JSON; COPY TO STDOUT of the same rows just before %v (%d bytes): %.2fx; load %s",
		n, cold.Round(time.Millisecond), bytes, copyDur.Round(time.Millisecond), copyBytes, copyDur.Seconds()/cold.Seconds(), loadAvg())
	// SHAPE_BENCH_ROUNDS warm syncs (the shape exists), each beside a
	// COPY, alternating which goes first.
	rounds := 3
	if s := os.Getenv("SHAPE_BENCH_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	for i := 0; i < rounds; i++ {
		var c time.Duration
		if i%2 == 1 {
			c, _ = copyRows()
		}
		start = time.Now()
		rows2, _ := fetchAll(t, e.url, "big")
		warm := time.Since(start)
		if i%2 == 0 {
			c, _ = copyRows()
		}
		if rows2 != n {
			t.Fatalf("warm sync: %d rows, want %d", rows2, n)
		}
		t.Logf("round %d: warm (shape exists) %v, COPY %v: warm/COPY throughput %.2fx; load %s",
			i+1, warm.Round(time.Millisecond), c.Round(time.Millisecond), c.Seconds()/warm.Seconds(), loadAvg())
	}
}

type countWriter struct{ n *int64 }

func (c *countWriter) Write(p []byte) (int, error) {
	*c.n += int64(len(p))
	return len(p), nil
}

// TestBenchManyShapes: N `k = const` shapes of one row each, created and
// synced by a client; the heap they take (engine and shape layer).
func TestBenchManyShapes(t *testing.T) {
	benchOnly(t)
	n := 10_000
	if s := os.Getenv("SHAPE_BENCH_SHAPES"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	e := newEnv(t, fmt.Sprintf(`CREATE TABLE kv (id int PRIMARY KEY, k int, v int); CREATE INDEX ON kv (k);
		INSERT INTO kv SELECT i, i, 0 FROM generate_series(1, %d) i`, n), func(c *shape.Config) {
		c.MaxShapes = n + 10
		c.LongPoll = 60 * time.Second
	})
	ctx := context.Background()
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	es0, _ := e.eng.Stats(ctx)
	handles := make([]string, n)
	offs := make([]string, n)
	start := time.Now()
	tr := &http.Transport{MaxIdleConnsPerHost: n + 100, MaxConnsPerHost: 0}
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			h, off, ok := syncShape(client, e.url, "table=kv&where=k+%3D+"+strconv.Itoa(i+1))
			if !ok {
				t.Errorf("shape %d never up to date", i)
			}
			handles[i], offs[i] = h, off
		}(i)
	}
	wg.Wait()
	created := time.Since(start)
	// Connections hold buffers of their own: measure the shapes alone.
	tr.CloseIdleConnections()
	e.http.CloseClientConnections()
	time.Sleep(time.Second)
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	es1, _ := e.eng.Stats(ctx)
	if p := os.Getenv("SHAPE_BENCH_HEAP"); p != "" {
		f, err := os.Create(p)
		if err == nil {
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	t.Logf("%d shapes created and synced in %v; heap %+d bytes, %.0f B per shape (engine and shape layer, 1 row each); engine %+v -> %+v",
		n, created.Round(time.Millisecond), int64(m1.HeapAlloc)-int64(m0.HeapAlloc), float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/float64(n), es0.Stats, es1.Stats)
	// Bytes of log per change: one update to each of 100 shapes.
	for i := 0; i < 100; i++ {
		e.exec(`UPDATE kv SET v = v + 1 WHERE k = $1`, i+1)
	}
	var logBytes, lines int64
	eventually(t, time.Minute, func() string {
		logBytes, lines = 0, 0
		logs, _ := filepath.Glob(filepath.Join(e.cfg.DataDir, "*", "log-*"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			logBytes += int64(len(b))
			lines += int64(bytes.Count(b, []byte{'\n'}))
		}
		if lines < 100 {
			return fmt.Sprintf("%d changes logged", lines)
		}
		return ""
	})
	t.Logf("log: %d bytes for %d changes, %.0f B per change (an update of one int column of a 3-column row, with its offset and checksum)", logBytes, lines, float64(logBytes)/float64(lines))
}

// TestBenchManyShapesLatency: the same shapes on a real `freshet serve`
// (its own process, so that 10,000 connections on each side fit the
// file limit), each with a long-polling client; writes to random k, the
// time from before the commit to the client's response.
func TestBenchManyShapesLatency(t *testing.T) {
	benchOnly(t)
	n := 10_000
	if s := os.Getenv("SHAPE_BENCH_SHAPES"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	db := pgtest.NewDB(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// SHAPE_BENCH_ILIKE=1: shapes `t ILIKE '<n>-%'`, which the engine's
	// LIKE index routes by a substring of '<n>-' (the nine of n < 10,
	// whose literal is two bytes, see every change).
	ilike := os.Getenv("SHAPE_BENCH_ILIKE") != ""
	where := func(i int) string { return "k+%3D+" + strconv.Itoa(i+1) }
	kind := "`k = const`"
	if ilike {
		where = func(i int) string { return url.QueryEscape("t ILIKE '" + strconv.Itoa(i+1) + "-%'") }
		kind = "`t ILIKE const`"
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE TABLE kv (id int PRIMARY KEY, k int, v int, t text); CREATE INDEX ON kv (k);
		INSERT INTO kv SELECT i, i, 0, i || '-X' FROM generate_series(1, %d) i`, n)); err != nil {
		t.Fatal(err)
	}
	srv := servetest.Start(t, servetest.Options{DSN: db.DSN, Slot: servetest.SlotFor("shb_", db.Name),
		Args: []string{"--shape-data-dir", t.TempDir(), "--shape-max-shapes", strconv.Itoa(n + 10), "--shape-long-poll", "60s"}})
	base := "http://" + srv.Addr
	tr := &http.Transport{MaxIdleConnsPerHost: n + 100}
	client := &http.Client{Transport: tr}
	handles := make([]string, n)
	offs := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			h, off, ok := syncShape(client, base, "table=kv&where="+where(i))
			if !ok {
				t.Errorf("shape %d never up to date", i)
			}
			handles[i], offs[i] = h, off
		}(i)
	}
	wg.Wait()
	t.Logf("%d shapes created and synced through freshet serve in %v", n, time.Since(start).Round(time.Millisecond))
	got := make([]chan time.Time, n)
	for i := range got {
		got[i] = make(chan time.Time, 4)
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			off, h := offs[i], handles[i]
			for pctx.Err() == nil {
				req, _ := http.NewRequestWithContext(pctx, "GET", base+"/v1/shape?table=kv&where="+where(i)+"&offset="+off+"&handle="+h+"&live=true", nil)
				res, err := client.Do(req)
				if err != nil {
					return
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				off = res.Header.Get("electric-offset")
				if bytes.Contains(b, []byte(`"operation"`)) {
					got[i] <- time.Now()
				}
			}
		}(i)
	}
	time.Sleep(5 * time.Second) // every client is waiting
	var lat []time.Duration
	for w := 0; w < 300; w++ {
		j := (w*7919 + 13) % n
		t0 := time.Now()
		if _, err := conn.Exec(ctx, `UPDATE kv SET v = v + 1 WHERE k = $1`, j+1); err != nil {
			t.Fatal(err)
		}
		select {
		case t1 := <-got[j]:
			lat = append(lat, t1.Sub(t0))
		case <-time.After(60 * time.Second):
			t.Fatalf("client %d never got its change", j)
		}
	}
	cancel()
	wg.Wait()
	tr.CloseIdleConnections()
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	t.Logf("write-to-client latency, %d %s shapes each with a long-polling client, %d writes one at a time: p50 %v p99 %v max %v; load %s",
		n, kind, len(lat), lat[len(lat)/2].Round(10*time.Microsecond), lat[len(lat)*99/100].Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond), loadAvg())
}

// TestBenchFanOut: one shape, C long-polling clients (1,000 by default,
// SHAPE_BENCH_CLIENTS), one transaction of 1,910 rows: the time from
// before the INSERT until the last client has all of it, and the CPU time
// the server spent meanwhile. The server is a real `freshet serve` in its
// own process (SHAPE_BENCH_FRESHET=<binary> runs another build, to
// alternate old and new), so that its CPU is told apart from the
// clients'; each client reads its responses through its own 16 KiB
// buffer, counting insert messages, and keeps nothing.
func TestBenchFanOut(t *testing.T) {
	benchOnly(t)
	c := 1000
	if s := os.Getenv("SHAPE_BENCH_CLIENTS"); s != "" {
		c, _ = strconv.Atoi(s)
	}
	db := pgtest.NewDB(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE fan (id int PRIMARY KEY, title text, n int)`); err != nil {
		t.Fatal(err)
	}
	srv := servetest.Start(t, servetest.Options{DSN: db.DSN, Slot: servetest.SlotFor("shf_", db.Name), Binary: os.Getenv("SHAPE_BENCH_FRESHET"),
		Args: []string{"--shape-data-dir", t.TempDir(), "--shape-long-poll", "60s"}})
	base := "http://" + srv.Addr
	tr := &http.Transport{MaxIdleConnsPerHost: c + 100}
	client := &http.Client{Transport: tr}
	h, off, ok := syncShape(client, base, "table=fan")
	if !ok {
		t.Fatal("the shape was never up to date")
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last time.Time
	done, requests := 0, 0
	ready := make(chan struct{}, c)
	for i := 0; i < c; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, n, reqs := off, 0, 0
			buf := make([]byte, 16<<10)
			for n < 1910 {
				req, _ := http.NewRequest("GET", base+"/v1/shape?table=fan&offset="+o+"&handle="+h+"&live=true", nil)
				if reqs == 0 {
					ready <- struct{}{}
				}
				reqs++
				res, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, got, err := countRows(res.Body, buf)
				res.Body.Close()
				if err != nil || res.StatusCode != 200 {
					t.Errorf("GET at %s: %d %v", o, res.StatusCode, err)
					return
				}
				o = res.Header.Get("electric-offset")
				n += got
			}
			mu.Lock()
			done++
			requests += reqs
			last = time.Now()
			mu.Unlock()
		}()
	}
	for i := 0; i < c; i++ {
		<-ready
	}
	time.Sleep(2 * time.Second) // every client's long-poll is held
	before := loadAvg()
	cpu0, self0 := procCPU(t, srv.Pid()), cpuTime()
	t0 := time.Now()
	if _, err := conn.Exec(ctx, `INSERT INTO fan SELECT i, 'a title of some length ' || i, i FROM generate_series(1, 1910) i`); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	cpu1, self1 := procCPU(t, srv.Pid()), cpuTime()
	tr.CloseIdleConnections()
	t.Logf("one shape, %d long-polling clients, one 1,910-row transaction: the last client had it after %v (%d clients, %d requests); the server's CPU meanwhile %v, the clients' (this process) %v; load %s before, %s after",
		c, last.Sub(t0).Round(time.Millisecond), done, requests, (cpu1 - cpu0).Round(time.Millisecond), (self1 - self0).Round(time.Millisecond), before, loadAvg())
}

// procCPU is a process's user and system CPU time so far, from
// /proc/<pid>/stat (in clock ticks of 10 ms).
func procCPU(t *testing.T, pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces: count fields
	// from after it (utime and stime are fields 14 and 15).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

var _ = engine.ModeRows

// TestBenchEngineOnly: the engine's part of TestBenchManyShapes, the same
// subscriptions with a sink that drops everything, so that the shape
// layer's own bytes per shape are the difference.
func TestBenchEngineOnly(t *testing.T) {
	benchOnly(t)
	n := 10_000
	if s := os.Getenv("SHAPE_BENCH_SHAPES"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	e := newEnv(t, fmt.Sprintf(`CREATE TABLE kv (id int PRIMARY KEY, k int, v int); CREATE INDEX ON kv (k);
		INSERT INTO kv SELECT i, i, 0 FROM generate_series(1, %d) i`, n), nil)
	ctx := context.Background()
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	sink := &countSink{}
	for i := 0; i < n; i++ {
		_, ref, err := e.eng.Subscribe(ctx, `SELECT "id", "k", "v" FROM "public"."kv" WHERE (k = `+strconv.Itoa(i+1)+`)`, nil, engine.ModeRows, sink)
		if err != nil || ref != nil {
			t.Fatal(err, ref)
		}
	}
	eventually(t, 5*time.Minute, func() string {
		st, _ := e.eng.Stats(ctx)
		if st.PendingReads > 0 || st.Subs < n {
			return fmt.Sprintf("%+v", st.Stats)
		}
		return ""
	})
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	t.Logf("engine only: %d subscriptions `k = const` of one row each: %.0f B per subscription", n, float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/float64(n))
}

type countSink struct{ n int }

func (c *countSink) Send(engine.Output) { c.n++ }

// TestBenchHydrationFloor: what a cold sync of TestBenchInitialSync's
// table cannot go below, each step alone, in turn: PostgreSQL's read of
// the rows in binary with nothing decoded (the read's own cost), the
// engine's hydration of the same query (the read decoded and landed in
// the engine, an Accepted without rows: touch mode), and the same in
// ModeRowsUnordered (the Accepted's held rows ranged over and decoded, as
// the shape does, without rendering).
func TestBenchHydrationFloor(t *testing.T) {
	benchOnly(t)
	e, n := bigEnv(t, nil)
	ctx := context.Background()
	const sql = `SELECT "id", "title", "n", "at" FROM "public"."big"`
	start := time.Now()
	rr := e.conn.PgConn().ExecParams(ctx, sql, nil, nil, nil, []int16{1})
	rows := 0
	for rr.NextRow() {
		rows++
	}
	if _, err := rr.Close(); err != nil || rows != n {
		t.Fatalf("read: %d rows, %v", rows, err)
	}
	read := time.Since(start)
	hydrate := func(mode engine.Mode) time.Duration {
		sink := &floorSink{done: make(chan int, 1)}
		start := time.Now()
		id, ref, err := e.eng.Subscribe(ctx, sql, nil, mode, sink)
		if err != nil || ref != nil {
			t.Fatal(err, ref)
		}
		got := <-sink.done
		d := time.Since(start)
		if err := e.eng.Unsubscribe(ctx, id); err != nil {
			t.Fatal(err)
		}
		if mode != engine.ModeTouch && got != n {
			t.Fatalf("%v: %d rows, want %d", mode, got, n)
		}
		return d
	}
	touch := hydrate(engine.ModeTouch)
	held := hydrate(engine.ModeRowsUnordered)
	t.Logf("%d rows: PostgreSQL's read alone (binary, not decoded) %v; the engine's hydration (touch mode) %v; with the held rows decoded (ModeRowsUnordered) %v; load %s",
		n, read.Round(time.Millisecond), touch.Round(time.Millisecond), held.Round(time.Millisecond), loadAvg())
}

// floorSink counts an Accepted's rows, decoding each held row (-1: the
// subscription was refused or ended).
type floorSink struct{ done chan int }

func (f *floorSink) Send(o engine.Output) {
	switch o.Kind {
	case engine.OutputRefused, engine.OutputEnded:
		f.done <- -1
		return
	case engine.OutputAccepted:
	default:
		return
	}
	rows := len(o.Rows)
	for range o.Held.All() {
		rows++
	}
	f.done <- rows
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestBenchUnsubscribe: what ending a big shape costs. A shape of
// SHAPE_BENCH_ROWS rows (1,000,000 by default) is synced, then deleted
// (DELETE /v1/shape, as an expiry or an out-of-scope end forgets it);
// the CPU time of the process is read from the DELETE until the
// engine's subscription is gone and the shape's files are removed, and
// again after a forced collection (the freed rows' share of the GC).
// SHAPE_BENCH_CPUPROFILE=<file> profiles that window.
func TestBenchUnsubscribe(t *testing.T) {
	benchOnly(t)
	n := 1_000_000
	if s := os.Getenv("SHAPE_BENCH_ROWS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	e := newEnv(t, fmt.Sprintf(`CREATE TABLE big (id int PRIMARY KEY, n int, t text);
		INSERT INTO big SELECT i, i, 'row ' || i FROM generate_series(1, %d) i`, n),
		func(c *shape.Config) { c.AllowDeletion = true })
	t0 := time.Now()
	h, _, ok := syncShape(&http.Client{Timeout: 10 * time.Minute}, e.url, "table=big")
	if !ok {
		t.Fatal("never up to date")
	}
	t.Logf("%d-row shape synced in %v (load %s)", n, time.Since(t0).Round(time.Millisecond), loadAvg())
	dir := filepath.Join(e.cfg.DataDir, h)
	ctx := context.Background()
	runtime.GC()
	if path := os.Getenv("SHAPE_BENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	c0, w0 := cpuTime(), time.Now()
	if r := e.do("DELETE", qs("table", "big", "handle", h), nil, ""); r.code != 202 && r.code != 200 && r.code != 204 {
		t.Fatalf("DELETE: %d %s", r.code, r.body)
	}
	for {
		st, err := e.eng.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); st.Subs == 0 && os.IsNotExist(err) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	c1, w1 := cpuTime(), time.Now()
	runtime.GC()
	c2 := cpuTime()
	runtime.ReadMemStats(&m1)
	t.Logf("unsubscribing the %d-row shape: %v of CPU, %v of wall time; with a forced GC after, %v of CPU; live heap %d -> %d MB (load %s)",
		n, (c1 - c0).Round(time.Millisecond), w1.Sub(w0).Round(time.Millisecond), (c2 - c0).Round(time.Millisecond), m0.HeapAlloc>>20, m1.HeapAlloc>>20, loadAvg())
}
