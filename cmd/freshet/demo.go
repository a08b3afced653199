package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"
)

const demoUsage = `Usage: freshet demo [seed|serve|verify|lag|bench|migrate] [flags]

With no subcommand: starts a throwaway PostgreSQL (or uses --dsn), creates
and seeds the ticket desk, runs 'freshet serve' in process, opens the ticket
desk's backend over the read cache and serves its HTTP handlers (and /stats)
on a port it prints, runs a writer, readers and a verifier that compares
every cached answer with PostgreSQL's, and shows what happens, refreshed
every second. Ctrl-C stops everything: the slot is dropped and the
throwaway server removed.

Subcommands:
  seed      create the schema and seed it into --dsn
  serve     the desk, the engine, the writer and the verify loop against --dsn
  verify    one pass of every lookup through the cache and PostgreSQL;
            exits 1 on any mismatch, printing both answers
  lag       commit-to-cached-answer latency (p50/p99/max) under --rate
  bench     reads/s and latency through the cache and through PostgreSQL
  migrate   widen|new-type|drop: a schema change under load, then verify

Flags:
`

// The demo's slot and publication.
const demoSlot = "freshet_demo"

// demoConfig is what `freshet demo` and its subcommands were asked to do.
type demoConfig struct {
	Sub        string // "" for the whole demo, else the subcommand
	DSN        string // empty: a throwaway PostgreSQL
	FreshetURL string // empty: run the engine in process
	Token      string
	Slot       string
	Listen     string // the desk's HTTP address
	Scale      int
	Seed       uint64
	Rate       float64 // writer transactions per second
	Writers    int     // writer transactions at once
	Mix        string  // writer mix
	Readers    int
	Keys       int     // argument draws per lookup in the working set
	Hot        int64   // tickets 1..Hot take every ticket change and the readers' ticket ids; 0: all
	ReadRate   float64 // all readers together, reads per second; 0 is flat out
	Verify     time.Duration
	Checkpoint time.Duration // between exact checkpoints; 0: none
	Settle     time.Duration
	Duration   time.Duration // 0: until Ctrl-C
	Plain      bool
	LogLevel   slog.Level

	// lag
	Samples int
	// bench
	Concurrency int
	PerLookup   time.Duration
	// migrate
	Kind string
	Load time.Duration
}

