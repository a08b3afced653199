package engine

import (
	"iter"
	"math/bits"
	"unsafe"
)

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
// plainSlots), in the order of its rows' records in memory.
func (v *view) heldAccepted(slots []int) HeldRows {
	rt := &v.srcs[0].t.rows
	h := HeldRows{rows: make([]heldResult, 0, v.members.len()), slots: slots}
	for id := range v.members.all() {
		key, rv := rt.row(id)
		h.rows = append(h.rows, heldResult{key, rv})
	}
	h.rows = inMemoryOrder(h.rows)
	return h
}

// inMemoryOrder returns rows ordered by where their encodings are in memory,
// which is about the order a read made them in: the result set's own
// order is its hashes', so a subscriber ranging over a million rows in
// it would miss the cache on nearly every row and key it reads (in the
// cold 1M-row shape sync that cost more than the key sort it replaced).
// A radix sort of the addresses, 11 bits a pass over the bits in which
// they differ, so about three passes for a result of a few hundred MB.
func inMemoryOrder(rows []heldResult) []heldResult {
	if len(rows) < 2 {
		return rows
	}
	addr := make([]uint64, len(rows))
	lo, hi := ^uint64(0), uint64(0)
	for i, r := range rows {
		a := uint64(uintptr(unsafe.Pointer(unsafe.StringData(r.rv.enc)))) >> 3
		addr[i] = a
		lo, hi = min(lo, a), max(hi, a)
	}
	for i := range addr {
		addr[i] -= lo
	}
	const digit = 11
	idx := make([]uint32, len(rows))
	for i := range idx {
		idx[i] = uint32(i)
	}
	tmp := make([]uint32, len(rows))
	var count [1 << digit]int
	for shift := 0; shift < bits.Len64(hi-lo); shift += digit {
		clear(count[:])
		for _, i := range idx {
			count[addr[i]>>shift&(1<<digit-1)]++
		}
		at := 0
		for d, c := range count {
			count[d] = at
			at += c
		}
		for _, i := range idx {
			d := addr[i] >> shift & (1<<digit - 1)
			tmp[count[d]] = i
			count[d]++
		}
		idx, tmp = tmp, idx
	}
	sorted := make([]heldResult, len(rows))
	for j, i := range idx {
		sorted[j] = rows[i]
	}
	return sorted
}
