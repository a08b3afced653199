package shape

import (
	"encoding/binary"
	"slices"
)

// entry is one row of a shape's current result, held as one string (one
// allocation per row, however wide): a header of little-endian uint32s,
// then the row's Electric key, then its values' text back to back, then
// the key the row is found by (the engine's key; empty for a row reloaded
// from disk, which is found by its Electric key). The header is its own
// length, the key's end, and each column's end (nullEnd set for NULL).
// An entry is never changed once built (an update makes a new one), so
// snapshots share entries with the live set.
type entry struct{ d string }

// nullEnd marks a NULL column's end in an entry's header.
const nullEnd = 1 << 31

func (e entry) u32(i int) int { return int(binary.LittleEndian.Uint32([]byte(e.d[4*i : 4*i+4]))) }

// cols is the number of columns the entry holds.
func (e entry) cols() int { return e.u32(0)/4 - 2 }

// key is the row's Electric key.
func (e entry) key() string { return e.d[e.u32(0):e.u32(1)] }

// val is column i's text; ok is false for NULL.
func (e entry) val(i int) (string, bool) {
	end := e.u32(2 + i)
	if end&nullEnd != 0 {
		return "", false
	}
	start := e.u32(1)
	if i > 0 {
		start = e.u32(1+i) &^ nullEnd
	}
	return e.d[start:end], true
}

// look is the engine's key of the row ("" when reloaded from disk).
func (e entry) look() string {
	n := e.cols()
	end := e.u32(1)
	if n > 0 {
		end = e.u32(1+n) &^ nullEnd
	}
	return e.d[end:]
}

// sameVal reports whether column i holds the same value in a and b.
func sameVal(a, b entry, i int) bool {
	av, aok := a.val(i)
	bv, bok := b.val(i)
	return aok == bok && av == bv
}

// scratch builds entries: a row's values are added one by one, then
// entry joins them with a key into one string. Its buffers are reused
// row after row.
type scratch struct {
	vals []byte
	ends []int // each column's end in vals; -1 for NULL
	out  []byte
	key  []byte
}

func (sc *scratch) reset() { sc.vals, sc.ends = sc.vals[:0], sc.ends[:0] }

// null adds a NULL column.
func (sc *scratch) null() { sc.ends = append(sc.ends, -1) }

// text adds a column's text.
func (sc *scratch) text(v string) {
	sc.vals = append(sc.vals, v...)
	sc.ends = append(sc.ends, len(sc.vals))
}

// ended records that the column whose text was just appended to
// sc.vals (by the renderer) ends here.
func (sc *scratch) ended() { sc.ends = append(sc.ends, len(sc.vals)) }

// start is where column i's text begins in vals.
func (sc *scratch) start(i int) int {
	for j := i - 1; j >= 0; j-- {
		if sc.ends[j] >= 0 {
			return sc.ends[j]
		}
	}
	return 0
}

// electricKey builds the Electric key "schema"."table"/"pk1"/"pk2" of the
// values added so far.
func (sc *scratch) electricKey(lay *layout) []byte {
	b := append(sc.key[:0], lay.keyPfx...)
	for _, i := range lay.pk {
		b = append(b, '/')
		if sc.ends[i] < 0 {
			b = append(b, '_')
			continue
		}
		b = append(b, '"')
		for _, c := range sc.vals[sc.start(i):sc.ends[i]] {
			if c == '/' {
				b = append(b, '/')
			}
			b = append(b, c)
		}
		b = append(b, '"')
	}
	sc.key = b
	return b
}

// entry joins the values added with key and look into an entry.
func (sc *scratch) entry(key []byte, look string) entry {
	h := 4 * (len(sc.ends) + 2)
	out := binary.LittleEndian.AppendUint32(sc.out[:0], uint32(h))
	keyEnd := h + len(key)
	out = binary.LittleEndian.AppendUint32(out, uint32(keyEnd))
	last := 0
	for _, end := range sc.ends {
		if end < 0 {
			out = binary.LittleEndian.AppendUint32(out, uint32(keyEnd+last)|nullEnd)
			continue
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(keyEnd+end))
		last = end
	}
	out = append(out, key...)
	out = append(out, sc.vals...)
	out = append(out, look...)
	sc.out = out
	return entry{string(out)}
}

