package change

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

var (
	usersRel = &Relation{OID: 16384, Schema: "public", Table: "users", ReplicaIdentity: 'd', Columns: []Column{
		{Name: "id", TypeOID: OIDInt4, TypeMod: -1, Key: true},
		{Name: "name", TypeOID: OIDText, TypeMod: -1},
		{Name: "bio", TypeOID: OIDText, TypeMod: -1},
		{Name: "avatar", TypeOID: OIDBytea, TypeMod: -1},
	}}
	fullRel = &Relation{OID: 16390, Schema: "Odd \"Schema\"", Table: "événements", ReplicaIdentity: 'f', Columns: []Column{
		{Name: "a", TypeOID: OIDInt8, TypeMod: -1, Key: true},
		{Name: "b", TypeOID: OIDNumeric, TypeMod: 655366, Key: true},
	}}
	pairRel = &Relation{OID: 16400, Schema: "public", Table: "pairs", ReplicaIdentity: 'i', Columns: []Column{
		{Name: "x", TypeOID: OIDInt4, TypeMod: -1, Key: true},
		{Name: "y", TypeOID: OIDInt4, TypeMod: -1, Key: true},
		{Name: "note", TypeOID: OIDVarchar, TypeMod: 14},
	}}
	noKeyRel = &Relation{OID: 16410, Schema: "public", Table: "log", ReplicaIdentity: 'n', Columns: []Column{
		{Name: "line", TypeOID: OIDText, TypeMod: -1},
	}}
)

var commitTime = time.Date(2026, 11, 30, 14, 1, 2, 123456000, time.UTC)

func txt(s string) Value { return TextValue(s) }

var (
	null      = Value{Kind: Null}
	absent    = Value{Kind: Absent}
	unchanged = Value{Kind: Unchanged}
)

// jsonFixtures are transactions covering every part of the JSON form.
func jsonFixtures() []*Txn {
	h := func(lsn LSN, xid uint32, changes ...Change) *Txn {
		return &Txn{XID: xid, CommitLSN: lsn, EndLSN: lsn + 0x30, CommitTime: commitTime, Last: true, Changes: changes}
	}
	withOrigin := h(0x1_0000_0010, 130, Change{Op: OpInsert, Rel: noKeyRel, New: Row{txt("from elsewhere")}})
	withOrigin.Origin, withOrigin.OriginLSN = "node_b", 0x2_ABCDEF00
	nonTx := h(0x16B3B80, 0, Change{Op: OpMessage, Message: &Message{LSN: 0x16B3B80, Prefix: "freshet", Content: []byte{0xff, 0x00, 'a'}}})
	nonTx.CommitTime = time.Date(2026, 11, 30, 14, 1, 3, 0, time.UTC)
	return []*Txn{
		h(0x16B3748, 123,
			Change{Op: OpRelation, Rel: usersRel},
			Change{Op: OpInsert, Rel: usersRel, New: Row{txt("1"), txt("Ada"), null, txt(`\x0001ff`)}},
			Change{Op: OpInsert, Rel: usersRel, New: Row{txt("2"), txt("quote \" back \\ nl \n tab \t ctl \x01 sep \u2028 é 日本"), txt(""), null}},
		),
		h(0x16B3800, 124,
			// Key changed: PostgreSQL sent the old key; bio is TOASTed and unchanged.
			Change{Op: OpUpdate, Rel: usersRel, Old: Row{txt("1"), absent, absent, absent}, New: Row{txt("10"), txt("Ada L."), unchanged, txt(`\x`)}},
			// Key unchanged: no old tuple.
			Change{Op: OpUpdate, Rel: usersRel, New: Row{txt("2"), txt("Bob"), txt("bio"), null}},
		),
		h(0x16B3900, 125,
			Change{Op: OpUpdate, Rel: fullRel, OldIsRow: true, Old: Row{txt("7"), txt("1.50")}, New: Row{txt("7"), txt("2.50")}},
			Change{Op: OpDelete, Rel: fullRel, OldIsRow: true, Old: Row{txt("7"), txt("2.50")}},
			Change{Op: OpDelete, Rel: usersRel, Old: Row{txt("2"), absent, absent, absent}},
			Change{Op: OpDelete, Rel: pairRel, Old: Row{txt("1"), txt("2"), absent}},
			Change{Op: OpInsert, Rel: pairRel, New: Row{txt("3"), txt("4"), {Kind: Text, Data: []byte{'l', 'a', 't', 0xe9}}}},
		),
		h(0x16B3A00, 126,
			Change{Op: OpTruncate, Truncate: &Truncate{Rels: []*Relation{usersRel, pairRel}, Cascade: true}},
			Change{Op: OpTruncate, Truncate: &Truncate{Rels: []*Relation{noKeyRel}, RestartIdentity: true}},
		),
		h(0x16B3B00, 127,
			Change{Op: OpMessage, Message: &Message{LSN: 0x16B3AF0, Transactional: true, Prefix: "app", Content: []byte(`{"event":"signup"}`)}},
			Change{Op: OpInsert, Rel: noKeyRel, New: Row{txt("no key here")}},
		),
		nonTx,
		h(0x16B3C00, 128,
			Change{Op: OpInsert, Rel: usersRel, New: Row{{Kind: Binary, Data: []byte{0, 0, 0, 3}}, {Kind: Binary, Data: []byte("Cy")}, null, {Kind: Binary, Data: []byte{}}}},
		),
		h(0x16B3D00, 129),
		withOrigin,
	}
}

