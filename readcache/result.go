package readcache

import (
	"fmt"
	"sync/atomic"

	"github.com/freshetdb/freshet/wire"
)

// Result is one cached query result: immutable once published, so a read
// holds it without a lock while deltas build its successor.
type Result struct {
	// Columns are the result's columns (names and type OIDs).
	Columns []wire.Column
	// Rows are the rows in the query's order; each value is PostgreSQL's
	// text form, nil for NULL.
	Rows [][][]byte
	// LSN is the position the result is exact at.
	LSN  string
	keys []string
	size int64
	memo [memoN]atomic.Pointer[any]
	// prev is the result this one was made from by a delta, kept (when
	// something was derived from it) until this one's first Memo, so the
	// rows the delta left alone need not be decoded again; from[j] is the
	// index in prev of row j, -1 for a row the delta changed.
	prev atomic.Pointer[Result]
	from []int32
}

// MemoSlot names the place in a Result where one adapter keeps what it
// derives from the result (decoded values, column metadata), so that a
// hit decodes nothing until a delta publishes the next Result.
type MemoSlot int

// The adapters' slots.
const (
	MemoDriver MemoSlot = iota // readcache/stdlib
	MemoPgx                    // readcache/pgxcache
	memoN
)

// Memo returns what build derived from r for slot, calling build the
// first time (readers racing on a fresh Result may each build; one value
// is kept and every later call returns it). build must not keep r's rows
// in a form a reader could change.
//
// When r was made by a delta from a result build's adapter had derived
// something from, build gets that (prev) and, for each row of r, the
// index of the same row in that result (from; -1 for a row the delta
// changed), so it can reuse what it made of the rows the delta left
// alone. Otherwise prev and from are nil.
func (r *Result) Memo(slot MemoSlot, build func(r *Result, prev any, from []int32) any) any {
	p := &r.memo[slot]
	if v := p.Load(); v != nil {
		return *v
	}
	var prev any
	if old := r.prev.Load(); old != nil {
		if pv := old.memo[slot].Load(); pv != nil {
			prev = *pv
		}
	}
	var from []int32
	if prev != nil {
		from = r.from
	}
	v := build(r, prev, from)
	if p.CompareAndSwap(nil, &v) {
		r.prev.Store(nil) // the old result may go
		return v
	}
	return *p.Load()
}

// ChangedRows returns how many of a result's n rows Memo's from marks as
// changed (all n when from is nil: nothing to reuse).
func ChangedRows(from []int32, n int) int {
	if from == nil {
		return n
	}
	c := 0
	for _, i := range from {
		if i < 0 {
			c++
		}
	}
	return c
}

// derived reports whether an adapter derived something from r.
func (r *Result) derived() bool {
	for i := range r.memo {
		if r.memo[i].Load() != nil {
			return true
		}
	}
	return false
}

// The size estimate of a row counts its text, the slice headers holding
// it, and the decoded value an adapter keeps beside each text value (an
// interface and its box).
const (
	rowOverhead   = 48
	valueOverhead = 56
)

func rowValues(vs []*string) ([][]byte, int64) {
	out := make([][]byte, len(vs))
	n := int64(rowOverhead)
	for i, v := range vs {
		if v != nil {
			out[i] = []byte(*v)
			n += int64(len(*v))
		}
		n += valueOverhead
	}
	return out, n
}

// newResult builds a result from an accepted frame.
func newResult(a *wire.Accepted) *Result {
	r := &Result{Columns: a.Columns, LSN: a.LSN, Rows: make([][][]byte, len(a.Rows)), keys: make([]string, len(a.Rows))}
	r.size = 256
	for i, row := range a.Rows {
		var n int64
		r.Rows[i], n = rowValues(row.Values)
		r.keys[i] = row.Key
		r.size += n + int64(len(row.Key))
	}
	return r
}

