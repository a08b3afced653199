package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/pgwal"
	"github.com/jackc/pgx/v5/pgconn"
)

const tailUsage = `Usage: freshet tail [flags]

Prints one JSON object per committed transaction, one line each, in commit
order. A transaction is acknowledged to PostgreSQL only once it has been
written (and, with --output, fsynced), so nothing is lost across restarts.

Flags:
`

// tailConfig is what `freshet tail` was asked to do.
type tailConfig struct {
	Stream     pgwal.Config
	From       change.LSN // start position; 0 = the slot's confirmed position
	Until      change.LSN // stop once the stream has passed it; 0 = never
	Format     string     // "json" or "none"
	Output     string     // file to append to; "" = stdout
	LogLevel   slog.Level
	CPUProfile string // write a CPU profile here; "" = none

	// Logger, when set, is used instead of a text logger at LogLevel.
	Logger *slog.Logger
	// Opened, when set, is called once the stream is open (the slot
	// exists), before the first event is read.
	Opened func()
}

// parseTailFlags turns tail's arguments into a tailConfig. Errors are
// usageErrors.
func (m *Main) parseTailFlags(args []string) (*tailConfig, error) {
	fs := m.newCommandFlags("tail", "freshet tail", tailUsage)
	def := pgwal.DefaultConfig()
	var (
		dsn         = fs.String("dsn", os.Getenv("FRESHET_DSN"), "PostgreSQL connection string of the database to follow (default $FRESHET_DSN)")
		slot        = fs.String("slot", def.Slot, "replication slot name")
		publication = fs.String("publication", def.Publication, "publication name")
		tables      = fs.String("tables", "", "comma-separated tables for the publication (default: all tables)")
		create      = fs.Bool("create", false, "create the slot and publication if they are missing")
		from        = fs.String("from", "", "start at this LSN (X/X) instead of the slot's confirmed position")
		until       = fs.String("until", "", "stop (exit 0) once the stream has passed this LSN (X/X)")
		format      = fs.String("format", "json", "output format: json or none (decode and acknowledge, print nothing)")
		output      = fs.String("output", "", "append to this file (fsynced before acknowledging) and resume after its last transaction")
		proto       = fs.Int("proto", def.ProtoVersion, "pgoutput protocol version: 1 or 2 (2 streams large transactions before they commit)")
		binary      = fs.Bool("binary", def.Binary, "ask pgoutput for binary values (printed base64-encoded)")
		heartbeat   = fs.Duration("heartbeat", def.HeartbeatInterval, "heartbeat interval for lag probes; 0 turns them off")
		logLevel    = fs.String("log-level", "info", "log level: debug, info, warn or error")
		cpuProfile  = fs.String("cpuprofile", "", "write a CPU profile (go tool pprof) to this file")
	)
	bad := fs.bad
	if err := fs.parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, bad("unexpected argument %q (flags only)", fs.Arg(0))
	}
	cfg := &tailConfig{Stream: def, Format: *format, Output: *output, CPUProfile: *cpuProfile}
	if *dsn == "" {
		return nil, bad("no database given: pass --dsn 'postgres://user@host/db' or set FRESHET_DSN")
	}
	cfg.Stream.DSN = *dsn
	cfg.Stream.Slot = *slot
	cfg.Stream.Publication = *publication
	if *tables != "" {
		for _, t := range strings.Split(*tables, ",") {
			if t = strings.TrimSpace(t); t != "" {
				cfg.Stream.Tables = append(cfg.Stream.Tables, t)
			}
		}
	}
	cfg.Stream.Create = *create
	var err error
	if *from != "" {
		if cfg.From, err = change.ParseLSN(*from); err != nil {
			return nil, bad("--from: %v", err)
		}
	}
	if *until != "" {
		if cfg.Until, err = change.ParseLSN(*until); err != nil {
			return nil, bad("--until: %v", err)
		}
	}
	switch cfg.Format {
	case "json", "none":
	default:
		return nil, bad("--format %q: want json or none", cfg.Format)
	}
	if cfg.Format == "none" && cfg.Output != "" {
		return nil, bad("--output with --format none would write nothing to resume from; drop one of them")
	}
	if *proto != 1 && *proto != 2 {
		return nil, bad("--proto %d: want 1 or 2", *proto)
	}
	cfg.Stream.ProtoVersion = *proto
	cfg.Stream.Binary = *binary
	if *heartbeat < 0 {
		return nil, bad("--heartbeat %v: want a duration >= 0", *heartbeat)
	}
	cfg.Stream.HeartbeatInterval = *heartbeat
	if err := cfg.LogLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return nil, bad("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	if err := cfg.Stream.Validate(); err != nil {
		return nil, bad("%v", err)
	}
	return cfg, nil
}

