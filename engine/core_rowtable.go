package engine

import (
	"encoding/binary"
	"hash/maphash"
	"iter"
	"math/bits"
	"unsafe"
)

// rowID names a row of a rowTable: an index into its rows, stable while
// the row is held (an update gives the row a new record, not a new id).
// 0 is no row.
type rowID uint32

// rowTable holds rows by id and by key: a table's held rows (table.rows)
// and a landing read's rows before they are held (its stage). Each row is
// one record, its key and encoded values in one allocation (record), and
// per id its record's pointer and the view source holding it (12
// bytes: a holder id, viewSource.hid); the ids
// are found by key through an open-addressing set of ids (keySet, about
// 5 bytes a slot). A held row costs its record, its meta and its key set
// slot, with no Go object of its own: views name it by id (a member set,
// an ordered view's entry, a join source's map).
//
// An id is freed when its row has left the key set and has no holder
// (state.release, finish); it is reused only after the core call that freed it
// (recycle, at the start of the next), in the order ids were freed, so
// that a stale id met later reads as freed (row panics) for as long as
// possible rather than as another row.
type rowTable struct {
	meta []metaChunk // ids 1, 2, ... in chunks of up to rowChunk
	cur  int         // the chunk being filled: those before it are full, those after it empty
	keys keySet
	// lists holds the holder lists of rows held by more than one view
	// source, each once: rows held by the same view sources, in the same
	// order, share one.
	lists holderLists
	// boxes holds the boxed values (rowVals.boxes) of rows whose
	// encodings have some.
	boxes    map[rowID]*[]any
	freed    []rowID // freed ids ready for reuse, from freeHead on
	freeHead int
	dying    []rowID // ids freed during the current core call
	stage    bool    // a landing's stage: ids are never reused, so they are in the order rows came in
	buf      []byte  // record scratch
}

// metaChunk is what a rowTable keeps for a chunk of ids, per id: its
// record (nil: a free id) and its holder word: the holder id of the one
// view source holding it (0: none), or, with holdList set, the index of
// its holder list in rowTable.lists when more than one holds it.
type metaChunk struct {
	recs []unsafe.Pointer
	hold []uint32
}

// len returns the ids in the chunk.
func (c *metaChunk) len() int { return len(c.recs) }

// grow makes room in the chunk for n ids.
func (c *metaChunk) grow(n int) {
	if len(c.recs)+n <= cap(c.recs) {
		return
	}
	size := min(max(len(c.recs)+n, 2*cap(c.recs), 8), rowChunk)
	recs, hold := make([]unsafe.Pointer, len(c.recs), size), make([]uint32, len(c.hold), size)
	copy(recs, c.recs)
	copy(hold, c.hold)
	c.recs, c.hold = recs, hold
}

// rowChunkBits sizes the chunks of rowTable.meta: a chunk grows by
// doubling up to rowChunk ids, so a table's metas never take much more
// than its rows need.
const (
	rowChunkBits = 10
	rowChunk     = 1 << rowChunkBits
)

// freedHolder marks the holder of a freed id: freeing it again panics.
const freedHolder = ^uint32(0)

// holdList marks a holder word naming a holder list (rowTable.lists), not
// a holder id.
const holdList = 1 << 31

// A record is a row's key and encoding in one allocation: a uvarint of the
// key's length times two (plus one when the encoding has boxed values), a
// uvarint of the encoding's length, the key's bytes, then the encoding's.
// It is never written once made: an update makes a new record, so a
// rowVals or key taken from a record describes the row as it was, for as
// long as it is kept (an overlay's before-image, a delta's key, an
// Accepted's HeldRows).

// recHdrMax is the most bytes a record's header takes.
const recHdrMax = 2 * binary.MaxVarintLen64

// zeroHdr is the room left for a record's header before its key.
var zeroHdr [recHdrMax]byte

// sealRecord makes a record of b: recHdrMax bytes of room, then the key
// (k bytes), then the encoding.
func sealRecord(b []byte, k int, boxed bool) unsafe.Pointer {
	var hdr [recHdrMax]byte
	kb := uint64(k) << 1
	if boxed {
		kb |= 1
	}
	h := binary.PutUvarint(hdr[:], kb)
	h += binary.PutUvarint(hdr[h:], uint64(len(b)-recHdrMax-k))
	start := recHdrMax - h
	copy(b[start:], hdr[:h])
	s := string(b[start:])
	return unsafe.Pointer(unsafe.StringData(s))
}

