package shape

import (
	"crypto/rand"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"strconv"
	"time"
)

// handle is a shape's handle, Electric's form "<random digits>-<creation
// time in Unix milliseconds>", held as its two numbers: a shape keeps
// its handle in two words rather than a string of about 27 bytes, and
// the text is made when a response or a file name needs it.
type handle struct{ rnd, ms uint64 }

// newHandle returns a handle never used before: 44 random bits and the
// creation time in milliseconds, like Electric's.
func newHandle() handle {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return handle{rnd: binary.LittleEndian.Uint64(b[:]) >> 20, ms: uint64(time.Now().UnixMilli())}
}

// String is the handle's text.
func (h handle) String() string { return string(h.appendTo(make([]byte, 0, 32))) }

func (h handle) appendTo(b []byte) []byte {
	b = strconv.AppendUint(b, h.rnd, 10)
	b = append(b, '-')
	return strconv.AppendUint(b, h.ms, 10)
}

// parseHandle reads a handle's text: two decimal numbers without
// leading zeros joined by '-', exactly as String writes them, so that a
// text names at most one handle (any other text names none).
func parseHandle(s string) (handle, bool) {
	num := func(t string) (uint64, bool) {
		if t == "" || (len(t) > 1 && t[0] == '0') {
			return 0, false
		}
		v, err := strconv.ParseUint(t, 10, 64)
		return v, err == nil
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '-' {
			rnd, ok1 := num(s[:i])
			ms, ok2 := num(s[i+1:])
			return handle{rnd, ms}, ok1 && ok2
		}
	}
	return handle{}, false
}

// hash spreads a handle over 64 bits (its random part is random
// already; the seed keeps the table's layout the process's own).
func (h handle) hash(seed uint64) uint64 {
	x := (h.rnd ^ seed) * 0x9e3779b97f4a7c15
	x ^= h.ms + (x >> 29)
	x *= 0xbf58476d1ce4e5b9
	return x ^ (x >> 32)
}

// shapeIndex is a hash set of shapes found by a key each shape carries
// (its first handle, or its definition): open addressing with linear
// probing over one pointer a slot, so the registry keeps neither a copy
// of the key nor a map's key and value slots per shape (two maps keyed
// by the handle's text and the definition's hash took about 90 B a
// shape; this takes 11-21 B an index). hash and same are the key's: its
// hash, and whether two shapes have the same key.
type shapeIndex struct {
	slots []*Shape // len a power of two, or 0; at most 3/4 full
	n     int
	hash  func(*Shape) uint64
	same  func(a, b *Shape) bool
}

// get returns the shape whose key has hash h and satisfies is.
func (x *shapeIndex) get(h uint64, is func(*Shape) bool) *Shape {
	if x.n == 0 {
		return nil
	}
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := x.slots[i]
		if s == nil {
			return nil
		}
		if is(s) {
			return s
		}
	}
}

// put adds s, replacing the shape with the same key if there is one.
func (x *shapeIndex) put(s *Shape) {
	if 4*(x.n+1) > 3*len(x.slots) {
		x.resize(max(16, 2*len(x.slots)))
	}
	mask := uint64(len(x.slots) - 1)
	for i := x.hash(s) & mask; ; i = (i + 1) & mask {
		cur := x.slots[i]
		if cur == nil {
			x.slots[i] = s
			x.n++
			return
		}
		if cur == s || x.same(cur, s) {
			x.slots[i] = s
			return
		}
	}
}

// del removes s (this shape, not another with its key) if it is there.
func (x *shapeIndex) del(s *Shape) {
	if x.n == 0 {
		return
	}
	mask := uint64(len(x.slots) - 1)
	i := x.hash(s) & mask
	for x.slots[i] != s {
		if x.slots[i] == nil {
			return
		}
		i = (i + 1) & mask
	}
	// Backward shift: each later shape of the probe run that may move
	// into the hole does, so that no get stops at a hole before it.
	for j := i; ; {
		x.slots[i] = nil
		for {
			j = (j + 1) & mask
			t := x.slots[j]
			if t == nil {
				x.n--
				if len(x.slots) > 16 && 8*x.n < len(x.slots) {
					x.resize(len(x.slots) / 2)
				}
				return
			}
			// t stays when its home slot k lies cyclically in (i, j].
			k := x.hash(t) & mask
			if (i <= j && i < k && k <= j) || (i > j && (i < k || k <= j)) {
				continue
			}
			x.slots[i] = t
			i = j
			break
		}
	}
}

