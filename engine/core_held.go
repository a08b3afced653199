package engine

import "iter"

// HeldRows is an Accepted's result as the engine holds it: each row's key
// and its encoded values, decoded only as a subscriber ranges over them,
// one row at a time (Output.Held). A million-row result handed over this
// way is two strings a row, not a value slice and a boxed value per
// column that the subscriber turns back into text. The zero value holds
// no rows.
type HeldRows struct {
	rows  []heldResult
	slots []int // the layout slot of each output, in Plan.Output order
}

// heldResult is one row of a HeldRows: its values as they were when the
// Accepted was built (a held row is changed in place by later
// transactions, its encoding never).
type heldResult struct {
	key string
	rv  rowVals
}

// Len returns the number of rows.
func (h HeldRows) Len() int { return len(h.rows) }

// All yields each row's key and its values in Plan.Output order, typed
// as in a ResultRow (nil for NULL), in no particular order. The values'
// slice is reused from one row to the next: a caller that keeps them
// copies the slice (the values in it may be kept).
func (h HeldRows) All() iter.Seq2[Key, []any] {
	return func(yield func(Key, []any) bool) {
		vals := make([]any, len(h.slots))
		var sl slabs
		for _, r := range h.rows {
			r.rv.pickInto(vals, h.slots, &sl)
			if !yield(Key(r.key), vals) {
				return
			}
		}
	}
}

// heldAccepted is an unordered plain view's result as HeldRows (slots:
// plainSlots), in the result set's own order.
func (v *view) heldAccepted(slots []int) HeldRows {
	h := HeldRows{rows: make([]heldResult, 0, v.result.len()), slots: slots}
	for e := range v.result.all() {
		h.rows = append(h.rows, heldResult{e.key, e.row.rowVals})
	}
	return h
}