func goldenLines(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s line %d:\n got %s\nwant %s", path, i+1, g, w)
			}
		}
	}
}

func TestAppendTxnJSONGolden(t *testing.T) {
	var out []byte
	for _, txn := range jsonFixtures() {
		start := len(out)
		out = AppendTxnJSON(out, txn)
		if !json.Valid(out[start:]) {
			t.Errorf("AppendTxnJSON(%s) is not valid JSON: %s", txn.CommitLSN, out[start:])
		}
		out = append(out, '\n')
	}
	goldenLines(t, "txns.golden.jsonl", out)
}

func TestAppendRelationJSONGolden(t *testing.T) {
	var out []byte
	for _, r := range []*Relation{usersRel, fullRel, pairRel, noKeyRel, {Schema: "s", Table: "empty"}} {
		start := len(out)
		out = AppendRelationJSON(out, r)
		if !json.Valid(out[start:]) {
			t.Errorf("AppendRelationJSON(%s) is not valid JSON: %s", r.QualifiedName(), out[start:])
		}
		out = append(out, '\n')
	}
	goldenLines(t, "relations.golden.jsonl", out)
}

func TestJSONValuesDecodeAsEncodingJSON(t *testing.T) {
	// What encoding/json reads back from a value must be the value's text
	// exactly.
	for _, s := range []string{"", "plain", "\"\\\n\r\t\x00\x1f\x7f", "é日本\u2028\u2029🎉", "<>&"} {
		out := appendJSONBytesOrBase64(nil, []byte(s))
		var got string
		if err := json.Unmarshal(out, &got); err != nil || got != s {
			t.Errorf("value %q encoded as %s reads back as %q, %v", s, out, got, err)
		}
	}
	if out := string(appendJSONBytesOrBase64(nil, []byte{'a', 0xff})); out != `{"base64":"Yf8="}` {
		t.Errorf("invalid UTF-8 encoded as %s, want {\"base64\":\"Yf8=\"}", out)
	}
}

func TestParseTxnJSONRoundTrip(t *testing.T) {
	for _, txn := range jsonFixtures() {
		line := AppendTxnJSON(nil, txn)
		got, err := ParseTxnJSON(line)
		if err != nil {
			t.Fatalf("ParseTxnJSON(%s): %v", line, err)
		}
		if again := AppendTxnJSON(nil, got); !bytes.Equal(again, line) {
			t.Errorf("round trip:\n got %s\nwant %s", again, line)
		}
		if got.CommitLSN != txn.CommitLSN || got.EndLSN != txn.EndLSN || got.XID != txn.XID || !got.CommitTime.Equal(txn.CommitTime) ||
			got.Origin != txn.Origin || got.OriginLSN != txn.OriginLSN || !got.Last || got.Fragment != 0 {
			t.Errorf("ParseTxnJSON header = %+v, want %+v", got, txn)
		}
	}
	// Kinds survive: unchanged, binary, base64 text, absent columns.
	got, err := ParseTxnJSON(AppendTxnJSON(nil, jsonFixtures()[1]))
	if err != nil {
		t.Fatal(err)
	}
	upd := got.Changes[0]
	if upd.New[2].Kind != Unchanged || upd.Old[1].Kind != Absent || upd.OldIsRow || !upd.Rel.Columns[0].Key || upd.Rel.Columns[1].Key {
		t.Errorf("parsed update = %+v (rel %+v), want bio Unchanged, old name Absent, id the only key", upd, upd.Rel)
	}
	if got.Changes[1].Old != nil {
		t.Errorf("parsed update without old tuple has Old = %v, want nil", got.Changes[1].Old)
	}
}

