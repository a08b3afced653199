package query

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
	"github.com/jackc/pgx/v5"
)

// exprGen draws random value expressions over the differential test's
// table "vals": arithmetic over every numeric type (extremes, NaN and
// infinities included), string functions, CASE, COALESCE, NULLIF,
// GREATEST/LEAST, casts and conditions on expressions.
type exprGen struct{ rng *rand.Rand }

func (g *exprGen) pick(s ...string) string { return s[g.rng.Intn(len(s))] }

func (g *exprGen) num(d int) string {
	if d <= 0 || g.rng.Intn(4) == 0 {
		if g.rng.Intn(3) == 0 {
			return g.pick("0", "1", "-1", "2", "3", "7", "1.5", "0.001", "-2.50", "2147483647", "-2147483648", "9223372036854775807",
				"100000000000000000000", "'NaN'::numeric", "'Infinity'::numeric", "'-Infinity'::float8", "'NaN'::float8", "1e300::float8",
				"'1e-300'::float8", "'-0'::float8", "2::int2", "(-32768)::int2", "'3.4e38'::float4", "'0.1'::real", "NULL::int4", "3.0::numeric")
		}
		return g.pick("i2", "i4", "i8", "n", "f8", "f4", "i4", "i8", "n")
	}
	switch g.rng.Intn(16) {
	case 0, 1, 2, 3:
		return fmt.Sprintf("(%s %s %s)", g.num(d-1), g.pick("+", "-", "*", "/", "%", "+", "-", "*"), g.num(d-1))
	case 4:
		return fmt.Sprintf("(- %s)", g.num(d-1))
	case 5:
		return fmt.Sprintf("CASE WHEN %s THEN %s ELSE %s END", g.cond(d-1), g.num(d-1), g.num(d-1))
	case 6:
		return fmt.Sprintf("COALESCE(%s, %s)", g.num(d-1), g.num(d-1))
	case 7:
		return fmt.Sprintf("NULLIF(%s, %s)", g.num(d-1), g.num(d-1))
	case 8:
		return fmt.Sprintf("%s(%s, %s)", g.pick("GREATEST", "LEAST"), g.num(d-1), g.num(d-1))
	case 9:
		return fmt.Sprintf("(%s)::%s", g.num(d-1), g.pick("int2", "int4", "int8", "numeric", "float8", "float4", "numeric(5,2)", "numeric(10,0)", "numeric(3,-1)", "text"))
	case 10:
		return fmt.Sprintf("length(%s)", g.text(d-1))
	case 11:
		return fmt.Sprintf("CASE %s WHEN %s THEN %s WHEN %s THEN %s END", g.num(d-1), g.num(0), g.num(d-1), g.num(0), g.num(d-1))
	case 12:
		return fmt.Sprintf("(%s)::%s", g.pick(g.text(d-1), "'  1.5e3 '", "'-inf'", "'NaN'", "'1e-5'", "'+.5'", "'5.'", "'1_000'", "' 12 '", "'0x1F'"), g.pick("int4", "numeric", "int8", "int2"))
	case 13:
		if g.rng.Intn(2) == 0 {
			return fmt.Sprintf("extract(%s from %s)", g.unit(), g.timestamp(d-1))
		}
		return fmt.Sprintf("date_part('%s', %s)", g.unit(), g.timestamp(d-1))
	case 14:
		return g.pick("array_length(ar, 1)", "array_length(ar, 2)", "array_length(tar, 1)", "cardinality(ar)", "cardinality(tar)",
			"array_length(ar, i2)", "array_length(ar, 0)", "cardinality('{}'::int4[])")
	}
	return fmt.Sprintf("(%s %s %s)", g.num(d-1), g.pick("+", "*", "/"), g.pick("i4", "n", "f8", "i2"))
}

func (g *exprGen) intArg(d int) string {
	if d > 0 && g.rng.Intn(4) == 0 {
		return fmt.Sprintf("length(%s)", g.text(d-1))
	}
	return g.pick("1", "0", "-1", "2", "3", "5", "2147483647", "-2147483648", "i4", "i2", "(i2 % 5)")
}