// recordParts returns a record's key and encoding (aliasing it) and
// whether the encoding has boxed values.
func recordParts(p unsafe.Pointer) (key, enc string, boxed bool) {
	kb, n1 := uvarintAt(p)
	e, n2 := uvarintAt(unsafe.Add(p, n1))
	at := unsafe.Add(p, n1+n2)
	k := int(kb >> 1)
	return unsafe.String((*byte)(at), k), unsafe.String((*byte)(unsafe.Add(at, k)), int(e)), kb&1 != 0
}

// recordKey returns a record's key (aliasing it).
func recordKey(p unsafe.Pointer) string {
	kb, n1 := uvarintAt(p)
	_, n2 := uvarintAt(unsafe.Add(p, n1))
	return unsafe.String((*byte)(unsafe.Add(p, n1+n2)), int(kb>>1))
}

func uvarintAt(p unsafe.Pointer) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; ; i++ {
		c := *(*byte)(unsafe.Add(p, i))
		if c < 0x80 {
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
}

// recAt returns where id's record pointer is.
func (rt *rowTable) recAt(id rowID) *unsafe.Pointer {
	i := uint32(id) - 1
	return &rt.meta[i>>rowChunkBits].recs[i&(rowChunk-1)]
}

// holdAt returns where id's first holder is.
func (rt *rowTable) holdAt(id rowID) *uint32 {
	i := uint32(id) - 1
	return &rt.meta[i>>rowChunkBits].hold[i&(rowChunk-1)]
}

// rec returns id's record; it panics for a freed id (a stale one).
func (rt *rowTable) rec(id rowID) unsafe.Pointer {
	p := *rt.recAt(id)
	if p == nil {
		panic("engine: a row was read by an id freed before")
	}
	return p
}

// key returns the key of row id (aliasing its record).
func (rt *rowTable) key(id rowID) string { return recordKey(rt.rec(id)) }

// vals returns the values of row id as its record holds them.
func (rt *rowTable) vals(id rowID) rowVals {
	_, rv := rt.row(id)
	return rv
}

// row returns the key and the values of row id (aliasing its record).
func (rt *rowTable) row(id rowID) (string, rowVals) {
	key, enc, boxed := recordParts(rt.rec(id))
	rv := rowVals{enc: enc}
	if boxed {
		rv.boxes = rt.boxes[id]
	}
	return key, rv
}

// lookup returns the id of the row of key in the key set, or 0.
func (rt *rowTable) lookup(key string) rowID { return rt.keys.get(rt, key) }

// nextID returns the id newID gives when no freed id is ready: the
// highest id rt has given, plus one.
func (rt *rowTable) nextID() rowID {
	if len(rt.meta) == 0 {
		return 1
	}
	return rowID(rt.cur<<rowChunkBits + rt.meta[rt.cur].len() + 1)
}

// len returns the number of rows in the key set.
func (rt *rowTable) len() int { return rt.keys.n }

// newID returns an unused id (its meta zero).
func (rt *rowTable) newID() rowID {
	if rt.freeHead < len(rt.freed) {
		id := rt.freed[rt.freeHead]
		rt.freeHead++
		if rt.freeHead == len(rt.freed) {
			rt.freed, rt.freeHead = rt.freed[:0], 0
		}
		return id
	}
	if len(rt.meta) == 0 {
		rt.meta = append(rt.meta, metaChunk{})
	}
	if rt.meta[rt.cur].len() == rowChunk {
		rt.cur++
		if rt.cur == len(rt.meta) {
			rt.meta = append(rt.meta, metaChunk{})
		}
	}
	c := &rt.meta[rt.cur]
	c.grow(1)
	n := c.len()
	c.recs, c.hold = append(c.recs, nil), append(c.hold, 0)
	return rowID(rt.cur<<rowChunkBits + n + 1)
}

// place gives id the record p (with boxes, when its encoding has boxed
// values).
func (rt *rowTable) place(id rowID, p unsafe.Pointer, boxes *[]any) {
	*rt.recAt(id) = p
	switch {
	case boxes != nil:
		if rt.boxes == nil {
			rt.boxes = make(map[rowID]*[]any)
		}
		rt.boxes[id] = boxes
	case len(rt.boxes) > 0:
		delete(rt.boxes, id)
	}
}

// encodeRecord encodes a layout row as the record of key.
func (rt *rowTable) encodeRecord(key string, vals []any) (unsafe.Pointer, *[]any) {
	b := append(rt.buf[:0], zeroHdr[:]...)
	b = append(b, key...)
	var boxes []any
	for _, x := range vals {
		b, boxes = appendVal(b, x, boxes)
	}
	rt.buf = b
	p := sealRecord(b, len(key), boxes != nil)
	if boxes != nil {
		bx := boxes // its own variable: &boxes would move boxes to the heap for every row
		return p, &bx
	}
	return p, nil
}

// record makes the record of key and rv.
func (rt *rowTable) record(key string, rv rowVals) unsafe.Pointer {
	b := append(rt.buf[:0], zeroHdr[:]...)
	b = append(append(b, key...), rv.enc...)
	rt.buf = b
	return sealRecord(b, len(key), rv.boxes != nil)
}

// insert adds the row of key (not in the key set) with the values of a
// layout row, and returns its id.
func (rt *rowTable) insert(key string, vals []any) rowID {
	id := rt.newRow(key, vals)
	rt.keys.put(rt, id)
	return id
}

// newRow gives a row of key (not in the key set) an id and the values
// of a layout row, and returns the id; the row is not in the key set.
func (rt *rowTable) newRow(key string, vals []any) rowID {
	id := rt.newID()
	p, boxes := rt.encodeRecord(key, vals)
	rt.place(id, p, boxes)
	return id
}

// insertVals adds the row of key (not in the key set) with values rv.
func (rt *rowTable) insertVals(key string, rv rowVals) rowID {
	id := rt.newID()
	rt.place(id, rt.record(key, rv), rv.boxes)
	rt.keys.put(rt, id)
	return id
}

// adopt returns the id of the row of sid's key (a row of from) in rt,
// adding it with sid's record, not a copy, when rt has no row of the key
// (added).
func (rt *rowTable) adopt(from *rowTable, sid rowID) (id rowID, added bool) {
	p := from.rec(sid)
	rt.keys.room(rt)
	i, tag, found := rt.keys.slot(rt, recordKey(p))
	if found {
		return rt.keys.idAt(i), false
	}
	id = rt.newID()
	var boxes *[]any
	if _, _, boxed := recordParts(p); boxed {
		boxes = from.boxes[sid]
	}
	rt.place(id, p, boxes)
	rt.keys.fill(i, id, tag)
	return id, true
}

// setVals gives row id the values of a layout row (a new record: one
// taken before keeps the old values).
func (rt *rowTable) setVals(id rowID, vals []any) {
	p, boxes := rt.encodeRecord(rt.key(id), vals)
	rt.place(id, p, boxes)
}

// setRowVals gives row id the values rv.
func (rt *rowTable) setRowVals(id rowID, rv rowVals) {
	rt.place(id, rt.record(rt.key(id), rv), rv.boxes)
}

// put adds or replaces the row of key with values rv and returns its id
// (a stage's: a key read twice keeps its id and its last values).
func (rt *rowTable) put(key string, rv rowVals) rowID {
	rt.keys.room(rt)
	i, tag, found := rt.keys.slot(rt, key)
	if found {
		id := rt.keys.idAt(i)
		rt.setRowVals(id, rv)
		return id
	}
	id := rt.newID()
	rt.place(id, rt.record(key, rv), rv.boxes)
	rt.keys.fill(i, id, tag)
	return id
}

// reserve makes room for n more rows: their metas and key set slots,
// so that adding them does not grow either.
func (rt *rowTable) reserve(n int) {
	if n <= 0 {
		return
	}
	if rt.keys.used == 0 {
		rt.keys.reserve(n)
	}
	n -= len(rt.freed) - rt.freeHead
	if n <= 0 {
		return
	}
	if len(rt.meta) == 0 {
		rt.meta = append(rt.meta, metaChunk{})
	}
	// The chunk being filled, then the empty ones after it.
	for i := rt.cur; i < len(rt.meta) && n > 0; i++ {
		c := &rt.meta[i]
		c.grow(min(n, rowChunk-c.len()))
		n -= cap(c.recs) - c.len()
	}
	for ; n > 0; n -= rowChunk {
		var c metaChunk
		c.grow(min(n, rowChunk))
		rt.meta = append(rt.meta, c)
	}
}

// putVals is put for the values of a layout row.
func (rt *rowTable) putVals(key string, vals []any) rowID {
	if id := rt.lookup(key); id != 0 {
		rt.setVals(id, vals)
		return id
	}
	return rt.insert(key, vals)
}

// keyed reports whether id is the row of its key in the key set.
func (rt *rowTable) keyed(id rowID) bool { return rt.lookup(rt.key(id)) == id }

// unkey takes row id out of the key set (when it is there): a lookup of
// its key no longer finds it, and whoever holds it still reads it.
func (rt *rowTable) unkey(id rowID) {
	if k := rt.key(id); rt.keys.get(rt, k) == id {
		rt.keys.remove(rt, k)
	}
}

// freeID frees id, a row out of the key set that nothing holds: reused
// after the core call (recycle).
func (rt *rowTable) freeID(id rowID) {
	h := rt.holdAt(id)
	if *h != 0 {
		panic("engine: a held row, or one freed before, was freed")
	}
	*h = freedHolder
	if len(rt.boxes) > 0 {
		delete(rt.boxes, id)
	}
	rt.dying = append(rt.dying, id)
}

// drop takes row id out of the key set and frees it when nothing holds
// it (a row held still, by a view re-reading its result, is freed when
// its last holder lets it go: state.release).
func (rt *rowTable) drop(id rowID) {
	rt.unkey(id)
	if *rt.holdAt(id) == 0 {
		rt.freeID(id)
	}
}

// recycle makes the ids freed during a core call reusable; stale ids met
// from then on read as freed (rec panics) until reused. A stage never
// reuses its ids.
func (rt *rowTable) recycle() {
	if rt.stage {
		return
	}
	if rt.freeHead > len(rt.freed)/2 {
		// The reused ids' room is taken back.
		n := copy(rt.freed, rt.freed[rt.freeHead:])
		rt.freed, rt.freeHead = rt.freed[:n], 0
	}
	for _, id := range rt.dying {
		*rt.recAt(id), *rt.holdAt(id) = nil, 0
		rt.freed = append(rt.freed, id)
	}
	clear(rt.dying)
	rt.dying = rt.dying[:0]
}

// all ranges over the ids of the rows in the key set (in no particular
// order); rows may be removed from the key set during the range.
func (rt *rowTable) all() iter.Seq[rowID] { return rt.keys.all() }

// inOrder ranges over a stage's ids in the order its rows came in.
func (rt *rowTable) inOrder() iter.Seq[rowID] {
	return func(yield func(rowID) bool) {
		for c, chunk := range rt.meta {
			for i := range chunk.recs {
				if chunk.recs[i] == nil || chunk.hold[i] == freedHolder {
					continue
				}
				if !yield(rowID(c<<rowChunkBits + i + 1)) {
					return
				}
			}
		}
	}
}

// holder returns the holder id of one view source holding id (0: none;
// freedHolder for a freed id).
func (rt *rowTable) holder(id rowID) uint32 {
	h := *rt.holdAt(id)
	if h&holdList != 0 && h != freedHolder {
		return rt.lists.get(h &^ holdList)[0]
	}
	return h
}

// addHolder records that vs holds row id.
func (rt *rowTable) addHolder(id rowID, vs *viewSource) {
	h := rt.holdAt(id)
	old := *h
	if old == 0 {
		*h = vs.hid
		return
	}
	l := &rt.lists
	buf := l.buf[:0]
	if old&holdList == 0 {
		buf = append(buf, old)
	} else {
		buf = append(buf, l.get(old&^holdList)...)
	}
	buf = append(buf, vs.hid)
	*h = holdList | l.intern(buf)
	if old&holdList != 0 {
		l.unref(old &^ holdList)
	}
	l.buf = buf
}

// dropHolder records that vs no longer holds row id (once: a view source
// that held it twice, an old and a new result, holds it still). The last
// holder takes the place of the one dropped (the last of the others when
// it was the first).
func (rt *rowTable) dropHolder(id rowID, vs *viewSource) {
	h := rt.holdAt(id)
	old := *h
	if old&holdList == 0 {
		if old == vs.hid {
			*h = 0
		}
		return
	}
	l := &rt.lists
	ids := l.get(old &^ holdList)
	i := len(ids) - 1
	if ids[0] == vs.hid {
		i = 0
	} else {
		for i > 0 && ids[i] != vs.hid {
			i--
		}
		if i == 0 {
			return
		}
	}
	buf := append(l.buf[:0], ids...)
	last := len(buf) - 1
	buf[i] = buf[last]
	buf = buf[:last]
	if len(buf) == 1 {
		*h = buf[0]
	} else {
		*h = holdList | l.intern(buf)
	}
	l.unref(old &^ holdList)
	l.buf = buf
}

// holders returns the holder ids of the view sources holding row id:
// first (0: none) and the others (not to be written: a holder list is
// shared).
func (rt *rowTable) holders(id rowID) (first uint32, more []uint32) {
	h := *rt.holdAt(id)
	if h&holdList == 0 || h == freedHolder {
		return h, nil
	}
	ids := rt.lists.get(h &^ holdList)
	return ids[0], ids[1:]
}

// holderLists keeps the holder lists of a rowTable's rows held by more
// than one view source, each list once, with the number of rows naming
// it: ten views holding the same rows cost a row 4 bytes (its holder
// word), not 4 a view. A list is never written once made: a row given or
// rid of a holder names another list (intern), and a list no row names
// is forgotten and its index reused (unref).
type holderLists struct {
	lists []string          // list i: its holder ids, 4 bytes each ("": a free index)
	refs  []int32           // rows naming list i
	index map[string]uint32 // list by its bytes
	free  []uint32          // free indexes
	buf   []uint32          // scratch for the list being made
}

// get returns list i's holder ids (aliasing the list: not to be written).
func (l *holderLists) get(i uint32) []uint32 {
	s := l.lists[i]
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.StringData(s))), len(s)/4)
}

