package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

const benchTailUsage = `Usage: freshet bench-tail [flags]

End-to-end benchmark (hidden command; scripts/bench-tail.sh runs it).
Starts a throwaway PostgreSQL, makes pairs of logical slots at the same
point, writes a workload, and drains the same WAL once with
'freshet tail --until L --format none' and once with
'pg_recvlogical --endpos L -f /dev/null', one after the other, for each
pgoutput protocol version. Prints seconds, throughput and the ratio.
With --compare OLD, a second freshet binary drains the same WAL too (on
slots of its own, in rotation with the others), so a change is measured
against the code before it in one run.

Flags:
`

// benchWorkload is one workload of the end-to-end benchmark.
type benchWorkload struct {
	Name  string
	Txns  int    // transactions the workload commits
	Rows  int    // rows it writes
	Write string // SQL that writes it
}

// benchResult is one timed drain.
type benchResult struct {
	Workload string
	Tool     string
	Proto    int
	Seconds  []float64 // wall-clock seconds, one per repetition
	CPU      []float64 // the client's CPU seconds (user+system), one per repetition
}

func (r benchResult) median() float64 { return median(r.Seconds) }

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// runBenchTail implements the hidden `freshet bench-tail`.
func (m *Main) runBenchTail(ctx context.Context, args []string) error {
	fs := m.newCommandFlags("bench-tail", "freshet bench-tail", benchTailUsage)
	var (
		small    = fs.Int("small", 200000, "number of small transactions in workload (a)")
		large    = fs.Int("large", 1000000, "rows of the single large transaction in workload (b)")
		reps     = fs.Int("reps", 3, "repetitions of each drain (the median is reported)")
		protos   = fs.String("protos", "1,2", "protocol versions to run")
		freshet  = fs.String("freshet", "", "the freshet binary to time (default: this one)")
		profile  = fs.String("cpuprofile-dir", "", "write a CPU profile of each freshet tail run into this directory")
		only     = fs.String("workloads", "a,b", "workloads to run: a (small transactions), b (one large transaction)")
		parallel = fs.Bool("parallel", false, "run freshet tail and pg_recvlogical at the same time instead of one after the other")
		extra    = fs.String("tail-args", "", "extra flags for freshet tail, space-separated (e.g. \"--heartbeat 0\")")
		base     = fs.String("compare", "", "a second freshet binary (e.g. built from an older commit) timed in the same run, on slots of its own")
	)
	if err := fs.parse(args); errors.Is(err, errHelp) {
		return nil
	} else if err != nil {
		return err
	}
	var protoList []int
	for _, p := range strings.Split(*protos, ",") {
		switch strings.TrimSpace(p) {
		case "1":
			protoList = append(protoList, 1)
		case "2":
			protoList = append(protoList, 2)
		default:
			return usageError{fmt.Sprintf("bench-tail: --protos %q: want a list of 1 and 2", *protos)}
		}
	}
	bin := *freshet
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this executable: %w", err)
		}
		bin = exe
	}
	logf := func(format string, a ...any) { fmt.Fprintf(m.Stderr, "bench-tail: "+format+"\n", a...) }

	logf("starting a throwaway PostgreSQL")
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		return fmt.Errorf("start PostgreSQL: %w", err)
	}
	defer c.Stop()
	dsn := c.DSN("postgres")
	recvlogical, err := findRecvlogical(c.BinDir)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	setup := `
CREATE TABLE bench (id bigint PRIMARY KEY, n int NOT NULL, v text NOT NULL);
CREATE TABLE bench_marker (id serial PRIMARY KEY, at timestamptz DEFAULT now());
CREATE PUBLICATION bench FOR ALL TABLES;
CREATE PROCEDURE bench_small(count int) LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..count LOOP
		INSERT INTO bench VALUES (i, i % 1000, 'small transaction ' || i);
		COMMIT;
	END LOOP;
END $$;`
	if _, err := conn.Exec(ctx, setup); err != nil {
		return fmt.Errorf("create the benchmark schema: %w", err)
	}
	workloads := []benchWorkload{
		{Name: fmt.Sprintf("(a) %d small txns", *small), Txns: *small, Rows: *small,
			Write: fmt.Sprintf("CALL bench_small(%d)", *small)},
		{Name: fmt.Sprintf("(b) one %d-row txn", *large), Txns: 1, Rows: *large,
			Write: fmt.Sprintf("INSERT INTO bench SELECT i + 100000000, i %% 1000, 'large transaction ' || i FROM generate_series(1, %d) i", *large)},
	}

	var chosen []benchWorkload
	for i, wl := range workloads {
		if strings.Contains(*only, string(rune('a'+i))) {
			chosen = append(chosen, wl)
		}
	}
	workloads = chosen

	tools := []string{"freshet", "recvlogical"}
	if *base != "" {
		tools = append(tools, "base")
	}
	var results []benchResult
	var walBytes = map[string]int64{}
	for wi, wl := range workloads {
		if _, err := conn.Exec(ctx, "TRUNCATE bench"); err != nil {
			return err
		}
		// Every slot of this workload is made now, before any of its
		// writes, so they all start at the same point of the stream.
		var slots []string
		for _, p := range protoList {
			for r := 0; r < *reps; r++ {
				for _, tool := range tools {
					name := fmt.Sprintf("w%d_p%d_r%d_%s", wi, p, r, tool)
					if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", name); err != nil {
						return fmt.Errorf("create slot %s: %w", name, err)
					}
					slots = append(slots, name)
				}
			}
		}
		var start, end change.LSN
		var s string
		if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
			return err
		}
		start, _ = change.ParseLSN(s)
		logf("%s: writing", wl.Name)
		t0 := time.Now()
		if _, err := conn.Exec(ctx, wl.Write); err != nil {
			return fmt.Errorf("write workload %s: %w", wl.Name, err)
		}
		if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
			return err
		}
		end, _ = change.ParseLSN(s)
		// One transaction past L so every reader sees the stream pass it.
		if _, err := conn.Exec(ctx, "INSERT INTO bench_marker DEFAULT VALUES"); err != nil {
			return err
		}
		walBytes[wl.Name] = int64(end - start)
		logf("%s: wrote %.1f MB of WAL in %.1fs, L = %v", wl.Name, float64(end-start)/1e6, time.Since(t0).Seconds(), end)

		for _, p := range protoList {
			fr := benchResult{Workload: wl.Name, Tool: "freshet tail", Proto: p}
			pr := benchResult{Workload: wl.Name, Tool: "pg_recvlogical", Proto: p}
			br := benchResult{Workload: wl.Name, Tool: "freshet tail (--compare)", Proto: p}
			for r := 0; r < *reps; r++ {
				// Rotate which goes first, so none always runs on a
				// warmer cache.
				order := append(append([]string(nil), tools[r%len(tools):]...), tools[:r%len(tools)]...)
				type run struct {
					tool   string
					cmd    *exec.Cmd
					stderr bytes.Buffer
					start  time.Time
					secs   float64
					err    error
				}
				var runs []*run
				for _, tool := range order {
					slot := fmt.Sprintf("w%d_p%d_r%d_%s", wi, p, r, tool)
					var cmd *exec.Cmd
					if tool == "freshet" || tool == "base" {
						args := []string{"tail", "--dsn", dsn, "--slot", slot, "--publication", "bench",
							"--until", end.String(), "--format", "none", "--proto", fmt.Sprint(p), "--log-level", "warn"}
						args = append(args, strings.Fields(*extra)...)
						if *profile != "" {
							args = append(args, "--cpuprofile", filepath.Join(*profile, slot+".pprof"))
						}
						if tool == "base" {
							cmd = exec.CommandContext(ctx, *base, args...)
						} else {
							cmd = exec.CommandContext(ctx, bin, args...)
						}
					} else {
						args := []string{"-d", dsn, "--slot", slot, "--start", "--endpos", end.String(),
							"-f", "/dev/null", "--no-loop",
							"-o", fmt.Sprintf("proto_version=%d", p), "-o", "publication_names=bench", "-o", "messages=true"}
						if p >= 2 {
							args = append(args, "-o", "streaming=on")
						}
						cmd = exec.CommandContext(ctx, recvlogical, args...)
					}
					ru := &run{tool: tool, cmd: cmd}
					cmd.Stdout = io.Discard
					cmd.Stderr = &ru.stderr
					runs = append(runs, ru)
				}
				wait := func(ru *run) {
					ru.err = ru.cmd.Wait()
					ru.secs = time.Since(ru.start).Seconds()
				}
				if *parallel {
					// Both at once: they share whatever else the machine is
					// doing at that moment.
					for _, ru := range runs {
						ru.start = time.Now()
						ru.err = ru.cmd.Start()
					}
					var wg sync.WaitGroup
					for _, ru := range runs {
						if ru.err == nil {
							wg.Add(1)
							go func() { defer wg.Done(); wait(ru) }()
						}
					}
					wg.Wait()
				} else {
					for _, ru := range runs {
						ru.start = time.Now()
						if ru.err = ru.cmd.Start(); ru.err == nil {
							wait(ru)
						}
					}
				}
				for _, ru := range runs {
					if ru.err != nil {
						return fmt.Errorf("%s: %w\n%s", ru.tool, ru.err, ru.stderr.String())
					}
					cpu := (ru.cmd.ProcessState.UserTime() + ru.cmd.ProcessState.SystemTime()).Seconds()
					switch ru.tool {
					case "freshet":
						fr.Seconds = append(fr.Seconds, ru.secs)
						fr.CPU = append(fr.CPU, cpu)
					case "base":
						br.Seconds = append(br.Seconds, ru.secs)
						br.CPU = append(br.CPU, cpu)
					default:
						pr.Seconds = append(pr.Seconds, ru.secs)
						pr.CPU = append(pr.CPU, cpu)
					}
					logf("%s proto %d rep %d: %s %.3fs (client CPU %.2fs)", wl.Name, p, r+1, ru.tool, ru.secs, cpu)
				}
			}
			results = append(results, fr, pr)
			if *base != "" {
				results = append(results, br)
			}
		}
		for _, slot := range slots {
			_, _ = conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot)
		}
	}

	mode := "one after the other"
	if *parallel {
		mode = "at the same time"
	}
	fmt.Fprintf(m.Stdout, "\nmedian of %d runs each, the two readers %s; PostgreSQL %d; freshet tail flags: %q\n\n", *reps, mode, c.Version, *extra)
	tw := tabwriter.NewWriter(m.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tproto\ttool\tseconds\ttxn/s\trows/s\tWAL MB/s\tclient CPU s\tfreshet/pg_recvlogical\t")
	for i, r := range results {
		wl := workloads[0]
		for _, w := range workloads {
			if w.Name == r.Workload {
				wl = w
			}
		}
		sec := r.median()
		ratio := ""
		if r.Tool == "freshet tail" && i+1 < len(results) {
			ratio = fmt.Sprintf("%.2f", results[i+1].median()/sec)
		} else if r.Tool == "freshet tail (--compare)" && i > 0 {
			ratio = fmt.Sprintf("%.2f", results[i-1].median()/sec)
		}
		txnRate := fmt.Sprintf("%.0f", float64(wl.Txns)/sec)
		if float64(wl.Txns)/sec < 10 {
			txnRate = fmt.Sprintf("%.2f", float64(wl.Txns)/sec)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.2f\t%s\t%.0f\t%.1f\t%.2f\t%s\t\n", r.Workload, r.Proto, r.Tool, sec,
			txnRate, float64(wl.Rows)/sec, float64(walBytes[r.Workload])/1e6/sec, median(r.CPU), ratio)
	}
	return tw.Flush()
}

// findRecvlogical finds pg_recvlogical next to the server binaries (through
// symlinks, as Debian's /usr/bin wrappers or /usr/local/bin links have it),
// or on PATH.
func findRecvlogical(binDir string) (string, error) {
	dirs := []string{binDir}
	if p, err := filepath.EvalSymlinks(filepath.Join(binDir, "initdb")); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "pg_recvlogical")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("pg_recvlogical"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("pg_recvlogical not found in %s or on PATH; install it with: apt-get install -y postgresql-client", binDir)
}