func (g *exprGen) text(d int) string {
	if d <= 0 || g.rng.Intn(4) == 0 {
		if g.rng.Intn(3) == 0 {
			return g.pick("'a'", "'ab '", "'É'", "''", "'xÀy'", "'A_b'", "NULL::text", "'  a  '")
		}
		return g.pick("t", "tc", "v", "c", "nm", "t", "t")
	}
	switch g.rng.Intn(21) {
	case 0, 1:
		return fmt.Sprintf("(%s || %s)", g.text(d-1), g.text(d-1))
	case 2:
		return fmt.Sprintf("(%s || %s)", g.text(d-1), g.pick(g.num(d-1), "bo", "d", "ts"))
	case 3:
		return fmt.Sprintf("%s(%s)", g.pick("lower", "upper"), g.text(d-1))
	case 4:
		return fmt.Sprintf("substr(%s, %s)", g.text(d-1), g.intArg(d-1))
	case 5:
		return fmt.Sprintf("substr(%s, %s, %s)", g.text(d-1), g.intArg(d-1), g.intArg(d-1))
	case 6:
		return fmt.Sprintf("substring(%s from %s for %s)", g.text(d-1), g.intArg(d-1), g.intArg(d-1))
	case 7:
		return fmt.Sprintf("%s(%s)", g.pick("btrim", "ltrim", "rtrim"), g.text(d-1))
	case 8:
		return fmt.Sprintf("%s(%s, %s)", g.pick("btrim", "ltrim", "rtrim"), g.text(d-1), g.pick("'a'", "'ab '", "''", "'É '"))
	case 9:
		return fmt.Sprintf("trim(%s %s from %s)", g.pick("both", "leading", "trailing"), g.pick("'a'", "' '", "'ba'"), g.text(d-1))
	case 10:
		return fmt.Sprintf("concat(%s, %s, %s)", g.text(d-1), g.pick(g.num(d-1), "bo", "c", "d"), g.text(d-1))
	case 11:
		return fmt.Sprintf("replace(%s, %s, %s)", g.text(d-1), g.pick("'a'", "''", "'b '", "'É'"), g.pick("'xy'", "''", "'a'"))
	case 12:
		return fmt.Sprintf("%s(%s, %s)", g.pick("left", "right"), g.text(d-1), g.intArg(d-1))
	case 13:
		return fmt.Sprintf("CASE WHEN %s THEN %s ELSE %s END", g.cond(d-1), g.text(d-1), g.text(d-1))
	case 14:
		return fmt.Sprintf("COALESCE(%s, %s)", g.text(d-1), g.text(d-1))
	case 15:
		return fmt.Sprintf("NULLIF(%s, %s)", g.text(d-1), g.text(d-1))
	case 16:
		return fmt.Sprintf("%s(%s, %s)", g.pick("GREATEST", "LEAST"), g.pick("tc", "t", "c", "'b'"), g.pick("tc", "'a'", "v"))
	case 17:
		return fmt.Sprintf("(%s)::%s", g.pick("i4", "n", "f8", "f4", "bo", "d", "ts", "tt", "c", "u", "iv", "tm", g.num(d-1)), g.pick("text", "varchar(3)", "char(3)", "varchar"))
	case 18:
		return fmt.Sprintf("(%s)::%s", g.text(d-1), g.pick("text", "varchar(2)", "char(4)", "bpchar"))
	case 19:
		return fmt.Sprintf("(%s %s %s)", g.jsonb(d-1), g.pick("->>", "->>", "#>>"), g.jsonKey())
	}
	return g.pick("(ts)::date::text", "(tt)::date::text", "(d)::timestamp::text", "(d)::timestamptz::text", "(tt)::timestamp::text")
}

func (g *exprGen) cond(d int) string {
	switch g.rng.Intn(11) {
	case 0:
		return fmt.Sprintf("starts_with(%s, %s)", g.text(d), g.pick("'a'", "''", "'É'", "t"))
	case 1:
		return fmt.Sprintf("%s %s %s", g.text(d), g.pick("=", "<>", "<", ">="), g.pick("'a'", "'b'", "tc", "''"))
	case 2:
		return fmt.Sprintf("%s IS %sNULL", g.pick(g.num(d), g.text(d)), g.pick("", "NOT "))
	case 3:
		return fmt.Sprintf("%s LIKE %s", g.text(d), g.pick("'a%'", "'%b'", "'_'"))
	case 4:
		return fmt.Sprintf("%s IN (%s, %s)", g.num(d), g.num(0), g.num(0))
	case 5:
		return g.pick("bo", "NOT bo", "bo IS NOT TRUE")
	case 6:
		return g.arrayCond(d)
	case 7, 8:
		return g.jsonCond(d)
	}
	return fmt.Sprintf("%s %s %s", g.num(d), g.pick("=", "<>", "<", "<=", ">", ">="), g.num(d))
}

