package engine

import (
	"slices"
	"testing"

	"github.com/freshetdb/freshet/change"
)

// TestRetypedBeforeRelation: a view compiled against a table's new shape
// (a column retyped) while views compiled against the old one still hold
// its rows, before the stream has sent the table's new Relation (it comes
// with the next change to the table, maybe much later). The new view must
// not take the old views' values of the column, decoded as the old type,
// for its own: its join compared a text column with uuid values and held
// 0 rows where PostgreSQL answered 2 (differential seed
// 1796150710797042084, issue 10 item 20).
func TestRetypedBeforeRelation(t *testing.T) {
	h := newHarness(t, CoreOptions{})
	h.createTable("a", []string{"id int4 pk", "v int4", "w int4"})
	h.insert("a", "1", "5", "1")
	h.insert("a", "2", "7", "1")
	h.commit(0)
	h.subscribe(1, "SELECT s0.id, s1.v FROM a s0 JOIN a s1 ON s1.id = s0.id", ModeRows)
	h.subscribe(2, "SELECT id, v FROM a WHERE w = 1", ModeRows)
	h.answerAll()

	// ALTER TABLE a ALTER v TYPE text: the catalog says so at once; the
	// stream says nothing until the next change to a.
	qt := *h.cat.tables["public.a"]
	qt.Columns = slices.Clone(qt.Columns)
	typ, _ := change.BuiltinType(change.OIDText)
	qt.Columns[1].TypeOID, qt.Columns[1].DeclaredOID, qt.Columns[1].Type, qt.Columns[1].Collation = change.OIDText, change.OIDText, typ, cCollation
	h.cat.tables["public.a"] = &qt
	h.subscribe(3, "SELECT s0.id, s1.v FROM a s0 JOIN a s1 ON s1.id = s0.id WHERE s1.v = '5'", ModeRows)
	h.subscribe(4, "SELECT id, v FROM a WHERE v = '7'", ModeRows)
	h.answerAll() // verify compares every subscription with the oracle
	for _, id := range []SubID{3, 4} {
		if m := h.models[id]; !m.accepted || len(m.rows) != 1 {
			t.Fatalf("sub %d: accepted %v with %d rows, want 1 row (PostgreSQL's answer)", id, m.accepted, len(m.rows))
		}
	}
	// A change of a row still streamed under the old shape (committed
	// before the ALTER) reaches the old views as their type, and the new
	// views as theirs.
	h.update("a", nil, "1", "5", "1")
	h.commit(0)
}