// parseDemoFlags parses a demo subcommand's arguments (sub "" is the demo
// itself): the flags they share and each one's own. Errors are
// usageErrors.
func (m *Main) parseDemoFlags(sub string, args []string) (*demoConfig, error) {
	name := "freshet demo"
	if sub != "" {
		name += " " + sub
	}
	fs := m.newCommandFlags("demo", name, demoUsage)
	c := &demoConfig{Sub: sub}
	fs.StringVar(&c.DSN, "dsn", os.Getenv("FRESHET_DEMO_DSN"), "use this database instead of a throwaway server (schema and seed are created when the tickets table is missing; the slot and publication are dropped on exit) ($FRESHET_DEMO_DSN)")
	if sub != "seed" {
		fs.StringVar(&c.FreshetURL, "freshet-url", "", "s2s endpoint of a running 'freshet serve' (ws://host:port/s2s/v1); default: run the engine in process")
		fs.StringVar(&c.Token, "token", os.Getenv("FRESHET_S2S_TOKEN"), "bearer token for --freshet-url ($FRESHET_S2S_TOKEN)")
		fs.StringVar(&c.Slot, "slot", demoSlot, "replication slot and publication of the in-process engine")
		fs.Float64Var(&c.Rate, "rate", 50, "writer transactions per second; 0 stops the writer")
		fs.IntVar(&c.Writers, "writers", 2, "writer transactions run at once (the rate is over all of them)")
		fs.StringVar(&c.Mix, "mix", "", "writer mix as kind=weight,... (kinds in docs/configuration.md); empty: every kind at its default weight")
		fs.IntVar(&c.Keys, "keys", 32, "working set: argument draws per lookup that readers and the verifier pick from; 0 draws new arguments for every read")
		fs.Int64Var(&c.Hot, "hot", 0, "hot set: the writer changes only tickets 1..N and the working set reads them (0: every ticket)")
		fs.Uint64Var(&c.Seed, "seed", 0, "random seed of the writer, the readers' working set and the verifier; 0 picks one from the clock")
	}
	fs.IntVar(&c.Scale, "scale", 1, "seed scale factor (scale 1: 10 organizations, 200 users, 3,000 tickets, about 6,000 comments)")
	logLevel := fs.String("log-level", "warn", "log level of the engine and the read cache: debug, info, warn or error (logs go to stderr)")
	switch sub {
	case "", "serve", "cluster":
		fs.StringVar(&c.Listen, "listen", "127.0.0.1:0", "address of the desk's HTTP handlers and /stats (port 0 picks a free one, printed)")
		fs.IntVar(&c.Readers, "readers", 16, "readers calling the desk's lookups through the cache")
		fs.Float64Var(&c.ReadRate, "read-rate", 2000, "reads per second of all readers together; 0 reads flat out")
		fs.DurationVar(&c.Verify, "verify-every", time.Second, "pause between verifier passes")
		fs.DurationVar(&c.Checkpoint, "checkpoint-every", 10*time.Second, "time between exact checkpoints: the writer pauses, the cache passes PostgreSQL's WAL position, every lookup is compared with no settling (0: none)")
		fs.DurationVar(&c.Settle, "settle", 3*time.Second, "the least time a differing pair is re-read, and the staleness assumed when the cache reports none")
		fs.DurationVar(&c.Duration, "duration", 0, "stop after this long (0: run until Ctrl-C)")
		fs.BoolVar(&c.Plain, "plain", false, "print one plain line per second instead of redrawing (the default when stdout is not a terminal)")
	case "verify":
		fs.DurationVar(&c.Settle, "settle", 3*time.Second, "the least time a differing pair is re-read, and the staleness assumed when the cache reports none")
	case "lag":
		fs.IntVar(&c.Samples, "samples", 200, "stamps to measure")
		fs.IntVar(&c.Readers, "readers", 0, "readers calling the desk's lookups through the cache while measuring")
		fs.Float64Var(&c.ReadRate, "read-rate", 2000, "reads per second of all readers together; 0 reads flat out")
	case "bench":
		fs.IntVar(&c.Concurrency, "concurrency", 16, "goroutines reading at once, on each route")
		fs.DurationVar(&c.Duration, "duration", 5*time.Second, "how long each route is measured with every lookup mixed")
		fs.DurationVar(&c.PerLookup, "per-lookup", time.Second, "how long each route is measured with each lookup alone")
	case "migrate":
		fs.IntVar(&c.Readers, "readers", 16, "readers calling the desk's lookups through the cache during the migration")
		fs.Float64Var(&c.ReadRate, "read-rate", 2000, "reads per second of all readers together; 0 reads flat out")
		fs.DurationVar(&c.Load, "load", 5*time.Second, "how long the load runs before and after the schema change")
		fs.DurationVar(&c.Settle, "settle", 3*time.Second, "the least time a differing pair is re-read, and the staleness assumed when the cache reports none")
	}
	bad := fs.bad
	if err := fs.parse(args); err != nil {
		return nil, err
	}
	rest := fs.Args()
	if sub == "migrate" {
		if len(rest) == 0 {
			return nil, bad("migrate: name the change: widen, new-type or drop")
		}
		c.Kind, rest = rest[0], rest[1:]
		if _, ok := migrations[c.Kind]; !ok {
			return nil, bad("migrate %q: want widen, new-type or drop", c.Kind)
		}
		// Flags may follow the kind.
		if err := fs.parse(rest); err != nil {
			return nil, err
		}
		rest = fs.Args()
	}
	if len(rest) > 0 {
		return nil, bad("unexpected argument %q", rest[0])
	}
	if err := c.LogLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return nil, bad("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	switch {
	case c.Scale < 1:
		return nil, bad("--scale %d: want 1 or more", c.Scale)
	case c.Rate < 0:
		return nil, bad("--rate %v: want 0 or more", c.Rate)
	case sub != "seed" && c.Writers < 1:
		return nil, bad("--writers %d: want 1 or more", c.Writers)
	case c.Readers < 0 || c.ReadRate < 0 || c.Keys < 0 || c.Hot < 0:
		return nil, bad("--readers, --read-rate, --keys and --hot: want 0 or more")
	case (sub == "" || sub == "serve" || sub == "cluster") && c.Verify <= 0:
		return nil, bad("--verify-every %v: want a positive duration", c.Verify)
	case c.Duration < 0 || c.Settle < 0 || c.Load < 0 || c.Checkpoint < 0:
		return nil, bad("durations: want 0 or more")
	case sub == "lag" && c.Samples < 1:
		return nil, bad("--samples %d: want 1 or more", c.Samples)
	case sub == "bench" && (c.Concurrency < 1 || c.Duration <= 0 || c.PerLookup <= 0):
		return nil, bad("--concurrency, --duration and --per-lookup: want 1 or more and positive durations")
	case (sub == "seed" || sub == "serve") && c.DSN == "":
		return nil, bad("%s: no database given: pass --dsn 'postgres://user@host/db'", sub)
	}
	if _, err := parseMix(c.Mix); err != nil {
		return nil, bad("--mix %q: %v", c.Mix, err)
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	return c, nil
}

// runDemo implements `freshet demo` and its subcommands.
func (m *Main) runDemo(ctx context.Context, args []string) error {
	sub := ""
	if len(args) > 0 {
		switch args[0] {
		case "seed", "serve", "verify", "lag", "bench", "migrate", "cluster":
			sub, args = args[0], args[1:]
		}
	}
	cfg, err := m.parseDemoFlags(sub, args)
	if errors.Is(err, errHelp) {
		return nil
	} else if err != nil {
		return err
	}
	switch sub {
	case "seed":
		return m.demoSeed(ctx, cfg)
	case "verify":
		return m.demoVerify(ctx, cfg)
	case "lag":
		return m.demoLag(ctx, cfg)
	case "bench":
		return m.demoBench(ctx, cfg)
	case "migrate":
		return m.demoMigrate(ctx, cfg)
	case "cluster":
		return m.demoCluster(ctx, cfg)
	}
	return m.demoRun(ctx, cfg)
}

// say prints a progress line on stderr.
func (m *Main) say(format string, a ...any) {
	fmt.Fprintf(m.Stderr, "freshet demo: "+format+"\n", a...)
}

// commas formats n with thousands separators.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var b []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	if neg {
		return "-" + string(b)
	}
	return string(b)
}
