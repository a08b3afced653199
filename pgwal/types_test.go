package pgwal

import (
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
)

func TestTypes(t *testing.T) {
	db := pgtest.NewDB(t)
	conn := connect(t, db.DSN)
	exec(t, conn,
		`CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')`,
		`CREATE DOMAIN posint AS int CHECK (VALUE > 0)`,
		`CREATE DOMAIN moods AS mood[]`,
		`CREATE TYPE pair AS (a int, b text)`,
		`CREATE TABLE t (id int PRIMARY KEY, m mood, ms mood[], p posint, ps posint[], dm moods, pr pair, r int4range, txt text)`)
	r := openReader(t, testConfig(t, db.DSN))
	exec(t, conn, `INSERT INTO t VALUES (1, 'ok', '{sad,happy}', 5, '{1,2}', '{ok}', '(1,x)', '[1,5)', 'plain')`)
	txn := nextTxn(t, r, 30*time.Second)
	ins := userChanges(txn.Changes)
	if len(ins) != 1 {
		t.Fatalf("got %d changes, want 1", len(ins))
	}
	rel := ins[0].Rel
	oid := func(col string) uint32 {
		i := rel.ColumnIndex(col)
		if i < 0 {
			t.Fatalf("no column %s", col)
		}
		return rel.Columns[i].TypeOID
	}
	types := r.Types()
	lookup := func(o uint32) change.Type {
		typ, ok := types.Type(o)
		if !ok {
			t.Fatalf("Type(%d) not found", o)
		}
		return typ
	}
	tests := []struct {
		col  string
		name string
		kind change.TypeKind
	}{
		{"m", "mood", change.KindEnum},
		{"ms", "_mood", change.KindArray},
		{"p", "posint", change.KindDomain},
		{"ps", "_posint", change.KindArray},
		{"dm", "moods", change.KindDomain},
		{"pr", "pair", change.KindComposite},
		{"r", "int4range", change.KindRange},
		{"txt", "text", change.KindBase},
	}
	for _, tt := range tests {
		typ := lookup(oid(tt.col))
		if typ.Name != tt.name || typ.Kind != tt.kind {
			t.Errorf("column %s: type %s kind %d, want %s kind %d", tt.col, typ.Name, typ.Kind, tt.name, tt.kind)
		}
	}
	if got := lookup(oid("ms")); got.Elem != oid("m") || got.Delim != ',' {
		t.Errorf("mood[]: Elem %d Delim %q, want %d ','", got.Elem, got.Delim, oid("m"))
	}
	if got := lookup(oid("p")); got.Base != 23 || got.Schema != "public" {
		t.Errorf("posint: Base %d schema %s, want 23 (int4) public", got.Base, got.Schema)
	}
	if got := lookup(oid("ps")); got.Elem != oid("p") {
		t.Errorf("posint[]: Elem %d, want %d", got.Elem, oid("p"))
	}
	if got := lookup(oid("dm")); got.Base != oid("ms") {
		t.Errorf("moods: Base %d, want %d (mood[])", got.Base, oid("ms"))
	}
	if _, ok := types.Type(4000000000); ok {
		t.Errorf("Type(4000000000) found, want not found")
	}
	// Cached: answered after the type is gone from the catalog.
	exec(t, conn, `DROP TABLE t`, `DROP DOMAIN moods`)
	if _, ok := types.Type(oid("dm")); !ok {
		t.Errorf("Type of a cached, since dropped domain not found, want the cached answer")
	}
}
