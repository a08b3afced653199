package engine

import (
	"fmt"
	"testing"
)

// TestUnsubscribeSoleReader: a view that is its table's only reader goes
// with its rows at once (killView drops the table rather than releasing
// each row), and a view that shares its table leaves the rows the other
// holds, which go on being maintained.
func TestUnsubscribeSoleReader(t *testing.T) {
	h := newHarness(t, CoreOptions{})
	h.createTable("items", []string{"id int4 pk", "n int4"})
	for i := 1; i <= 6; i++ {
		h.insert("items", fmt.Sprint(i), fmt.Sprint(i))
	}
	h.commit(0)
	h.subscribe(1, `SELECT id, n FROM items WHERE n > 2`, ModeRows)
	h.subscribe(2, `SELECT id, n FROM items WHERE n < 5`, ModeRows)
	h.answerAll()
	h.verify()
	h.unsubscribe(1)
	if st := h.core.Stats(); st.Views != 1 || st.HeldRows != 4 {
		t.Errorf("after the first of two views of a table went: %+v, want 1 view holding its 4 rows", st)
	}
	h.update("items", nil, "3", "30")
	h.insert("items", "0", "0")
	h.commit(0)
	h.verify()
	h.unsubscribe(2)
	if st := h.core.Stats(); st.Views != 0 || st.HeldRows != 0 {
		t.Errorf("after the table's sole reader went: %+v, want no view or row", st)
	}
	h.subscribe(3, `SELECT id, n FROM items WHERE n > 0`, ModeRows)
	h.answerAll()
	h.update("items", nil, "4", "40")
	h.commit(0)
	h.verify()
	if st := h.core.Stats(); st.Views != 1 || st.HeldRows != 6 {
		t.Errorf("a view of the table again: %+v, want 1 view holding 6 rows", st)
	}
}
