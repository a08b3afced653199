package query

import (
	"flag"
	"fmt"
	"strings"
	"testing"
)

var probeParser = flag.Bool("parse.probe", false, "bisect the size at which each chain family crashes PostgreSQL's parser (slow; prints a table)")

// chainFamily builds a query whose parse tree is n levels deep.
type chainFamily struct {
	name string
	gen  func(n int) string
}

func repeatJoin(s, sep string, n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat(s+sep, n-1) + s
}

var chainFamilies = []chainFamily{
	{"plus", func(n int) string { return "SELECT id FROM users WHERE id = " + repeatJoin("1", "+", n) }},
	{"minus-binary", func(n int) string { return "SELECT id FROM users WHERE id = " + repeatJoin("1", " - ", n) }},
	{"cast", func(n int) string { return "SELECT id FROM users WHERE id = 1" + strings.Repeat("::int8", n) }},
	{"collate", func(n int) string {
		return `SELECT id FROM users WHERE name` + strings.Repeat(` COLLATE "C"`, n) + ` = 'a'`
	}},
	{"unary-minus", func(n int) string { return "SELECT id FROM users WHERE id = " + strings.Repeat("- ", n) + "1" }},
	{"not", func(n int) string { return "SELECT id FROM users WHERE " + strings.Repeat("NOT ", n) + "active" }},
	{"parens", func(n int) string {
		return "SELECT id FROM users WHERE id = " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n)
	}},
	{"not-parens", func(n int) string { return deepQuery(n) }},
	{"func", func(n int) string {
		return "SELECT id FROM users WHERE id = " + strings.Repeat("abs(", n) + "1" + strings.Repeat(")", n)
	}},
	{"concat", func(n int) string { return "SELECT id FROM users WHERE name = " + repeatJoin("'a'", "||", n) }},
	{"json-arrow", func(n int) string { return "SELECT id FROM users WHERE meta" + strings.Repeat("->'a'", n) + " IS NULL" }},
	{"at-time-zone", func(n int) string {
		return "SELECT id FROM users WHERE created_at" + strings.Repeat(" AT TIME ZONE 'UTC'", n) + " IS NULL"
	}},
	{"subscript", func(n int) string { return "SELECT id FROM users WHERE tags" + strings.Repeat("[1]", n) + " = 'a'" }},
	{"and", func(n int) string { return "SELECT id FROM users WHERE " + repeatJoin("active", " AND ", n) }},
	{"or", func(n int) string { return "SELECT id FROM users WHERE " + repeatJoin("active", " OR ", n) }},
	{"case", func(n int) string {
		return "SELECT id FROM users WHERE " + strings.Repeat("CASE WHEN active THEN ", n) + "true" + strings.Repeat(" END", n)
	}},
	{"array", func(n int) string {
		return "SELECT id FROM users WHERE tags = " + strings.Repeat("ARRAY[", n) + "'a'" + strings.Repeat("]", n)
	}},
	{"row", func(n int) string {
		return "SELECT id FROM users WHERE " + strings.Repeat("ROW(", n) + "1" + strings.Repeat(")", n) + " IS NULL"
	}},
	{"is-true", func(n int) string { return "SELECT id FROM users WHERE active" + strings.Repeat(" IS TRUE", n) }},
	{"operator", func(n int) string {
		return "SELECT id FROM users WHERE id = " + repeatJoin("1", " OPERATOR(pg_catalog.+) ", n)
	}},
	{"in-list", func(n int) string { return inQuery(n) }},
	{"join", func(n int) string {
		var b strings.Builder
		b.WriteString("SELECT a0.id FROM users a0")
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, " JOIN users a%d ON a%d.id = a%d.id", i, i, i-1)
		}
		return b.String()
	}},
	{"union", func(n int) string { return repeatJoin("SELECT id FROM users", " UNION ", n) }},
	{"subquery", func(n int) string {
		return "SELECT id FROM users WHERE id = " + strings.Repeat("(SELECT ", n) + "1" + strings.Repeat(")", n)
	}},
}

// probeStackKiB is the stack the probe's children run with: small, so the
// crash sizes are small and quick to find (they scale with the stack).
const probeStackKiB = 1024

// TestProbeParserCrash finds, for every chain family, the smallest size
// at which PostgreSQL's parser crashes on a probeStackKiB stack, each
// parse in a child process, and the nesting prescreen bounds it by there
// (which must be well over the ceiling for that stack). It runs only with
// -parse.probe; the figures set cStackPerLevel.
func TestProbeParserCrash(t *testing.T) {
	if !*probeParser {
		t.Skip("run with -parse.probe to find the parser's crash sizes")
	}
	ceiling := ceilingFor(probeStackKiB << 10)
	for _, f := range chainFamilies {
		crashes := func(n int) bool { return parseInChild(t, f.gen(n), probeStackKiB).crashed }
		hi := 16
		for !crashes(hi) && hi < 1<<17 {
			hi *= 2
		}
		if !crashes(hi) {
			o := parseInChild(t, f.gen(hi), probeStackKiB)
			t.Logf("%-14s no crash up to %d terms: %v", f.name, hi, o)
			continue
		}
		// Scan down from the first crash for the smallest (crashing is
		// not quite monotonic near the edge).
		lo := hi / 2
		for n := lo; n <= hi; n += max(1, (hi-lo)/64) {
			if crashes(n) {
				hi = n
				break
			}
		}
		est := prescreen(f.gen(hi)).nesting
		t.Logf("%-14s crashes at %d terms (%d bytes), prescreen bounds it %d deep, %.1fx the ceiling of %d for a %d KiB stack; %d bytes of stack a term",
			f.name, hi, len(f.gen(hi)), est, float64(est)/float64(ceiling), ceiling, probeStackKiB, probeStackKiB<<10/hi)
		if est < 2*ceiling {
			t.Errorf("%s: crashes %d deep by prescreen's bound, under twice the ceiling %d", f.name, est, ceiling)
		}
	}
}

