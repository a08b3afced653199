package engine

import (
	"strings"

	"github.com/freshetdb/freshet/query"
)

// The apply path's memory (issue 14: allocations per routed change). A
// change is decoded, routed, settled and turned into outputs without an
// allocation of its own in the usual case:
//
//   - the layout slices changes decode into ([]any) come from slotArena,
//     reused from one transaction to the next: nothing keeps them past
//     the transaction (the held row is encoded from them; a view that
//     keeps values boxes them on its own, view.ownedRow);
//   - the decoded text and integer values are boxed in shared slabs
//     (slabs, as a hydration read's values are), and the outputs' rows
//     and projections are cut from shared chunks (chunks): neither is
//     ever written again where it was handed out, so an output, and every
//     value in it, is its receiver's to keep as before; a value kept
//     pins its slab or chunk (up to a few tens of KiB) until the
//     collector finds it unreferenced;
//   - Core.Ready's Outputs slice is reused by the next outputs.

// applyMem is the apply path's memory, owned by the core's state.
type applyMem struct {
	slots slotArena
	boxes slabs             // decoded values (engine_slab.go)
	rows  chunks[ResultRow] // delta rows
	vals  chunks[any]       // projections of delta rows
}

// newApplyMem returns the apply path's memory with its chunk sizes.
func newApplyMem() applyMem {
	return applyMem{rows: chunks[ResultRow]{size: 64}, vals: chunks[any]{size: 256}}
}

// slotArena hands out the layout slices of one transaction's changes.
type slotArena struct{ buf []any }

// slotArenaKeep is the most slots the arena keeps for the next
// transaction (a larger one's are dropped: a huge transaction does not
// leave its memory held).
const slotArenaKeep = 1 << 14

// alloc returns n slots, valid until reset.
func (a *slotArena) alloc(n int) []any {
	if n > cap(a.buf)-len(a.buf) {
		a.buf = make([]any, 0, max(n, 2*cap(a.buf), 64))
	}
	l := len(a.buf)
	a.buf = a.buf[:l+n]
	return a.buf[l : l+n : l+n]
}

// reset ends the transaction the slots served: every slice alloc
// returned is invalid.
func (a *slotArena) reset() {
	if cap(a.buf) > slotArenaKeep {
		a.buf = nil
		return
	}
	clear(a.buf)
	a.buf = a.buf[:0]
}

// chunks cuts slices of T from shared chunks of size elements, never
// reused: a slice it returned stays valid and its receiver's.
type chunks[T any] struct {
	buf  []T
	size int
}

// alloc returns n zero elements (its own allocation when n is more than
// a quarter of a chunk).
func (c *chunks[T]) alloc(n int) []T {
	if n > cap(c.buf)-len(c.buf) {
		if n > c.size/4 {
			return make([]T, n)
		}
		c.buf = make([]T, 0, c.size)
	}
	l := len(c.buf)
	c.buf = c.buf[:l+n]
	return c.buf[l : l+n : l+n]
}

// own returns x boxed on its own, not in the apply path's slabs: for values a
// view keeps past the transaction (an ordered view's entered row, an
// aggregate's state), which must not pin a chunk.
func own(x any) any {
	switch v := x.(type) {
	case string:
		return strings.Clone(v)
	case int64:
		return v // boxed again: a new allocation (none below 256)
	}
	return x
}

// ownedRow is row for a view that may keep the values past the
// transaction: each is boxed on its own (own), not in the arena's chunks.
func (v *view) ownedRow(vals []any) query.Row {
	q := v.row(vals)
	for i, x := range q[0] {
		q[0][i] = own(x)
	}
	return q
}
