package engine

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected outputs of the scripts under testdata/core/")

// TestCoreScripts runs the behaviour scripts under testdata/core/ (one
// subtest per file) against the core through the test harness, which also
// checks every output against its own model of the tables. A script is a
// list of commands in the style of etcd raft's datadriven tests:
//
//	# a comment
//	command key=value ...
//	input lines
//	----
//	the outputs the command produced, up to a blank line
//
// Run with -rewrite to replace the expected outputs with what the core
// produces now (then read the diff). The commands:
//
//	core [margin=N]                 a new core (before anything else; default options otherwise)
//	table name=T                    a table; input: "column type [pk]" per line
//	insert table=T                  input: one row of words per line ("null" NULL, "@u" unchanged TOAST)
//	update table=T [old-key=a,b]    input: the new rows; old-key: the old key's values when the key changed
//	delete table=T                  input: one row key per line (its words)
//	delete-old table=T              input: the old row as sent, "-" for a column it does not carry
//	truncate tables=T,U
//	relation table=T add=C:type     a Relation with a column added (pending, like a change)
//	relation table=T retype=C:type  a Relation with a column's type changed
//	commit [frag=N]                 commits the pending changes (in fragments of N changes)
//	subscribe id=N [mode=touch]     input: the SQL
//	unsubscribe id=N
//	answer id=N at=LSN [in-progress=xid,...]
//	                                answers read N from a snapshot at LSN ("+n": the position plus n)
//	answer-all                      answers every pending read at the position and advances past it
//	clock now=TIMESTAMPTZ           the database's clock at a new position (Core.Clock, a heartbeat's)
//	reads-sql                       the SQL of the pending reads
//	stats                           the core's counters
func TestCoreScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "core", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts under testdata/core")
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			runScript(t, path)
		})
	}
}

// scriptCmd is one command of a script with its expected output.
type scriptCmd struct {
	line  int // of the command, 1-based
	name  string
	args  map[string]string
	input []string
	// The file's lines before the expected output, and after it.
	head      []string
	want, got string
}

// parseScript reads a script into its commands; rest holds what follows
// the last command (comments).
func parseScript(t *testing.T, path string) (cmds []*scriptCmd, rest []string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var pending []string // comments and blank lines before a command
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			pending = append(pending, l)
			continue
		}
		c := &scriptCmd{line: i + 1, args: map[string]string{}, head: append(pending, l)}
		pending = nil
		f := strings.Fields(l)
		c.name = f[0]
		for _, a := range f[1:] {
			k, v, ok := strings.Cut(a, "=")
			if !ok {
				t.Fatalf("%s:%d: argument %q is not key=value", path, i+1, a)
			}
			c.args[k] = v
		}
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			c.input = append(c.input, lines[i])
			c.head = append(c.head, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: %s has no ---- line", path, c.line, c.name)
		}
		c.head = append(c.head, "----")
		var want []string
		for i++; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		if len(want) > 0 {
			c.want = strings.Join(want, "\n") + "\n"
		}
		cmds = append(cmds, c)
	}
	return cmds, pending
}