// intern returns the index of the list of ids (two or more), made when
// no row names it yet, counting one more row naming it.
func (l *holderLists) intern(ids []uint32) uint32 {
	b := unsafe.String((*byte)(unsafe.Pointer(&ids[0])), 4*len(ids))
	if i, ok := l.index[b]; ok {
		l.refs[i]++
		return i
	}
	s := string([]byte(b)) // a copy: b aliases the scratch
	var i uint32
	if n := len(l.free); n > 0 {
		i = l.free[n-1]
		l.free = l.free[:n-1]
		l.lists[i], l.refs[i] = s, 1
	} else {
		i = uint32(len(l.lists))
		if i >= holdList-1 {
			panic("engine: a table's rows have more than 2^31 holder lists")
		}
		l.lists, l.refs = append(l.lists, s), append(l.refs, 1)
	}
	if l.index == nil {
		l.index = make(map[string]uint32)
	}
	l.index[s] = i
	return i
}

// unref counts one row fewer naming list i, forgetting it when none is
// left.
func (l *holderLists) unref(i uint32) {
	if l.refs[i]--; l.refs[i] > 0 {
		return
	}
	delete(l.index, l.lists[i])
	l.lists[i] = ""
	l.free = append(l.free, i)
}

// keySet is a rowTable's ids by their rows' keys: an open-addressing
// table with linear probing of 4-byte slots, each an id with a tag from
// the key's hash in the bits above it (0: empty, 1: deleted), the key
// read from the row's record, so a row costs 4 bytes over the table's
// load (7/8 at most). The tag takes the bits the ids do not need: 8 while
// the ids are below 2^24 (keyIDBits), fewer past that (the set is rebuilt
// with one bit more for the ids when an id reaches its limit: room, put),
// and at least one, its high bit, which marks a live slot. Deletion
// leaves a tombstone, so ids never move while the set is ranged over and
// deleting during a range is safe; adding during a range is not (all
// panics when the set grew). The zero value is an empty set.
type keySet struct {
	slots []uint32
	shift uint8 // the bits for the id (keyIDBits when zero): slot = tag<<shift | id
	n     int   // live ids
	used  int   // live ids and tombstones
}