// TestParserSurvivesCeiling parses, for every chain family, the largest
// text prescreen lets reach the parser on a small stack, in a child
// process with that stack: it must not crash. The child computes its own
// ceiling from its stack, as a server does.
func TestParserSurvivesCeiling(t *testing.T) {
	ceiling := ceilingFor(probeStackKiB << 10)
	for _, f := range chainFamilies {
		// The largest n whose text prescreen lets through.
		lo, hi := 0, 1
		for prescreen(f.gen(hi)).nesting <= ceiling && hi < 1<<20 {
			lo, hi = hi, hi*2
		}
		if hi >= 1<<20 {
			continue // flat: never deep (and, IN, OR lists)
		}
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			if prescreen(f.gen(mid)).nesting <= ceiling {
				lo = mid
			} else {
				hi = mid
			}
		}
		if lo == 0 {
			t.Errorf("%s: prescreen refuses even one term", f.name)
			continue
		}
		if o := parseInChild(t, f.gen(lo), probeStackKiB); o.crashed {
			t.Errorf("%s: %d terms (prescreen bounds it %d deep, the ceiling %d) crash the parser on a %d KiB stack: %v",
				f.name, lo, prescreen(f.gen(lo)).nesting, ceiling, probeStackKiB, o)
		}
	}
	// The harness sees a crash: 4,000 terms crash a 1 MiB stack.
	if o := parseInChild(t, chainFamilies[0].gen(4000), probeStackKiB); !o.crashed {
		t.Errorf("4,000 terms of 1+1+... on a %d KiB stack: %v, want a crash (else this test cannot fail)", probeStackKiB, o)
	}
}

// TestChainsRefused pins what a long chain of one operator comes to, with
// the default limits and with every limit lifted: refused too_complex by
// prescreen (before the parser, which crashed at about 23,900 terms) or
// too_long, never a crash and never the parser's own error.
func TestChainsRefused(t *testing.T) {
	opts := DefaultOptions()
	opts.Catalog = snapshotCatalog(t)
	lifted := opts
	lifted.MaxAlternatives, lifted.MaxInValues, lifted.MaxDepth, lifted.MaxSQLLength = 0, 0, 0, 0
	byName := map[string]chainFamily{}
	for _, f := range chainFamilies {
		byName[f.name] = f
	}
	tests := []struct {
		family string
		n      int
		opts   Options
		want   Code
	}{
		{"plus", 100, opts, ""}, // parsed and compiled: arithmetic is supported
		{"plus", 100, lifted, ""},
		{"plus", 1000, opts, CodeTooComplex},
		{"plus", 1000, lifted, CodeTooComplex},
		{"plus", 24000, opts, CodeTooComplex}, // 48 KB: crashed the parser
		{"plus", 24000, lifted, CodeTooComplex},
		{"plus", 60000, opts, CodeTooComplex},
		{"plus", 60000, lifted, CodeTooComplex},
		{"plus", 500000, opts, CodeTooLong},
		{"plus", 500000, lifted, CodeTooComplex},
		{"cast", 1000, opts, CodeTooComplex},
		{"cast", 24000, opts, CodeTooLong},
		{"cast", 24000, lifted, CodeTooComplex},
		{"cast", 500000, lifted, CodeTooComplex},
		{"collate", 1000, opts, CodeTooComplex},
		{"collate", 24000, lifted, CodeTooComplex},
		{"collate", 500000, lifted, CodeTooComplex},
		{"unary-minus", 24000, lifted, CodeTooComplex},
		{"not", 24000, lifted, CodeTooComplex},
		{"parens", 24000, lifted, CodeTooComplex},
		{"func", 24000, lifted, CodeTooComplex},
		{"json-arrow", 24000, lifted, CodeTooComplex},
		{"at-time-zone", 24000, lifted, CodeTooComplex},
		{"is-true", 24000, lifted, CodeTooComplex},
		{"case", 24000, lifted, CodeTooComplex},
		{"array", 24000, lifted, CodeTooComplex},
		{"subquery", 24000, lifted, CodeTooComplex},
		{"join", 2000, lifted, CodeTooComplex},
		{"union", 2000, lifted, CodeTooComplex},
		{"and", 24000, lifted, ""}, // flat: one AND of 24,000 arguments
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s/%d", tt.family, tt.n)
		if tt.opts.MaxDepth == 0 {
			name += "/lifted"
		}
		t.Run(name, func(t *testing.T) {
			f, ok := byName[tt.family]
			if !ok {
				t.Fatalf("no family %q", tt.family)
			}
			r := wantRefusal(t, f.gen(tt.n), tt.opts, tt.want)
			if tt.want == CodeTooComplex && !strings.Contains(r.Message, "levels deep") {
				t.Fatalf("refused by %q, want prescreen's nesting bound", r.Message)
			}
		})
	}
}
