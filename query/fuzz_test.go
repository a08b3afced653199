package query

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/freshetdb/freshet/change"
	pg "github.com/pganalyze/pg_query_go/v6"
)

// memCatalog is a Catalog holding tables in memory, for fuzzing and
// benchmarks that must not wait on the server.
type memCatalog map[[2]string]*Table

func (m memCatalog) Table(_ context.Context, schema, name string) (*Table, error) {
	if t, ok := m[[2]string{schema, name}]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("table %s.%s: %w", schema, name, ErrNoTable)
}

// catalogSnapshot is testdata/schema.sql's tables as PGCatalog reads them,
// kept in a file so that fuzzing (whose processes start no server) and
// benchmarks need none; TestCatalogSnapshot keeps it equal to what
// PostgreSQL says (go test ./query -run TestCatalogSnapshot -update
// rewrites it).
const catalogSnapshot = "testdata/catalog.json"

// snapshotTables names the tables the snapshot holds.
var snapshotTables = [][2]string{{"public", "users"}, {"public", "orders"}, {"public", "items"}, {"public", "skus"},
	{"public", "nopk"}, {"other", "accounts"}, {"other", "users"}}

var (
	snapOnce sync.Once
	snap     memCatalog
	snapErr  error
)

// snapshotCatalog returns the tables of catalogSnapshot, read once per
// process.
func snapshotCatalog(t testing.TB) memCatalog {
	snapOnce.Do(func() {
		b, err := os.ReadFile(catalogSnapshot)
		if err != nil {
			snapErr = err
			return
		}
		var tables []*Table
		if err := json.Unmarshal(b, &tables); err != nil {
			snapErr = fmt.Errorf("%s: %w", catalogSnapshot, err)
			return
		}
		snap = memCatalog{}
		for _, tb := range tables {
			snap[[2]string{tb.Schema, tb.Name}] = tb
		}
	})
	if snapErr != nil {
		t.Fatalf("catalog snapshot: %v", snapErr)
	}
	return snap
}

// snapshotJSON returns tables as catalogSnapshot holds them: the OIDs a
// database gives its own objects (tables, enums, domains, which differ
// from one database to the next) replaced by fixed ones in order of
// appearance (from 90000), built-in ones kept.
func snapshotJSON(tables []*Table) ([]byte, error) {
	fixed := map[uint32]uint32{}
	oid := func(o *uint32) {
		if *o < 16384 { // FirstNormalObjectId: built in
			return
		}
		if _, ok := fixed[*o]; !ok {
			fixed[*o] = 90000 + uint32(len(fixed))
		}
		*o = fixed[*o]
	}
	out := make([]*Table, len(tables))
	for i, tb := range tables {
		c := *tb
		c.Columns = slices.Clone(tb.Columns)
		oid(&c.OID)
		for j := range c.Columns {
			col := &c.Columns[j]
			oid(&col.TypeOID)
			oid(&col.DeclaredOID)
			oid(&col.Type.OID)
			oid(&col.Type.Base)
			oid(&col.Type.Elem)
			oid(&col.Collation.OID)
		}
		out[i] = &c
	}
	return json.MarshalIndent(out, "", "\t")
}