// runTail implements `freshet tail`.
func (m *Main) runTail(ctx context.Context, args []string) error {
	cfg, err := m.parseTailFlags(args)
	if errors.Is(err, errHelp) {
		return nil
	} else if err != nil {
		return err
	}
	return m.tail(ctx, cfg)
}

// tail follows the stream as cfg says until ctx ends or cfg.Until is
// passed.
func (m *Main) tail(ctx context.Context, cfg *tailConfig) error {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	}
	cfg.Stream.Logger = logger
	if cfg.CPUProfile != "" {
		stop, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}

	t := &tailer{format: cfg.Format, until: cfg.Until, logger: logger}
	var out io.Writer = m.Stdout
	if cfg.Output != "" {
		f, last, err := openOutput(cfg.Output)
		if err != nil {
			return err
		}
		defer f.Close()
		out, t.sync = f, f.Sync
		if f.torn > 0 {
			logger.Info("cut a torn last line (a transaction an earlier run did not finish writing; it was never acknowledged, so it comes again)", "file", cfg.Output, "bytes", f.torn)
		}
		if last > 0 {
			// Resume strictly after the file's last transaction. The slot
			// never confirmed past it (we ack only after fsync), so
			// nothing after it is lost; the reader may resend it, and the
			// filter below drops it.
			t.after = last
			if last > cfg.From {
				cfg.From = last
			}
			logger.Info("resuming after the output file's last transaction", "file", cfg.Output, "lsn", last)
		}
	}
	if cfg.Until != 0 && cfg.Stream.HeartbeatInterval == 0 {
		logger.Warn("with --heartbeat 0, --until stops only when a transaction at or past it arrives; nothing else marks the stream passing it", "until", cfg.Until)
	}
	cfg.Stream.StartLSN = cfg.From
	t.out = &countingWriter{w: out}
	t.w = bufio.NewWriterSize(t.out, 256<<10)
	// A streamed transaction (protocol 2) is encoded while it streams
	// and kept in its output form, so its commit only copies bytes out.
	if cfg.Format == "json" {
		t.enc = change.NewTxnJSONWriter(t.w)
		cfg.Stream.Decoder.StreamEncoder = change.JSONEncoder{}
	} else {
		cfg.Stream.Decoder.StreamEncoder = noEncoding{}
	}

	r, err := pgwal.Open(ctx, cfg.Stream)
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while connecting
		}
		return tailOpenError(cfg, err)
	}
	defer r.Close()
	if cfg.Opened != nil {
		cfg.Opened()
	}
	return t.run(ctx, r)
}

// noEncoding is the StreamEncoder of --format none: changes are decoded
// (and so checked) as they stream, and nothing of them is kept.
type noEncoding struct{}

func (noEncoding) AppendChange(dst []byte, _ *change.Change) []byte { return dst }

// tailOpenError makes sure set-up errors say what to do on the command
// line.
func tailOpenError(cfg *tailConfig, err error) error {
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return fmt.Errorf("%w\ncheck that PostgreSQL is running and reachable at the address in --dsn (or FRESHET_DSN), and that the user, password and database in it are right", err)
	}
	msg := err.Error()
	if !cfg.Stream.Create && strings.Contains(msg, "does not exist") && !strings.Contains(msg, "--create") &&
		(strings.Contains(msg, "slot") || strings.Contains(msg, "publication")) {
		return fmt.Errorf("%w\nrun again with --create to create slot %q and publication %q", err, cfg.Stream.Slot, cfg.Stream.Publication)
	}
	return err
}

// eventSource is the part of *pgwal.Reader tail uses.
type eventSource interface {
	Next(ctx context.Context) (change.Event, error)
	Ack(lsn change.LSN)
}