// jsonb draws a jsonb expression.
func (g *exprGen) jsonb(d int) string {
	if d <= 0 || g.rng.Intn(2) == 0 {
		return g.pick("js", "js", "js", `'{"a": {"b": 2}, "c": [3]}'::jsonb`, `'{"b": 1, "a": {"zz": 1, "b": [1, "x"], "y": null}}'::jsonb`)
	}
	op := g.pick("->", "->", "#>")
	return fmt.Sprintf("(%s %s %s)", g.jsonb(d-1), op, g.jsonKey())
}

// jsonKey is a key, index or path for ->, ->>, #> and #>> (a path
// only suits #> and #>>, a key or index only -> and ->>: the server
// refuses the others, and so must Compile).
func (g *exprGen) jsonKey() string {
	return g.pick("'a'", "'b'", "'c'", "'aa'", "0", "1", "-1", "2", "'{a,b}'", "'{a,b,1}'", "'{b,2,c}'", "'{}'", "'{ 1}'", "'{a,0}'", "i2")
}

// arrayCond draws a condition on the array columns.
func (g *exprGen) arrayCond(d int) string {
	intArr := g.pick("ar", "ar", "'{1,7}'", "'{}'::int4[]", "ARRAY[2, 7]", "'{NULL,2}'::integer[]", "NULL::int4[]")
	textArr := g.pick("tar", "tar", "'{a}'", "ARRAY['a', 'b']", "'{NULL}'::text[]", "ARRAY['É']")
	switch g.rng.Intn(6) {
	case 0:
		return fmt.Sprintf("ar %s %s", g.pick("@>", "<@", "&&"), intArr)
	case 1:
		return fmt.Sprintf("%s %s ar", intArr, g.pick("@>", "<@", "&&"))
	case 2:
		return fmt.Sprintf("tar %s %s", g.pick("@>", "<@", "&&"), textArr)
	case 3:
		return fmt.Sprintf("%s %s %s(ar)", g.pick("i4", "i2", "i8", "n", "f8", "1", "7", "NULL::int4", g.num(d)), g.pick(ops...), g.pick("ANY", "ALL"))
	case 4:
		return fmt.Sprintf("%s %s %s(tar)", g.pick("t", "v", "tc", "'a'", "lower(t)"), g.pick("=", "<>", "<", ">="), g.pick("ANY", "ALL"))
	}
	return fmt.Sprintf("NOT (ar %s ar)", g.pick("@>", "&&"))
}

// jsonCond draws a condition on jsonb.
func (g *exprGen) jsonCond(d int) string {
	switch g.rng.Intn(3) {
	case 0:
		return fmt.Sprintf("%s ? %s", g.jsonb(d), g.pick("'a'", "'b'", "'s'", "'n'", "t"))
	case 1:
		return fmt.Sprintf("%s %s %s", g.jsonb(d), g.pick("@>", "<@"), g.pick(`'{"a": 1}'`, `'[1]'`, `'1.5'`, `'{}'`, `'[[2]]'`, `'{"b": [{"c": "x\n\"y"}]}'`, "js", `'"a"'`, `'{"a": 1, "b": [1, 2, {"c": "x\n\"y"}], "z": 1}'`, `'1'`, `'"s"'`, `'true'`))
	}
	return fmt.Sprintf("(%s ->> %s) %s %s", g.jsonb(d), g.jsonKey(), g.pick("=", "<", "IS NOT DISTINCT FROM"), g.pick("'s'", "'1'", "t", "'[1, 2]'"))
}

// unit is a unit of date_trunc, extract or date_part, as people write
// them (any case, plurals and abbreviations).
func (g *exprGen) unit() string {
	return g.pick("microseconds", "milliseconds", "second", "minute", "hour", "day", "week", "month", "quarter", "year",
		"decade", "century", "millennium", "dow", "isodow", "doy", "isoyear", "epoch", "julian", "timezone", "MONTHS", "y", "Hour", "msec")
}

func (g *exprGen) timestamp(d int) string {
	if d <= 0 || g.rng.Intn(3) > 0 {
		return g.pick("ts", "tt", "ts", "tt", "d")
	}
	return fmt.Sprintf("date_trunc('%s', %s)", g.unit(), g.timestamp(d-1))
}