func TestParseTxnJSONErrors(t *testing.T) {
	for _, in := range []string{
		``, `{}`, `[]`, `{"lsn":"nope"}`, `{"lsn":"0/1","commit_time":"yesterday"}`,
		`{"lsn":"0/1","changes":[{"op":"upsert"}]}`,
		`{"lsn":"0/1","changes":[{"op":"insert","new":{"a":1}}]}`,
		`{"lsn":"0/1","changes":[{"op":"insert","new":{"a":{"binary":"!!"}}}]}`,
		`{"lsn":"0/1","changes":[{"op":"insert","new":[1]}]}`,
		`{"lsn":"0/1","changes":[{"op":"message","content":{"base64":"%"}}]}`,
	} {
		if txn, err := ParseTxnJSON([]byte(in)); err == nil {
			t.Errorf("ParseTxnJSON(%s) = %+v, want an error", in, txn)
		}
	}
}

// fragments splits txn into fragments of n changes each; only the Last
// carries the EndLSN, as pgwal sends them.
func fragments(txn *Txn, n int) []*Txn {
	var out []*Txn
	for i := 0; i == 0 || i < len(txn.Changes); i += n {
		f := *txn
		f.Fragment, f.Last = len(out), i+n >= len(txn.Changes)
		if !f.Last {
			f.EndLSN = 0
		}
		f.Changes = txn.Changes[i:min(i+n, len(txn.Changes))]
		out = append(out, &f)
	}
	return out
}

func TestTxnJSONWriterFragments(t *testing.T) {
	for _, size := range []int{1, 2, 100} {
		var buf bytes.Buffer
		jw := NewTxnJSONWriter(&buf)
		var want []byte
		for _, txn := range jsonFixtures() {
			line := AppendTxnJSON(nil, txn)
			if len(txn.Changes) > size {
				// end_lsn moves to the end: it was not known at fragment 0.
				end := `,"end_lsn":"` + txn.EndLSN.String() + `"`
				line = []byte(strings.Replace(string(line), end, "", 1))
				line = append(line[:len(line)-1], end+"}"...)
			}
			want = append(append(want, line...), '\n')
			for _, f := range fragments(txn, size) {
				if err := jw.Write(f); err != nil {
					t.Fatalf("Write(fragment %d of %s): %v", f.Fragment, f.CommitLSN, err)
				}
				if jw.Open() == f.Last {
					t.Fatalf("Open() = %v after fragment %d (Last %v)", jw.Open(), f.Fragment, f.Last)
				}
			}
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("fragments of %d:\n got %s\nwant %s", size, buf.Bytes(), want)
		}
		// Whatever the shape, every line reads back as the transaction.
		for i, line := range bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n")) {
			txn, err := ParseTxnJSON(line)
			if err != nil {
				t.Fatalf("ParseTxnJSON(%s): %v", line, err)
			}
			if fx := jsonFixtures()[i]; txn.EndLSN != fx.EndLSN || !bytes.Equal(AppendTxnJSON(nil, txn), AppendTxnJSON(nil, fx)) {
				t.Errorf("fragments of %d: line %d reads back as %s, want %s", size, i+1, AppendTxnJSON(nil, txn), AppendTxnJSON(nil, fx))
			}
		}
	}
}

func TestTxnJSONWriterOrder(t *testing.T) {
	txn := jsonFixtures()[2]
	frags := fragments(txn, 2)
	tests := []struct {
		name string
		seq  []*Txn
	}{
		{"fragment 1 first", []*Txn{frags[1]}},
		{"fragment skipped", []*Txn{frags[0], frags[2]}},
		{"new transaction before Last", []*Txn{frags[0], jsonFixtures()[0]}},
		{"fragment of another transaction", []*Txn{frags[0], func() *Txn { f := *frags[1]; f.CommitLSN++; return &f }()}},
	}
	for _, tt := range tests {
		jw := NewTxnJSONWriter(&bytes.Buffer{})
		var err error
		for _, f := range tt.seq {
			if err = jw.Write(f); err != nil {
				break
			}
		}
		if !errors.Is(err, ErrFragmentOrder) {
			t.Errorf("%s: err = %v, want ErrFragmentOrder", tt.name, err)
		}
	}
	jw := NewTxnJSONWriter(failWriter{})
	if err := jw.Write(jsonFixtures()[0]); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Write to a failing writer: err = %v, want the writer's error", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// countWriter counts bytes and keeps the last few.
type countWriter struct {
	n    int64
	tail []byte
}

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	w.tail = append(w.tail, p...)
	if len(w.tail) > 64 {
		w.tail = w.tail[len(w.tail)-64:]
	}
	return len(p), nil
}

