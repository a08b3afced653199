package query

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
)

// TestLiftedLiterals compiles, for every column type of the differential
// test's table, comparisons with a table of literal forms (the column's
// own values as unknown-typed strings and cast, integers against int8 and
// numeric literals against int and float columns, NULL, text[] and
// interval literals; LIKE, whose literal stays in place) twice: with the
// where's literals lifted into slots of a shared template and with them in
// place. The two plans must normalize alike, derive the same constraints,
// and read the same rows from PostgreSQL (each rendered), and the lifted
// plan must keep exactly the rows PostgreSQL's WHERE keeps. Plans of one
// form with other literals must share templates (an integer literal
// against an int4 column, a string against text, at least).
func TestLiftedLiterals(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	conn, cat := setupDiff(t, rng, 150)
	opts := DefaultOptions()
	opts.Catalog = cat
	ctx := context.Background()
	compile := func(sql string, lift bool) (*Plan, *Refusal) {
		t.Helper()
		liftLiterals = lift
		defer func() { liftLiterals = true }()
		p, r, err := Compile(ctx, sql, nil, opts)
		if err != nil {
			t.Fatalf("compile %s: %v", sql, err)
		}
		return p, r
	}
	// ids runs a rendered read and returns the ids it reads.
	ids := func(p *Plan, sql string) []int64 {
		rows, _ := readRows(t, conn, p, sql, 0)
		var out []int64
		for _, r := range rows {
			out = append(out, r[0][0].(int64))
		}
		slices.Sort(out)
		return out
	}
	g := &predGen{rng: rng}
	byTemplate := map[*Template]map[string]bool{} // normalized statements per template
	keys := map[PlanKey]string{}
	compiled := 0
	for _, c := range diffColumns {
		forms := map[string]bool{}
		for range 24 {
			forms[g.value(c)] = true
		}
		for _, extra := range [][]string{
			{"i4", "5", "-5", "0", "2147483647", "5000000000", "2.0", "'7'::int8"},
			{"i8", "5", "-9223372036854775808", "'5'", "1.5"},
			{"f8", "2", "1e300", "0.1", "'NaN'"},
			{"n", "2", "1.50", "-0.0001", "'1.5'::float8"},
			{"tar", "'{a,b}'", "'{a,b}'::text[]", "ARRAY['a','b']"},
			{"iv", "'1 day'", "interval '1 day'", "'1 mon'::interval", "'-1 days'"},
			{"t", "'a'", "'é'", "'a'::varchar", "E'a\\\\b'", "'a''b'"},
			{"bo", "true", "false", "'t'"},
		} {
			if extra[0] == c.name {
				for _, f := range extra[1:] {
					forms[f] = true
				}
			}
		}
		ops := []string{"=", "<>", "<", ">=", "IS DISTINCT FROM", "IS NOT DISTINCT FROM", "BETWEEN"}
		if c.name == "t" || c.name == "v" {
			ops = append(ops, "LIKE", "ILIKE")
		}
		var sorted []string
		for f := range forms {
			sorted = append(sorted, f)
		}
		slices.Sort(sorted)
		for _, op := range ops {
			for i, f := range sorted {
				rhs := f
				if op == "BETWEEN" {
					rhs = f + " AND " + sorted[(i+1)%len(sorted)]
				}
				sql := fmt.Sprintf("SELECT id FROM vals WHERE %s %s %s", c.name, op, rhs)
				lifted, lr := compile(sql, true)
				plain, pr := compile(sql, false)
				if (lr == nil) != (pr == nil) || lr != nil && lr.Code != pr.Code {
					t.Fatalf("%s: lifted refusal %v, in place %v", sql, lr, pr)
				}
				if lr != nil {
					continue
				}
				compiled++
				norm := plain.Normalized()
				if got := lifted.Normalized(); got != norm {
					t.Fatalf("%s: lifted normalizes to %q, in place to %q", sql, got, norm)
				}
				if prev, ok := keys[lifted.Key]; ok && prev != norm {
					t.Fatalf("%s: key shared with %q", norm, prev)
				}
				keys[lifted.Key] = norm
				if byTemplate[lifted.Template] == nil {
					byTemplate[lifted.Template] = map[string]bool{}
				}
				byTemplate[lifted.Template][norm] = true
				var lc, pc []string
				for _, x := range lifted.Constraints(0) {
					lc = append(lc, describeConstraint(x))
				}
				for _, x := range plain.Constraints(0) {
					pc = append(pc, describeConstraint(x))
				}
				if !slices.Equal(lc, pc) {
					t.Fatalf("%s: lifted constraints %v, in place %v", sql, lc, pc)
				}
				want := ids(plain, plain.Render(RenderOptions{Columns: SelectNeeded}))
				if got := ids(lifted, lifted.Render(RenderOptions{Columns: SelectNeeded})); !slices.Equal(got, want) {
					t.Fatalf("%s: PostgreSQL reads %v for the lifted plan, %v for the plan in place", sql, got, want)
				}
				// Every row of the table, in the plan's layout: the lifted
				// plan keeps what PostgreSQL's WHERE keeps.
				var cols []string
				for _, col := range lifted.Sources[0].Columns {
					cols = append(cols, change.QuoteIdent(col.Name))
				}
				rows, _ := readRows(t, conn, lifted, "SELECT "+strings.Join(cols, ", ")+" FROM vals ORDER BY id", 0)
				var kept []int64
				for _, r := range rows {
					if lifted.Eval(r) == True {
						kept = append(kept, r[0][0].(int64))
					}
				}
				if !slices.Equal(kept, want) {
					t.Fatalf("%s: the lifted plan keeps %v, PostgreSQL %v", sql, kept, want)
				}
			}
		}
	}
	shared := map[string]int{}
	for tmpl, norms := range byTemplate {
		if len(norms) > 1 {
			// Templates of one text differ in their literals' kinds or
			// in what the values made of them: the most shared counts.
			shared[tmpl.Text] = max(shared[tmpl.Text], len(norms))
		}
	}
	t.Logf("%d plans, %d templates, %d shared by more than one statement", compiled, len(byTemplate), len(shared))
	for _, text := range []string{"SELECT id FROM public.vals WHERE i4 = $1", "SELECT id FROM public.vals WHERE t = $1"} {
		if shared[text] < 3 {
			t.Errorf("%s: shared by %d statements, want 3 or more (shared: %v)", text, shared[text], shared)
		}
	}
}
