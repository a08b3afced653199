package s2s_test

import (
	"testing"
)

// An ordered subscription asked with delta_order "moves" gets deltas with
// the moved rows and the size, never every key; one subscribed the old way
// (no delta_order, or one this server does not know) still gets the whole
// order, whichever subscribed first and however many share the view.
func TestDeltaOrderMoves(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	old, _ := e.connect()
	nw, _ := e.connect()
	const q = "SELECT id, name FROM items ORDER BY name, id"
	old.sendf(`{"type":"subscribe","id":"s","sql":%q,"mode":"rows"}`, q)
	if f := old.expect("accepted"); f.m["delta_order"] != nil {
		t.Fatalf("old client's accepted = %s, want no delta_order", f.raw)
	}
	nw.sendf(`{"type":"subscribe","id":"s","sql":%q,"mode":"rows","delta_order":"moves"}`, q)
	if f := nw.expect("accepted"); f.str("delta_order") != "moves" {
		t.Fatalf("accepted = %s, want delta_order moves", f.raw)
	}
	nw.sendf(`{"type":"subscribe","id":"u","sql":%q,"mode":"rows","delta_order":"positions"}`, q)
	if f := nw.expect("accepted"); f.m["delta_order"] != nil {
		t.Fatalf("accepted for an unknown delta_order = %s, want no delta_order (the full order)", f.raw)
	}
	// Rows ordered apple(1), fig "x"(3), pear(2); 3 becomes "zebra" and
	// moves last.
	e.exec("UPDATE items SET name = 'zebra' WHERE id = 3")
	f := old.expect("delta")
	if order := list(f, "order"); len(order) != 3 || f.m["moves"] != nil || f.m["size"] != nil {
		t.Fatalf("old client's delta = %s, want the whole order of 3 keys and no moves", f.raw)
	}
	var fu, fm frame
	for range 2 {
		g := nw.expect("delta")
		if g.str("id") == "u" {
			fu = g
		} else {
			fm = g
		}
	}
	if order := list(fu, "order"); len(order) != 3 {
		t.Fatalf("delta for the unknown form = %s, want the whole order", fu.raw)
	}
	moves := list(fm, "moves")
	if fm.m["order"] != nil || fm.m["size"] != 3.0 || len(moves) != 1 {
		t.Fatalf("delta = %s, want one move, size 3, no order", fm.raw)
	}
	mv := moves[0].(map[string]any)
	order := list(f, "order")
	if up := list(fm, "upsert"); len(up) != 1 || mv["key"] != key(up[0]) || mv["key"] != order[2] || mv["after"] != order[1] {
		t.Fatalf("delta = %s, want 3 moved after pear (old client's order %v)", fm.raw, list(f, "order"))
	}
	// A change of values that moves nothing: upsert and size alone.
	e.exec("UPDATE items SET name = 'apricot' WHERE id = 1")
	old.expect("delta")
	for range 2 {
		g := nw.expect("delta")
		if g.str("id") != "s" {
			continue
		}
		if g.m["moves"] != nil || g.m["order"] != nil || g.m["size"] != 3.0 || len(list(g, "upsert")) != 1 {
			t.Fatalf("delta = %s, want one upsert, size 3, no moves and no order", g.raw)
		}
	}
}