// TestCatalogSnapshot reads testdata/schema.sql's tables from PostgreSQL
// and compares them with catalogSnapshot (with -update, writes it).
func TestCatalogSnapshot(t *testing.T) {
	_, cat := testDB(t)
	var tables []*Table
	for _, q := range snapshotTables {
		tb, err := cat.Table(context.Background(), q[0], q[1])
		if err != nil {
			t.Fatalf("read %v: %v", q, err)
		}
		tables = append(tables, tb)
	}
	got, err := snapshotJSON(tables)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(catalogSnapshot, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(catalogSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what PostgreSQL says of testdata/schema.sql; run go test ./query -run TestCatalogSnapshot -update and review the diff", catalogSnapshot)
	}
}

// FuzzCompile feeds arbitrary SQL to Compile: it must never panic, and a
// compiled plan must render, evaluate an all-NULL row and order it, and
// its normalized form must compile to the same normalized form again.
func FuzzCompile(f *testing.F) {
	for _, path := range []string{"testdata/compile.txt", "testdata/refusals.txt"} {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		for _, chunk := range strings.Split(string(b), "\n----\n") {
			f.Add(strings.TrimSpace(chunk))
		}
	}
	f.Add(deepQuery(300))
	f.Add(wideQuery(2000))
	for _, fam := range chainFamilies {
		f.Add(fam.gen(5))
	}
	f.Add("SELECT id FROM users WHERE age = -99\x00 OR age >= 0")
	f.Add("SELECT oid, rolname, rolpassword FROM pg_catalog.pg_authid")
	f.Add("SELECT u.id FROM users u JOIN other.accounts a ON a.id = u.id WHERE u.age IN (1, 9000000000)")
	cat := snapshotCatalog(f)
	opts := DefaultOptions()
	opts.Catalog = cat
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	f.Fuzz(func(t *testing.T, sql string) {
		if p, r, err := Compile(canceled, sql, nil, opts); !errors.Is(err, context.Canceled) {
			t.Fatalf("Compile(%q) with its context ended = %v, %v, %v; want the context's error", sql, p != nil, r, err)
		}
		p, r, err := Compile(context.Background(), sql, nil, opts)
		if err != nil {
			t.Fatalf("Compile(%q) error %v: a memory catalog never fails", sql, err)
		}
		if r != nil {
			if r.Code == "" || r.Message == "" {
				t.Fatalf("Compile(%q) refusal without code or message: %+v", sql, r)
			}
			return
		}
		// The lexical prescreen's bounds never exceed the parse tree's
		// counts (else it would refuse queries the limits allow).
		// (The plan keeps no tree: the SQL is parsed again for this.)
		tree, err := pg.Parse(sql)
		if err != nil {
			t.Fatalf("parse %q again: %v", sql, err)
		}
		if sc := prescreen(sql); sc.lexed && tree.Stmts[0].Stmt.GetSelectStmt().WhereClause != nil {
			w := tree.Stmts[0].Stmt.GetSelectStmt().WhereClause
			if real := alternatives(w, false, 1<<40); sc.alternatives > real {
				t.Fatalf("prescreen counts %d alternatives in %q, the tree %d", sc.alternatives, sql, real)
			}
			if real := inValues(w, 1<<40); sc.inValues > real {
				t.Fatalf("prescreen counts %d IN values in %q, the tree %d", sc.inValues, sql, real)
			}
		}
		_ = p.Render(RenderOptions{})
		_ = p.Render(RenderOptions{Columns: SelectNeeded, Window: true, Margin: 3})
		if p.Clocked() {
			// The engine's read (Hold) and the tests' reference (At), at
			// clocks near now and at the ends of the range.
			for _, at := range []change.Timestamp{{Micros: 849_657_600_000_000}, {Micros: -211_813_488_000_000_000}, {Micros: 9_223_371_331_199_999_999}} {
				_ = p.Render(RenderOptions{Columns: SelectNeeded, Window: true, Margin: 3, Hold: true})
				_ = p.Render(RenderOptions{At: &at})
				if thr, err := p.Thresholds(nil, at); err == nil {
					empty := make(Row, len(p.Sources))
					for i, s := range p.Sources {
						empty[i] = make([]any, len(s.Columns))
					}
					_, _ = p.EvalAt(empty, thr)
					_ = p.HoldsAt(empty, thr)
				}
			}
		}
		row := make(Row, len(p.Sources))
		for i, s := range p.Sources {
			row[i] = make([]any, len(s.Columns))
		}
		_ = p.Eval(row)
		if p.Agg != nil {
			// Outputs and order compare group rows.
			keys, args := make([]any, len(p.Agg.KeyOIDs)), make([]any, len(p.Agg.Aggs))
			_ = p.Agg.Eval(row, keys, args)
			row = Row{make([]any, len(p.Agg.Post.Sources[0].Columns))}
		}
		_ = p.Compare(row, row)
		_ = p.CompareWindow(row, make(Row, len(row)))
		_ = p.Project(row)
		// A row of values: expressions over them may raise PostgreSQL's
		// errors (as EvalError), never panic.
		full := make(Row, len(p.Sources))
		for i, s := range p.Sources {
			full[i] = make([]any, len(s.Columns))
			for j, c := range s.Columns {
				full[i][j] = sampleValue(c)
			}
		}
		_, _ = p.EvalRow(full)
		_ = p.Check(full)
		if p.Agg != nil {
			keys, args := make([]any, len(p.Agg.KeyOIDs)), make([]any, len(p.Agg.Aggs))
			_ = p.Agg.Eval(full, keys, args)
			if f := p.Agg.First; f != nil {
				vals := make([]any, len(f.OIDs))
				if f.EvalFirst(full, vals) == nil {
					var st FirstState
					f.Add(&st, "k", vals, 1)
					_ = f.First(&st)
					f.Add(&st, "k", vals, -1)
				}
			}
			gs := p.Agg.Post.Sources[0]
			full = Row{make([]any, len(gs.Columns))}
			for j, c := range gs.Columns {
				full[0][j] = sampleValue(c)
			}
			_, _ = p.Agg.Post.EvalRow(full)
		}
		_ = p.Project(full)
		_ = p.Compare(full, row)
		p2, r2, err := Compile(context.Background(), p.Normalized(), nil, opts)
		if err != nil || r2 != nil {
			t.Fatalf("normalized %q of %q does not compile: %v %+v", p.Normalized(), sql, err, r2)
		}
		if p2.Normalized() != p.Normalized() {
			t.Fatalf("normalizing twice changes %q: %q then %q", sql, p.Normalized(), p2.Normalized())
		}
		if p2.Key != p.Key {
			t.Fatalf("the normalized %q of %q has another key: %q, %q", p.Normalized(), sql, p2.Key, p.Key)
		}
	})
}

// deepQuery nests NOT and parentheses n levels deep.
func deepQuery(n int) string {
	return "SELECT id FROM users WHERE " + strings.Repeat("NOT (", n) + "age = 1" + strings.Repeat(")", n)
}

// wideQuery ORs n equalities.
func wideQuery(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("age = %d", i)
	}
	return "SELECT id FROM users WHERE " + strings.Join(parts, " OR ")
}

