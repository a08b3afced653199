package engine

import (
	"hash/maphash"
	"iter"
)

// entrySet is a set of entries by their keys (entry.key): an ordered or
// join view's result (an unordered single-table view's is an idSet of
// its rows' ids, a table's rows a keySet, core_rowtable.go). It is an
// open-addressing table with linear probing: per slot the entry's pointer
// and one tag byte (empty, deleted, or seven bits of the key's hash), so
// a held key costs about 9 bytes over the table's load (7/8 at most)
// where a Go map slot costs about 40 (its string key, its value, its
// load). Deletion leaves a tombstone, so entries never move while the
// set is ranged over and deleting during a range is safe, as with a Go
// map; adding a key during a range is not (all panics when the set grew).
// The zero value is an empty set.
type entrySet struct {
	slots []*entry
	tags  []uint8
	n     int // live entries
	used  int // live entries and tombstones
}

// The tags of a slot that holds no entry; a live slot's tag has its high
// bit set.
const (
	tagEmpty   uint8 = 0
	tagDeleted uint8 = 1
)

var setSeed = maphash.MakeSeed()

// hashKey returns the key's slot hash and tag.
func hashKey(key string) (uint64, uint8) {
	h := maphash.String(setSeed, key)
	return h, uint8(h>>57) | 0x80
}

// len returns the number of entries.
func (s *entrySet) len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// get returns the entry of key, or nil.
func (s *entrySet) get(key string) *entry {
	if s == nil || s.n == 0 {
		return nil
	}
	h, tag := hashKey(key)
	if i := s.index(key, h, tag); i >= 0 {
		return s.slots[i]
	}
	return nil
}

// index returns the slot of key (of hash h and tag), or -1.
func (s *entrySet) index(key string, h uint64, tag uint8) int {
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch t := s.tags[i]; t {
		case tagEmpty:
			return -1
		case tag:
			if s.slots[i].key == key {
				return int(i)
			}
		}
	}
}

// has reports whether key is in the set.
func (s *entrySet) has(key string) bool { return s.get(key) != nil }

// put adds e under e.key, replacing the entry of the same key if any (a
// replacement does not grow the set, so it may be done during a range).
func (s *entrySet) put(e *entry) {
	h, tag := hashKey(e.key)
	if s.n > 0 {
		if i := s.index(e.key, h, tag); i >= 0 {
			s.slots[i] = e
			return
		}
	}
	if (s.used+1)*8 > len(s.slots)*7 {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		if t := s.tags[i]; t < 0x80 {
			if t == tagEmpty {
				s.used++
			}
			s.slots[i], s.tags[i] = e, tag
			s.n++
			return
		}
	}
}

// remove takes key out of the set and returns its entry (nil when absent).
func (s *entrySet) remove(key string) *entry {
	if s == nil || s.n == 0 {
		return nil
	}
	h, tag := hashKey(key)
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch t := s.tags[i]; t {
		case tagEmpty:
			return nil
		case tag:
			if e := s.slots[i]; e.key == key {
				s.slots[i], s.tags[i] = nil, tagDeleted
				s.n--
				if s.n == 0 {
					// Nothing left to probe past: every slot is free again.
					clear(s.tags)
					s.used = 0
				}
				return e
			}
		}
	}
}

// reserve sizes an empty set for n entries, so that adding them does not
// rehash.
func (s *entrySet) reserve(n int) {
	if s.used > 0 || n == 0 {
		return
	}
	size := openSize(0, 0, n, 4)
	s.slots, s.tags = make([]*entry, size), make([]uint8, size)
}

// grow makes room for one more entry: the same size without tombstones
// when they are at least a quarter of the slots, else twice the size.
func (s *entrySet) grow() {
	size := openSize(len(s.slots), s.used, s.n, 4)
	old := s.slots
	oldTags := s.tags
	s.slots, s.tags, s.used = make([]*entry, size), make([]uint8, size), 0
	mask := uint64(size - 1)
	for j, e := range old {
		if oldTags[j] < 0x80 {
			continue
		}
		h, tag := hashKey(e.key)
		i := h & mask
		for s.tags[i] != tagEmpty {
			i = (i + 1) & mask
		}
		s.slots[i], s.tags[i] = e, tag
		s.used++
	}
}

// all ranges over the entries in slot order. Entries may be removed
// during the range (a removed one not reached yet is not produced);
// adding one may grow the set, which panics.
func (s *entrySet) all() iter.Seq[*entry] {
	return func(yield func(*entry) bool) {
		if s == nil {
			return
		}
		slots := s.slots
		for i := range slots {
			if &s.slots[0] != &slots[0] {
				panic("engine: entrySet grew while ranged over")
			}
			if s.tags[i] < 0x80 {
				continue
			}
			if !yield(slots[i]) {
				return
			}
		}
	}
}

// keys returns the keys of the entries (in no particular order).
func (s *entrySet) keys() []string {
	ks := make([]string, 0, s.len())
	for e := range s.all() {
		ks = append(ks, e.key)
	}
	return ks
}