// tailer writes the stream out and acknowledges what it has durably
// written. Events are read ahead by a goroutine so tail can tell a burst
// (more already waiting: keep writing) from a pause (nothing waiting: flush,
// fsync once, acknowledge the highest written position).
type tailer struct {
	format string
	out    *countingWriter
	w      *bufio.Writer
	enc    txnEncoder   // nil for --format none
	sync   func() error // fsync after flushing; nil for stdout
	after  change.LSN   // drop transactions at or before this position (already in the output file)
	until  change.LSN   // stop once passed; 0 = never
	logger *slog.Logger

	unacked  change.LSN // highest position written but not yet acknowledged
	inTxn    bool       // a transaction's fragments are being written
	skipping bool       // the current transaction is being dropped
	lastSync time.Time
}

// txnEncoder writes transactions fragment by fragment
// (*change.TxnJSONWriter).
type txnEncoder interface {
	Write(frag *change.Txn) error
}

type nextResult struct {
	ev  change.Event
	err error
}

// The reader goroutine stays at most this far ahead of the writer.
const readAhead = 256

// A burst is synced at least this often, so acknowledgements keep flowing
// under a steady stream.
const (
	syncBytes = 8 << 20
	syncEvery = 250 * time.Millisecond
)

func (t *tailer) run(ctx context.Context, r eventSource) error {
	rctx, cancel := context.WithCancel(ctx)
	ch := make(chan nextResult, readAhead)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := r.Next(rctx)
			select {
			case ch <- nextResult{ev, err}:
			case <-rctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() { cancel(); <-done }()

	t.lastSync = time.Now()
	for {
		var res nextResult
		select {
		case res = <-ch:
		case <-ctx.Done():
			return t.commit(r) // Ctrl-C: keep what was written, exit cleanly
		}
		if res.err != nil {
			if ctx.Err() != nil {
				return t.commit(r)
			}
			if err := t.commit(r); err != nil {
				t.logger.Error("acknowledge before exiting", "err", err)
			}
			return fmt.Errorf("read the stream: %w", res.err)
		}
		stop, err := t.handle(res.ev)
		if err != nil {
			return err
		}
		if stop {
			return t.commit(r)
		}
		if len(ch) == 0 || t.out.n >= syncBytes || time.Since(t.lastSync) >= syncEvery {
			if err := t.commit(r); err != nil {
				return err
			}
		}
	}
}

// handle writes one event and reports whether --until has been passed.
func (t *tailer) handle(ev change.Event) (stop bool, err error) {
	switch ev := ev.(type) {
	case *change.Txn:
		if ev.Fragment == 0 {
			t.skipping = ev.CommitLSN <= t.after && t.after != 0
			if t.until != 0 && ev.CommitLSN > t.until {
				return true, nil // past the end: not ours to print
			}
		}
		if t.skipping {
			return false, nil
		}
		t.inTxn = !ev.Last
		if t.enc != nil {
			if err := t.enc.Write(ev); err != nil {
				return false, fmt.Errorf("write transaction %v: %w", ev.CommitLSN, err)
			}
		}
		if !ev.Last {
			return false, nil
		}
		t.unacked = ev.CommitLSN
		return t.until != 0 && (ev.CommitLSN >= t.until || ev.EndLSN >= t.until), nil
	case *change.Heartbeat:
		// Heartbeats are not printed. They come between transactions, so
		// once what came before is durable their position may be acked.
		if !t.inTxn && ev.LSN > t.unacked {
			t.unacked = ev.LSN
		}
		return t.until != 0 && ev.LSN >= t.until, nil
	default:
		return false, nil
	}
}

// commit flushes what was written, fsyncs it (with --output) and
// acknowledges the highest complete position.
func (t *tailer) commit(r eventSource) error {
	if err := t.w.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if t.unacked == 0 {
		return nil
	}
	if t.sync != nil {
		if err := t.sync(); err != nil {
			return err
		}
	}
	r.Ack(t.unacked)
	t.unacked = 0
	t.out.n = 0
	t.lastSync = time.Now()
	return nil
}

// countingWriter counts the bytes written since the last sync.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
