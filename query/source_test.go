package query

import (
	"context"
	"errors"
	"testing"

	"github.com/freshetdb/freshet/change"
)

func TestSourceDecode(t *testing.T) {
	opts := DefaultOptions()
	opts.Catalog = snapshotCatalog(t)
	p, r, err := Compile(context.Background(), "SELECT i.sku FROM items i WHERE i.qty > 1", nil, opts)
	if err != nil || r != nil {
		t.Fatal(err, r)
	}
	s := p.Sources[0]
	rel := &change.Relation{OID: s.Table.OID, Schema: "public", Table: "items", Columns: []change.Column{
		{Name: "order_id", TypeOID: change.OIDInt8, Key: true}, {Name: "line", TypeOID: change.OIDInt4, Key: true},
		{Name: "sku", TypeOID: change.OIDText}, {Name: "qty", TypeOID: change.OIDInt4}}}
	if !s.Matches(rel) {
		t.Fatal("source does not match its own table")
	}
	row := change.Row{change.TextValue("7"), change.TextValue("2"), {Kind: change.Unchanged}, change.TextValue("5")}
	if _, err := s.Decode(rel, row, nil, nil); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("unchanged value without a held row: err = %v, want ErrNotHeld", err)
	}
	held := []any{int64(7), int64(2), "big toasted text", int64(1)}
	vals, err := s.Decode(rel, row, held, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{int64(7), int64(2), "big toasted text", int64(5)}
	for i := range want {
		if vals[i] != want[i] {
			t.Fatalf("Decode = %v, want %v", vals, want)
		}
	}
	if got := p.Eval(Row{vals}); got != True {
		t.Fatalf("Eval = %v, want true", got)
	}
	if string(s.AppendKey(nil, vals)) != string(s.AppendKey(nil, held)) {
		t.Fatal("same primary key encodes differently")
	}
	dropped := &change.Relation{OID: rel.OID, Schema: "public", Table: "items", Columns: rel.Columns[:3]}
	if _, err := s.Decode(dropped, row[:3], held, nil); !errors.Is(err, ErrColumnMissing) {
		t.Fatalf("dropped column: err = %v, want ErrColumnMissing", err)
	}
}