// productQuery ANDs n two-way ORs: 2^n alternatives in normal form.
func productQuery(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("(age = %d OR small = %d)", i, i)
	}
	return "SELECT id FROM users WHERE " + strings.Join(parts, " AND ")
}

// inQuery lists n IN values.
func inQuery(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprint(i)
	}
	return "SELECT id FROM users WHERE age IN (" + strings.Join(parts, ", ") + ")"
}

func TestLimits(t *testing.T) {
	cat := snapshotCatalog(t)
	opts := DefaultOptions()
	opts.Catalog = cat
	lifted := opts
	lifted.MaxAlternatives, lifted.MaxInValues, lifted.MaxDepth = 0, 0, 0
	tests := []struct {
		name string
		sql  string
		opts Options
		want Code // "" = accepted
	}{
		{"1024 alternatives", wideQuery(1024), opts, ""},
		{"1025 alternatives", wideQuery(1025), opts, CodeTooComplex},
		{"2^10 by product", productQuery(10), opts, ""},
		{"2^11 by product", productQuery(11), opts, CodeTooComplex},
		{"2^40 lifted", productQuery(40), lifted, ""},
		{"NOT swaps AND and OR", "SELECT id FROM users WHERE NOT (" + strings.Join(strings.Split(strings.Repeat("age = 1,", 1025), ",")[:1025], " AND ") + ")", opts, CodeTooComplex},
		{"10000 IN values", inQuery(10000), opts, ""},
		{"10001 IN values", inQuery(10001), opts, CodeTooManyInValues},
		{"10001 IN values lifted", inQuery(10001), lifted, ""},
		{"depth 150", deepQuery(150), opts, ""},
		{"depth 1000", deepQuery(1000), opts, CodeTooComplex},
		{"too long", "SELECT id FROM users WHERE name = '" + strings.Repeat("x", DefaultMaxSQLLength) + "'", opts, CodeTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantRefusal(t, tt.sql, tt.opts, tt.want)
		})
	}
}

