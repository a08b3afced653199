package main

import (
	"context"
	"strings"
	"testing"
)

// TestCommandFlags holds every subcommand to one convention: -h prints the
// usage to stdout and exits 0 with nothing on stderr; an unknown flag
// prints flag's message and the usage to stderr, nothing to stdout, and
// exits 2 with an error naming the subcommand.
func TestCommandFlags(t *testing.T) {
	for _, args := range [][]string{
		{"serve"}, {"tail"}, {"relay"}, {"demo"}, {"demo", "seed"}, {"demo", "verify"}, {"bench-tail"},
	} {
		name := strings.Join(args, " ")
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			usage := "Usage: freshet " + args[0]
			out, errOut, err := runMain(context.Background(), append(args, "-h")...)
			if err != nil {
				t.Fatalf("freshet %s -h: %v, want exit 0", name, err)
			}
			if !strings.Contains(out, usage) || errOut != "" {
				t.Errorf("freshet %s -h: stdout %q, stderr %q; want the usage on stdout alone", name, head(out), head(errOut))
			}
			out, errOut, err = runMain(context.Background(), append(args, "--bogus")...)
			if exitCode(err) != 2 || err == nil || !strings.HasPrefix(err.Error(), args[0]+": flag provided but not defined: -bogus") {
				t.Errorf("freshet %s --bogus: %v (exit %d), want exit 2 naming the subcommand and the flag", name, err, exitCode(err))
			}
			if out != "" || !strings.Contains(errOut, "flag provided but not defined") || !strings.Contains(errOut, usage) {
				t.Errorf("freshet %s --bogus: stdout %q, stderr %q; want the message and the usage on stderr alone", name, head(out), head(errOut))
			}
		})
	}
}

// head is the start of s, for messages.
func head(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