// resize moves the shapes into a table of size slots.
func (x *shapeIndex) resize(size int) {
	old := x.slots
	x.slots = make([]*Shape, size)
	mask := uint64(size - 1)
	for _, s := range old {
		if s == nil {
			continue
		}
		i := x.hash(s) & mask
		for x.slots[i] != nil {
			i = (i + 1) & mask
		}
		x.slots[i] = s
	}
}

// all returns every shape in the index.
func (x *shapeIndex) all() []*Shape {
	out := make([]*Shape, 0, x.n)
	for _, s := range x.slots {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// registry finds shapes by handle and by definition. Most shapes have
// one handle, their first (which names their directory); the few a 409
// gave more are found by those in a map of their own.
type registry struct {
	seed    maphash.Seed
	hseed   uint64
	byName  shapeIndex        // by the first handle
	byDef   shapeIndex        // by definition
	rotated map[handle]*Shape // by every later handle; nil until a 409 makes one
}

func newRegistry() *registry {
	r := &registry{seed: maphash.MakeSeed()}
	var b [8]byte
	_, _ = rand.Read(b[:])
	r.hseed = binary.LittleEndian.Uint64(b[:])
	r.byName = shapeIndex{hash: func(s *Shape) uint64 { return s.name.hash(r.hseed) }, same: func(a, b *Shape) bool { return a.name == b.name }}
	r.byDef = shapeIndex{hash: func(s *Shape) uint64 { d := s.definition(); return d.hash(r.seed) }, same: func(a, b *Shape) bool { return a.definition().equal(b.definition()) }}
	return r
}

// lookup finds the shape with handle h.
func (r *registry) lookup(h string) *Shape {
	hd, ok := parseHandle(h)
	if !ok {
		return nil
	}
	if s := r.byName.get(hd.hash(r.hseed), func(s *Shape) bool { return s.name == hd }); s != nil {
		return s
	}
	return r.rotated[hd]
}

// get finds the shape of def.
func (r *registry) get(def *definition) *Shape {
	return r.byDef.get(def.hash(r.seed), func(s *Shape) bool { return s.definition().equal(*def) })
}

// put registers s by its handles and its definition; rotated are its
// handles after the first.
func (r *registry) put(s *Shape, rotated []handle) {
	r.byDef.put(s)
	r.byName.put(s)
	for _, h := range rotated {
		r.rotate(s, h)
	}
}

// rotate registers h as a later handle of s.
func (r *registry) rotate(s *Shape, h handle) {
	if r.rotated == nil {
		r.rotated = map[handle]*Shape{}
	}
	r.rotated[h] = s
}

// del removes s (not another shape with its definition or a handle).
func (r *registry) del(s *Shape, rotated []handle) {
	r.byDef.del(s)
	r.byName.del(s)
	for _, h := range rotated {
		if r.rotated[h] == s {
			delete(r.rotated, h)
		}
	}
	if len(r.rotated) == 0 {
		r.rotated = nil
	}
}

func (r *registry) len() int { return r.byDef.n }

// all returns every shape registered by definition.
func (r *registry) all() []*Shape { return r.byDef.all() }

// hash is the definition's hash, consistent with equal.
func (d *definition) hash(seed maphash.Seed) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	str := func(s string) {
		h.WriteString(s)
		h.WriteByte(0)
	}
	str(d.Schema)
	str(d.Table)
	str(d.Where)
	h.WriteByte(byte(len(d.Params)))
	for _, p := range d.Params {
		str(p)
	}
	h.WriteByte(byte(len(d.Columns)))
	for _, c := range d.Columns {
		str(c)
	}
	h.WriteByte(byte(d.Replica))
	h.WriteByte(byte(d.Log))
	return h.Sum64()
}

// equal reports whether d and o define the same shape.
func (d definition) equal(o definition) bool {
	return d.Schema == o.Schema && d.Table == o.Table && d.Where == o.Where && d.Replica == o.Replica && d.Log == o.Log &&
		slices.Equal(d.Params, o.Params) && slices.Equal(d.Columns, o.Columns)
}
