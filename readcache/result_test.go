package readcache

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/wire"
	"github.com/jackc/pgx/v5/pgtype"
)

func sp(s string) *string { return &s }

func rowsOf(r *Result) string {
	var parts []string
	for i, row := range r.Rows {
		vals := make([]string, len(row))
		for j, v := range row {
			if v == nil {
				vals[j] = "NULL"
			} else {
				vals[j] = string(v)
			}
		}
		parts = append(parts, r.keys[i]+"="+strings.Join(vals, ","))
	}
	return strings.Join(parts, " ")
}

func TestApply(t *testing.T) {
	acc := &wire.Accepted{ID: "q", Mode: wire.ModeRows, LSN: "0/1", Columns: []wire.Column{{Name: "id", TypeOID: 23}, {Name: "v", TypeOID: 25}},
		Rows: []wire.Row{{Key: "a", Values: []*string{sp("1"), sp("x")}}, {Key: "b", Values: []*string{sp("2"), nil}}}}
	tests := []struct {
		name  string
		delta string
		want  string
		bad   string
	}{
		{"upsert new", `{"lsn":"0/2","upsert":[{"key":"c","values":["3","z"]}]}`, "a=1,x b=2,NULL c=3,z", ""},
		{"upsert existing keeps place", `{"lsn":"0/2","upsert":[{"key":"a","values":["1","y"]}]}`, "a=1,y b=2,NULL", ""},
		{"remove", `{"lsn":"0/2","remove":["a"]}`, "b=2,NULL", ""},
		{"remove unknown", `{"lsn":"0/2","remove":["zz"]}`, "a=1,x b=2,NULL", ""},
		{"reorder", `{"lsn":"0/2","upsert":[{"key":"c","values":["0","w"]}],"order":["c","b","a"]}`, "c=0,w b=2,NULL a=1,x", ""},
		{"window slides", `{"lsn":"0/2","upsert":[{"key":"c","values":["0","w"]}],"remove":["b"],"order":["c","a"]}`, "c=0,w a=1,x", ""},
		{"remove all", `{"lsn":"0/2","remove":["a","b"],"order":[]}`, "", ""},
		{"order names a missing key", `{"lsn":"0/2","order":["a","q"]}`, "", "does not hold"},
		{"order misses a key", `{"lsn":"0/2","order":["a"]}`, "", "lists 1 keys"},
		{"wrong width", `{"lsn":"0/2","upsert":[{"key":"c","values":["3"]}]}`, "", "1 values"},
		{"moves: none", `{"lsn":"0/2","upsert":[{"key":"a","values":["1","y"]}],"size":2}`, "a=1,y b=2,NULL", ""},
		{"moves: one to the head", `{"lsn":"0/2","moves":[{"key":"b","after":null}],"size":2}`, "b=2,NULL a=1,x", ""},
		{"moves: new row between", `{"lsn":"0/2","upsert":[{"key":"c","values":["3","z"]}],"moves":[{"key":"c","after":"a"}],"size":3}`, "a=1,x c=3,z b=2,NULL", ""},
		{"moves: chain", `{"lsn":"0/2","upsert":[{"key":"c","values":["3","z"]},{"key":"a","values":["1","w"]}],"moves":[{"key":"c","after":"b"},{"key":"a","after":"c"}],"size":3}`, "b=2,NULL c=3,z a=1,w", ""},
		{"moves: window slides", `{"lsn":"0/2","upsert":[{"key":"c","values":["0","w"]}],"remove":["b"],"moves":[{"key":"c","after":null}],"size":2}`, "c=0,w a=1,x", ""},
		{"moves: remove all", `{"lsn":"0/2","remove":["a","b"],"size":0}`, "", ""},
		{"moves: wrong size", `{"lsn":"0/2","remove":["a"],"size":2}`, "", "the delta says 2"},
		{"moves: new row not placed", `{"lsn":"0/2","upsert":[{"key":"c","values":["3","z"]}],"size":3}`, "", "no move places it"},
		{"moves: after a missing key", `{"lsn":"0/2","moves":[{"key":"a","after":"q"}],"size":2}`, "", "moves placed"},
		{"moves: after a removed key", `{"lsn":"0/2","remove":["b"],"moves":[{"key":"a","after":"b"}],"size":1}`, "", "removes"},
		{"moves: a cycle", `{"lsn":"0/2","moves":[{"key":"a","after":"b"},{"key":"b","after":"a"}],"size":2}`, "", "moves placed"},
		{"moves: twice", `{"lsn":"0/2","moves":[{"key":"a","after":null},{"key":"a","after":"b"}],"size":2}`, "", "moved twice"},
		{"moves: two heads", `{"lsn":"0/2","moves":[{"key":"a","after":null},{"key":"b","after":null}],"size":2}`, "", "first place"},
		{"moves: unknown key", `{"lsn":"0/2","moves":[{"key":"q","after":"a"}],"size":3}`, "", "neither held nor upserted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newResult(acc)
			var d wire.Delta
			if err := json.Unmarshal([]byte(tt.delta), &d); err != nil {
				t.Fatal(err)
			}
			nr, err := r.apply(&d)
			if tt.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tt.bad) {
					t.Fatalf("error = %v, want one containing %q", err, tt.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := rowsOf(nr); got != tt.want {
				t.Fatalf("rows = %q, want %q", got, tt.want)
			}
			if nr.LSN != "0/2" {
				t.Fatalf("LSN = %q, want 0/2", nr.LSN)
			}
			if got := rowsOf(r); got != "a=1,x b=2,NULL" {
				t.Fatalf("the old result changed: %q", got)
			}
			if want := sizeOf(nr); nr.size != want {
				t.Fatalf("size = %d, want %d (counted afresh)", nr.size, want)
			}
		})
	}
}

