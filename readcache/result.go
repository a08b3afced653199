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
func (r *Result) Memo(slot MemoSlot, build func(*Result) any) any {
	p := &r.memo[slot]
	if v := p.Load(); v != nil {
		return *v
	}
	v := build(r)
	if p.CompareAndSwap(nil, &v) {
		return v
	}
	return *p.Load()
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
	}
	byKey := make(map[string]item, len(r.keys)+len(d.Upsert))
	order := make([]string, 0, len(r.keys)+len(d.Upsert))
	for i, k := range r.keys {
		byKey[k] = item{vals: r.Rows[i], n: rowSize(r.Rows[i]) + int64(len(k))}
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
		byKey[u.Key] = item{vals: vals, n: n + int64(len(u.Key))}
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
	nr := &Result{Columns: r.Columns, LSN: d.LSN, Rows: make([][][]byte, 0, len(order)), keys: make([]string, 0, len(order)), size: 256}
	for _, k := range order {
		it, ok := byKey[k]
		if !ok {
			return nil, fmt.Errorf("apply delta at %s: order names key %q the result does not hold", d.LSN, k)
		}
		delete(byKey, k) // a key named twice is then missing
		nr.Rows = append(nr.Rows, it.vals)
		nr.keys = append(nr.keys, k)
		nr.size += it.n
	}
	if len(byKey) != 0 {
		return nil, fmt.Errorf("apply delta at %s: order lists %d keys, the result holds %d rows", d.LSN, len(nr.Rows), len(nr.Rows)+len(byKey))
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
