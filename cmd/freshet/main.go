package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
)

// Version is the server's version, set at build time with -ldflags.
var Version = "0.1.0-dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "tail" && os.Getenv("GOMAXPROCS") == "" {
		// tail is one serial pipeline (receive, decode, write) whose pace
		// is set by the walsender. With more than one P, every message
		// handed from the receiving goroutine to the decoding one wakes
		// another OS thread; on one P the handoff is a plain goroutine
		// switch. Measured: a third of the CPU for the same stream, CPU
		// that a small machine leaves to the walsender
		// (docs/benchmarks.md). GOMAXPROCS in the environment overrides.
		runtime.GOMAXPROCS(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := &Main{Stdout: os.Stdout, Stderr: os.Stderr}
	if err := m.Run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "freshet:", err)
		os.Exit(exitCode(err))
	}
}

// Main is the command line, kept as a value so tests can run it.
type Main struct {
	Stdout io.Writer
	Stderr io.Writer
}

const usage = `freshet follows a PostgreSQL database through logical replication.

Usage:
  freshet <command> [flags]

Commands:
  serve     serve fresh query results to backends over WebSocket
  tail      print committed transactions as JSON, one per line
  relay     publish committed transactions to a NATS JetStream bus for serve replicas
  demo      the ticket-desk demo: engine, read cache, writer, readers, verifier
  version   print the version

Run 'freshet <command> -h' for a command's flags.
`

// printFlags prints a subcommand's usage text and its flags, spelled
// --name as the rest of the documentation spells them.
func printFlags(fs *flag.FlagSet, text string) {
	var b strings.Builder
	out := fs.Output()
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(out)
	fmt.Fprint(out, text, strings.ReplaceAll("\n"+b.String(), "\n  -", "\n  --")[1:])
}

// startCPUProfile writes a CPU profile to path until stop is called
// (--cpuprofile of tail and serve).
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create CPU profile (--cpuprofile): %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("start CPU profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// usageError is a mistake in how the command was called (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func exitCode(err error) int {
	if _, ok := err.(usageError); ok {
		return 2
	}
	return 1
}

// Run runs the command named by args[0].
func (m *Main) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return usageError{"no command given"}
	}
	switch args[0] {
	case "version", "--version":
		fmt.Fprintln(m.Stdout, "freshet", Version)
		return nil
	case "serve":
		return m.runServe(ctx, args[1:])
	case "tail":
		return m.runTail(ctx, args[1:])
	case "relay":
		return m.runRelay(ctx, args[1:])
	case "demo":
		return m.runDemo(ctx, args[1:])
	case "bench-tail": // hidden: the end-to-end benchmark (scripts/bench-tail.sh)
		return m.runBenchTail(ctx, args[1:])
	case "help", "-h", "--help":
		fmt.Fprint(m.Stdout, usage)
		return nil
	default:
		fmt.Fprint(m.Stderr, usage)
		return usageError{fmt.Sprintf("unknown command %q", args[0])}
	}
}
