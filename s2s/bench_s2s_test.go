package s2s_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestBenchS2S measures commit-to-frame latency and fan-out against a
// `freshet serve` subprocess; this test process is the client. It runs only
// with FRESHET_S2S_BENCH=1 (docs/benchmarks.md, section s2s);
// FRESHET_S2S_BENCH_SERVER_GOMAXPROCS sets the server's GOMAXPROCS, and
// FRESHET_S2S_BENCH_PROFILE=file has the server write a CPU profile of
// the run to file (profile the client with go test's -cpuprofile), and
// FRESHET_S2S_BENCH_BIN=path runs that freshet binary as the server
// instead of one built from this tree (to compare builds with one client);
// FRESHET_S2S_BENCH_SOCKETS=1000 runs only the socket counts listed and
// FRESHET_S2S_BENCH_FANOUT=0 skips the fan-out, and
// FRESHET_S2S_BENCH_RATE sets the latency phases' transactions per second
// (100), and FRESHET_S2S_BENCH_KEYS=k spreads the sockets over k rows
// (socket i subscribes to row i%k+1) and has each transaction update one
// of them at random, so a transaction touches 1/k of the sockets
// (k=100: 1%; the default 1 touches every socket), and
// FRESHET_S2S_BENCH_FLOOR=1 runs the floor writer (benchFloorMain: one
// write(2) of a pre-encoded frame per socket per transaction, triggered by
// the same paced loop) as the server instead of freshet, for the same
// client, sockets and frames:
//
//	FRESHET_S2S_BENCH=1 go test ./s2s -run TestBenchS2S -v -timeout 20m
func TestBenchS2S(t *testing.T) {
	if os.Getenv("FRESHET_S2S_BENCH") == "" {
		t.Skip("set FRESHET_S2S_BENCH=1 to run the s2s benchmark")
	}
	floor := os.Getenv("FRESHET_S2S_BENCH_FLOOR") == "1"
	bin := os.Getenv("FRESHET_S2S_BENCH_BIN") // another build to compare with
	if bin == "" && !floor {
		bin = filepath.Join(t.TempDir(), "freshet")
		if out, err := exec.Command("go", "build", "-o", bin, "../cmd/freshet").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	db := pgtest.NewDB(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	keys := 1
	if v := os.Getenv("FRESHET_S2S_BENCH_KEYS"); v != "" {
		if keys, err = strconv.Atoi(v); err != nil || keys < 1 {
			t.Fatalf("FRESHET_S2S_BENCH_KEYS=%q: want the number of rows the sockets spread over, 1 or more", v)
		}
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE hot (id int PRIMARY KEY, ts bigint NOT NULL, pad text)"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO hot SELECT g, 0, 'x' FROM generate_series(1, $1::int) g", keys); err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	srv := exec.Command(bin, "serve", "--dsn", db.DSN, "--listen", addr, "--slot", "bench", "--publication", "bench", "--log-level", "warn", "--insecure")
	var trigger io.Writer    // the floor writer's stdin: a line per transaction
	var report *bufio.Reader // its stdout: a line per phase
	if floor {
		srv = exec.Command(os.Args[0])
		srv.Env = append(os.Environ(), benchFloorEnv+"="+addr)
		if trigger, err = srv.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		out, err := srv.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		report = bufio.NewReader(out)
	}
	// update writes the timestamp into one row (of keys, at random), or
	// has the floor writer write a frame as if it had.
	update := func() error {
		if floor {
			_, err := fmt.Fprintf(trigger, "t %d %d\n", time.Now().UnixMicro(), 1+rand.Intn(keys))
			return err
		}
		_, err := conn.Exec(ctx, "UPDATE hot SET ts = $1 WHERE id = $2", time.Now().UnixMicro(), 1+rand.Intn(keys))
		return err
	}
	if p := os.Getenv("FRESHET_S2S_BENCH_SERVER_GOMAXPROCS"); p != "" {
		if srv.Env == nil {
			srv.Env = os.Environ()
		}
		srv.Env = append(srv.Env, "GOMAXPROCS="+p)
	}
	if p := os.Getenv("FRESHET_S2S_BENCH_PROFILE"); p != "" {
		srv.Args = append(srv.Args, "--cpuprofile", p)
	}
	var stderr bytes.Buffer
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// SIGTERM: a graceful stop writes the CPU profile.
		srv.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			srv.Process.Kill()
			<-done
		}
	}()

	// cpu returns the CPU seconds used so far by the server (and of those,
	// in the kernel) and by this (client) process.
	cpu := func() (server, serverSys, client float64) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", srv.Process.Pid))
		if i := bytes.LastIndexByte(b, ')'); i > 0 {
			f := bytes.Fields(b[i+2:])
			u, _ := strconv.ParseFloat(string(f[11]), 64)
			s, _ := strconv.ParseFloat(string(f[12]), 64)
			server, serverSys = (u+s)/100, s/100 // clock ticks (USER_HZ 100)
		}
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		client = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
		return
	}
	// load is the machine's load average: the box is shared, and the
	// figures mean little without it.
	load := func() string {
		b, _ := os.ReadFile("/proc/loadavg")
		if f := bytes.Fields(b); len(f) >= 3 {
			return string(bytes.Join(f[:3], []byte(" ")))
		}
		return "?"
	}
	// written reads the server's freshet_s2s_commit_to_write_seconds
	// buckets (upper bounds and cumulative counts) from /metrics; quantile
	// reads a quantile off the difference of two readings, as the upper
	// bound of the bucket it falls in (buckets 1.25x apart).
	written := func() (les, cum []float64) {
		if floor {
			return nil, nil // the floor reports its own (floorTook)
		}
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return nil, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(body), "\n") {
			rest, ok := strings.CutPrefix(line, `freshet_s2s_commit_to_write_seconds_bucket{le="`)
			if !ok {
				continue
			}
			le, n, _ := strings.Cut(rest, `"} `)
			l, _ := strconv.ParseFloat(le, 64)
			c, _ := strconv.ParseFloat(n, 64)
			les, cum = append(les, l), append(cum, c)
		}
		return les, cum
	}
	quantile := func(les, before, after []float64, p float64) float64 {
		if len(les) == 0 || len(before) != len(after) {
			return 0
		}
		total := after[len(after)-1] - before[len(before)-1]
		for i := range les {
			if after[i]-before[i] >= p*total {
				return les[i] * 1000
			}
		}
		return les[len(les)-1] * 1000
	}
	pct := func(all []int64, p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[int(float64(len(all)-1)*p)]) / 1000
	}
	counts := []int{1, 100, 1000}
	if v := os.Getenv("FRESHET_S2S_BENCH_SOCKETS"); v != "" {
		counts = counts[:0]
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("FRESHET_S2S_BENCH_SOCKETS=%q: want socket counts like 1,100,1000", v)
			}
			counts = append(counts, n)
		}
	}
	fanout := os.Getenv("FRESHET_S2S_BENCH_FANOUT") != "0" && !floor
	rate := 100
	if v := os.Getenv("FRESHET_S2S_BENCH_RATE"); v != "" {
		if rate, err = strconv.Atoi(v); err != nil || rate < 1 || rate > 1000 {
			t.Fatalf("FRESHET_S2S_BENCH_RATE=%q: want transactions per second, 1 to 1000", v)
		}
	}
	for _, n := range counts {
		client, err := newBenchClient(addr, n, func(i int) string {
			return fmt.Sprintf(`{"type":"subscribe","id":"h","sql":"SELECT id, ts FROM hot WHERE id = %d","mode":"rows"}`, i%keys+1)
		})
		if err != nil {
			t.Fatalf("bench client: %v\n%s", err, stderr.String())
		}
		client.accepted.Wait()
		// A line to attach a profiler or perf to, before the phase.
		t.Logf("sockets=%d open and accepted (server pid %d, client pid %d); writing for 5 s", n, srv.Process.Pid, os.Getpid())
		// Latency: a steady rate (100 transactions a second) for 5 s.
		s0, k0, c0 := cpu()
		les, w0 := written()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		end := time.Now().Add(5 * time.Second)
		txns := 0
		for time.Now().Before(end) {
			<-tick.C
			if err := update(); err != nil {
				t.Fatal(err)
			}
			txns++
		}
		tick.Stop()
		time.Sleep(time.Second)
		var all []int64
		client.each(func(s *benchSock) {
			all = append(all, s.lat...)
			s.lat = s.lat[:0]
		})
		slices.Sort(all)
		s1, k1, c1 := cpu()
		_, w1 := written()
		server := fmt.Sprintf("server commit-to-write p50<=%.2fms p99<=%.2fms", quantile(les, w0, w1, 0.5), quantile(les, w0, w1, 0.99))
		if floor {
			fmt.Fprintf(trigger, "r\n")
			line, err := report.ReadString('\n')
			if err != nil {
				t.Fatalf("the floor writer's report: %v\n%s", err, stderr.String())
			}
			var p50, p99 float64
			var writes, short int64
			fmt.Sscan(line, &p50, &p99, &writes, &short)
			server = fmt.Sprintf("floor trigger-to-last-write p50=%.2fms p99=%.2fms writes=%d short=%d", p50, p99, writes, short)
		}
		kernelPerFrame := 0.0
		if len(all) > 0 {
			kernelPerFrame = (k1 - k0) / float64(len(all)) * 1e6
		}
		t.Logf("latency sockets=%d keys=%d rate=%d/s txns=%d frames=%d p50=%.2fms p99=%.2fms max=%.2fms %s (CPU s: server %.2f of which kernel %.2f = %.2fus a frame, client %.2f; load %s)",
			n, keys, rate, txns, len(all), pct(all, 0.5), pct(all, 0.99), pct(all, 1), server, s1-s0, k1-k0, kernelPerFrame, c1-c0, load())
		if n == 1000 && fanout {
			// Fan-out: the writer commits as fast as one connection can
			// for 5 s; count the rows delivered to all sockets.
			client.each(func(s *benchSock) { s.rows.Store(0) })
			s0, k0, c0 := cpu()
			start := time.Now()
			txns = 0
			for time.Since(start) < 5*time.Second {
				if err := update(); err != nil {
					t.Fatal(err)
				}
				txns++
			}
			wrote := time.Since(start)
			// Wait until deliveries stop growing.
			var total, last int64 = 0, -1
			for total != last {
				last = total
				time.Sleep(500 * time.Millisecond)
				total = 0
				client.each(func(s *benchSock) { total += s.rows.Load() })
			}
			elapsed := time.Since(start) - time.Second // the last two polls saw no growth
			var lat []int64
			client.each(func(s *benchSock) { lat = append(lat, s.lat...) })
			slices.Sort(lat)
			s1, k1, c1 := cpu()
			t.Logf("fan-out sockets=1000 txns=%d (%.0f/s) rows delivered=%d in %.1fs = %.0f rows/s; latency p50=%.2fms p99=%.2fms (CPU s: server %.2f of which kernel %.2f, client %.2f; load %s)",
				txns, float64(txns)/wrote.Seconds(), total, elapsed.Seconds(), float64(total)/elapsed.Seconds(), pct(lat, 0.5), pct(lat, 0.99), s1-s0, k1-k0, c1-c0, load())
		}
		client.close()
		if err := client.Err(); err != nil {
			t.Error(err)
		}
		if k := client.lost.Load(); k > 0 {
			log := stderr.Bytes()
			if len(log) > 1500 {
				log = log[len(log)-1500:]
			}
			t.Logf("sockets=%d: %d closed by the server before the end; the server's log ends:\n%s", n, k, log)
		}
	}
}
