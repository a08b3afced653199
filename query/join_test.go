package query

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
)

// TestJoinDifferential builds joined rows the way the engine would (nested
// loops over Source.On, null-extending LEFT joins), filters them with Eval,
// and compares the kept rows' keys with PostgreSQL's answer to the same
// query. Each source holds only the rows that satisfy its constraints, as
// in the engine; kept rows must also satisfy every source's constraints.
func TestJoinDifferential(t *testing.T) {
	seed := int64(42)
	if *diffSeed != 0 {
		seed = *diffSeed
	}
	rng := rand.New(rand.NewSource(seed))
	conn, cat := testDB(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `
		CREATE TABLE jp (id int PRIMARY KEY, k int, x int);
		CREATE TABLE jc (id int PRIMARY KEY, pid bigint, y int, t text);
		CREATE TABLE jg (a int, b int, z numeric, PRIMARY KEY (a, b));`); err != nil {
		t.Fatal(err)
	}
	maybe := func(v int) string {
		if rng.Intn(5) == 0 {
			return "NULL"
		}
		return fmt.Sprint(v)
	}
	var ins []string
	for i := 0; i < 30; i++ {
		ins = append(ins, fmt.Sprintf("INSERT INTO jp VALUES (%d, %s, %s)", i, maybe(rng.Intn(4)), maybe(rng.Intn(10))))
	}
	for i := 0; i < 60; i++ {
		ins = append(ins, fmt.Sprintf("INSERT INTO jc VALUES (%d, %s, %s, %s)", i, maybe(rng.Intn(35)), maybe(rng.Intn(10)),
			[]string{"NULL", "'a'", "'b'", "'ab'"}[rng.Intn(4)]))
	}
	for a := 0; a < 60; a += 2 {
		for b := 0; b < 4; b++ {
			if rng.Intn(2) == 0 {
				ins = append(ins, fmt.Sprintf("INSERT INTO jg VALUES (%d, %d, %s)", a, b, maybe(rng.Intn(10))))
			}
		}
	}
	if _, err := conn.Exec(ctx, strings.Join(ins, ";")); err != nil {
		t.Fatal(err)
	}
	froms := []string{
		"jp JOIN jc ON jc.pid = jp.id",
		"jp LEFT JOIN jc ON jc.pid = jp.id",
		"jp LEFT JOIN jc ON jp.id = jc.pid LEFT JOIN jg ON jg.a = jc.id AND jg.b = jp.k",
		"jc LEFT JOIN jp ON jp.id = jc.pid JOIN jg ON jg.a = jc.id",
		"jp JOIN jc ON jc.pid = jp.id LEFT JOIN jg ON jg.a = jc.id AND jg.b = jc.y",
		"jc c1 LEFT JOIN jc c2 ON c2.id = c1.pid",
		"jp LEFT JOIN jc ON jc.pid = jp.id JOIN jg ON jg.a = jc.id AND jg.b = jp.k",
	}
	preds := []string{"jp.x > 3", "jc.y IS NULL", "jc.t = 'a' OR jc.t IS NULL", "jg.z >= 5", "jg.z IS NULL", "jp.k IN (1, 2)",
		"NOT (jc.y < 5)", "jg.a IS NOT NULL", "jp.x = jc.y", "jc.t LIKE 'a%'", "jp.x BETWEEN 2 AND 6", "jc.y <> 3",
		"jg.b = 2", "jc.id IN (1, 3, 40)", "jg.a IN (2, 4, 6)", "jp.k = 1 OR jp.k IS NULL"}
	opts := DefaultOptions()
	opts.Catalog = cat
	checked := 0
	for i := 0; i < 200; i++ {
		from := froms[rng.Intn(len(froms))]
		var conds []string
		for k := rng.Intn(3); k > 0; k-- {
			p := preds[rng.Intn(len(preds))]
			if strings.HasPrefix(from, "jc c1") {
				p = strings.NewReplacer("jp.", "c2.", "jc.", "c1.", "jg.", "c2.").Replace(p)
				p = strings.NewReplacer("c2.x", "c2.y", "c2.k", "c2.y", "c2.z", "c2.y", "c2.a", "c2.id").Replace(p)
			}
			conds = append(conds, "("+p+")")
		}
		where := ""
		if len(conds) > 0 {
			where = " WHERE " + strings.Join(conds, []string{" AND ", " OR "}[rng.Intn(2)])
		}
		sql := "SELECT * FROM " + from + where
		p, r, err := Compile(ctx, sql, nil, opts)
		if err != nil || r != nil {
			if r != nil && (r.Code == CodeUnknownColumn) {
				continue // a predicate naming a table this FROM lacks
			}
			t.Fatalf("compile %s: %v %v", sql, err, r)
		}
		// Every source's needed rows, as the engine would hold them.
		tables := make([][][]any, len(p.Sources))
		for si, s := range p.Sources {
			var cols []string
			for _, c := range s.Columns {
				cols = append(cols, change.QuoteIdent(c.Name))
			}
			res := conn.PgConn().ExecParams(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+s.Table.Name, nil, nil, nil, nil).Read()
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			for _, raw := range res.Rows {
				vals := make([]any, len(raw))
				for j, b := range raw {
					if b != nil {
						vals[j], err = change.DecodeOID(s.Columns[j].TypeOID, change.Value{Kind: change.Text, Data: b}, nil)
						if err != nil {
							t.Fatal(err)
						}
					}
				}
				// Held only when it satisfies the source's constraints,
				// as in the engine: the result must not change.
				held := true
				for _, c := range p.Constraints(si) {
					held = held && satisfies(s.Columns[c.Column].TypeOID, c, vals[c.Column])
				}
				if held {
					tables[si] = append(tables[si], vals)
				}
			}
		}
		var joined []Row
		for _, r := range tables[0] {
			row := make(Row, len(p.Sources))
			row[0] = r
			joined = append(joined, row)
		}
		for si := 1; si < len(p.Sources); si++ {
			s := p.Sources[si]
			var next []Row
			for _, row := range joined {
				matched := false
				for _, cand := range tables[si] {
					ok := true
					for _, k := range s.On {
						a := cand[k.Column]
						var b any
						if row[k.Other] != nil {
							b = row[k.Other][k.OtherColumn]
						}
						if a == nil || b == nil || string(AppendKey(nil, s.Columns[k.Column].TypeOID, a)) != string(AppendKey(nil, p.Sources[k.Other].Columns[k.OtherColumn].TypeOID, b)) {
							ok = false
							break
						}
					}
					if ok {
						matched = true
						nr := append(Row(nil), row...)
						nr[si] = cand
						next = append(next, nr)
					}
				}
				if !matched && s.Join == JoinLeft {
					next = append(next, append(Row(nil), row...))
				}
			}
			joined = next
		}
		var got []string
		for _, row := range joined {
			if p.Eval(row) == True {
				got = append(got, keyString(p, row))
				if c, ok := violated(p, row); !ok {
					t.Fatalf("seed %d: %s: kept row %s violates constraint %s", seed, sql, keyString(p, row), describeConstraint(c))
				}
			}
		}
		var keys []string
		for _, s := range p.Sources {
			for j := 0; j < s.KeyN; j++ {
				keys = append(keys, change.QuoteIdent(s.Alias)+"."+change.QuoteIdent(s.Columns[j].Name))
			}
		}
		res := conn.PgConn().ExecParams(ctx, "SELECT "+strings.Join(keys, ", ")+" FROM "+from+where, nil, nil, nil, nil).Read()
		if res.Err != nil {
			t.Fatalf("%s: %v", sql, res.Err)
		}
		var want []string
		for _, raw := range res.Rows {
			var parts []string
			for _, b := range raw {
				if b == nil {
					parts = append(parts, "NULL")
				} else {
					parts = append(parts, string(b))
				}
			}
			want = append(want, strings.Join(parts, ","))
		}
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("seed %d: %s:\n got %d rows %v\nwant %d rows %v", seed, sql, len(got), got, len(want), want)
		}
		checked++
	}
	if checked < 100 {
		t.Errorf("only %d join queries checked", checked)
	}
}

func keyString(p *Plan, row Row) string {
	var parts []string
	for i, s := range p.Sources {
		for j := 0; j < s.KeyN; j++ {
			if row[i] == nil || row[i][j] == nil {
				parts = append(parts, "NULL")
			} else {
				parts = append(parts, fmtValue(row[i][j]))
			}
		}
	}
	return strings.Join(parts, ",")
}