// expr draws an expression of any of the kinds.
func (g *exprGen) expr(d int) string {
	switch g.rng.Intn(6) {
	case 0, 1:
		return g.num(d)
	case 2, 3:
		return g.text(d)
	case 4:
		switch g.rng.Intn(3) {
		case 0:
			return g.timestamp(d)
		case 1:
			return g.jsonb(d + 1)
		}
	}
	return g.cond(d)
}

// pgEval creates eval_rows(e): e evaluated on each row of vals alone (so
// that one row's error leaves the others' values), as (id, null, text of
// the value by its output function, SQLSTATE of an error).
const pgEval = `CREATE FUNCTION eval_rows(e text) RETURNS TABLE(rid int, vnull bool, val text, err text) LANGUAGE plpgsql AS $f$
DECLARE r int;
BEGIN
  FOR r IN SELECT id FROM vals ORDER BY id LOOP
    rid := r; vnull := NULL; val := NULL; err := NULL;
    BEGIN
      EXECUTE 'SELECT x IS NULL, format(''%s'', x) FROM (SELECT (' || e || ') AS x FROM vals WHERE id = $1) s' INTO vnull, val USING r;
    EXCEPTION WHEN OTHERS THEN err := SQLSTATE;
    END;
    RETURN NEXT;
  END LOOP;
END $f$`

// pgRow is PostgreSQL's answer for one row.
type pgRow struct {
	null     bool
	val, err string
}

func evalOnServer(t *testing.T, conn *pgx.Conn, e string) []pgRow {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT vnull, val, err FROM eval_rows($1) ORDER BY rid", e)
	if err != nil {
		t.Fatalf("eval_rows(%s): %v", e, err)
	}
	var out []pgRow
	for rows.Next() {
		var null *bool
		var val, e *string
		if err := rows.Scan(&null, &val, &e); err != nil {
			t.Fatal(err)
		}
		r := pgRow{}
		if e != nil {
			r.err = *e
		} else {
			r.null = null != nil && *null
			if val != nil {
				r.val = *val
			}
		}
		out = append(out, r)
	}
	if rows.Err() != nil {
		t.Fatalf("eval_rows(%s): %v", e, rows.Err())
	}
	return out
}