// FuzzApply: any delta either fails cleanly or yields a result whose rows
// are exactly its keys, with no key twice, and leaves the old one intact.
func FuzzApply(f *testing.F) {
	f.Add(`{"upsert":[{"key":"c","values":["3","z"]}],"remove":["a"]}`)
	f.Add(`{"order":["b","a"]}`)
	f.Add(`{"upsert":[{"key":"a","values":[null,null]}],"order":["a","b","a"]}`)
	f.Add(`{"upsert":[{"key":"c","values":["3","z"]}],"moves":[{"key":"c","after":"a"},{"key":"b","after":null}],"size":3}`)
	f.Add(`{"moves":[{"key":"a","after":"b"},{"key":"b","after":"a"}],"size":2}`)
	f.Fuzz(func(t *testing.T, delta string) {
		acc := &wire.Accepted{Columns: []wire.Column{{Name: "id", TypeOID: 23}, {Name: "v", TypeOID: 25}},
			Rows: []wire.Row{{Key: "a", Values: []*string{sp("1"), sp("x")}}, {Key: "b", Values: []*string{sp("2"), nil}}}}
		r := newResult(acc)
		var d wire.Delta
		if json.Unmarshal([]byte(delta), &d) != nil {
			return
		}
		nr, err := r.apply(&d)
		if got := rowsOf(r); got != "a=1,x b=2,NULL" {
			t.Fatalf("the old result changed: %q", got)
		}
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, k := range nr.keys {
			if seen[k] {
				t.Fatalf("key %q twice in %s", k, rowsOf(nr))
			}
			seen[k] = true
		}
		if len(nr.keys) != len(nr.Rows) {
			t.Fatalf("%d keys, %d rows", len(nr.keys), len(nr.Rows))
		}
		for _, row := range nr.Rows {
			if len(row) != 2 {
				t.Fatalf("row of %d values", len(row))
			}
		}
	})
}

