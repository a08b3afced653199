package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/freshetdb/freshet/ticketdesk"
)

// demoRun implements `freshet demo` and `freshet demo serve`: the whole
// story, until Ctrl-C or --duration.
func (m *Main) demoRun(ctx context.Context, cfg *demoConfig) error {
	return m.withLoad(ctx, cfg, func(st *demoStack, ld *demoLoad) error { return m.run(ctx, cfg, st, ld) })
}

// run shows the load until Ctrl-C or --duration.
func (m *Main) run(ctx context.Context, cfg *demoConfig, st *demoStack, ld *demoLoad) error {
	ld.StartVerifier(cfg.Verify, cfg.Settle, cfg.Checkpoint)
	if err := ld.StartProbe(200 * time.Millisecond); err != nil {
		return err
	}
	smp := ld.newSampler()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s (--listen): %w", cfg.Listen, err)
	}
	hs := &http.Server{Handler: ld.deskMux(smp), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	desk := "http://" + ln.Addr().String()
	m.say("the ticket desk's backend is at %s (its lookups under /, counters at %s/stats)", desk, desk)
	m.say("engine %s, PostgreSQL %s", st.url, st.dsn)

	tty := !cfg.Plain && isTerminal(m.Stdout)
	head := fmt.Sprintf("freshet demo: ticket desk at %s   engine %s", desk, st.url)
	var stopAt <-chan time.Time
	if cfg.Duration > 0 {
		stopAt = time.After(cfg.Duration)
	}
	tick := time.NewTicker(time.Second)
	var runErr error
	printed := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-stopAt:
			break loop
		case err := <-ld.Err():
			runErr = err
			break loop
		case <-tick.C:
		}
		sn := smp.Sample(ctx)
		var b bytes.Buffer
		if tty {
			b.WriteString("\x1b[H\x1b[2J")
			sn.Render(&b, head)
		} else {
			b.WriteString(sn.Line() + "\n")
		}
		ld.verifier.mu.Lock()
		mms := ld.verifier.mismatches
		ld.verifier.mu.Unlock()
		if tty {
			for i, mm := range mms {
				if i == 5 {
					fmt.Fprintf(&b, "... and %d more (all on %s/stats)\n", len(mms)-5, desk)
					break
				}
				b.WriteString(formatMismatch(mm) + "\n")
			}
		} else {
			for _, mm := range mms[printed:] {
				b.WriteString(formatMismatch(mm) + "\n")
			}
			printed = len(mms)
		}
		m.Stdout.Write(b.Bytes())
	}
	tick.Stop()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = hs.Shutdown(sctx)
	cancel()
	ld.Stop()
	sn := smp.Sample(context.Background())
	w := bufio.NewWriter(m.Stdout)
	fmt.Fprintln(w, "final: "+sn.Summary())
	w.Flush()
	if runErr != nil {
		return runErr
	}
	if sn.Mismatches > 0 {
		return fmt.Errorf("the verifier found %d mismatches between the cache and PostgreSQL (printed above)", sn.Mismatches)
	}
	return nil
}

// deskMux serves the ticket desk's handlers and /stats.
func (ld *demoLoad) deskMux(smp *sampler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", ticketdesk.NewHandler(ld.st.cached))
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		smp.mu.Lock()
		sn := smp.last
		smp.mu.Unlock()
		if sn == nil {
			sn = smp.Sample(r.Context())
		}
		b, err := ld.statsJSON(sn)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	return mux
}

// demoSeed implements `freshet demo seed`.
func (m *Main) demoSeed(ctx context.Context, cfg *demoConfig) error {
	_, db, err := openDirect(cfg.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	seeded, err := ensureSeeded(ctx, db, cfg.Scale)
	if err != nil {
		return quiet(ctx, err)
	}
	if !seeded {
		return errors.New("seed: the ticket desk's tables are already there; drop them first (DROP TABLE tickets CASCADE, ...) to seed again")
	}
	m.say("created the ticket desk's schema and seeded it (scale %d)", cfg.Scale)
	return nil
}

// demoVerify implements `freshet demo verify`: one pass of every lookup.
func (m *Main) demoVerify(ctx context.Context, cfg *demoConfig) error {
	cfg.Rate = 0 // verify reads; it does not write
	return m.withLoad(ctx, cfg, func(st *demoStack, ld *demoLoad) error { return m.verify(ctx, cfg, ld) })
}

// verify runs one pass and prints what it found.
func (m *Main) verify(ctx context.Context, cfg *demoConfig, ld *demoLoad) error {
	rep, err := ld.VerifyOnce(ctx, rand.New(rand.NewSource(int64(cfg.Seed)+7)), cfg.Settle)
	if err != nil {
		return quiet(ctx, fmt.Errorf("verify: %w", err))
	}
	mms := rep.Mismatches
	tw := tabwriter.NewWriter(m.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "lookup\texpect\tcached read\trefusal code\tagreed\t")
	for _, lr := range rep.Lookups {
		agreed := "at once"
		switch {
		case lr.Mismatched > 0:
			agreed = "NO"
		case lr.AgreedAfterSettle > 0:
			agreed = "after a re-read"
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\t\n", lr.Name, lr.Expect, routeNames(lr.Routes), routeNames(lr.Refusals), agreed)
	}
	tw.Flush()
	fmt.Fprintf(m.Stdout, "verify: %d lookups, %d answers compared, %d mismatches\n", len(rep.Lookups), rep.Compared, len(mms))
	for _, mm := range mms {
		fmt.Fprintln(m.Stdout, formatMismatch(mm))
	}
	if len(mms) > 0 {
		return fmt.Errorf("verify: %d mismatches between the cache and PostgreSQL", len(mms))
	}
	return nil
}

// routeNames names the routes a lookup's cached reads took ("cache" is
// from memory, anything else is why it went to PostgreSQL).
func routeNames(routes map[string]int) string {
	var out []string
	for k, n := range routes {
		if n == 1 {
			out = append(out, k)
		} else {
			out = append(out, fmt.Sprintf("%s x%d", k, n))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
