package query

import (
	"fmt"
	"strconv"
	"sync"
)

// Plans of one shape (the same query with other binds) have equal Output
// and Order slices and equal SourceShapes: a plan takes the one an earlier
// plan already holds instead of keeping its own copy. The tables are keyed by the slices'
// contents, so two plans share one only when it is equal element for
// element, whatever they were compiled from; a table forgets everything
// once it holds maxShapes entries, which bounds it under any mix of
// queries. Shared slices are never written to (a Plan is immutable).
var shapes struct {
	sync.Mutex
	outputs map[string][]Output
	orders  map[string][]OrderKey
	texts   map[string]string // PlanKey shapes (Normalized is their prefix)
	sources map[string]*SourceShape
	// templates by PlanKey shape, the newest first (shareTemplate)
	templates map[string][]*Template
}

const maxShapes = 4096

// shareOutput returns a slice equal to o, shared with other plans.
func shareOutput(o []Output) []Output {
	var k []byte
	for _, x := range o {
		if x.expr != nil {
			return o // expressions hold the binds' values: not shared
		}
		k = strconv.AppendQuote(k, x.Name)
		k = appendInts(k, int64(x.TypeOID), int64(x.TypeMod), int64(x.Source), int64(x.Column))
	}
	return share(&shapes.outputs, k, o)
}

// shareOrder returns a slice equal to o, shared with other plans.
func shareOrder(o []OrderKey) []OrderKey {
	var k []byte
	for _, x := range o {
		if x.expr != nil {
			return o
		}
		k = appendInts(k, int64(x.Source), int64(x.Column))
		k = strconv.AppendBool(k, x.Desc)
		k = strconv.AppendBool(k, x.NullsFirst)
	}
	return share(&shapes.orders, k, o)
}

func appendInts(k []byte, xs ...int64) []byte {
	for _, x := range xs {
		k = strconv.AppendInt(k, x, 10)
		k = append(k, '/')
	}
	return k
}

// share returns the slice table holds under key, or stores o there
// (capped, so that no append can reach past it) and returns it.
func share[T any](table *map[string][]T, key []byte, o []T) []T {
	if len(o) == 0 {
		return o
	}
	shapes.Lock()
	defer shapes.Unlock()
	if s, ok := (*table)[string(key)]; ok {
		return s
	}
	if *table == nil || len(*table) >= maxShapes {
		*table = make(map[string][]T)
	}
	o = o[:len(o):len(o)]
	(*table)[string(key)] = o
	return o
}

// shareText returns a string equal to t, shared with other plans: the
// shape of a PlanKey, which plans of one query with distinct binds hold
// alike. Keys compare by content, so sharing saves memory and changes
// nothing else.
func shareText(t string) string {
	shapes.Lock()
	defer shapes.Unlock()
	if s, ok := shapes.texts[t]; ok {
		return s
	}
	if shapes.texts == nil || len(shapes.texts) >= maxShapes {
		shapes.texts = make(map[string]string)
	}
	shapes.texts[t] = t
	return t
}

// shareSource returns a SourceShape equal to s, shared with other plans;
// order is s.Columns as indexes into s.Table.Columns. Shapes are keyed by
// the table's identity (the same *Table, which the table keeps alive) and
// every other field's value, so two plans share one only when they would
// hold equal ones.
func shareSource(s *SourceShape, order []int) *SourceShape {
	k := fmt.Appendf(nil, "%p/%q/", s.Table, s.Alias)
	k = strconv.AppendBool(k, s.Qualified)
	k = strconv.AppendBool(k, s.Nullable)
	k = strconv.AppendBool(k, s.Star)
	k = appendInts(k, int64(s.Join), int64(s.KeyN), int64(len(order)))
	for _, ci := range order {
		k = appendInts(k, int64(ci))
	}
	k = append(k, ';')
	for _, o := range s.On {
		k = appendInts(k, int64(o.Column), int64(o.Other), int64(o.OtherColumn))
	}
	shapes.Lock()
	defer shapes.Unlock()
	if x, ok := shapes.sources[string(k)]; ok {
		return x
	}
	if shapes.sources == nil || len(shapes.sources) >= maxShapes {
		shapes.sources = make(map[string]*SourceShape)
	}
	s.Columns = s.Columns[:len(s.Columns):len(s.Columns)]
	s.On = s.On[:len(s.On):len(s.On)]
	shapes.sources[string(k)] = s
	return s
}

// shareTemplate returns a template of shape already held when it is the
// same as t but for the plans' values (sameTemplate), else t, held first
// among the shape's templates for its later plans. A shape keeps up to
// maxTemplates: its plans can need more than one (a NULL bind folds its
// comparison; a plan compiled after a schema change holds the table's new
// shape), and holding only the first would leave every later plan of a
// shape whose first plan was such a one with a template of its own.
// Which of two equal templates is held changes nothing but memory.
func shareTemplate(shape string, t *Template) *Template {
	shapes.Lock()
	defer shapes.Unlock()
	held := shapes.templates[shape]
	for i, x := range held {
		if sameTemplate(x, t) {
			if i > 0 { // the newest first: a shape's plans tend to come alike
				copy(held[1:i+1], held[:i])
				held[0] = x
			}
			return x
		}
	}
	if shapes.templates == nil || len(shapes.templates) >= maxShapes {
		shapes.templates = make(map[string][]*Template)
	}
	if len(held) < maxTemplates {
		held = append(held, nil)
	}
	copy(held[1:], held)
	held[0] = t
	shapes.templates[shape] = held
	return t
}

// maxTemplates bounds the templates held for one shape.
const maxTemplates = 4