func TestIsSelect(t *testing.T) {
	tests := []struct {
		sql  string
		want bool
	}{
		{"SELECT 1", true},
		{"  select * from t", true},
		{"-- note\n/* c */ (SELECT id FROM t) UNION (SELECT id FROM u)", true},
		{"SELECT * FROM t;", true},
		{"selected", false},
		{"SELECT 1; DELETE FROM t", false},
		{"SELECT * FROM t FOR UPDATE", false},
		{"SELECT * FROM t for share", false},
		{"SELECT * FROM t\nFOR UPDATE", false},
		{"SELECT fortune FROM t", true},
		{"SELECT * INTO x FROM t", false},
		{"INSERT INTO t VALUES (1) RETURNING *", false},
		{"WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", false},
		{"UPDATE t SET v = 1", false},
		{"/* unterminated", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsSelect(tt.sql); got != tt.want {
			t.Errorf("IsSelect(%q) = %v, want %v", tt.sql, got, tt.want)
		}
	}
}

func FuzzIsSelect(f *testing.F) {
	f.Add("SELECT 1")
	f.Add("-- x\nselect * from t for update")
	f.Add("/**/((select")
	f.Fuzz(func(t *testing.T, s string) {
		if !IsSelect(s) {
			return
		}
		// What comes before the SELECT keyword is spaces, comments and
		// parentheses (a ';' there is inside a comment); from it on, no
		// ';' but trailing ones.
		at := -1
		for i := 0; i+6 <= len(s) && at < 0; i++ {
			if strings.EqualFold(s[i:i+6], "select") {
				at = i
			}
		}
		if at < 0 {
			t.Fatalf("IsSelect(%q) = true without SELECT", s)
		}
		if strings.Contains(strings.TrimRight(strings.TrimSpace(s[at:]), ";"), ";") {
			t.Fatalf("IsSelect(%q) = true for two statements", s)
		}
	})
}

func TestKey(t *testing.T) {
	a, b := sp("1"), sp("1;")
	keys := map[string]string{}
	for name, k := range map[string]string{
		"one text":    Key("SELECT $1", []wire.Param{{Value: a}}),
		"one binary":  Key("SELECT $1", []wire.Param{{Value: a, Format: wire.FormatBinary}}),
		"null":        Key("SELECT $1", []wire.Param{{}}),
		"no params":   Key("SELECT $1", nil),
		"two":         Key("SELECT $1", []wire.Param{{Value: a}, {Value: a}}),
		"other value": Key("SELECT $1", []wire.Param{{Value: b}}),
		"other sql":   Key("SELECT $1 ", []wire.Param{{Value: a}}),
	} {
		if other, dup := keys[k]; dup {
			t.Errorf("%s and %s share the key %q", name, other, k)
		}
		keys[k] = name
	}
	if Key("SELECT $1", []wire.Param{{Value: sp("1")}}) != Key("SELECT $1", []wire.Param{{Value: a}}) {
		t.Error("equal binds give different keys")
	}
}

// TestAppendArg: each bind is keyed in the form the subscribe frame
// sends, and the key reads back into the same SQL and parameters that Key
// turns into the same key.
func TestAppendArg(t *testing.T) {
	tests := []struct {
		arg  any
		want string // format:value, or NULL
		ok   bool
	}{
		{nil, "NULL", true},
		{42, "text:42", true},
		{int64(-7), "text:-7", true},
		{int8(-8), "text:-8", true},
		{uint32(9), "text:9", true},
		{"héllo", "text:héllo", true},
		{"", "text:", true},
		{true, "text:true", true},
		{[]byte{0, 255}, "binary:AP8=", true},
		{[]byte(nil), "NULL", true},
		{1.5, "text:1.5", true},
		{time.Date(2024, 5, 1, 10, 0, 0, 123456000, time.UTC), "text:2024-05-01 10:00:00.123456Z", true},
		{(*int)(nil), "NULL", true},
		{"bad\xff", "", false},
		{"nul\x00", "", false},
		{struct{ X int }{1}, "", false},
	}
	const q = "SELECT $1"
	for _, tt := range tests {
		key, ok := AppendArg(AppendKey(nil, q), pgtype.NewMap(), tt.arg)
		if ok != tt.ok {
			t.Errorf("AppendArg(%#v) ok = %v, want %v", tt.arg, ok, tt.ok)
			continue
		}
		if !ok {
			continue
		}
		sql, ps, ok := paramsOf(string(key))
		if !ok || sql != q || len(ps) != 1 {
			t.Errorf("paramsOf(key of %#v) = %q, %d params, %v; want %q, 1 param", tt.arg, sql, len(ps), ok, q)
			continue
		}
		got := "NULL"
		if ps[0].Value != nil {
			f := ps[0].Format
			if f == "" {
				f = "text"
			}
			got = fmt.Sprintf("%s:%s", f, *ps[0].Value)
		}
		if got != tt.want {
			t.Errorf("AppendArg(%#v) = %s, want %s", tt.arg, got, tt.want)
		}
		if k := Key(sql, ps); k != string(key) {
			t.Errorf("Key(paramsOf(key of %#v)) = %q, want %q", tt.arg, k, key)
		}
		if pp, ok := Params(pgtype.NewMap(), []any{tt.arg}); !ok || Key(q, pp) != string(key) {
			t.Errorf("Params(%#v) = %v, %v; want the parameters AppendArg keys", tt.arg, pp, ok)
		}
	}
	for _, bad := range []string{"", "\x00\x00\x00\x09SELECT", "\x00\x00\x00\x01Sx", "\x00\x00\x00\x01St\x00\x00\x00\x09ab"} {
		if _, _, ok := paramsOf(bad); ok {
			t.Errorf("paramsOf(%q) ok, want a refusal", bad)
		}
	}
}

// TestKeyAllocs: building the key of a read and looking it up
// allocates nothing.
func TestKeyAllocs(t *testing.T) {
	m := pgtype.NewMap()
	buf := make([]byte, 0, 256)
	args := []any{int64(42), "name", true, []byte("x")}
	n := testing.AllocsPerRun(100, func() {
		b := AppendKey(buf[:0], "SELECT * FROM t WHERE id = $1 AND name = $2 AND ok = $3 AND b = $4")
		for _, a := range args {
			b, _ = AppendArg(b, m, a)
		}
	})
	if n != 0 {
		t.Errorf("allocations per key = %v, want 0", n)
	}
}

// TestMemoReuse: a result made by a delta offers its first Memo build what
// the same slot derived from the previous result, and which of its rows
// the delta left alone; the previous result is let go after that build,
// and a slot that derived nothing before gets nothing.
func TestMemoReuse(t *testing.T) {
	acc := &wire.Accepted{ID: "q", Mode: wire.ModeRows, LSN: "0/1", Columns: []wire.Column{{Name: "v", TypeOID: 25}},
		Rows: []wire.Row{{Key: "a", Values: []*string{sp("1")}}, {Key: "b", Values: []*string{sp("2")}}, {Key: "c", Values: []*string{sp("3")}}}}
	delta := func(r *Result, js string) *Result {
		t.Helper()
		var d wire.Delta
		if err := json.Unmarshal([]byte(js), &d); err != nil {
			t.Fatal(err)
		}
		nr, err := r.apply(&d)
		if err != nil {
			t.Fatal(err)
		}
		return nr
	}
	type seen struct {
		prev any
		from string
	}
	memo := func(r *Result, slot MemoSlot, name string) seen {
		var got seen
		r.Memo(slot, func(_ *Result, prev any, from []int32) any {
			got = seen{prev, fmt.Sprint(from)}
			return name
		})
		return got
	}
	r0 := newResult(acc)
	if got := memo(r0, MemoDriver, "r0"); got.prev != nil || got.from != "[]" {
		t.Errorf("first result: prev %v, from %s; want nothing", got.prev, got.from)
	}
	r1 := delta(r0, `{"lsn":"0/2","upsert":[{"key":"b","values":["22"]},{"key":"d","values":["4"]}],"remove":["c"],"order":["a","b","d"]}`)
	if got := memo(r1, MemoDriver, "r1"); got.prev != "r0" || got.from != "[0 -1 -1]" {
		t.Errorf("after a delta: prev %v, from %s; want r0, [0 -1 -1]", got.prev, got.from)
	}
	if r1.prev.Load() != nil {
		t.Error("r1 still holds r0 after its first build")
	}
	if got := memo(r1, MemoPgx, "pgx"); got.prev != nil {
		t.Errorf("a slot r0 had nothing in: prev %v, want nil", got.prev)
	}
	if n := ChangedRows([]int32{0, -1, -1}, 3); n != 2 {
		t.Errorf("ChangedRows = %d, want 2", n)
	}
	r2 := delta(r1, `{"lsn":"0/3","upsert":[{"key":"a","values":["11"]}]}`)
	r3 := delta(r2, `{"lsn":"0/4","upsert":[{"key":"d","values":["44"]}]}`)
	if got := memo(r3, MemoDriver, "r3"); got.prev != nil {
		t.Errorf("two deltas with no read between: prev %v, want nil (r2 derived nothing)", got.prev)
	}
	if got := rowsOf(r3); got != "a=11 b=22 d=44" {
		t.Errorf("rows = %s", got)
	}
}

// sizeOf counts a result's size estimate afresh.
func sizeOf(r *Result) int64 {
	n := int64(256)
	for i, row := range r.Rows {
		n += rowSize(row) + int64(len(r.keys[i]))
	}
	return n
}

// TestApplyMovesRandom: a result changed by random removals, insertions,
// moves and value changes, told in the moves form, ends as the same
// change told with the whole order does, size included.
func TestApplyMovesRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	cols := []wire.Column{{Name: "v", TypeOID: 25}}
	for iter := 0; iter < 3000; iter++ {
		acc := &wire.Accepted{Columns: cols}
		var now []string
		for i := range rng.Intn(40) {
			k := fmt.Sprintf("k%d", i)
			acc.Rows = append(acc.Rows, wire.Row{Key: k, Values: []*string{sp(k)}})
			now = append(now, k)
		}
		r := newResult(acc)
		if iter%2 == 0 {
			r.Memo(MemoDriver, func(*Result, any, []int32) any { return 1 })
		}
		moved := map[string]bool{}
		up := map[string]string{}
		var removed []string
		for e := range rng.Intn(6) {
			switch op := rng.Intn(4); {
			case op == 0 && len(now) > 0:
				i := rng.Intn(len(now))
				if !moved[now[i]] && up[now[i]] == "" {
					removed = append(removed, now[i])
					now = slices.Delete(now, i, i+1)
				}
			case op == 1:
				k := fmt.Sprintf("n%d", e)
				now = slices.Insert(now, rng.Intn(len(now)+1), k)
				moved[k], up[k] = true, "new"
			case op == 2 && len(now) > 0:
				i := rng.Intn(len(now))
				up[now[i]] = fmt.Sprintf("v%d", e)
			case len(now) > 0:
				i := rng.Intn(len(now))
				k := now[i]
				now = slices.Delete(now, i, i+1)
				now = slices.Insert(now, rng.Intn(len(now)+1), k)
				moved[k] = true
			}
		}
		mk := func() *wire.Delta {
			d := &wire.Delta{LSN: "0/2", Remove: removed}
			for _, k := range now {
				if v, ok := up[k]; ok {
					d.Upsert = append(d.Upsert, wire.Row{Key: k, Values: []*string{sp(v)}})
				}
			}
			return d
		}
		full := mk()
		full.Order = slices.Clone(now)
		if full.Order == nil {
			full.Order = []string{}
		}
		want, err := r.apply(full)
		if err != nil {
			t.Fatal(err)
		}
		mv := mk()
		size := len(now)
		mv.Size = &size
		for j, k := range now {
			if !moved[k] {
				continue
			}
			m := wire.Move{Key: k}
			if j > 0 {
				m.After = &now[j-1]
			}
			mv.Moves = append(mv.Moves, m)
		}
		got, err := r.apply(mv)
		if err != nil {
			t.Fatalf("old %v new %v moves %+v: %v", r.keys, now, mv.Moves, err)
		}
		if rowsOf(got) != rowsOf(want) || got.size != want.size || !slices.Equal(got.from, want.from) {
			t.Fatalf("moves form gives %q (size %d, from %v), the whole order %q (size %d, from %v)",
				rowsOf(got), got.size, got.from, rowsOf(want), want.size, want.from)
		}
	}
}
