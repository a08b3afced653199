package s2s

import (
	"encoding/json"
	"testing"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/query"
	"github.com/freshetdb/freshet/wire"
)

var testCols = []query.Output{{Name: "id", TypeOID: 23, TypeMod: -1}, {Name: "price", TypeOID: 1700, TypeMod: 655366}, {Name: "note", TypeOID: 25, TypeMod: -1}}

func numeric(t testing.TB, s string) change.Numeric {
	n, err := change.ParseNumeric(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestEncodeFrames(t *testing.T) {
	e := newEncoder(nil)
	rows := []engine.ResultRow{
		{Key: "\x00\x01", Values: []any{int64(1), numeric(t, "1.50"), "a \"q\"\n"}},
		{Key: "\x00\x02", Values: []any{int64(2), nil, nil}},
	}
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"accepted rows", e.accepted("q1", engine.ModeRows, &engine.Output{Kind: engine.OutputAccepted, LSN: 0x16B3748, Columns: testCols, Rows: rows}, false),
			`{"type":"accepted","id":"q1","mode":"rows","lsn":"0/16B3748","columns":[{"name":"id","type_oid":23},{"name":"price","type_oid":1700,"type_mod":655366},{"name":"note","type_oid":25}],"rows":[{"key":"AAE","values":["1","1.50","a \"q\"\n"]},{"key":"AAI","values":["2",null,null]}]}`},
		{"accepted touch", e.accepted("t", engine.ModeTouch, &engine.Output{Kind: engine.OutputAccepted, LSN: 0x10}, false),
			`{"type":"accepted","id":"t","mode":"touch","lsn":"0/10","rows":null}`},
		{"accepted empty", e.accepted("q", engine.ModeRows, &engine.Output{Kind: engine.OutputAccepted, LSN: 0x10, Columns: testCols[:1], Rows: []engine.ResultRow{}}, false),
			`{"type":"accepted","id":"q","mode":"rows","lsn":"0/10","columns":[{"name":"id","type_oid":23}],"rows":[]}`},
		{"delta", e.delta("q1", testCols, &engine.Output{Kind: engine.OutputDelta, LSN: 0x20, Rows: rows[:1], Removed: []engine.Key{"\x00\x02"}, Order: []engine.Key{"\x00\x01"}}, false),
			`{"type":"delta","id":"q1","lsn":"0/20","upsert":[{"key":"AAE","values":["1","1.50","a \"q\"\n"]}],"remove":["AAI"],"order":["AAE"]}`},
		{"delta remove only", e.delta("q1", testCols, &engine.Output{Kind: engine.OutputDelta, LSN: 0x21, Removed: []engine.Key{"\x00\x01"}, Order: []engine.Key{}}, false),
			`{"type":"delta","id":"q1","lsn":"0/21","remove":["AAE"],"order":[]}`},
		{"count delta", e.delta("c", []query.Output{{Name: "count", TypeOID: 20, Source: -1}}, &engine.Output{Kind: engine.OutputDelta, LSN: 0x22, Count: 43, Rows: []engine.ResultRow{{Values: []any{int64(43)}}}}, false),
			`{"type":"delta","id":"c","lsn":"0/22","upsert":[{"key":"","values":["43"]}],"count":"43"}`},
		{"delta moves", e.delta("q1", testCols, &engine.Output{Kind: engine.OutputDelta, LSN: 0x23, Rows: rows[1:], Order: []engine.Key{"\x00\x02", "\x00\x01", "\x00\x03"},
			Moves: []engine.Move{{Key: "\x00\x02", Head: true}, {Key: "\x00\x03", After: "\x00\x01"}}}, true),
			`{"type":"delta","id":"q1","lsn":"0/23","upsert":[{"key":"AAI","values":["2",null,null]}],"moves":[{"key":"AAI","after":null},{"key":"AAM","after":"AAE"}],"size":3}`},
		{"delta moves, none moved", e.delta("q1", testCols, &engine.Output{Kind: engine.OutputDelta, LSN: 0x24, Rows: rows[:1], Order: []engine.Key{"\x00\x01", "\x00\x02"}, Moves: []engine.Move{}}, true),
			`{"type":"delta","id":"q1","lsn":"0/24","upsert":[{"key":"AAE","values":["1","1.50","a \"q\"\n"]}],"size":2}`},
		{"delta moves asked, unordered", e.delta("q1", testCols, &engine.Output{Kind: engine.OutputDelta, LSN: 0x25, Rows: rows[:1]}, true),
			`{"type":"delta","id":"q1","lsn":"0/25","upsert":[{"key":"AAE","values":["1","1.50","a \"q\"\n"]}]}`},
		{"accepted moves", e.accepted("q1", engine.ModeRows, &engine.Output{Kind: engine.OutputAccepted, LSN: 0x10, Columns: testCols[:1], Rows: []engine.ResultRow{}, Plan: &query.Plan{Template: &query.Template{Limit: 5}}}, true),
			`{"type":"accepted","id":"q1","mode":"rows","lsn":"0/10","columns":[{"name":"id","type_oid":23}],"limit":5,"rows":[],"delta_order":"moves"}`},
		{"accepted moves asked, unordered", e.accepted("q1", engine.ModeRows, &engine.Output{Kind: engine.OutputAccepted, LSN: 0x10, Columns: testCols[:1], Rows: []engine.ResultRow{}, Plan: &query.Plan{Template: &query.Template{Limit: -1}}}, true),
			`{"type":"accepted","id":"q1","mode":"rows","lsn":"0/10","columns":[{"name":"id","type_oid":23}],"rows":[]}`},
		{"touched", (&touchBatch{lsn: 0x30, ids: []string{"a", "b\"c"}}).encode(nil), `{"type":"touched","lsn":"0/30","ids":["a","b\"c"]}`},
		{"refused", simpleFrame(wire.TypeRefused, "x", "distinct", "DISTINCT is not supported", false),
			`{"type":"refused","id":"x","code":"distinct","reason":"DISTINCT is not supported","retryable":false}`},
	}
	for _, tt := range tests {
		if string(tt.got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, tt.got, tt.want)
		}
		if _, err := wire.Decode(tt.got, 0); err != nil || !json.Valid(tt.got) {
			t.Errorf("%s: wire.Decode: %v", tt.name, err)
		}
	}
}

