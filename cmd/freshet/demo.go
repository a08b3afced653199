package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/pgwal"
	"github.com/jackc/pgx/v5"
)

const demoUsage = `Usage: freshet demo [flags]

Starts a throwaway PostgreSQL (or uses --dsn), creates a small ticket-desk
schema (organizations, tickets, comments), runs a writer that opens, comments
on and closes tickets, and prints every committed transaction as 'freshet
tail' would. Runs until Ctrl-C; the throwaway server is then stopped and
removed.

Flags:
`

// The demo's slot and publication.
const demoSlot = "freshet_demo"

// runDemo implements `freshet demo`.
func (m *Main) runDemo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("freshet demo", flag.ContinueOnError)
	var flagOut bytes.Buffer
	fs.SetOutput(&flagOut)
	var (
		dsn      = fs.String("dsn", "", "use this database instead of a throwaway server (creates the demo tables, slot and publication in it; the slot and publication are dropped on exit)")
		interval = fs.Duration("interval", 800*time.Millisecond, "pause between the writer's transactions")
		proto    = fs.Int("proto", pgwal.DefaultConfig().ProtoVersion, "pgoutput protocol version: 1 or 2")
		logLevel = fs.String("log-level", "info", "log level: debug, info, warn or error")
	)
	fs.Usage = func() {
		printFlags(fs, demoUsage)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(m.Stdout, flagOut.String())
			return nil
		}
		fmt.Fprint(m.Stderr, flagOut.String())
		return usageError{"demo: " + err.Error()}
	}
	bad := func(format string, a ...any) error {
		fs.Usage()
		fmt.Fprint(m.Stderr, flagOut.String())
		return usageError{"demo: " + fmt.Sprintf(format, a...)}
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q (flags only)", fs.Arg(0))
	}
	if *interval <= 0 {
		return bad("--interval %v: want a positive duration", *interval)
	}
	if *proto != 1 && *proto != 2 {
		return bad("--proto %d: want 1 or 2", *proto)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return bad("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	logger := slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: level}))

	if *dsn == "" {
		fmt.Fprintln(m.Stderr, "freshet demo: starting a throwaway PostgreSQL...")
		c, err := pgtest.Start(pgtest.Options{})
		if err != nil {
			return fmt.Errorf("start a throwaway PostgreSQL: %w", err)
		}
		defer func() {
			fmt.Fprintln(m.Stderr, "freshet demo: stopping PostgreSQL and removing", c.Dir)
			c.Stop()
		}()
		*dsn = c.DSN("postgres")
		fmt.Fprintf(m.Stderr, "freshet demo: PostgreSQL %d is at %s (log: %s)\n", c.Version, *dsn, c.LogPath())
	} else {
		defer dropDemoSlot(*dsn, logger)
	}

	w, err := newDeskWriter(ctx, *dsn, *interval, logger)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer w.Close()
	stream := pgwal.DefaultConfig()
	stream.DSN = *dsn
	stream.Slot = demoSlot
	stream.Publication = demoSlot
	stream.Tables = []string{"organizations", "tickets", "comments"}
	stream.Create = true
	stream.ProtoVersion = *proto
	opened := make(chan struct{})
	cfg := &tailConfig{
		Stream: stream,
		Format: "json",
		Logger: logger,
		Opened: func() { close(opened) },
	}

	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		tailErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cancel()
		tailErr = m.tail(ctx, cfg)
	}()
	select {
	case <-opened:
	case <-ctx.Done():
		wg.Wait()
		return tailErr
	}
	if err := w.Seed(ctx); err != nil {
		cancel()
		wg.Wait()
		if parent.Err() != nil {
			return tailErr
		}
		return err
	}
	fmt.Fprintf(m.Stderr, "freshet demo: a writer commits a transaction every %v; each one is printed below as a JSON line. Press Ctrl-C to stop.\n", *interval)
	werr := w.Run(ctx)
	cancel()
	wg.Wait()
	if werr != nil {
		return werr
	}
	return tailErr
}

// dropDemoSlot drops the demo's slot and publication from a database the
// user gave, so the slot does not pin WAL after the demo.
func dropDemoSlot(dsn string, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		logger.Warn("drop the demo's slot: connect", "err", err, "slot", demoSlot)
		return
	}
	defer conn.Close(ctx)
	for i := 0; i < 50; i++ {
		var left int
		_, _ = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, demoSlot)
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, demoSlot).Scan(&left); err != nil || left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{demoSlot}.Sanitize()); err != nil {
		logger.Warn("drop the demo's publication", "err", err)
	}
	fmt.Fprintf(os.Stderr, "freshet demo: dropped slot and publication %q (the demo tables stay)\n", demoSlot)
}