// keyIDBits is the bits a keySet gives its ids at first (a variable so
// that a test can start it low and watch the set widen).
var keyIDBits uint8 = 24

// keyDeleted is a tombstone's slot (a live slot's tag is never 0).
const keyDeleted = 1

// bits returns the bits the set gives its ids.
func (s *keySet) bits() uint8 {
	if s.shift == 0 {
		return keyIDBits
	}
	return s.shift
}

// tag returns the tag of hash h, shifted into place.
func (s *keySet) tag(h uint64) uint32 {
	sh := s.bits()
	return (uint32(h>>(32+sh)) | 1<<(31-sh)) << sh
}

// idAt returns the id in slot i (live).
func (s *keySet) idAt(i uint64) rowID { return rowID(s.slots[i] & (1<<s.bits() - 1)) }

// hashKey64 returns the key's hash (hashKey's, without the tag).
func hashKey64(key string) uint64 { return maphash.String(setSeed, key) }

// get returns the id of key, or 0.
func (s *keySet) get(rt *rowTable, key string) rowID {
	if s.n == 0 {
		return 0
	}
	h := hashKey64(key)
	sh := s.bits()
	tag, idMask := s.tag(h), uint32(1)<<sh-1
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		v := s.slots[i]
		if v == 0 {
			return 0
		}
		if v&^idMask == tag {
			if id := rowID(v & idMask); recordKey(*rt.recAt(id)) == key {
				return id
			}
		}
	}
}