// TestExprDifferential compiles random expressions as output columns and
// compares, row by row, the value's text (or the SQLSTATE of the error
// PostgreSQL raises) with the server's, and the result's type and type
// modifier with what the server describes. Boolean expressions are also
// compiled as WHERE clauses (EvalRow against the server's truth value,
// and the kept rows against the routing constraints), and every
// expression is compiled as an ORDER BY key against the server's order.
func TestExprDifferential(t *testing.T) {
	seed := int64(20261201)
	if *diffSeed != 0 {
		seed = *diffSeed
	}
	rng := rand.New(rand.NewSource(seed))
	conn, cat := setupDiff(t, rng, 120)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, pgEval); err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Catalog = cat
	n := 700
	if testing.Short() {
		n = 150
	}
	if *diffN > 0 {
		n = *diffN
	}
	g := &exprGen{rng: rng}
	var accepted, refused, rowsCompared, errorsCompared int
	reasons := map[Code]int{}
	covered := map[string]int{}
	// Every construct is accepted some times: a regression that refuses
	// one fails the floor below instead of going unseen. Past n, more
	// expressions are drawn (up to 4n in all) while a construct is below
	// its floor, so a rare draw (#>> is one pick in three of one branch)
	// does not fail the run for a seed that happened not to draw it.
	floor := max(1, n/600)
	below := func() bool {
		for _, c := range exprConstructs {
			if covered[c] < floor {
				return true
			}
		}
		return false
	}
	for i := 0; !t.Failed() && (i < n || (i < 4*n && !testing.Short() && below())); i++ {
		e := g.expr(1 + rng.Intn(3))
		sql := fmt.Sprintf("SELECT id, %s AS x FROM vals", e)
		p, r, err := Compile(ctx, sql, nil, opts)
		if err != nil {
			t.Fatalf("compile %s: %v", sql, err)
		}
		server := evalOnServer(t, conn, e)
		if p == nil {
			refused++
			reasons[r.Code]++
			if r.Code == CodeEvalError {
				// A constant part fails: PostgreSQL fails every row.
				for k, sr := range server {
					if sr.err == "" {
						t.Errorf("seed %d: %s refused (%s) but PostgreSQL evaluates row %d to %q", seed, e, r.Message, k, sr.val)
						break
					}
				}
			} else if testing.Verbose() && reasons[r.Code] < 6 {
				t.Logf("refused %s: %s", e, r.Message)
			}
			continue
		}
		accepted++
		for _, c := range exprConstructs {
			if strings.Contains(e, c) {
				covered[c]++
			}
		}
		// The server's type for the expression.
		sd, err := conn.PgConn().Prepare(ctx, "", "SELECT "+e+" FROM vals", nil)
		if err != nil {
			t.Errorf("seed %d: accepted, but PostgreSQL rejects %s: %v", seed, e, err)
			continue
		}
		out := p.Output[1]
		if f := sd.Fields[0]; f.DataTypeOID != out.TypeOID || f.TypeModifier != out.TypeMod {
			t.Errorf("seed %d: %s: type %s(%d), PostgreSQL says %s(%d)", seed, e, typeName(out.TypeOID), out.TypeMod, typeName(f.DataTypeOID), f.TypeModifier)
			continue
		}
		rows, _ := readRows(t, conn, p, "SELECT "+neededList(p)+" FROM vals ORDER BY id", 0)
		if len(rows) != len(server) {
			t.Fatalf("%d rows read, %d evaluated", len(rows), len(server))
		}
		failed := false
		for k, row := range rows {
			want := server[k]
			_, err := p.EvalRow(row)
			var got pgRow
			if err != nil {
				var ee *EvalError
				if !errors.As(err, &ee) {
					t.Fatalf("EvalRow: %v", err)
				}
				got.err = ee.Code
			} else if v := p.Project(row)[1]; v == nil {
				got.null = true
			} else {
				got.val = formatText(out.TypeOID, v)
			}
			if got != want {
				t.Errorf("seed %d: %s\n  row %s: got %+v, PostgreSQL %+v", seed, e, fmtRow(row), got, want)
				failed = true
				break
			}
			rowsCompared++
			if want.err != "" {
				errorsCompared++
			}
		}
		if failed {
			continue
		}
		if out.TypeOID == change.OIDBool {
			checkWhere(t, seed, e, opts, conn, server)
		}
		noErrors := true
		for _, sr := range server {
			noErrors = noErrors && sr.err == ""
		}
		if noErrors {
			checkOrder(t, seed, e, opts, conn)
		}
	}
	t.Logf("%d expressions accepted, %d refused: %v; %d rows compared, %d of them errors", accepted, refused, reasons, rowsCompared, errorsCompared)
	if accepted < n*2/3 {
		t.Errorf("only %d of %d expressions were accepted; refusals: %v", accepted, n, reasons)
	}
	if errorsCompared == 0 {
		t.Errorf("no row raised an error: the overflow and division cases are not exercised")
	}
	for _, c := range exprConstructs {
		if covered[c] < floor && !testing.Short() {
			t.Errorf("only %d accepted expressions use %q (want at least %d)", covered[c], c, floor)
		}
	}
	if testing.Verbose() {
		t.Logf("accepted per construct: %v", covered)
	}
}

// exprConstructs are the constructs TestExprDifferential must see
// accepted, by their text in the drawn expressions.
var exprConstructs = []string{" + ", " / ", " % ", "(- ", "||", "CASE", "COALESCE", "NULLIF", "GREATEST", "LEAST",
	"lower(", "upper(", "length(", "substr(", "substring(", "trim(", "concat(", "starts_with(", "replace(", "left(", "right(",
	"::text", "::int4", "::numeric(", "::float4", "::date", "::char(", "date_trunc(", "extract(", "date_part(",
	"@>", "<@", "&&", "(ar)", "(tar)", "array_length(", "cardinality(", "->>", "#>>", " -> ", " ? "}

