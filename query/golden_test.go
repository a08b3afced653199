package query

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenCase is one query of a testdata/*.txt file: SQL preceded by
// optional "-- bind <oid> text <value>", "-- bind <oid> binary <hex>" or
// "-- bind <oid> null" lines; cases are separated by lines of "----".
type goldenCase struct {
	sql   string
	binds []Bind
}

func readCases(t *testing.T, path string) []goldenCase {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	for _, chunk := range strings.Split(string(b), "\n----\n") {
		var gc goldenCase
		var sql []string
		for _, line := range strings.Split(chunk, "\n") {
			if rest, ok := strings.CutPrefix(line, "-- bind "); ok {
				f := strings.SplitN(rest, " ", 3)
				oid, err := strconv.ParseUint(f[0], 10, 32)
				if err != nil {
					t.Fatalf("%s: bad bind line %q", path, line)
				}
				bd := Bind{OID: uint32(oid)}
				switch f[1] {
				case "text":
					bd.Data = []byte("")
					if len(f) > 2 {
						bd.Data = []byte(f[2])
					}
				case "binary":
					bd.Format = FormatBinary
					bd.Data, err = hex.DecodeString(f[2])
					if err != nil {
						t.Fatalf("%s: bad hex in %q", path, line)
					}
				case "null":
				default:
					t.Fatalf("%s: bad bind line %q", path, line)
				}
				gc.binds = append(gc.binds, bd)
				continue
			}
			sql = append(sql, line)
		}
		gc.sql = strings.TrimSpace(strings.Join(sql, "\n"))
		if gc.sql != "" {
			cases = append(cases, gc)
		}
	}
	return cases
}

// fmtValue prints a decoded value for golden files.
func fmtValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return strconv.Quote(x)
	case []byte:
		return `\x` + hex.EncodeToString(x)
	case change.UUID:
		return hex.EncodeToString(x[:])
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprintf("%v", v)
}

func describePlan(p *Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "normalized: %s\n", p.Normalized())
	for i, v := range p.Params() {
		fmt.Fprintf(&b, "param $%d: %s %s\n", i+1, typeName(p.ParamOIDs[i]), fmtValue(v))
	}
	for i, s := range p.Sources {
		var cols []string
		for j, c := range s.Columns {
			name := c.Name
			if j < s.KeyN {
				name += "*"
			}
			cols = append(cols, name)
		}
		fmt.Fprintf(&b, "source %d: %s.%s AS %s %s nullable=%v star=%v columns=[%s]\n", i, s.Table.Schema, s.Table.Name, s.Alias, s.Join, s.Nullable, s.Star, strings.Join(cols, " "))
		for _, k := range s.On {
			fmt.Fprintf(&b, "  on %s.%s = %s.%s\n", s.Alias, s.Columns[k.Column].Name, p.Sources[k.Other].Alias, p.Sources[k.Other].Columns[k.OtherColumn].Name)
		}
		for _, c := range p.Constraints(i) {
			fmt.Fprintf(&b, "  constraint %s %s\n", s.Columns[c.Column].Name, describeConstraint(c))
		}
	}
	srcs := p.Sources
	if g := p.Agg; g != nil {
		srcs = g.Post.Sources
		var keys []string
		for _, k := range g.KeyOIDs {
			keys = append(keys, typeName(k))
		}
		var aggs []string
		for _, a := range g.Aggs {
			arg := ""
			if a.ArgOID != 0 {
				arg = typeName(a.ArgOID)
			}
			aggs = append(aggs, fmt.Sprintf("%s(%s)->%s", a.Kind, arg, typeName(a.TypeOID)))
		}
		fmt.Fprintf(&b, "group by: [%s] aggregates: [%s] having: %v\n", strings.Join(keys, " "), strings.Join(aggs, " "), g.Post.filter != nil)
		if f := g.First; f != nil {
			var vals, order []string
			for _, oid := range f.OIDs {
				vals = append(vals, typeName(oid))
			}
			for _, k := range f.order {
				order = append(order, fmt.Sprintf("%d desc=%v nullsfirst=%v", k.at, k.desc, k.nullsFirst))
			}
			fmt.Fprintf(&b, "first row: [%s] by [%s]\n", strings.Join(vals, " "), strings.Join(order, ", "))
		}
	}
	var outs []string
	for _, o := range p.Output {
		if o.Source == ExprSource {
			outs = append(outs, fmt.Sprintf("%s=expr:%s(%d)", o.Name, typeName(o.TypeOID), o.TypeMod))
			continue
		}
		if o.Source < 0 {
			outs = append(outs, o.Name+"=count(*)")
			continue
		}
		s := srcs[o.Source]
		outs = append(outs, strings.ReplaceAll(fmt.Sprintf("%s=%s.%s", o.Name, s.Alias, s.Columns[o.Column].Name), "\x00", "@"))
	}
	fmt.Fprintf(&b, "output: %s\n", strings.Join(outs, ", "))
	for _, k := range p.Order {
		if k.Source == ExprSource {
			fmt.Fprintf(&b, "order: expr:%s desc=%v nullsfirst=%v\n", typeName(k.expr.oid), k.Desc, k.NullsFirst)
			continue
		}
		s := srcs[k.Source]
		fmt.Fprintf(&b, "order: %s desc=%v nullsfirst=%v\n", strings.ReplaceAll(s.Alias+"."+s.Columns[k.Column].Name, "\x00", "@"), k.Desc, k.NullsFirst)
	}
	fmt.Fprintf(&b, "limit: %d offset: %d count: %v\n", p.Limit, p.Offset, p.Count)
	for _, cb := range p.Clock {
		kind := "enters"
		if cb.Leaves() {
			kind = "leaves"
		}
		fmt.Fprintf(&b, "clock: %s (%s.%s, rows %s)\n", cb.String(), p.Sources[cb.Source].Alias, p.Sources[cb.Source].Columns[cb.Column].Name, kind)
	}
	if p.Raises() {
		fmt.Fprintf(&b, "raises: true\n")
	}
	fmt.Fprintf(&b, "render: %s\n", p.Render(RenderOptions{}))
	fmt.Fprintf(&b, "render needed: %s\n", p.Render(RenderOptions{Columns: SelectNeeded}))
	fmt.Fprintf(&b, "render needed window+5: %s\n", p.Render(RenderOptions{Columns: SelectNeeded, Window: true, Margin: 5}))
	return b.String()
}

func describeConstraint(c Constraint) string {
	var parts []string
	switch c.Kind {
	case ConstraintRange:
		for _, r := range c.Ranges {
			lo, hi := "(-inf", "+inf)"
			if r.Low != nil {
				lo = "(" + fmtValue(r.Low)
				if r.LowInc {
					lo = "[" + fmtValue(r.Low)
				}
			}
			if r.High != nil {
				hi = fmtValue(r.High) + ")"
				if r.HighInc {
					hi = fmtValue(r.High) + "]"
				}
			}
			parts = append(parts, lo+", "+hi)
		}
	default:
		for _, v := range c.Values {
			parts = append(parts, fmtValue(v))
		}
		if c.Null {
			parts = append(parts, "NULL")
		}
	}
	return c.Kind.String() + " {" + strings.Join(parts, "; ") + "}"
}

func describe(p *Plan, r *Refusal, err error) string {
	switch {
	case err != nil:
		return "error: " + err.Error() + "\n"
	case r != nil:
		s := fmt.Sprintf("refused: %s", r.Code)
		if r.Retryable {
			s += " (retryable)"
		}
		if r.Param > 0 {
			s += fmt.Sprintf(" param=$%d", r.Param)
		}
		if r.Position > 0 {
			s += fmt.Sprintf(" at=%d", r.Position)
		}
		return s + ": " + r.Message + "\n"
	}
	return describePlan(p)
}

func runGolden(t *testing.T, cases, golden string, opts Options) {
	conn, cat := testDB(t)
	opts.Catalog = cat
	var out strings.Builder
	for _, gc := range readCases(t, cases) {
		p, r, err := Compile(context.Background(), gc.sql, gc.binds, opts)
		fmt.Fprintf(&out, "== %s\n", gc.sql)
		for _, bd := range gc.binds {
			fmt.Fprintf(&out, "   bind oid=%d format=%d %q\n", bd.OID, bd.Format, bd.Data)
		}
		out.WriteString(describe(p, r, err))
		if p != nil {
			// Every rendering runs on PostgreSQL.
			vals, oids, formats := p.Args()
			ros := []RenderOptions{{}, {Columns: SelectNeeded}, {Columns: SelectNeeded, Window: true, Margin: 5}}
			if p.Clocked() {
				at := change.Timestamp{Micros: 849_657_600_000_000} // 2026-12-04 00:00 UTC
				ros = append(ros, RenderOptions{At: &at}, RenderOptions{Columns: SelectNeeded, Window: true, Margin: 5, At: &at, Hold: true})
				fmt.Fprintf(&out, "at: %s\nhold: %s\n", p.Render(ros[3]), p.Render(ros[4]))
			}
			for _, ro := range ros {
				sql := p.Render(ro)
				if res := conn.PgConn().ExecParams(context.Background(), sql, vals, oids, formats, nil).Read(); res.Err != nil {
					t.Errorf("rendered %s: %v", sql, res.Err)
				}
			}
		}
		out.WriteString("\n")
	}
	if *update {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if got := out.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s line %d:\n got: %s\nwant: %s\n(run go test ./query -run %s -update to accept)", golden, i+1, g, w, t.Name())
			}
		}
	}
}

func TestCompileGolden(t *testing.T) {
	runGolden(t, "testdata/compile.txt", "testdata/compile.golden", DefaultOptions())
}

func TestRefusalGolden(t *testing.T) {
	runGolden(t, "testdata/refusals.txt", "testdata/refusals.golden", DefaultOptions())
}