// slot returns the slot of key: where its id is (found), else where an
// id of key goes (the first tombstone or empty slot probed), with the
// key's tag. The set must have room for one more id (room).
func (s *keySet) slot(rt *rowTable, key string) (i uint64, tag uint32, found bool) {
	h := hashKey64(key)
	tag, idMask := s.tag(h), uint32(1)<<s.bits()-1
	mask := uint64(len(s.slots) - 1)
	free := ^uint64(0)
	for i = h & mask; ; i = (i + 1) & mask {
		switch v := s.slots[i]; {
		case v == 0:
			if free != ^uint64(0) {
				return free, tag, false
			}
			return i, tag, false
		case v == keyDeleted:
			if free == ^uint64(0) {
				free = i
			}
		case v&^idMask == tag:
			if recordKey(*rt.recAt(rowID(v & idMask))) == key {
				return i, tag, true
			}
		}
	}
}

// room makes room for one more id, the next new id of rt included.
func (s *keySet) room(rt *rowTable) {
	if next := rt.nextID(); uint64(next) >= 1<<s.bits() {
		s.widen(rt, next)
	}
	if (s.used+1)*8 > len(s.slots)*7 {
		s.grow(rt)
	}
}

// fill puts id in slot i (from slot, not found) with tag.
func (s *keySet) fill(i uint64, id rowID, tag uint32) {
	if s.slots[i] == 0 {
		s.used++
	}
	s.slots[i] = tag | uint32(id)
	s.n++
}