func runScript(t *testing.T, path string) {
	cmds, rest := parseScript(t, path)
	var h *harness
	for _, c := range cmds {
		if h == nil {
			opts := CoreOptions{}
			if c.name == "core" {
				if m := c.args["margin"]; m != "" {
					opts.WindowMargin = c.atoi(t, path, m)
				}
			}
			h = newHarness(t, opts)
			if c.name == "core" {
				continue
			}
		}
		from := h.out.Len()
		c.run(t, path, h)
		c.got = h.out.String()[from:]
		if !*rewrite && c.got != c.want {
			t.Errorf("%s:%d: %s: output differs (run with -rewrite to accept):\n--- got\n%s--- want\n%s", path, c.line, c.name, c.got, c.want)
		}
	}
	if *rewrite {
		var b strings.Builder
		for _, c := range cmds {
			for _, l := range c.head {
				b.WriteString(l + "\n")
			}
			b.WriteString(c.got)
			b.WriteString("\n")
		}
		for len(rest) > 0 && strings.TrimSpace(rest[0]) == "" {
			rest = rest[1:]
		}
		for _, l := range rest {
			b.WriteString(l + "\n")
		}
		if err := os.WriteFile(path, []byte(strings.TrimSuffix(b.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *scriptCmd) atoi(t *testing.T, path, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s:%d: %q is not a number", path, c.line, s)
	}
	return n
}

func (c *scriptCmd) arg(t *testing.T, path, key string) string {
	v, ok := c.args[key]
	if !ok {
		t.Fatalf("%s:%d: %s needs %s=", path, c.line, c.name, key)
	}
	return v
}

func (c *scriptCmd) run(t *testing.T, path string, h *harness) {
	at := func(s string) change.LSN {
		if n, ok := strings.CutPrefix(s, "+"); ok {
			d, err := strconv.ParseUint(n, 0, 64)
			if err != nil {
				t.Fatalf("%s:%d: at=%s: %v", path, c.line, s, err)
			}
			return h.lsn + change.LSN(d)
		}
		lsn, err := change.ParseLSN(s)
		if err != nil {
			t.Fatalf("%s:%d: at=%s: %v", path, c.line, s, err)
		}
		return lsn
	}
	switch c.name {
	case "core":
		t.Fatalf("%s:%d: core comes first", path, c.line)
	case "table":
		h.createTable(c.arg(t, path, "name"), c.input)
	case "insert", "update", "delete":
		table := c.arg(t, path, "table")
		for _, l := range c.input {
			words := strings.Fields(l)
			switch c.name {
			case "insert":
				h.insert(table, words...)
			case "update":
				var old []string
				if k, ok := c.args["old-key"]; ok {
					old = strings.Split(k, ",")
				}
				h.update(table, old, words...)
			default:
				h.delete(table, words...)
			}
		}
	case "delete-old":
		ht := h.tables[c.arg(t, path, "table")]
		for _, l := range c.input {
			var old change.Row
			for _, w := range strings.Fields(l) {
				if w == "-" {
					old = append(old, change.Value{Kind: change.Absent})
				} else {
					old = append(old, txt(w))
				}
			}
			h.pending = append(h.pending, change.Change{Op: change.OpDelete, Rel: ht.rel, Old: old})
		}
	case "truncate":
		h.truncate(strings.Split(c.arg(t, path, "tables"), ",")...)
	case "relation":
		ht := h.tables[c.arg(t, path, "table")]
		rel := *ht.rel
		rel.Columns = slices.Clone(rel.Columns)
		typ := func(spec string) (string, uint32) {
			name, tname, _ := strings.Cut(spec, ":")
			oid, ok := typeOIDs[tname]
			if !ok {
				t.Fatalf("%s:%d: unknown type %q", path, c.line, tname)
			}
			return name, oid
		}
		if spec, ok := c.args["add"]; ok {
			name, oid := typ(spec)
			rel.Columns = append(rel.Columns, change.Column{Name: name, TypeOID: oid, TypeMod: -1})
		}
		if spec, ok := c.args["retype"]; ok {
			name, oid := typ(spec)
			i := rel.ColumnIndex(name)
			if i < 0 {
				t.Fatalf("%s:%d: no column %q", path, c.line, name)
			}
			rel.Columns[i].TypeOID = oid
		}
		ht.rel = &rel
		h.pending = append(h.pending, change.Change{Op: change.OpRelation, Rel: ht.rel})
	case "commit":
		frag := 0
		if f, ok := c.args["frag"]; ok {
			frag = c.atoi(t, path, f)
		}
		h.commit(frag)
	case "subscribe":
		mode := ModeRows
		if c.args["mode"] == "touch" {
			mode = ModeTouch
		}
		h.subscribe(SubID(c.atoi(t, path, c.arg(t, path, "id"))), strings.Join(c.input, "\n"), mode)
	case "unsubscribe":
		h.unsubscribe(SubID(c.atoi(t, path, c.arg(t, path, "id"))))
	case "answer":
		var inProgress []uint32
		if ip, ok := c.args["in-progress"]; ok {
			for _, x := range strings.Split(ip, ",") {
				inProgress = append(inProgress, uint32(c.atoi(t, path, x)))
			}
		}
		h.answer(ReadID(c.atoi(t, path, c.arg(t, path, "id"))), at(c.arg(t, path, "at")), inProgress...)
	case "answer-all":
		h.answerAll()
	case "clock":
		v, err := change.DecodeOID(change.OIDTimestamptz, change.TextValue(c.arg(t, path, "now")), nil)
		if err != nil {
			t.Fatalf("%s:%d: clock now=: %v", path, c.line, err)
		}
		h.setClock(v.(change.Timestamp))
	case "reads-sql":
		ids := slices.Clone(h.readIDs)
		slices.Sort(ids)
		for _, id := range ids {
			fmt.Fprintf(&h.out, "sql %d: %s\n", id, h.reads[id].ReadSQL())
		}
	case "stats":
		st := h.core.Stats()
		fmt.Fprintf(&h.out, "views=%d subs=%d held-rows=%d pending-reads=%d\n", st.Views, st.Subs, st.HeldRows, st.PendingReads)
	default:
		t.Fatalf("%s:%d: unknown command %q", path, c.line, c.name)
	}
}
