package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
)

// errHelp is returned when -h was asked for: the usage went to Stdout and
// the command exits 0.
var errHelp = errors.New("help requested")

// commandFlags is one subcommand's flag set. The flag package prints into
// a buffer, which goes to Stdout when -h was asked for and to Stderr
// after a mistake, so that `freshet serve -h | less` works and a wrong
// flag still reaches the terminal.
type commandFlags struct {
	*flag.FlagSet
	m    *Main
	name string // the subcommand's name, the prefix of its usage errors
	out  bytes.Buffer
}

// newCommandFlags makes the flag set of `freshet <name>` (flagSet names
// it in flag's own messages, e.g. "freshet demo seed"), printing usage
// (the subcommand's text, then its flags) on -h and on a mistake.
func (m *Main) newCommandFlags(name, flagSet, usage string) *commandFlags {
	c := &commandFlags{FlagSet: flag.NewFlagSet(flagSet, flag.ContinueOnError), m: m, name: name}
	c.SetOutput(&c.out)
	c.Usage = func() { printFlags(c.FlagSet, usage) }
	return c
}

// parse parses args. On -h it prints the usage to Stdout and returns
// errHelp; on a mistake it prints flag's message and the usage to Stderr
// and returns a usageError.
func (c *commandFlags) parse(args []string) error {
	err := c.Parse(args)
	if err == nil {
		return nil
	}
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(c.m.Stdout, c.out.String())
		c.out.Reset()
		return errHelp
	}
	// flag has already printed the error and the usage into out.
	fmt.Fprint(c.m.Stderr, c.out.String())
	c.out.Reset()
	return usageError{c.name + ": " + err.Error()}
}

// bad prints the usage to Stderr and returns a usageError of the
// subcommand saying what was wrong (and, by the callers' convention, how
// to put it right).
func (c *commandFlags) bad(format string, a ...any) error {
	c.Usage()
	fmt.Fprint(c.m.Stderr, c.out.String())
	c.out.Reset()
	return usageError{c.name + ": " + fmt.Sprintf(format, a...)}
}