// checkWhere compiles e as a WHERE clause: EvalRow must keep exactly the
// rows the server's value is true for, fail exactly where it fails, and
// every kept row must satisfy the routing constraints.
func checkWhere(t *testing.T, seed int64, e string, opts Options, conn *pgx.Conn, server []pgRow) {
	t.Helper()
	sql := "SELECT id FROM vals WHERE i4 IN (0, 1, 2, 7) AND " + e
	if rng := len(e) % 3; rng == 0 {
		sql = "SELECT id FROM vals WHERE " + e
	}
	p, r, err := Compile(context.Background(), sql, nil, opts)
	if err != nil || r != nil {
		t.Errorf("seed %d: %s accepted as an output but not in WHERE: %v %v", seed, e, err, r)
		return
	}
	rows, _ := readRows(t, conn, p, "SELECT "+neededList(p)+" FROM vals ORDER BY id", 0)
	restricted := strings.HasPrefix(sql, "SELECT id FROM vals WHERE i4 IN (0, 1, 2, 7) AND ")
	for k, row := range rows {
		got, err := p.EvalRow(row)
		want := server[k]
		var i4 any
		for j, c := range p.Sources[0].Columns {
			if c.Name == "i4" {
				i4 = row[0][j]
			}
		}
		inSet := !restricted
		if x, ok := i4.(int64); ok && (x == 0 || x == 1 || x == 2 || x == 7) {
			inSet = true
		}
		switch {
		case want.err != "":
			// Every condition is evaluated: the row raises whatever the
			// other condition says.
			if err == nil {
				t.Errorf("seed %d: WHERE %s: row %s: no error, PostgreSQL raises %s", seed, e, fmtRow(row), want.err)
				return
			}
			continue
		case err != nil:
			t.Errorf("seed %d: WHERE %s: row %s: %v, PostgreSQL evaluates it", seed, e, fmtRow(row), err)
			return
		}
		keep := inSet && !want.null && want.val == "t"
		if (got == True) != keep {
			t.Errorf("seed %d: %s\n  row %s: EvalRow = %v, want kept %v", seed, sql, fmtRow(row), got, keep)
			return
		}
		if keep {
			if c, ok := violated(p, row); !ok {
				t.Errorf("seed %d: %s: kept row %s violates constraint %s %s", seed, sql, fmtRow(row), p.Sources[0].Columns[c.Column].Name, describeConstraint(c))
				return
			}
		}
	}
}

// checkOrder compiles ORDER BY e and compares Compare's tie groups with
// the server's dense_rank.
func checkOrder(t *testing.T, seed int64, e string, opts Options, conn *pgx.Conn) {
	t.Helper()
	if _, err := strconv.Atoi(e); err == nil {
		return // ORDER BY 1 names an output column
	}
	dir := []string{"", " DESC", " NULLS FIRST"}[len(e)%3]
	sql := "SELECT id FROM vals ORDER BY " + e + dir
	p, r, err := Compile(context.Background(), sql, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if r == nil && p.Order[0].Source != ExprSource {
		return // a position (ORDER BY - -1 is ORDER BY 1) or a column
	}
	if r != nil {
		if r.Code != CodeType && r.Code != CodeCollation && r.Code != CodeOrderBy {
			t.Errorf("seed %d: ORDER BY %s refused: %v", seed, e, r)
		}
		return
	}
	check := fmt.Sprintf("SELECT %s, dense_rank() OVER (ORDER BY %s%s) FROM vals", neededList(p), e, dir)
	rows, extras := readRows(t, conn, p, check, 1)
	type ranked struct {
		row  Row
		rank int
	}
	rs := make([]ranked, len(rows))
	for k := range rows {
		fmt.Sscan(string(extras[k][0]), &rs[k].rank)
		rs[k].row = rows[k]
	}
	sort.SliceStable(rs, func(a, b int) bool { return p.Compare(rs[a].row, rs[b].row) < 0 })
	for k := 1; k < len(rs); k++ {
		a, b := rs[k-1], rs[k]
		c := p.Compare(a.row, b.row)
		if (c == 0) != (a.rank == b.rank) || c < 0 && a.rank > b.rank {
			t.Errorf("seed %d: ORDER BY %s%s: rows %s (rank %d) and %s (rank %d): Compare = %d", seed, e, dir, fmtRow(a.row), a.rank, fmtRow(b.row), b.rank, c)
			return
		}
	}
	// The window read Render writes for it must run and return the
	// window CompareWindow keeps.
	pw, r, err := Compile(context.Background(), sql+" LIMIT 5 OFFSET 2", nil, opts)
	if err != nil || r != nil {
		t.Fatalf("compile with limit: %v %v", err, r)
	}
	win, _ := readRows(t, conn, pw, pw.Render(RenderOptions{Columns: SelectNeeded, Window: true, Margin: 3}), 0)
	all := make([]Row, len(rs))
	for k := range rs {
		all[k] = rs[k].row
	}
	sort.Slice(all, func(a, b int) bool { return pw.CompareWindow(all[a], all[b]) < 0 })
	for k := range win {
		if keyString(pw, win[k]) != keyString(pw, all[k]) {
			t.Errorf("seed %d: window row %d under ORDER BY %s is %s, CompareWindow puts %s there", seed, k, e, keyString(pw, win[k]), keyString(pw, all[k]))
			return
		}
	}
}