// smallRows is how many rows a shape keeps in a slice before it makes a
// map: most shapes of an app are a handful of rows, and a map costs a
// few hundred bytes even for one.
const smallRows = 8

// rowSet is a shape's current rows, found by the engine's key of each
// row, or by their Electric keys while they are the rows reloaded from
// disk (byKey). Its one row is held in the set itself: most shapes of an
// app hold one row or none, and a slice of one costs its header and 16
// bytes more.
type rowSet struct {
	one  entry     // the only row while more is nil (the zero entry: none)
	more *moreRows // the rows once there are two, or for a set by Electric key
}

// moreRows is a set's rows beyond one.
type moreRows struct {
	small []entry
	m     map[string]entry
	byKey bool
}

// newRowSet returns an empty set sized for n rows.
func newRowSet(n int, byKey bool) rowSet {
	if n > smallRows {
		return rowSet{more: &moreRows{m: make(map[string]entry, n), byKey: byKey}}
	}
	if byKey {
		return rowSet{more: &moreRows{byKey: true}}
	}
	return rowSet{}
}

// byKey reports whether rows are found by their Electric keys.
func (rs *rowSet) byKey() bool { return rs.more != nil && rs.more.byKey }

// of is the key e is found by in rs.
func (rs *rowSet) of(e entry) string {
	if rs.byKey() {
		return e.key()
	}
	return e.look()
}

func (rs *rowSet) len() int {
	if m := rs.more; m == nil {
		if rs.one.d == "" {
			return 0
		}
		return 1
	} else if m.m != nil {
		return len(m.m)
	} else {
		return len(m.small)
	}
}

// get finds the row with key k.
func (rs *rowSet) get(k string) (entry, bool) {
	m := rs.more
	if m == nil {
		if rs.one.d != "" && rs.of(rs.one) == k {
			return rs.one, true
		}
		return entry{}, false
	}
	if m.m != nil {
		e, ok := m.m[k]
		return e, ok
	}
	for _, e := range m.small {
		if rs.of(e) == k {
			return e, true
		}
	}
	return entry{}, false
}

// put adds e, replacing the row with the same key.
func (rs *rowSet) put(e entry) {
	k := rs.of(e)
	m := rs.more
	if m == nil {
		if rs.one.d == "" || rs.of(rs.one) == k {
			rs.one = e
			return
		}
		m = &moreRows{small: make([]entry, 1, 2)}
		m.small[0], rs.one, rs.more = rs.one, entry{}, m
	}
	if m.m != nil {
		m.m[k] = e
		return
	}
	for i := range m.small {
		if rs.of(m.small[i]) == k {
			m.small[i] = e
			return
		}
	}
	if len(m.small) < smallRows {
		m.small = append(m.small, e)
		return
	}
	m.m = make(map[string]entry, 2*smallRows)
	for _, o := range m.small {
		m.m[rs.of(o)] = o
	}
	m.small = nil
	m.m[k] = e
}

// del removes the row with key k.
func (rs *rowSet) del(k string) {
	m := rs.more
	if m == nil {
		if rs.one.d != "" && rs.of(rs.one) == k {
			rs.one = entry{}
		}
		return
	}
	if m.m != nil {
		delete(m.m, k)
		return
	}
	for i := range m.small {
		if rs.of(m.small[i]) == k {
			m.small = slices.Delete(m.small, i, i+1)
			if len(m.small) == 0 {
				m.small = nil
			}
			return
		}
	}
}

// each calls fn for every row, in no particular order.
func (rs *rowSet) each(fn func(entry)) {
	m := rs.more
	if m == nil {
		if rs.one.d != "" {
			fn(rs.one)
		}
		return
	}
	if m.m != nil {
		for _, e := range m.m {
			fn(e)
		}
		return
	}
	for _, e := range m.small {
		fn(e)
	}
}
