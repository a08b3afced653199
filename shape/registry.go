package shape

import (
	"hash/maphash"
	"slices"
)

// defIndex finds shapes by definition. It is keyed by a 64-bit hash of
// the definition's canonical text rather than by the text itself (which
// is about a hundred bytes a shape); the shape found is checked against
// the definition, and a definition whose hash another already holds goes
// in a second map keyed by its text, so a collision costs a lookup, never
// a wrong shape.
type defIndex struct {
	seed maphash.Seed
	m    map[uint64]*Shape
	more map[string]*Shape
}

func newDefIndex() defIndex {
	return defIndex{seed: maphash.MakeSeed(), m: map[uint64]*Shape{}}
}

// get returns the shape registered for def, whose canonical text is id.
func (x *defIndex) get(def definition, id string) *Shape {
	if s := x.m[maphash.String(x.seed, id)]; s != nil && s.def.equal(def) {
		return s
	}
	return x.more[id]
}

// put registers s for its definition.
func (x *defIndex) put(s *Shape, id string) {
	h := maphash.String(x.seed, id)
	if cur := x.m[h]; cur == nil || cur.def.equal(s.def) {
		x.m[h] = s
		return
	}
	if x.more == nil {
		x.more = map[string]*Shape{}
	}
	x.more[id] = s
}

// del removes s if it is the shape registered for its definition.
func (x *defIndex) del(s *Shape, id string) {
	h := maphash.String(x.seed, id)
	if x.m[h] == s {
		delete(x.m, h)
	} else if x.more[id] == s {
		delete(x.more, id)
	}
}

func (x *defIndex) len() int { return len(x.m) + len(x.more) }

// all returns every registered shape.
func (x *defIndex) all() []*Shape {
	out := make([]*Shape, 0, x.len())
	for _, s := range x.m {
		out = append(out, s)
	}
	for _, s := range x.more {
		out = append(out, s)
	}
	return out
}

// equal reports whether d and o define the same shape.
func (d definition) equal(o definition) bool {
	return d.Schema == o.Schema && d.Table == o.Table && d.Where == o.Where && d.Replica == o.Replica && d.Log == o.Log &&
		slices.Equal(d.Params, o.Params) && slices.Equal(d.Columns, o.Columns)
}