// TestTxnJSONWriterBoundedMemory writes a transaction of a million rows
// in fragments and checks the writer never holds more than its flush size
// plus one change.
func TestTxnJSONWriterBoundedMemory(t *testing.T) {
	rows := 1_000_000
	if testing.Short() {
		rows = 100_000
	}
	const perFrag = 1000
	var cw countWriter
	jw := NewTxnJSONWriter(&cw)
	frag := &Txn{XID: 9, CommitLSN: 0x5000000, CommitTime: commitTime, Changes: make([]Change, perFrag)}
	vals := make([]Row, perFrag)
	for i := range frag.Changes {
		vals[i] = Row{txt(""), txt("a row of a very large transaction"), null, null}
		frag.Changes[i] = Change{Op: OpInsert, Rel: usersRel, New: vals[i]}
	}
	maxBuf := 0
	for f := 0; f*perFrag < rows; f++ {
		frag.Fragment, frag.Last = f, (f+1)*perFrag >= rows
		if frag.Last {
			frag.EndLSN = 0x5000030
		}
		for i := range vals {
			vals[i][0] = txt(fmt.Sprint(f*perFrag + i))
		}
		if err := jw.Write(frag); err != nil {
			t.Fatal(err)
		}
		maxBuf = max(maxBuf, cap(jw.buf))
	}
	if limit := 2 * jsonFlushSize; maxBuf > limit {
		t.Errorf("writer buffer grew to %d bytes, want at most %d", maxBuf, limit)
	}
	wantTail := fmt.Sprintf(`{"id":"%d"},"new":{"id":"%d","name":"a row of a very large transaction","bio":null,"avatar":null}}],"end_lsn":"0/5000030"}`+"\n", rows-1, rows-1)
	if !strings.HasSuffix(string(cw.tail), wantTail[len(wantTail)-60:]) {
		t.Errorf("line ends %q, want ...%q", cw.tail, wantTail[len(wantTail)-60:])
	}
}

// TestTxnJSONLinesScan reads the golden file back line by line, as tail
// does when resuming.
func TestTxnJSONLinesScan(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "txns.golden.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var last LSN
	n := 0
	for sc.Scan() {
		txn, err := ParseTxnJSON(sc.Bytes())
		if err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		if txn.CommitLSN <= last {
			t.Errorf("line %d: lsn %s not after %s", n+1, txn.CommitLSN, last)
		}
		last = txn.CommitLSN
		n++
	}
	if n != len(jsonFixtures()) {
		t.Errorf("read %d lines, want %d", n, len(jsonFixtures()))
	}
}

func BenchmarkAppendTxnJSON(b *testing.B) {
	txn := &Txn{XID: 1, CommitLSN: 0x16B3748, EndLSN: 0x16B3778, CommitTime: commitTime, Last: true}
	for i := 0; i < 100; i++ {
		txn.Changes = append(txn.Changes, Change{Op: OpInsert, Rel: usersRel,
			New: Row{txt(fmt.Sprint(i)), txt("some name"), txt("a short bio with \"quotes\""), null}})
	}
	buf := AppendTxnJSON(nil, txn)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf = AppendTxnJSON(buf[:0], txn)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(txn.Changes)), "ns/change")
}

func BenchmarkTxnJSONWriter(b *testing.B) {
	txn := &Txn{XID: 1, CommitLSN: 0x16B3748, EndLSN: 0x16B3778, CommitTime: commitTime, Last: true}
	for i := 0; i < 100; i++ {
		txn.Changes = append(txn.Changes, Change{Op: OpInsert, Rel: usersRel,
			New: Row{txt(fmt.Sprint(i)), txt("some name"), txt("a short bio with \"quotes\""), null}})
	}
	var cw byteCounter
	jw := NewTxnJSONWriter(&cw)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := jw.Write(txn); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(cw) / int64(b.N))
}

// byteCounter is an io.Writer that only counts.
type byteCounter int64

func (c *byteCounter) Write(p []byte) (int, error) { *c += byteCounter(len(p)); return len(p), nil }

func FuzzParseTxnJSON(f *testing.F) {
	for _, txn := range jsonFixtures() {
		f.Add(AppendTxnJSON(nil, txn))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		txn, err := ParseTxnJSON(line)
		if err != nil {
			return
		}
		out := AppendTxnJSON(nil, txn)
		again, err := ParseTxnJSON(out)
		if err != nil {
			t.Fatalf("ParseTxnJSON(%s) printed %s, which does not parse: %v", line, out, err)
		}
		if out2 := AppendTxnJSON(nil, again); !bytes.Equal(out, out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
	})
}

// FuzzJSONValue checks that any bytes, written as a column value, read back
// exactly: as a JSON string when they are UTF-8, as base64 otherwise.
func FuzzJSONValue(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\\n\x00\u2028", "é日本🎉", "a\xff", "\xed\xa0\x80"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out := appendJSONBytesOrBase64(nil, b)
		if !json.Valid(out) {
			t.Fatalf("value %q encoded as invalid JSON %s", b, out)
		}
		v, err := parseValueJSON(out)
		if err != nil {
			t.Fatalf("value %q encoded as %s: %v", b, out, err)
		}
		if !bytes.Equal(v.Data, b) || v.Kind != Text {
			t.Fatalf("value %q encoded as %s reads back as %q", b, out, v.Data)
		}
	})
}