// put adds id under its row's key, which must not be in the set.
func (s *keySet) put(rt *rowTable, id rowID) {
	if uint64(id) >= 1<<s.bits() {
		s.widen(rt, id)
	}
	if (s.used+1)*8 > len(s.slots)*7 {
		s.grow(rt)
	}
	h := hashKey64(rt.key(id))
	tag := s.tag(h)
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		if v := s.slots[i]; v <= keyDeleted {
			if v == 0 {
				s.used++
			}
			s.slots[i] = tag | uint32(id)
			s.n++
			return
		}
	}
}

// remove takes key out of the set and returns its id (0 when absent).
func (s *keySet) remove(rt *rowTable, key string) rowID {
	if s.n == 0 {
		return 0
	}
	h := hashKey64(key)
	tag, idMask := s.tag(h), uint32(1)<<s.bits()-1
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		v := s.slots[i]
		if v == 0 {
			return 0
		}
		if v&^idMask == tag {
			if id := rowID(v & idMask); recordKey(*rt.recAt(id)) == key {
				s.slots[i] = keyDeleted
				s.n--
				if s.n == 0 {
					// Nothing left to probe past: every slot is free again.
					clear(s.slots)
					s.used = 0
				}
				return id
			}
		}
	}
}

// reserve sizes an empty set for n ids, so that adding them does not
// rehash.
func (s *keySet) reserve(n int) {
	if s.used > 0 || n == 0 {
		return
	}
	s.slots = make([]uint32, openSize(0, 0, n, 4))
}

// grow makes room for one more id: the same size without tombstones when
// they are at least a quarter of the slots, else twice the size.
func (s *keySet) grow(rt *rowTable) {
	s.rehash(rt, openSize(len(s.slots), s.used, s.n, 4), s.bits())
}

// widen gives the ids enough bits for id, taking them from the tags: the
// set is rebuilt at its size.
func (s *keySet) widen(rt *rowTable, id rowID) {
	sh := s.bits()
	for uint64(id) >= 1<<sh {
		sh++
	}
	if sh > 31 {
		panic("engine: a table's rows ran out of row ids (2^31)")
	}
	s.rehash(rt, len(s.slots), sh)
}