// TestEncodeShared: a delta the engine hands to many subscribers (the same
// row slices) is encoded once per transaction, each frame with its own id.
func TestEncodeShared(t *testing.T) {
	e := newEncoder(nil)
	rows := []engine.ResultRow{{Key: "\x01", Values: []any{int64(7), numeric(t, "2"), "x"}}, {Key: "\x02", Values: []any{int64(8), nil, "y"}}}
	out := engine.Output{Kind: engine.OutputDelta, LSN: 0x40, Rows: rows}
	for i := range 1000 {
		id := string(rune('a' + i%26))
		b := e.delta(id, testCols, &out, false)
		f, err := wire.Decode(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		if d := f.(*wire.Delta); d.ID != id || len(d.Upsert) != 2 {
			t.Fatalf("frame %d = %s", i, b)
		}
	}
	if e.rowN != 2 {
		t.Fatalf("rows encoded for 1000 subscribers = %d, want 2", e.rowN)
	}
	// Another view's delta sharing a row's values (the same row in a
	// second result) reuses its encoding too.
	e.delta("z", testCols, &engine.Output{Kind: engine.OutputDelta, LSN: 0x40, Rows: []engine.ResultRow{rows[1]}}, false)
	if e.rowN != 2 {
		t.Fatalf("rows encoded = %d, want 2", e.rowN)
	}
	// The next transaction encodes afresh.
	out.LSN = 0x50
	e.delta("a", testCols, &out, false)
	if e.rowN != 4 {
		t.Fatalf("rows encoded after the next transaction = %d, want 4", e.rowN)
	}
}

// TestEncodeSharedFrame: subscriptions of one view carrying the same id
// (on different connections) get the very same frame bytes, built once;
// another id gets its own frame.
func TestEncodeSharedFrame(t *testing.T) {
	e := newEncoder(nil)
	rows := []engine.ResultRow{{Key: "\x01", Values: []any{int64(7), numeric(t, "2"), "x"}}}
	out := engine.Output{Kind: engine.OutputDelta, LSN: 0x40, Rows: rows}
	first := e.delta("h", testCols, &out, false)
	for i := range 100 {
		b := e.delta("h", testCols, &out, false)
		if &b[0] != &first[0] {
			t.Fatalf("frame %d was built again, want the first frame's bytes", i)
		}
	}
	other := e.delta("k", testCols, &out, false)
	want := `{"type":"delta","id":"k","lsn":"0/40","upsert":[{"key":"AQ","values":["7","2","x"]}]}`
	if string(other) != want {
		t.Fatalf("got %s\nwant %s", other, want)
	}
	// The next transaction builds afresh.
	out.LSN = 0x50
	if b := e.delta("h", testCols, &out, false); &b[0] == &first[0] || !json.Valid(b) {
		t.Fatalf("frame of the next transaction = %s, shares the previous one's bytes", b)
	}
}

// TestEncodeFormsNotShared: subscribers of one view with the same id, one
// asking for moves and one not, get each their own form (the shared
// encodings are keyed by it).
func TestEncodeFormsNotShared(t *testing.T) {
	e := newEncoder(nil)
	out := engine.Output{Kind: engine.OutputDelta, LSN: 0x50, Order: []engine.Key{"\x00\x02", "\x00\x01"},
		Moves: []engine.Move{{Key: "\x00\x02", Head: true}}}
	full := string(e.delta("q", testCols, &out, false))
	moves := string(e.delta("q", testCols, &out, true))
	again := string(e.delta("q", testCols, &out, false))
	if want := `{"type":"delta","id":"q","lsn":"0/50","order":["AAI","AAE"]}`; full != want || again != want {
		t.Errorf("full form = %s, then %s, want %s", full, again, want)
	}
	if want := `{"type":"delta","id":"q","lsn":"0/50","moves":[{"key":"AAI","after":null}],"size":2}`; moves != want {
		t.Errorf("moves form = %s, want %s", moves, want)
	}
}
