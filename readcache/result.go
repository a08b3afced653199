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
