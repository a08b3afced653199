package query

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Soak settings: go test ./query -run Differential -query.diffn 100000 -query.seed 5
// (the seed applies to the evaluation, order and join differential tests).
var (
	diffN    = flag.Int("query.diffn", 0, "predicates the evaluation differential test draws (0: 1,500)")
	diffSeed = flag.Int64("query.seed", 0, "seed of the evaluation differential test (0: the fixed one)")
)

// diffColumn is a column of the differential test's table with the
// literals (PostgreSQL input forms) its rows and constants are drawn from.
type diffColumn struct {
	name, typ string
	lits      []string
}

var diffColumns = []diffColumn{
	{"i4", "integer", []string{"-2147483648", "-1", "0", "1", "2", "7", "100", "2147483647"}},
	{"i8", "bigint", []string{"-9223372036854775808", "0", "2", "5", "9007199254740992", "9007199254740993", "9223372036854775807"}},
	{"i2", "smallint", []string{"-32768", "0", "1", "2", "32767"}},
	{"n", "numeric", []string{"0", "1.5", "1.50", "-0.0001", "2", "7.000", "100000000000000000000.5", "NaN", "Infinity", "-Infinity"}},
	{"f8", "double precision", []string{"NaN", "Infinity", "-Infinity", "-0", "0", "0.1", "1.5", "2", "1e+300", "9007199254740992"}},
	{"f4", "real", []string{"0.1", "1.5", "NaN", "-0", "2", "3.4e+38", "-Infinity"}},
	{"t", "text", []string{"", "a", "A", "a ", "ab", "b", "é", "É", "ß", "z", "a_b", "a%b", `\`, "ǅ", "Σ", "ς", "ſ", "Ǆa", "İ"}},
	{"tc", `text COLLATE "C"`, []string{"", "a", "A", "ab", "É", "é", "Z"}},
	{"v", "varchar(10)", []string{"a", "A", "a ", "ab", "b"}},
	{"c", "char(4)", []string{"a", "a  ", "ab", " a", "A"}},
	{"nm", "name", []string{"a", "ab", "B"}},
	{"bo", "boolean", []string{"true", "false"}},
	{"u", "uuid", []string{"00000000-0000-0000-0000-000000000000", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "ffffffff-ffff-ffff-ffff-ffffffffffff"}},
	{"by", "bytea", []string{`\x`, `\x00`, `\x0001`, `\xff`, `\x61`}},
	{"d", "date", []string{"2024-01-01", "2000-01-01", "infinity", "-infinity", "0044-03-15 BC", "2024-02-29"}},
	{"tm", "time", []string{"00:00:00", "12:00:00.5", "23:59:59.999999", "24:00:00", "12:00:00"}},
	{"tz", "timetz", []string{"12:00:00+00", "13:00:00+01", "12:00:00-05", "11:00:00-01", "07:00:00-05"}},
	{"ts", "timestamp", []string{"2024-01-01 00:00:00", "2024-01-01 12:00:00", "infinity", "-infinity", "1999-12-31 23:59:59.999999", "0044-03-15 00:00:00 BC",
		"2021-01-03 10:30:15.25", "0001-01-01 00:00:00 BC", "1900-02-28 06:07:08.000009"}},
	{"tt", "timestamptz", []string{"2024-01-01 00:00:00+00", "2024-01-01 12:00:00+00", "2024-01-01 01:00:00+01", "infinity", "-infinity", "1999-12-31 23:59:59.999999+00",
		"2020-12-31 23:59:59.5+00", "0999-06-15 12:00:00+00 BC"}},
	{"iv", "interval", []string{"1 mon", "30 days", "720:00:00", "1 day", "24:00:00", "-1 days", "1 year", "00:00:00", "1 mon -1 days", "29 days 24:00:00"}},
	{"e", "mood", []string{"sad", "ok", "happy"}},
	{"js", "jsonb", []string{`{}`, `[1, 2]`, `null`, `{"a": 1, "b": [1, 2, {"c": "x\n\"y"}]}`, `{"a": "s", "n": null, "aa": 1.50}`,
		`[1, "a", [2], {"a": 1}]`, `"a"`, `1.50`, `{"a": {"b": [10, 20]}}`, `true`, `{"b": 1e2, "a": [1, 1]}`, `{"a": {"zz": 1, "b": 2, "bb": 3}, "b": "1"}`}},
	{"ar", "integer[]", []string{`{}`, `{1,NULL}`, `{{1,2},{3,4}}`, `{1,2,7}`, `{2}`, `{NULL}`, `{7,1}`, `{-2147483648,0}`}},
	{"tar", "text[]", []string{`{}`, `{a,b}`, `{A,NULL}`, `{"a b",c}`, `{É}`, `{"a ",ab}`}},
}

func diffColumnByName(name string) diffColumn {
	for _, c := range diffColumns {
		if c.name == name {
			return c
		}
	}
	panic(name)
}

// quote writes s as a SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// setupDiff creates and fills the table "vals" with rows of random values
// drawn from each column's literals (a fifth of them NULL).
func setupDiff(t *testing.T, rng *rand.Rand, rows int) (*pgx.Conn, *PGCatalog) {
	conn, cat := testDB(t)
	ctx := context.Background()
	for _, s := range []string{"SET TimeZone = 'UTC'", "SET DateStyle = 'ISO, MDY'", "SET IntervalStyle = 'postgres'", "SET extra_float_digits = 1"} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	var defs []string
	for _, c := range diffColumns {
		defs = append(defs, c.name+" "+c.typ)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE vals (id integer PRIMARY KEY, "+strings.Join(defs, ", ")+")"); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for r := 0; r < rows; r++ {
		if r > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%d", r)
		for _, c := range diffColumns {
			b.WriteString(", ")
			if rng.Intn(5) == 0 {
				b.WriteString("NULL")
			} else {
				b.WriteString(quote(c.lits[rng.Intn(len(c.lits))]))
			}
		}
		b.WriteString(")")
	}
	if _, err := conn.Exec(ctx, "INSERT INTO vals VALUES "+b.String()); err != nil {
		t.Fatal(err)
	}
	return conn, cat
}

// readRows runs the plan's needed-columns query in text format and decodes
// each row into a Row, with the server's extra trailing columns returned
// raw.
func readRows(t *testing.T, conn *pgx.Conn, p *Plan, sql string, extra int) ([]Row, [][][]byte) {
	t.Helper()
	vals, oids, formats := p.Args()
	res := conn.PgConn().ExecParams(context.Background(), sql, vals, oids, formats, nil).Read()
	if res.Err != nil {
		t.Fatalf("%s: %v", sql, res.Err)
	}
	return decodeRows(t, p, res, extra)
}

func decodeRows(t *testing.T, p *Plan, res *pgconn.Result, extra int) ([]Row, [][][]byte) {
	var rows []Row
	var extras [][][]byte
	for _, raw := range res.Rows {
		row := make(Row, len(p.Sources))
		k := 0
		for i, s := range p.Sources {
			vals := make([]any, len(s.Columns))
			allNull := true
			for j, c := range s.Columns {
				if raw[k] != nil {
					allNull = false
					v, err := change.DecodeOID(c.TypeOID, change.Value{Kind: change.Text, Data: raw[k]}, nil)
					if err != nil {
						t.Fatalf("decode %s %q: %v", c.Name, raw[k], err)
					}
					vals[j] = v
				}
				k++
			}
			if !(allNull && s.Nullable) {
				row[i] = vals
			}
		}
		rows = append(rows, row)
		extras = append(extras, raw[k:k+extra])
	}
	return rows, extras
}

// predGen draws random predicates over vals.
type predGen struct {
	rng   *rand.Rand
	binds []Bind
	useB  bool
}

func (g *predGen) pick(s []string) string { return s[g.rng.Intn(len(s))] }

// value returns a constant for column c: a literal of its own, sometimes
// cast, sometimes a bind (OID 0, text), sometimes NULL.
func (g *predGen) value(c diffColumn) string {
	if g.rng.Intn(15) == 0 {
		return "NULL"
	}
	lit := g.pick(c.lits)
	if g.useB && g.rng.Intn(3) == 0 {
		g.binds = append(g.binds, Bind{Data: []byte(lit)})
		return fmt.Sprintf("$%d", len(g.binds))
	}
	switch c.name {
	case "i4", "i8", "i2":
		switch g.rng.Intn(4) {
		case 0:
			return lit
		case 1:
			return g.pick([]string{"1.5", "2.0", "-0.5", "7", "2147483648", "9007199254740993.0"})
		case 2:
			return g.pick([]string{"'1.5'::float8", "'2'::float8", "'9007199254740992'::float8", "'NaN'::float8"})
		}
	case "n":
		switch g.rng.Intn(3) {
		case 0:
			return g.pick([]string{"2", "7", "1.5", "'1.5'::float8", "'NaN'::numeric"})
		}
	case "f8", "f4":
		switch g.rng.Intn(3) {
		case 0:
			return g.pick([]string{"0.1", "1.5", "2", "'0.1'::real", "'1.5'::float4"})
		}
	case "c":
		if g.rng.Intn(3) == 0 {
			return g.pick([]string{"'a '::text", "'b '::text", "'a'::text", "'ab  '::varchar"})
		}
	case "v":
		if g.rng.Intn(3) == 0 {
			return g.pick([]string{"'a '::char(3)", "'a'::bpchar", "'b  '::bpchar"})
		}
	case "d":
		if g.rng.Intn(3) == 0 {
			return g.pick([]string{"'2024-01-01 00:00:00'::timestamp", "'2024-01-01 12:00:00'::timestamp", "'2024-01-01 00:00:00+00'::timestamptz"})
		}
	case "ts", "tt":
		if g.rng.Intn(3) == 0 {
			return g.pick([]string{"'2024-01-01'::date", "'2024-01-01 00:00:00'::timestamp", "'2024-01-01 01:00:00+00'::timestamptz"})
		}
	}
	if g.rng.Intn(4) == 0 {
		t := c.typ
		if i := strings.Index(t, " COLLATE"); i > 0 {
			t = t[:i]
		}
		return quote(lit) + "::" + t
	}
	return quote(lit)
}

var ops = []string{"=", "<>", "<", "<=", ">", ">="}

func (g *predGen) atom() string {
	c := diffColumns[g.rng.Intn(len(diffColumns))]
	switch g.rng.Intn(14) {
	case 0:
		return fmt.Sprintf("%s BETWEEN %s AND %s", c.name, g.value(c), g.value(c))
	case 1:
		return fmt.Sprintf("%s NOT BETWEEN %s AND %s", c.name, g.value(c), g.value(c))
	case 2, 3:
		var vs []string
		for k := 1 + g.rng.Intn(4); k > 0; k-- {
			vs = append(vs, g.value(c))
		}
		not := ""
		if g.rng.Intn(2) == 0 {
			not = "NOT "
		}
		return fmt.Sprintf("%s %sIN (%s)", c.name, not, strings.Join(vs, ", "))
	case 4:
		return fmt.Sprintf("%s IS %sNULL", c.name, g.pick([]string{"", "NOT "}))
	case 5:
		return fmt.Sprintf("%s IS %sDISTINCT FROM %s", c.name, g.pick([]string{"", "NOT "}), g.value(c))
	case 6:
		b := diffColumnByName("bo")
		_ = b
		return g.pick([]string{"bo", "NOT bo", "bo IS TRUE", "bo IS NOT TRUE", "bo IS FALSE", "bo IS NOT FALSE", "bo IS UNKNOWN", "bo IS NOT UNKNOWN", "bo = true", "(i4 > 1) IS NOT FALSE"})
	case 7:
		col := g.pick([]string{"t", "tc", "v", "c", "nm"})
		pat := g.pick([]string{"a%", "%a", "_", "a_b", `a\_b`, "%", "", "A%", "é%", "É", "%b%", "a  ", "a", "ß", "Σ", "σ", "ς", "%\\%%", "ǆa", "i%"})
		op := g.pick([]string{"LIKE", "NOT LIKE", "ILIKE", "NOT ILIKE"})
		esc := ""
		if g.rng.Intn(5) == 0 {
			esc = " ESCAPE " + g.pick([]string{"'!'", "''", `'\'`})
		}
		return fmt.Sprintf("%s %s %s%s", col, op, quote(pat), esc)
	case 8:
		// = ANY / <> ALL / other ANY over an array literal.
		if c.name == "e" {
			return "e = 'ok'"
		}
		var vs []string
		for k := g.rng.Intn(4); k > 0; k-- {
			l := g.pick(c.lits)
			if g.rng.Intn(6) == 0 {
				vs = append(vs, "NULL")
			} else {
				vs = append(vs, `"`+strings.ReplaceAll(strings.ReplaceAll(l, `\`, `\\`), `"`, `\"`)+`"`)
			}
		}
		return fmt.Sprintf("%s %s %s(%s)", c.name, g.pick(ops), g.pick([]string{"ANY", "ALL"}), quote("{"+strings.Join(vs, ",")+"}"))
	case 9:
		// Two columns of compatible types.
		pairs := [][2]string{{"i4", "i8"}, {"i4", "n"}, {"i8", "f8"}, {"n", "f8"}, {"f4", "f8"}, {"i2", "i4"}, {"d", "ts"}, {"d", "tt"}, {"ts", "tt"}, {"t", "v"}, {"c", "t"}, {"c", "v"}, {"tz", "tz"}, {"iv", "iv"}, {"f4", "n"}}
		p := pairs[g.rng.Intn(len(pairs))]
		return fmt.Sprintf("%s %s %s", p[0], g.pick(ops), p[1])
	case 10:
		return fmt.Sprintf("%s %s %s", g.value(c), g.pick(ops), c.name)
	}
	return fmt.Sprintf("%s %s %s", c.name, g.pick(ops), g.value(c))
}

func (g *predGen) pred(depth int) string {
	if depth <= 0 || g.rng.Intn(3) == 0 {
		return g.atom()
	}
	switch g.rng.Intn(3) {
	case 0:
		return fmt.Sprintf("(%s AND %s)", g.pred(depth-1), g.pred(depth-1))
	case 1:
		return fmt.Sprintf("(%s OR %s)", g.pred(depth-1), g.pred(depth-1))
	}
	return fmt.Sprintf("NOT (%s)", g.pred(depth-1))
}

// TestEvalDifferential compiles random predicates and compares Eval's
// verdict on every row with PostgreSQL's own, row by row. Refused
// predicates are skipped (they are counted and must stay a minority), and a
// predicate the server rejects must have been refused.
func TestEvalDifferential(t *testing.T) {
	seed := int64(20261130)
	if *diffSeed != 0 {
		seed = *diffSeed
	}
	rng := rand.New(rand.NewSource(seed))
	conn, cat := setupDiff(t, rng, 200)
	opts := DefaultOptions()
	opts.Catalog = cat
	n := 1500
	if testing.Short() {
		n = 300
	}
	if *diffN > 0 {
		n = *diffN
	}
	var accepted, refused int
	reasons := map[Code]int{}
	for i := 0; i < n; i++ {
		g := &predGen{rng: rng, useB: i%2 == 1}
		pred := g.pred(2)
		sql := "SELECT id FROM vals WHERE " + pred
		p, r, err := Compile(context.Background(), sql, g.binds, opts)
		if err != nil {
			t.Fatalf("compile %s: %v", sql, err)
		}
		// The server's verdict per row, with the same binds.
		check := fmt.Sprintf("SELECT %s, (%s) FROM vals ORDER BY id", neededList(p), pred)
		if p == nil {
			refused++
			reasons[r.Code]++
			if testing.Verbose() && reasons[r.Code] < 8 {
				t.Logf("refused %s: %s", sql, r.Message)
			}
			continue
		}
		accepted++
		vals, oids, formats := p.Args()
		res := conn.PgConn().ExecParams(context.Background(), check, vals, oids, formats, nil).Read()
		if res.Err != nil {
			t.Errorf("accepted, but PostgreSQL rejects it: %s: %v", sql, res.Err)
			continue
		}
		rows, extras := decodeRows(t, p, res, 1)
		for k, row := range rows {
			want := Unknown
			switch string(extras[k][0]) {
			case "t":
				want = True
			case "f":
				want = False
			}
			if got := p.Eval(row); got != want {
				t.Errorf("seed %d: %s\n  binds %q\n  row id=%v: Eval = %v, want %v (row %v)", seed, sql, bindTexts(g.binds), row[0][0], got, want, fmtRow(row))
				break
			}
			if want == True {
				if c, ok := violated(p, row); !ok {
					t.Errorf("seed %d: %s\n  binds %q\n  row id=%v is kept but violates constraint %s %s", seed, sql, bindTexts(g.binds), row[0][0],
						p.Sources[0].Columns[c.Column].Name, describeConstraint(c))
					break
				}
			}
		}
		if t.Failed() && accepted > 20 {
			break
		}
	}
	t.Logf("%d predicates accepted, %d refused: %v", accepted, refused, reasons)
	if accepted < n/2 {
		t.Errorf("only %d of %d predicates were accepted; refusals: %v", accepted, n, reasons)
	}
}

// neededList selects the plan's needed columns (all from vals here).
func neededList(p *Plan) string {
	if p == nil {
		return "1"
	}
	var cols []string
	for _, s := range p.Sources {
		for _, c := range s.Columns {
			cols = append(cols, change.QuoteIdent(s.Alias)+"."+change.QuoteIdent(c.Name))
		}
	}
	return strings.Join(cols, ", ")
}

func bindTexts(bs []Bind) []string {
	var out []string
	for _, b := range bs {
		out = append(out, string(b.Data))
	}
	return out
}

func fmtRow(r Row) string {
	var parts []string
	for _, vals := range r {
		for _, v := range vals {
			parts = append(parts, fmtValue(v))
		}
	}
	return strings.Join(parts, " ")
}

// TestOrderDifferential checks Compare against ORDER BY on the server: the
// server's dense_rank over the same ORDER BY must be exactly the tie groups
// of Compare, in the same order.
func TestOrderDifferential(t *testing.T) {
	seed := int64(7)
	if *diffSeed != 0 {
		seed = *diffSeed
	}
	rng := rand.New(rand.NewSource(seed))
	conn, cat := setupDiff(t, rng, 200)
	opts := DefaultOptions()
	opts.Catalog = cat
	orderable := []string{"i4", "i8", "i2", "n", "f8", "f4", "t", "tc", "v", "c", "nm", "bo", "u", "by", "d", "tm", "tz", "ts", "tt", "iv"}
	for i := 0; i < 300; i++ {
		var keys []string
		for k := 1 + rng.Intn(3); k > 0; k-- {
			key := orderable[rng.Intn(len(orderable))]
			key += []string{"", " ASC", " DESC"}[rng.Intn(3)]
			key += []string{"", " NULLS FIRST", " NULLS LAST"}[rng.Intn(3)]
			keys = append(keys, key)
		}
		order := strings.Join(keys, ", ")
		sql := "SELECT id FROM vals ORDER BY " + order
		p, r, err := Compile(context.Background(), sql, nil, opts)
		if err != nil || r != nil {
			t.Fatalf("compile %s: %v %v", sql, err, r)
		}
		check := fmt.Sprintf("SELECT %s, dense_rank() OVER (ORDER BY %s) FROM vals", neededList(p), order)
		rows, extras := readRows(t, conn, p, check, 1)
		rank := make(map[*[]any]int)
		type ranked struct {
			row  Row
			rank int
		}
		rs := make([]ranked, len(rows))
		for k := range rows {
			var n int
			fmt.Sscan(string(extras[k][0]), &n)
			rs[k] = ranked{rows[k], n}
		}
		_ = rank
		sort.SliceStable(rs, func(a, b int) bool { return p.Compare(rs[a].row, rs[b].row) < 0 })
		for k := 1; k < len(rs); k++ {
			a, b := rs[k-1], rs[k]
			c := p.Compare(a.row, b.row)
			if (c == 0) != (a.rank == b.rank) || c < 0 && a.rank > b.rank {
				t.Fatalf("seed %d: ORDER BY %s: rows %s (server rank %d) and %s (rank %d): Compare = %d",
					seed, order, fmtRow(a.row), a.rank, fmtRow(b.row), b.rank, c)
			}
		}
		// CompareWindow is a total order on distinct rows, and the window
		// Render asks for is exactly its first offset+limit+margin rows.
		all := make([]Row, len(rs))
		for k := range rs {
			all[k] = rs[k].row
		}
		sort.Slice(all, func(a, b int) bool { return p.CompareWindow(all[a], all[b]) < 0 })
		for k := 1; k < len(all); k++ {
			if p.CompareWindow(all[k-1], all[k]) == 0 {
				t.Fatalf("CompareWindow ties two distinct rows under ORDER BY %s", order)
			}
		}
		pw, r, err := Compile(context.Background(), sql+" LIMIT 10 OFFSET 3", nil, opts)
		if err != nil || r != nil {
			t.Fatalf("compile with limit: %v %v", err, r)
		}
		win, _ := readRows(t, conn, pw, pw.Render(RenderOptions{Columns: SelectNeeded, Window: true, Margin: 5}), 0)
		if len(win) != 18 {
			t.Fatalf("window of ORDER BY %s has %d rows, want 18", order, len(win))
		}
		for k := range win {
			if keyString(pw, win[k]) != keyString(p, all[k]) {
				t.Fatalf("window row %d under ORDER BY %s is %s, CompareWindow puts %s there", k, order, keyString(pw, win[k]), keyString(p, all[k]))
			}
		}
	}
}

// violated checks a kept row against every source's routing constraints:
// it returns the first one the row breaks.
func violated(p *Plan, row Row) (Constraint, bool) {
	for i, s := range p.Sources {
		if row[i] == nil {
			continue
		}
		for _, c := range p.Constraints(i) {
			if !satisfies(s.Columns[c.Column].TypeOID, c, row[i][c.Column]) {
				return c, false
			}
		}
	}
	return Constraint{}, true
}

// satisfies is how the engine reads a constraint: value sets by AppendKey,
// ranges by CompareValues.
func satisfies(oid uint32, c Constraint, v any) bool {
	switch c.Kind {
	case ConstraintIn:
		if v == nil {
			return c.Null
		}
		k := string(AppendKey(nil, oid, v))
		for _, x := range c.Values {
			if string(AppendKey(nil, oid, x)) == k {
				return true
			}
		}
		return false
	case ConstraintNotIn:
		if v == nil {
			return false
		}
		k := string(AppendKey(nil, oid, v))
		for _, x := range c.Values {
			if string(AppendKey(nil, oid, x)) == k {
				return false
			}
		}
		return true
	}
	if v == nil {
		return false
	}
	for _, r := range c.Ranges {
		if r.Low != nil {
			if cmp := CompareValues(oid, v, r.Low); cmp < 0 || cmp == 0 && !r.LowInc {
				continue
			}
		}
		if r.High != nil {
			if cmp := CompareValues(oid, v, r.High); cmp > 0 || cmp == 0 && !r.HighInc {
				continue
			}
		}
		return true
	}
	return false
}