// rehash rebuilds the set with size slots and shift bits for the ids.
func (s *keySet) rehash(rt *rowTable, size int, shift uint8) {
	old, oldMask := s.slots, uint32(1)<<s.bits()-1
	s.slots, s.used, s.shift = make([]uint32, size), 0, shift
	mask := uint64(size - 1)
	for _, v := range old {
		if v <= keyDeleted {
			continue
		}
		id := rowID(v & oldMask)
		h := hashKey64(rt.key(id))
		i := h & mask
		for s.slots[i] != 0 {
			i = (i + 1) & mask
		}
		s.slots[i] = s.tag(h) | uint32(id)
		s.used++
	}
}

// all ranges over the ids in slot order. Ids may be removed during the
// range; adding one may grow the set, which panics.
func (s *keySet) all() iter.Seq[rowID] {
	return func(yield func(rowID) bool) {
		slots := s.slots
		idMask := uint32(1)<<s.bits() - 1
		for i := range slots {
			if &s.slots[0] != &slots[0] {
				panic("engine: keySet grew while ranged over")
			}
			v := slots[i]
			if v <= keyDeleted {
				continue
			}
			if !yield(rowID(v & idMask)) {
				return
			}
		}
	}
}

// idSet is a set of row ids: the rows an unordered single-table view
// holds (resultSet.members), by the ids of its table's rowTable; a
// view's key is looked up in its table (rowTable.lookup) and its id
// here. While the set holds few of the ids up to its highest it is open
// addressing with linear probing by the id's own hash, 4 bytes a slot (0
// empty, idDeleted a tombstone); once it holds at least one in
// bitmapDensity of them it is a bitmap over the ids (a view holding most
// of its table pays an eighth of a byte a row, not five), and it goes
// back when it holds fewer than a quarter of that (on add, or fit: a
// view's set is fitted when it settles). Removing during a range is safe
// (a removed id not reached yet is not produced), adding is not (all
// panics when the set grew or changed form). The zero value is an empty
// set.
type idSet struct {
	slots []rowID  // open addressing (nil in bitmap form)
	bits  []uint64 // bitmap form: bit id%64 of bits[id/64]
	n     int      // ids
	used  int      // open addressing: ids and tombstones
	hi    rowID    // open addressing: the highest id added
}

// idDeleted marks a slot whose id was removed.
const idDeleted = ^rowID(0)

// bitmapDensity: a set takes the bitmap form once it holds at least one
// in bitmapDensity of the ids up to its highest (the bitmap then takes at
// most 4 bytes an id, open addressing 4.6 to 9).
const bitmapDensity = 32

// idHash spreads an id over the slots (Fibonacci hashing: the high bits
// of the product).
func idHash(id rowID, mask uint64) uint64 {
	return (uint64(id) * 0x9E3779B97F4A7C15 >> 32) & mask
}

// len returns the number of ids.
func (s *idSet) len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// has reports whether id is in the set.
func (s *idSet) has(id rowID) bool {
	if s == nil || s.n == 0 || id == 0 {
		return false
	}
	if s.bits != nil {
		w := int(id / 64)
		return w < len(s.bits) && s.bits[w]&(1<<(id%64)) != 0
	}
	mask := uint64(len(s.slots) - 1)
	for i := idHash(id, mask); ; i = (i + 1) & mask {
		switch s.slots[i] {
		case 0:
			return false
		case id:
			return true
		}
	}
}

// add adds id; it reports false when id was in the set already.
func (s *idSet) add(id rowID) bool {
	if s.bits != nil && s.sparse() {
		s.toSlots()
	}
	if s.bits != nil {
		w := int(id / 64)
		if w >= len(s.bits) {
			s.bits = append(s.bits, make([]uint64, w+1-len(s.bits))...)
		}
		if s.bits[w]&(1<<(id%64)) != 0 {
			return false
		}
		s.bits[w] |= 1 << (id % 64)
		s.n++
		return true
	}
	if s.has(id) {
		return false
	}
	if (s.used+1)*8 > len(s.slots)*7 {
		if s.n >= 64 && (s.n+1)*bitmapDensity >= int(max(s.hi, id)) {
			s.toBits()
			return s.add(id)
		}
		s.grow()
	}
	s.hi = max(s.hi, id)
	mask := uint64(len(s.slots) - 1)
	for i := idHash(id, mask); ; i = (i + 1) & mask {
		if t := s.slots[i]; t == 0 || t == idDeleted {
			if t == 0 {
				s.used++
			}
			s.slots[i] = id
			s.n++
			return true
		}
	}
}

