package engine

import (
	"hash/maphash"
	"iter"
)

// indexed is a record an index finds by a key it holds.
type indexed[K comparable] interface {
	comparable
	indexKey() K
}

// index is a set of records (pointers) by the key each holds
// (indexKey): the core's views by plan key, subscriptions by id, a
// table's view sources. Like entrySet it is an open-addressing table
// with linear probing, per slot the record's pointer and a tag byte
// (empty, deleted, or seven bits of the key's hash): about 10 bytes a
// record at its load, where a Go map's slot of the key and the pointer
// costs 30 (an 8-byte key) to 80 (a query.PlanKey's two strings) bytes,
// a cost every subscription of distinct binds pays once per map
// (TestMemoryPerSubscription). A record's key must not change while it
// is in the index. Deletion leaves a tombstone, so records never move
// while the index is ranged over and deleting during a range is safe;
// adding one during a range is not. The zero value is an empty index.
type index[K comparable, P indexed[K]] struct {
	slots []P
	tags  []uint8
	n     int // live records
	used  int // live records and tombstones
}

// hashOf returns the key's slot hash and tag.
func hashOf[K comparable](k K) (uint64, uint8) {
	h := maphash.Comparable(setSeed, k)
	return h, uint8(h>>57) | 0x80
}

// len returns the number of records.
func (x *index[K, P]) len() int { return x.n }

// get returns the record of key k (the zero P when there is none).
func (x *index[K, P]) get(k K) P {
	var none P
	if x.n == 0 {
		return none
	}
	h, tag := hashOf(k)
	if i := x.find(k, h, tag); i >= 0 {
		return x.slots[i]
	}
	return none
}

// find returns the slot of key k (of hash h and tag), or -1.
func (x *index[K, P]) find(k K, h uint64, tag uint8) int {
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch t := x.tags[i]; t {
		case tagEmpty:
			return -1
		case tag:
			if x.slots[i].indexKey() == k {
				return int(i)
			}
		}
	}
}

// put adds p under its key, replacing the record of the same key if any.
func (x *index[K, P]) put(p P) {
	k := p.indexKey()
	h, tag := hashOf(k)
	if x.n > 0 {
		if i := x.find(k, h, tag); i >= 0 {
			x.slots[i] = p
			return
		}
	}
	if (x.used+1)*8 > len(x.slots)*7 {
		x.grow()
	}
	x.place(p, h, tag)
}

// place puts p in the first free slot of its probe sequence.
func (x *index[K, P]) place(p P, h uint64, tag uint8) {
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		if t := x.tags[i]; t < 0x80 {
			if t == tagEmpty {
				x.used++
			}
			x.slots[i], x.tags[i] = p, tag
			x.n++
			return
		}
	}
}

// remove takes the record of key k out of the index and returns it (the
// zero P when there is none).
func (x *index[K, P]) remove(k K) P {
	var none P
	if x.n == 0 {
		return none
	}
	h, tag := hashOf(k)
	i := x.find(k, h, tag)
	if i < 0 {
		return none
	}
	p := x.slots[i]
	x.slots[i], x.tags[i] = none, tagDeleted
	x.n--
	if x.n == 0 {
		// Nothing left to probe past: every slot is free again. A large
		// table is let go: a burst (10,000 reads asked at once) would
		// keep its size for good.
		clear(x.tags)
		x.used = 0
		if len(x.slots) > maxKeptSlots {
			x.slots, x.tags = nil, nil
		}
	}
	return p
}

// openSize is the sizing rule of every open-addressing table in the core
// (index, entrySet, keySet, idSet): the slot count a table of size slots,
// used of them taken (live or tombstones) and live holding entries,
// rehashes to so that one more entry fits. An empty table starts at
// least slots; tombstones making up a quarter of the slots or more are
// dropped at the same size, else the size doubles; then it doubles until
// live+1 entries are at most 7/8 of it. openSize(0, 0, n, 4) sizes an
// empty table for n entries.
func openSize(size, used, live, least int) int {
	switch {
	case size == 0:
		size = least
	case used-live < size/4:
		size *= 2
	}
	for (live+1)*8 > size*7 {
		size *= 2
	}
	return size
}

// maxKeptSlots is the largest table an index keeps once empty.
const maxKeptSlots = 64

// grow makes room for one more record, dropping tombstones: the same
// size when they are at least a quarter of the slots, else twice the
// size (as entrySet.grow).
func (x *index[K, P]) grow() {
	size := openSize(len(x.slots), x.used, x.n, 8)
	slots, tags := x.slots, x.tags
	x.slots, x.tags = make([]P, size), make([]uint8, size)
	x.n, x.used = 0, 0
	for i, t := range tags {
		if t >= 0x80 {
			h, tag := hashOf(slots[i].indexKey())
			x.place(slots[i], h, tag)
		}
	}
}

// all ranges over the records, in slot order. Records may be removed
// during the range (one removed before it is reached is not produced);
// adding one may grow the index, which panics.
func (x *index[K, P]) all() iter.Seq[P] {
	return func(yield func(P) bool) {
		slots, tags := x.slots, x.tags
		for i := range tags {
			if tags[i] < 0x80 {
				continue
			}
			if !yield(slots[i]) {
				return
			}
			if len(x.tags) > 0 && &x.tags[0] != &tags[0] {
				panic("engine: index grew while ranged over")
			}
		}
	}
}