// wantRefusal compiles sql without binds and fails unless it is refused
// with want ("" = accepted); it returns the refusal.
func wantRefusal(t *testing.T, sql string, opts Options, want Code) *Refusal {
	t.Helper()
	_, r, err := Compile(context.Background(), sql, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	var got Code
	if r != nil {
		got = r.Code
	}
	if got != want {
		t.Fatalf("refusal = %q (%v), want %q", got, r, want)
	}
	return r
}

func BenchmarkCompile(b *testing.B) {
	opts := DefaultOptions()
	opts.Catalog = snapshotCatalog(b)
	sql := `SELECT o.id, u.name FROM orders o JOIN users u ON u.id = o.user_id WHERE o.status = $1 AND u.age BETWEEN 18 AND 65 ORDER BY o.placed_at DESC LIMIT 20`
	binds := []Bind{{Data: []byte("paid")}}
	b.ReportAllocs()
	for b.Loop() {
		if _, r, err := Compile(context.Background(), sql, binds, opts); err != nil || r != nil {
			b.Fatal(err, r)
		}
	}
}

func BenchmarkHostile(b *testing.B) {
	opts := DefaultOptions()
	opts.Catalog = snapshotCatalog(b)
	for _, bc := range []struct{ name, sql string }{
		{"deep-refused-5000", deepQuery(5000)},
		{"chain-refused-24000", chainFamilies[0].gen(24000)},
		{"wide-refused-8000", wideQuery(8000)},
		{"product-refused-2^60", productQuery(60)},
		{"in-refused-15000", inQuery(15000)},
		{"too-long-refused-1MB", wideQuery(70000)},
		{"too-long-refused-1MB-in", inQuery(150000)},
		{"wide-accepted-1024", wideQuery(1024)},
		{"in-accepted-10000", inQuery(10000)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := Compile(context.Background(), bc.sql, nil, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The floor: PostgreSQL's parser alone (cgo, protobuf); not for
		// texts it would crash on.
		if prescreen(bc.sql).nesting > nestingCeiling {
			continue
		}
		b.Run(bc.name+"/parse-only", func(b *testing.B) {
			for b.Loop() {
				_, _ = pg.Parse(bc.sql)
			}
		})
	}
}

func BenchmarkEval(b *testing.B) {
	opts := DefaultOptions()
	opts.Catalog = snapshotCatalog(b)
	p, r, err := Compile(context.Background(), `SELECT id FROM users WHERE (age > 30 AND name LIKE 'a%') OR score = 1.5 OR id IN (1, 2, 3)`, nil, opts)
	if err != nil || r != nil {
		b.Fatal(err, r)
	}
	row := Row{make([]any, len(p.Sources[0].Columns))}
	for i, c := range p.Sources[0].Columns {
		switch c.Name {
		case "id":
			row[0][i] = int64(7)
		case "age":
			row[0][i] = int64(31)
		case "name":
			row[0][i] = "bob"
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		p.Eval(row)
	}
}

// FuzzCompileBinds compiles queries whose one bind is arbitrary (type
// OID, format, bytes): never a panic; a refusal has a code and a message,
// a bind's names its parameter; a plan renders and evaluates.
func FuzzCompileBinds(f *testing.F) {
	queries := []string{
		"SELECT id FROM users WHERE age IN (12, $1, 15, 9000000000)",
		"SELECT id FROM users WHERE age IN (12, $1, 15)",
		"SELECT id FROM users WHERE age = $1",
		"SELECT id FROM users WHERE score IN ($1, 1.5, 2)",
		"SELECT id FROM users WHERE name IN ($1, 'a') ORDER BY id LIMIT 3",
		"SELECT id FROM users WHERE tags = $1",
		"SELECT o.id FROM orders o JOIN users u ON u.id = o.user_id WHERE u.age = $1",
		"SELECT id FROM users ORDER BY id LIMIT $1 OFFSET 2",
	}
	for i := range queries {
		f.Add(uint8(i), uint32(0), false, []byte("9000000000"))
		f.Add(uint8(i), uint32(20), true, []byte{0, 0, 0, 0, 0, 0, 0, 16})
		f.Add(uint8(i), uint32(0), true, []byte{0, 0, 0, 16})
		f.Add(uint8(i), uint32(25), false, []byte("a\x00b"))
	}
	opts := DefaultOptions()
	opts.Catalog = snapshotCatalog(f)
	f.Fuzz(func(t *testing.T, q uint8, oid uint32, binary bool, data []byte) {
		sql := queries[int(q)%len(queries)]
		b := Bind{OID: oid, Data: data}
		if binary {
			b.Format = FormatBinary
		}
		p, r, err := Compile(context.Background(), sql, []Bind{b}, opts)
		if err != nil {
			t.Fatalf("Compile(%q, %+v) error %v: a memory catalog never fails", sql, b, err)
		}
		if r != nil {
			if r.Code == "" || r.Message == "" || r.Code == CodeBind && r.Param != 1 {
				t.Fatalf("Compile(%q, %+v) refusal %+v", sql, b, r)
			}
			return
		}
		_ = p.Render(RenderOptions{Columns: SelectNeeded, Window: true, Margin: 3})
		if p.Clocked() {
			// The engine's read (Hold) and the tests' reference (At), at
			// clocks near now and at the ends of the range.
			for _, at := range []change.Timestamp{{Micros: 849_657_600_000_000}, {Micros: -211_813_488_000_000_000}, {Micros: 9_223_371_331_199_999_999}} {
				_ = p.Render(RenderOptions{Columns: SelectNeeded, Window: true, Margin: 3, Hold: true})
				_ = p.Render(RenderOptions{At: &at})
				if thr, err := p.Thresholds(nil, at); err == nil {
					empty := make(Row, len(p.Sources))
					for i, s := range p.Sources {
						empty[i] = make([]any, len(s.Columns))
					}
					_, _ = p.EvalAt(empty, thr)
					_ = p.HoldsAt(empty, thr)
				}
			}
		}
		row := make(Row, len(p.Sources))
		for i, s := range p.Sources {
			row[i] = make([]any, len(s.Columns))
		}
		_ = p.Eval(row)
		if len(p.ParamOIDs) != 1 || p.ParamOIDs[0] == 0 {
			t.Fatalf("Compile(%q, %+v) left $1 untyped: %v", sql, b, p.ParamOIDs)
		}
	})
}

// sampleValue is a value of a column's type for evaluating plans in the
// fuzz target (nil for types without one here).
func sampleValue(c Column) any {
	if c.Type.Kind == change.KindArray {
		return change.Array{Dims: []change.ArrayDim{{Len: 2, Lower: 1}}, Elems: []any{sampleValue(Column{TypeOID: c.Type.Elem}), nil}}
	}
	switch familyOf(c.TypeOID) {
	case famInt:
		return int64(-2147483648)
	case famNumeric:
		return change.Numeric{Coef: big.NewInt(-15), Exp: -1, Scale: 1}
	case famFloat:
		return math.Inf(1)
	case famText:
		return "Ab é "
	case famBool:
		return true
	case famDate:
		return change.Date{Days: -800000}
	case famTimestamp:
		return change.Timestamp{Micros: -62135596800000000}
	case famInterval:
		return change.Interval{Months: 1}
	case famJSON:
		return change.JSON(`{"a": [1, "b"], "c": null}`)
	case famUUID:
		return change.UUID{}
	case famBytea:
		return []byte{0}
	case famTime:
		return change.TimeOfDay(0)
	case famTimeTZ:
		return change.TimeTZ{}
	}
	if c.Type.Kind == change.KindEnum {
		return "ok"
	}
	return nil
}