// remove takes id out of the set; it reports whether id was there.
func (s *idSet) remove(id rowID) bool {
	if s == nil || s.n == 0 || id == 0 {
		return false
	}
	if s.bits != nil {
		w := int(id / 64)
		if w >= len(s.bits) || s.bits[w]&(1<<(id%64)) == 0 {
			return false
		}
		s.bits[w] &^= 1 << (id % 64)
		s.n--
		return true
	}
	mask := uint64(len(s.slots) - 1)
	for i := idHash(id, mask); ; i = (i + 1) & mask {
		switch s.slots[i] {
		case 0:
			return false
		case id:
			s.slots[i] = idDeleted
			s.n--
			if s.n == 0 {
				clear(s.slots)
				s.used = 0
			}
			return true
		}
	}
}

// toBits turns an open-addressing set into a bitmap.
func (s *idSet) toBits() {
	bits := make([]uint64, int(s.hi)/64+1)
	for _, id := range s.slots {
		if id != 0 && id != idDeleted {
			bits[id/64] |= 1 << (id % 64)
		}
	}
	s.slots, s.bits, s.used, s.hi = nil, bits, 0, 0
}

// toSlots turns a bitmap into an open-addressing set.
func (s *idSet) toSlots() {
	bits, n := s.bits, s.n
	*s = idSet{}
	s.reserve(n)
	for w, word := range bits {
		for word != 0 {
			b := bits64TrailingZeros(word)
			word &^= 1 << b
			s.add(rowID(w*64 + b))
		}
	}
}

// fit takes the form the set's density calls for: the bitmap once a set
// reserved for its ids was filled without growing (add checks when it
// grows), open addressing once a bitmap lost most of its ids (remove does
// not change the form, so that removing during a range is safe).
func (s *idSet) fit() {
	switch {
	case s == nil:
	case s.bits == nil && s.n >= 64 && s.n*bitmapDensity >= int(s.hi):
		s.toBits()
	case s.bits != nil && s.sparse():
		s.toSlots()
	}
}

// sparse reports whether a bitmap holds fewer than a quarter of the ids
// the bitmap form is for.
func (s *idSet) sparse() bool { return s.n*bitmapDensity*4 < len(s.bits)*64 }

// reserve sizes an empty set for n ids.
func (s *idSet) reserve(n int) {
	if s.used > 0 || s.bits != nil || n == 0 {
		return
	}
	s.slots = make([]rowID, openSize(0, 0, n, 4))
}

// grow makes room for one more id, as keySet.grow.
func (s *idSet) grow() {
	old, size := s.slots, openSize(len(s.slots), s.used, s.n, 4)
	s.slots, s.used = make([]rowID, size), 0
	mask := uint64(size - 1)
	for _, id := range old {
		if id == 0 || id == idDeleted {
			continue
		}
		i := idHash(id, mask)
		for s.slots[i] != 0 {
			i = (i + 1) & mask
		}
		s.slots[i] = id
		s.used++
	}
}

// all ranges over the ids: in slot order, or in id order for a bitmap.
func (s *idSet) all() iter.Seq[rowID] {
	return func(yield func(rowID) bool) {
		if s == nil {
			return
		}
		if bits := s.bits; bits != nil {
			for w := range bits {
				for word := bits[w]; word != 0; {
					if len(s.bits) == 0 || &s.bits[0] != &bits[0] {
						panic("engine: idSet grew or changed form while ranged over")
					}
					b := bits64TrailingZeros(word)
					word &^= 1 << b
					if bits[w]&(1<<b) == 0 {
						continue // removed during the range
					}
					if !yield(rowID(w*64 + b)) {
						return
					}
				}
			}
			return
		}
		slots := s.slots
		for i := range slots {
			if len(s.slots) == 0 || &s.slots[0] != &slots[0] {
				panic("engine: idSet grew or changed form while ranged over")
			}
			if id := slots[i]; id != 0 && id != idDeleted {
				if !yield(id) {
					return
				}
			}
		}
	}
}

// ids returns the ids in a slice (in no particular order).
func (s *idSet) ids() []rowID {
	out := make([]rowID, 0, s.len())
	for id := range s.all() {
		out = append(out, id)
	}
	return out
}

// bits64TrailingZeros is bits.TrailingZeros64 as an int.
func bits64TrailingZeros(x uint64) int { return bits.TrailingZeros64(x) }
