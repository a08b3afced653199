package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// docSetting is one row of a settings table in docs/configuration.md.
type docSetting struct{ env, def string }

// serveDocSettings reads the flag tables of the "freshet serve" section
// of docs/configuration.md, by flag name.
func serveDocSettings(t *testing.T) map[string]docSetting {
	t.Helper()
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## freshet serve")
	end := strings.Index(doc[start+1:], "\n## ")
	if start < 0 || end < 0 {
		t.Fatalf("docs/configuration.md has no \"## freshet serve\" section")
	}
	row := regexp.MustCompile("(?m)^\\| `--([a-z-]+)` \\| `([A-Z0-9_]+)` \\| ([^|]*) \\|")
	out := map[string]docSetting{}
	for _, m := range row.FindAllStringSubmatch(doc[start:start+1+end], -1) {
		out[m[1]] = docSetting{env: m[2], def: strings.TrimSpace(m[3])}
	}
	return out
}

// Every flag of `freshet serve` is in docs/configuration.md with its
// variable and its default, and the doc names no flag serve lacks.
func TestServeSettingsDocumented(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "FRESHET_") {
			t.Setenv(k, "") // defaults, not this machine's settings
		}
	}
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &out}
	if _, err := m.parseServeFlags([]string{"-h"}); err != errHelp {
		t.Fatalf("serve -h: %v", err)
	}
	// PrintDefaults: "  --name string\n    \thelp ($ENV) (default \"x\")".
	flagRE := regexp.MustCompile(`(?m)^  --([a-z-]+)(?: string)?\n\s+(.*)$`)
	envRE := regexp.MustCompile(`\$(FRESHET_[A-Z0-9_]+)`)
	defRE := regexp.MustCompile(`\(default "([^"]*)"\)$`)
	doc := serveDocSettings(t)
	flags := flagRE.FindAllStringSubmatch(out.String(), -1)
	if len(flags) == 0 {
		t.Fatalf("no flags in serve -h:\n%s", out.String())
	}
	seen := map[string]bool{}
	for _, f := range flags {
		name, help := f[1], f[2]
		seen[name] = true
		d, ok := doc[name]
		if !ok {
			t.Errorf("--%s is not in docs/configuration.md", name)
			continue
		}
		if env := envRE.FindStringSubmatch(help); env == nil || env[1] != d.env {
			t.Errorf("--%s: doc names variable %s, the flag %v", name, d.env, env)
		}
		def := ""
		if m := defRE.FindStringSubmatch(help); m != nil {
			def = m[1]
		}
		docDef := d.def
		if strings.HasPrefix(docDef, "`") {
			docDef = strings.Trim(strings.Fields(docDef)[0], "`")
		} else {
			docDef = "" // "(required)", "(none)": no default value
		}
		if name == "read-dsn" {
			docDef = "" // its default is --dsn, applied after parsing
		}
		if def != docDef {
			t.Errorf("--%s: doc default %q, the flag's %q", name, d.def, def)
		}
	}
	for name := range doc {
		if !seen[name] {
			t.Errorf("docs/configuration.md documents --%s, which serve does not have", name)
		}
	}
}
