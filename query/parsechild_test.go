package query

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// envParseChild names a file of SQL the test binary parses with
// PostgreSQL's parser and nothing else (see parseChild), so a test can
// watch the parser crash without the crash ending its own run.
const envParseChild = "FRESHET_PARSE_CHILD"

// parseChild runs in a child process started by parseInChild: it does
// with the file's SQL what compiling and rendering do in C (parse, deparse
// the tree, parse the deparsed text), on a thread other than the main
// one as a server's compiles do, and prints "ok" or "error: ..." on
// stdout. A crash of the parser ends the child with a signal instead.
func parseChild(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	done := make(chan error)
	runtime.LockOSThread() // the parse runs on another thread, as a server's does
	go func() { done <- parseDeparseParse(string(b)) }()
	if err := <-done; err != nil {
		fmt.Printf("error: %v\n", err)
		return 0
	}
	fmt.Println("ok")
	return 0
}

func parseDeparseParse(sql string) error {
	tree, err := pg.Parse(sql)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "parsed")
	text, err := pg.Deparse(tree)
	if err != nil {
		return fmt.Errorf("deparse: %w", err)
	}
	fmt.Fprintln(os.Stderr, "deparsed")
	if _, err := pg.Parse(text); err != nil {
		return fmt.Errorf("parse the deparsed text: %w", err)
	}
	return nil
}

// childOutcome is what parsing one text in a child process came to.
type childOutcome struct {
	crashed bool   // the child died (a signal, or a nonzero exit)
	err     string // the parser's error, "" when it parsed
	detail  string // the exit status and stderr's tail, when crashed
	took    time.Duration
}

func (o childOutcome) String() string {
	switch {
	case o.crashed:
		return "CRASH (" + o.detail + ")"
	case o.err != "":
		return "error: " + o.err
	}
	return "ok"
}

// parseInChild parses sql with pg_query in a child process whose stack
// limit (RLIMIT_STACK, the C stack of its threads) is stackKiB.
func parseInChild(t testing.TB, sql string, stackKiB int) childOutcome {
	t.Helper()
	path := filepath.Join(t.TempDir(), "q.sql")
	if err := os.WriteFile(path, []byte(sql), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", fmt.Sprintf(`ulimit -s %d && exec "$0" -test.run='^$'`, stackKiB), os.Args[0])
	cmd.Env = append(os.Environ(), envParseChild+"="+path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	o := childOutcome{took: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		tail := stderr.String()
		if len(tail) > 240 {
			tail = tail[:240]
		}
		o.crashed, o.detail = true, exit.String()+": "+strings.TrimSpace(tail)
	case err != nil:
		t.Fatalf("run the parse child: %v", err)
	default:
		out := strings.TrimSpace(stdout.String())
		if out != "ok" {
			o.err = strings.TrimPrefix(out, "error: ")
		}
	}
	return o
}