// apply returns the result after d: remove, then upsert, then reorder.
func (r *Result) apply(d *wire.Delta) (*Result, error) {
	if d.Order == nil && d.Size != nil {
		return r.applyMoves(d)
	}
	type item struct {
		vals [][]byte
		n    int64
		from int32 // index in r, -1 for a row of d
	}
	byKey := make(map[string]item, len(r.keys)+len(d.Upsert))
	order := make([]string, 0, len(r.keys)+len(d.Upsert))
	for i, k := range r.keys {
		byKey[k] = item{vals: r.Rows[i], n: rowSize(r.Rows[i]) + int64(len(k)), from: int32(i)}
		order = append(order, k)
	}
	removed := false
	for _, k := range d.Remove {
		if _, ok := byKey[k]; ok {
			delete(byKey, k)
			removed = true
		}
	}
	for _, u := range d.Upsert {
		if len(u.Values) != len(r.Columns) {
			return nil, fmt.Errorf("apply delta at %s: a row has %d values, the result has %d columns", d.LSN, len(u.Values), len(r.Columns))
		}
		if _, ok := byKey[u.Key]; !ok {
			order = append(order, u.Key)
		}
		vals, n := rowValues(u.Values)
		byKey[u.Key] = item{vals: vals, n: n + int64(len(u.Key)), from: -1}
	}
	if d.Order != nil {
		order = d.Order
	} else if removed {
		kept := order[:0:0]
		for _, k := range order {
			if _, ok := byKey[k]; ok {
				kept = append(kept, k)
			}
		}
		order = kept
	}
	nr := &Result{Columns: r.Columns, LSN: d.LSN, Rows: make([][][]byte, 0, len(order)), keys: make([]string, 0, len(order)),
		from: make([]int32, 0, len(order)), size: 256}
	for _, k := range order {
		it, ok := byKey[k]
		if !ok {
			return nil, fmt.Errorf("apply delta at %s: order names key %q the result does not hold", d.LSN, k)
		}
		delete(byKey, k) // a key named twice is then missing
		nr.Rows = append(nr.Rows, it.vals)
		nr.keys = append(nr.keys, k)
		nr.from = append(nr.from, it.from)
		nr.size += it.n
	}
	if len(byKey) != 0 {
		return nil, fmt.Errorf("apply delta at %s: order lists %d keys, the result holds %d rows", d.LSN, len(nr.Rows), len(nr.Rows)+len(byKey))
	}
	if r.derived() {
		nr.prev.Store(r) // at most one result back: r's own prev is gone once it was derived from
	} else {
		nr.from = nil
	}
	return nr, nil
}

func rowSize(vals [][]byte) int64 {
	n := int64(rowOverhead)
	for _, v := range vals {
		n += int64(len(v)) + valueOverhead
	}
	return n
}

// moveMark is what a delta in the moves form says of one key.
type moveMark struct {
	old     int32 // index in the result, -1 when not held
	up      int   // 1 + index in Upsert, 0 when not upserted
	removed bool
	moved   bool
	placed  bool
	next    *string // the moved key now right after this one
}

