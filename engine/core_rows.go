package engine

import (
	"strconv"
	"unsafe"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

// unloaded marks a held value the core does not know: a column no view
// asked for when the row was loaded, or an unchanged TOASTed value of a row
// it did not hold.
type unloaded struct{}

func isUnloaded(v any) bool { _, ok := v.(unloaded); return ok }

// held returns the id of the held row of key, or 0.
func (tb *table) held(key string) rowID { return tb.rows.lookup(key) }

// layoutCol is one column of a table's layout: the union of every column
// name the core has seen for the table. Columns are only ever appended, so
// a held row's slots keep their meaning across schema changes (a dropped or
// renamed column's slot is simply no longer filled).
type layoutCol struct {
	name    string
	typ     change.Type // how values decode (from the catalog of a plan naming it)
	typeOID uint32      // the base type: AppendKey/CompareValues use it
	declOID uint32      // the type as declared (what the stream's relation says)
	typMod  int32       // the declared type's modifier
	attNum  int16       // the column's attnum as the plan's catalog read it (0: unknown)
	typed   bool
	fast    fastKind // integers and text decode without change.Decode's type resolution
	need    int      // view sources needing this column
}

// table is the core's state for one table some view reads.
type table struct {
	oid    uint32
	schema string
	name   string
	cols   []layoutCol
	byName map[string]int
	key    []int                           // layout positions of the primary key, in key order
	rows   rowTable                        // the held rows, by id and by key, with their holders
	srcs   index[*viewSource, *viewSource] // every view source reading the table
	route  route
	// relMaps caches, per relation shape seen in the stream, the layout
	// position of each of its columns.
	relMaps map[*change.Relation][]int
	rel     *change.Relation // the newest shape seen
	keyBuf  []byte           // keyOf's scratch
	encBuf  []byte           // encode's scratch
}

// newTable returns the core's state for t: its layout starts as t's
// columns, with the row key's slots noted.
func newTable(t *query.Table) *table {
	tb := &table{
		oid:     t.OID,
		schema:  t.Schema,
		name:    t.Name,
		byName:  make(map[string]int),
		relMaps: make(map[*change.Relation][]int),
	}
	tb.route.init()
	for _, c := range t.Columns {
		tb.column(c.Name)
	}
	for _, k := range t.RowKey() {
		tb.key = append(tb.key, tb.column(k))
	}
	return tb
}

// column returns the layout position of name, adding it if new.
func (tb *table) column(name string) int {
	if i, ok := tb.byName[name]; ok {
		return i
	}
	tb.cols = append(tb.cols, layoutCol{name: name})
	tb.byName[name] = len(tb.cols) - 1
	return len(tb.cols) - 1
}

// columnFor returns the layout position of a column a plan uses, typed
// as the plan says. A slot holds one shape of a column (name, declared
// type, modifier, attnum): a plan compiled against another shape than the
// slot's (the catalog saw an ALTER COLUMN TYPE, or a DROP and ADD COLUMN,
// that the stream has not shown yet, or a stale catalog did not) gets a
// slot of its own, so that neither view reads the other's values as its
// own. The views of the shape that no longer holds end once the stream, a
// read or the catalog check shows it. An existing slot of the plan's shape
// serves only while views need it: one no view needs is not kept current
// (changes decode only needed columns, and DDL changes no row in the
// stream), so after ALTER TYPE A to B and back to A its values are stale.
func (tb *table) columnFor(c *query.Column) int {
	slot := tb.column(c.Name)
	// Key columns keep their slots (rows are keyed by them): every view of
	// the table ends when one changes shape (retireStale).
	if lc := &tb.cols[slot]; lc.typed && !lc.sameShape(c) && !tb.isKey(slot) {
		slot = -1
		for i := len(tb.cols) - 1; i >= 0; i-- {
			if lc := &tb.cols[i]; lc.name == c.Name && lc.typed && lc.need > 0 && lc.sameShape(c) {
				slot = i
				break
			}
		}
		if slot < 0 {
			tb.cols = append(tb.cols, layoutCol{name: c.Name})
			slot = len(tb.cols) - 1
			tb.byName[c.Name] = slot
			// Relations seen map names to the old slots.
			clear(tb.relMaps)
		}
	}
	tb.typeColumn(slot, c)
	return slot
}

// sameShape reports whether a plan's column is the shape the slot holds.
func (lc *layoutCol) sameShape(c *query.Column) bool {
	return lc.declOID == c.DeclaredOID && lc.typeOID == c.TypeOID && lc.typMod == c.TypeMod &&
		(lc.attNum == 0 || c.AttNum == 0 || lc.attNum == c.AttNum)
}

// typeColumn records the type of a column a plan uses.
func (tb *table) typeColumn(i int, c *query.Column) {
	lc := &tb.cols[i]
	lc.typ, lc.typeOID, lc.declOID, lc.typMod, lc.typed = c.Type, c.TypeOID, c.DeclaredOID, c.TypeMod, true
	if c.AttNum != 0 {
		lc.attNum = c.AttNum
	}
	if lc.typ.OID == 0 {
		lc.typ.OID = c.TypeOID
	}
	lc.fast = fastKindOf(lc.typ, c.TypeOID)
}

// relMap returns, for each column of rel, its layout position.
func (tb *table) relMap(rel *change.Relation) []int {
	if m, ok := tb.relMaps[rel]; ok {
		return m
	}
	m := make([]int, len(rel.Columns))
	for i, c := range rel.Columns {
		m[i] = tb.relSlot(c)
	}
	tb.relMaps[rel] = m
	return m
}

// relSlot returns the slot a stream column's values decode into: the
// column's slot of the same declared type and modifier that views need
// (the newest such), else the name's current slot.
func (tb *table) relSlot(c change.Column) int {
	slot := tb.column(c.Name)
	if lc := &tb.cols[slot]; !lc.typed || lc.declOID == c.TypeOID && lc.typMod == c.TypeMod {
		return slot
	}
	for i := len(tb.cols) - 1; i >= 0; i-- {
		if lc := &tb.cols[i]; lc.name == c.Name && lc.typed && lc.need > 0 && lc.declOID == c.TypeOID && lc.typMod == c.TypeMod {
			return i
		}
	}
	return slot
}

// decodeRow decodes the needed columns of a change's row into a layout
// slice. Values it cannot know (Absent, Unchanged, undecodable) are left
// unloaded and reported by ok=false when a needed column is among them;
// fill supplies unchanged values from the row as held, when there is one.
// With mem (the apply path) the slice is the transaction's (valid until
// it is settled) and text and integer values are boxed in mem's slabs;
// without, both are allocated.
func (tb *table) decodeRow(rel *change.Relation, row change.Row, fill []any, types change.TypeResolver, mem *applyMem) (vals []any, ok bool) {
	m := tb.relMap(rel)
	var boxes *slabs
	if mem != nil {
		vals, boxes = mem.slots.alloc(len(tb.cols)), &mem.boxes
	} else {
		vals = make([]any, len(tb.cols))
	}
	for i := range vals {
		vals[i] = unloaded{}
	}
	ok = true
	for i, v := range row {
		if i >= len(m) {
			break
		}
		slot := m[i]
		lc := &tb.cols[slot]
		if lc.need == 0 && !tb.isKey(slot) {
			continue
		}
		switch v.Kind {
		case change.Null:
			vals[slot] = nil
		case change.Text, change.Binary:
			if x, done := decodeFast(lc, v, boxes); done {
				vals[slot] = x
				continue
			}
			typ := lc.typ
			if !lc.typed {
				t, found := change.BuiltinType(rel.Columns[i].TypeOID)
				if !found && types != nil {
					t, found = types.Type(rel.Columns[i].TypeOID)
				}
				if !found {
					t = change.Type{OID: rel.Columns[i].TypeOID}
				}
				typ = t
			}
			x, err := change.Decode(typ, v, types)
			if err != nil {
				ok = false
				continue
			}
			vals[slot] = x
		default: // Absent, Unchanged
			if x := valAt(fill, slot); !isUnloaded(x) {
				vals[slot] = x
			} else if lc.need > 0 {
				ok = false
			}
		}
	}
	return vals, ok
}

// isKey reports whether slot holds a column of the row key.
func (tb *table) isKey(slot int) bool {
	for _, k := range tb.key {
		if k == slot {
			return true
		}
	}
	return false
}

// keyOf returns the primary key encoding of a layout row, and false when a
// key value is unknown.
func (tb *table) keyOf(vals []any) (string, bool) {
	b := tb.keyBuf[:0]
	for _, slot := range tb.key {
		if slot >= len(vals) || isUnloaded(vals[slot]) {
			return "", false
		}
		b = query.AppendKey(b, tb.cols[slot].typeOID, vals[slot])
	}
	tb.keyBuf = b
	if id := tb.rows.lookup(unsafe.String(unsafe.SliceData(b), len(b))); id != 0 {
		return tb.rows.key(id), true // a held row's key: no new string
	}
	return string(b), true
}

// merge fills the unloaded slots of dst from src (both describe the same
// row at the same position).
func merge(dst, src []any) []any {
	if len(dst) < len(src) {
		n := make([]any, len(src))
		copy(n, dst)
		for i := len(dst); i < len(src); i++ {
			n[i] = unloaded{}
		}
		dst = n
	}
	for i, v := range src {
		if isUnloaded(dst[i]) && !isUnloaded(v) {
			dst[i] = v
		}
	}
	return dst
}

// encode encodes a layout row for holding.
func (tb *table) encode(vals []any) rowVals {
	var rv rowVals
	rv, tb.encBuf = encodeVals(tb.encBuf, vals)
	return rv
}

// mergeHeld fills the unloaded slots of held row id from src, a row at
// the same position (a view that loaded other columns of it).
func (tb *table) mergeHeld(id rowID, src rowVals) {
	rv := tb.rows.vals(id)
	if rv.enc == src.enc && rv.boxes == nil && src.boxes == nil {
		return
	}
	tb.rows.setVals(id, merge(rv.values(), src.values()))
}

// missing reports whether a change's row lacks values (unchanged TOAST,
// or absent).
func missing(row change.Row) bool {
	for _, v := range row {
		if v.Kind == change.Unchanged || v.Kind == change.Absent {
			return true
		}
	}
	return false
}

// keyOfHeldBuf is keyOf for an encoded row: it builds the key in
// tb.keyBuf and returns it (valid until the next key is built).
func (tb *table) keyOfHeldBuf(rv rowVals) ([]byte, bool) {
	b := tb.keyBuf[:0]
	for _, slot := range tb.key {
		if i := rv.find(slot); i >= 0 && rv.enc[i] == tagInt {
			// An integer key, the common one: no box for its value.
			_, payload, _ := slotAt(rv.enc, i)
			x, _ := varint(payload, 0)
			b = query.AppendIntKey(b, x)
			continue
		}
		x := rv.val(slot)
		if isUnloaded(x) {
			return nil, false
		}
		b = query.AppendKey(b, tb.cols[slot].typeOID, x)
	}
	tb.keyBuf = b
	return b, true
}

// identityLayout reports whether the source's columns are the table's
// layout slots 0, 1, ... in order: then a row read in the source's column
// order is already in layout order.
func (vs *viewSource) identityLayout() bool {
	for j, slot := range vs.col {
		if slot != j {
			return false
		}
	}
	return true
}

// layoutSlots returns, for each layout slot up to the source's last
// column, the source column held there plus one (0: none).
func (vs *viewSource) layoutSlots() []int {
	n := 0
	for _, slot := range vs.col {
		n = max(n, slot+1)
	}
	at := make([]int, n)
	for j, slot := range vs.col {
		at[slot] = j + 1
	}
	return at
}

// relayout re-encodes a row read in the source's column order (readHeld)
// in the table's layout order (at is layoutSlots), other slots unloaded;
// src is scratch.
func relayout(rv rowVals, at []int, src *[]string) rowVals {
	cols := (*src)[:0]
	for i := 0; i < len(rv.enc); {
		_, _, next := slotAt(rv.enc, i)
		cols = append(cols, rv.enc[i:next])
		i = next
	}
	*src = cols
	b := make([]byte, 0, len(rv.enc)+len(at))
	for _, j := range at {
		if j == 0 || j > len(cols) {
			b = append(b, tagUnloaded)
		} else {
			b = append(b, cols[j-1]...)
		}
	}
	// Boxed values keep their indexes: the same boxes serve.
	return rowVals{enc: string(b), boxes: rv.boxes}
}

// decodeFast decodes a streamed integer or text value of a typed column
// as change.Decode does (TestDecodeFast), without looking its type up for
// every value, boxed in boxes' slabs when it is not nil; done is false
// for other columns and forms.
func decodeFast(lc *layoutCol, v change.Value, boxes *slabs) (x any, done bool) {
	if !lc.typed || v.Kind != change.Text {
		return nil, false
	}
	switch lc.fast {
	case fastText:
		if boxes != nil {
			p := boxes.strs.next()
			*p = boxes.clone(unsafe.String(unsafe.SliceData(v.Data), len(v.Data)))
			return box(stringWord, p), true
		}
		return string(v.Data), true
	case fastInt:
		bits := 64
		switch lc.typeOID {
		case change.OIDInt2:
			bits = 16
		case change.OIDInt4:
			bits = 32
		}
		n, err := strconv.ParseInt(unsafe.String(unsafe.SliceData(v.Data), len(v.Data)), 10, bits)
		if err != nil {
			return nil, false // change.Decode says why
		}
		if boxes != nil && (n < 0 || n > 255) { // the runtime boxes 0-255 without allocating
			p := boxes.ints.next()
			*p = n
			return box(int64Word, p), true
		}
		return n, true
	}
	return nil, false
}