// applyMoves applies a delta in the moves form (wire.DeltaOrderMoves):
// remove, upsert, and put each moved row right after the row its move
// names. Its cost grows with the rows the delta names, besides one look
// at each held key and copying the slices that hold them (the result is
// immutable: readers hold the old one).
func (r *Result) applyMoves(d *wire.Delta) (*Result, error) {
	marks := make(map[string]*moveMark, len(d.Remove)+len(d.Upsert)+2*len(d.Moves))
	mark := func(k string) *moveMark {
		m := marks[k]
		if m == nil {
			m = &moveMark{old: -1}
			marks[k] = m
		}
		return m
	}
	for _, k := range d.Remove {
		mark(k).removed = true
	}
	for i, u := range d.Upsert {
		if len(u.Values) != len(r.Columns) {
			return nil, fmt.Errorf("apply delta at %s: a row has %d values, the result has %d columns", d.LSN, len(u.Values), len(r.Columns))
		}
		m := mark(u.Key)
		if m.removed {
			return nil, fmt.Errorf("apply delta at %s: key %q both removed and upserted", d.LSN, u.Key)
		}
		m.up = i + 1
	}
	var head *string
	for i := range d.Moves {
		mv := &d.Moves[i]
		m := mark(mv.Key)
		if m.moved || m.removed {
			return nil, fmt.Errorf("apply delta at %s: key %q moved twice, or moved and removed", d.LSN, mv.Key)
		}
		m.moved = true
		if mv.After == nil {
			if head != nil {
				return nil, fmt.Errorf("apply delta at %s: two moves to the first place (%q, %q)", d.LSN, *head, mv.Key)
			}
			head = &mv.Key
			continue
		}
		a := mark(*mv.After)
		if a.next != nil {
			return nil, fmt.Errorf("apply delta at %s: two moves after key %q", d.LSN, *mv.After)
		}
		a.next = &mv.Key
	}
	// The held rows the delta names, in the result's order.
	var stops []int32
	for i, k := range r.keys {
		if m, ok := marks[k]; ok {
			m.old = int32(i)
			stops = append(stops, int32(i))
		}
	}
	n := len(r.keys) + len(d.Moves)
	nr := &Result{Columns: r.Columns, LSN: d.LSN, Rows: make([][][]byte, 0, n), keys: make([]string, 0, n), size: r.size}
	derived := r.derived()
	if derived {
		nr.from = make([]int32, 0, n)
	}
	placed := 0
	var err error
	// place appends the row k (named by the delta) and the chain of moved
	// rows after it.
	place := func(k string, m *moveMark) {
		for {
			if m.placed {
				err = fmt.Errorf("apply delta at %s: key %q placed twice", d.LSN, k)
				return
			}
			m.placed = true
			switch {
			case m.up > 0:
				vals, sz := rowValues(d.Upsert[m.up-1].Values)
				nr.Rows = append(nr.Rows, vals)
				nr.size += sz + int64(len(k))
				if m.old >= 0 {
					nr.size -= rowSize(r.Rows[m.old]) + int64(len(k))
				}
				if derived {
					nr.from = append(nr.from, -1)
				}
			case m.old >= 0:
				nr.Rows = append(nr.Rows, r.Rows[m.old])
				if derived {
					nr.from = append(nr.from, m.old)
				}
			default:
				err = fmt.Errorf("apply delta at %s: a move names key %q, neither held nor upserted", d.LSN, k)
				return
			}
			nr.keys = append(nr.keys, k)
			if m.moved {
				placed++
			}
			if m.next == nil {
				return
			}
			k = *m.next
			m = marks[k]
		}
	}
	if head != nil {
		place(*head, marks[*head])
	}
	at := int32(0)
	copyTo := func(end int32) {
		nr.Rows = append(nr.Rows, r.Rows[at:end]...)
		nr.keys = append(nr.keys, r.keys[at:end]...)
		if derived {
			for i := at; i < end; i++ {
				nr.from = append(nr.from, i)
			}
		}
	}
	for _, i := range stops {
		if err != nil {
			return nil, err
		}
		copyTo(i)
		at = i + 1
		k := r.keys[i]
		m := marks[k]
		switch {
		case m.removed:
			nr.size -= rowSize(r.Rows[i]) + int64(len(k))
			if m.next != nil {
				return nil, fmt.Errorf("apply delta at %s: a move is after key %q, which the delta removes", d.LSN, k)
			}
		case m.moved:
			// Its chain places it (with its new values when upserted).
		default:
			place(k, m)
		}
	}
	if err != nil {
		return nil, err
	}
	copyTo(int32(len(r.keys)))
	if placed != len(d.Moves) {
		return nil, fmt.Errorf("apply delta at %s: %d of %d moves placed (a move is after a key the result does not hold)", d.LSN, placed, len(d.Moves))
	}
	for k, m := range marks {
		if m.up > 0 && m.old < 0 && !m.placed {
			return nil, fmt.Errorf("apply delta at %s: key %q is new to the result but no move places it", d.LSN, k)
		}
	}
	if len(nr.keys) != *d.Size {
		return nil, fmt.Errorf("apply delta at %s: the result would hold %d rows, the delta says %d", d.LSN, len(nr.keys), *d.Size)
	}
	if derived {
		nr.prev.Store(r)
	} else {
		nr.from = nil
	}
	return nr, nil
}
