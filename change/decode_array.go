package change

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// maxArrayDims is PostgreSQL's MAXDIM.
const maxArrayDims = 6

// rawElem is one element of an array's text form before decoding.
type rawElem struct {
	text  string
	null  bool
	owned bool // text is a fresh copy, not a substring of the input
}

type arrayParser struct {
	s     string
	i     int
	delim byte
	ndim  int                 // dimensions, fixed when the first element is reached
	lens  [maxArrayDims]int32 // length of each dimension, -1 until known
	elems []rawElem
	buf   []byte
}

// parseArray parses an array's text form ("{1,2}", "{{a,NULL},{\"b c\",d}}",
// "[0:1]={1,2}", "{}") and decodes its elements as t's element type.
func parseArray(s string, owned bool, t Type, r TypeResolver, depth int) (Array, error) {
	delim := t.Delim
	if delim == 0 {
		delim = ','
	}
	p := arrayParser{s: s, delim: delim}
	for k := range p.lens {
		p.lens[k] = -1
	}
	p.elems = make([]rawElem, 0, strings.Count(s, string(delim))+1)
	var bounds [][2]int64
	p.space()
	for p.peek() == '[' {
		if len(bounds) == maxArrayDims {
			return Array{}, fmt.Errorf("parse array %q: more than %d dimensions", clip(s), maxArrayDims)
		}
		lo, hi, err := p.bound()
		if err != nil {
			return Array{}, err
		}
		bounds = append(bounds, [2]int64{lo, hi})
		p.space()
	}
	if len(bounds) > 0 {
		if p.peek() != '=' {
			return Array{}, fmt.Errorf("parse array %q: want '=' after the dimensions", clip(s))
		}
		p.i++
		p.space()
	}
	if err := p.level(0); err != nil {
		return Array{}, err
	}
	p.space()
	if p.i != len(p.s) {
		return Array{}, fmt.Errorf("parse array %q: junk after the closing brace", clip(s))
	}
	var a Array
	if len(p.elems) == 0 {
		if len(bounds) > 0 {
			return Array{}, fmt.Errorf("parse array %q: dimensions given for an empty array", clip(s))
		}
		return a, nil
	}
	if len(bounds) > 0 && len(bounds) != p.ndim {
		return Array{}, fmt.Errorf("parse array %q: %d dimensions given, %d found", clip(s), len(bounds), p.ndim)
	}
	a.Dims = make([]ArrayDim, p.ndim)
	for k := 0; k < p.ndim; k++ {
		a.Dims[k] = ArrayDim{Len: p.lens[k], Lower: 1}
		if len(bounds) > 0 {
			lo, hi := bounds[k][0], bounds[k][1]
			if hi-lo+1 != int64(p.lens[k]) {
				return Array{}, fmt.Errorf("parse array %q: dimension %d is [%d:%d] but holds %d elements", clip(s), k+1, lo, hi, p.lens[k])
			}
			a.Dims[k].Lower = int32(lo)
		}
	}
	et := lookupType(t.Elem, r)
	a.Elems = make([]any, len(p.elems))
	for k, e := range p.elems {
		if e.null {
			continue
		}
		v, err := decodeText(et, e.text, owned || e.owned, r, depth+1)
		if err != nil {
			return Array{}, fmt.Errorf("element %d: %w", k+1, err)
		}
		a.Elems[k] = v
	}
	return a, nil
}

func (p *arrayParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *arrayParser) space() {
	for p.i < len(p.s) && isSpace(p.s[p.i]) {
		p.i++
	}
}

func (p *arrayParser) errorf(format string, args ...any) error {
	return fmt.Errorf("parse array %q: %s at byte %d", clip(p.s), fmt.Sprintf(format, args...), p.i)
}

// bound reads "[lo:hi]" or "[hi]" (lower bound 1).
func (p *arrayParser) bound() (lo, hi int64, err error) {
	p.i++ // '['
	num := func() (int64, bool) {
		start := p.i
		if p.peek() == '-' || p.peek() == '+' {
			p.i++
		}
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		v, err := strconv.ParseInt(p.s[start:p.i], 10, 32)
		return v, err == nil
	}
	p.space()
	a, ok := num()
	if !ok {
		return 0, 0, p.errorf("malformed dimension bound")
	}
	p.space()
	lo, hi = 1, a
	if p.peek() == ':' {
		p.i++
		p.space()
		b, ok := num()
		if !ok {
			return 0, 0, p.errorf("malformed dimension bound")
		}
		p.space()
		lo, hi = a, b
	}
	if p.peek() != ']' {
		return 0, 0, p.errorf("want ']'")
	}
	p.i++
	if hi < lo-1 || hi-lo+1 > math.MaxInt32 {
		return 0, 0, p.errorf("upper bound below lower bound")
	}
	return lo, hi, nil
}

// level reads one brace-enclosed level of the array.
func (p *arrayParser) level(lvl int) error {
	if lvl >= maxArrayDims {
		return p.errorf("more than %d dimensions", maxArrayDims)
	}
	if p.peek() != '{' {
		return p.errorf("want '{'")
	}
	p.i++
	p.space()
	if p.peek() == '}' {
		p.i++
		if lvl == 0 {
			return nil
		}
		return p.errorf("empty sub-array")
	}
	var n int32
	for {
		p.space()
		if p.peek() == '{' {
			if p.ndim != 0 && lvl+1 >= p.ndim {
				return p.errorf("sub-array where an element belongs")
			}
			if err := p.level(lvl + 1); err != nil {
				return err
			}
		} else {
			if p.ndim == 0 {
				p.ndim = lvl + 1
			} else if p.ndim != lvl+1 {
				return p.errorf("element where a sub-array belongs")
			}
			if err := p.element(); err != nil {
				return err
			}
		}
		n++
		p.space()
		switch c := p.peek(); {
		case c == p.delim:
			p.i++
			continue
		case c == '}':
			p.i++
		default:
			return p.errorf("want %q or '}'", p.delim)
		}
		break
	}
	if p.lens[lvl] == -1 {
		p.lens[lvl] = n
	} else if p.lens[lvl] != n {
		return p.errorf("sub-arrays of different lengths")
	}
	return nil
}

// element reads one element, quoted or not.
func (p *arrayParser) element() error {
	p.buf = p.buf[:0]
	if p.peek() == '"' {
		p.i++
		start := p.i
		escapes := false
		for {
			if p.i >= len(p.s) {
				return p.errorf("unterminated quoted element")
			}
			c := p.s[p.i]
			p.i++
			if c == '"' {
				break
			}
			if c == '\\' {
				if p.i >= len(p.s) {
					return p.errorf("unterminated quoted element")
				}
				c = p.s[p.i]
				p.i++
				escapes = true
			}
			p.buf = append(p.buf, c)
		}
		if !escapes {
			p.elems = append(p.elems, rawElem{text: p.s[start : p.i-1]})
		} else {
			p.elems = append(p.elems, rawElem{text: string(p.buf), owned: true})
		}
		return nil
	}
	start := p.i
	escaped := false
	keep := 0 // length of buf up to the last character that is not trailing space
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == p.delim || c == '}' {
			break
		}
		switch c {
		case '{', '"':
			return p.errorf("unexpected %q in an unquoted element", c)
		case '\\':
			if p.i+1 >= len(p.s) {
				return p.errorf("backslash at end of input")
			}
			p.i++
			p.buf = append(p.buf, p.s[p.i])
			keep = len(p.buf)
			escaped = true
			p.i++
			continue
		}
		p.buf = append(p.buf, c)
		if !isSpace(c) {
			keep = len(p.buf)
		}
		p.i++
	}
	if keep == 0 && !escaped {
		return p.errorf("empty unquoted element")
	}
	e := rawElem{owned: escaped}
	if escaped {
		e.text = string(p.buf[:keep])
	} else {
		e.text = p.s[start : start+keep] // no escapes: buf is a copy of the input from start
		e.null = strings.EqualFold(e.text, "NULL")
	}
	p.elems = append(p.elems, e)
	return nil
}

// String returns the array's text form, formatting each element by its Go
// type. Elements of float4 arrays print as float8 would; use AppendText
// with the array's type for those.
func (a Array) String() string {
	b, err := appendArray(nil, Type{Kind: KindArray}, a, nil)
	if err != nil {
		return fmt.Sprintf("%%!(array: %v)", err)
	}
	return string(b)
}

// appendArray appends the text form of a, as array_out prints it.
func appendArray(dst []byte, t Type, a Array, r TypeResolver) ([]byte, error) {
	if len(a.Dims) == 0 || len(a.Elems) == 0 {
		return append(dst, "{}"...), nil
	}
	total := 1
	custom := false
	for _, d := range a.Dims {
		total *= int(d.Len)
		if d.Lower != 1 {
			custom = true
		}
	}
	if total != len(a.Elems) {
		return dst, fmt.Errorf("format array: dimensions hold %d elements, have %d", total, len(a.Elems))
	}
	if custom {
		for _, d := range a.Dims {
			dst = append(dst, '[')
			dst = strconv.AppendInt(dst, int64(d.Lower), 10)
			dst = append(dst, ':')
			dst = strconv.AppendInt(dst, int64(d.Lower)+int64(d.Len)-1, 10)
			dst = append(dst, ']')
		}
		dst = append(dst, '=')
	}
	delim := t.Delim
	if delim == 0 {
		delim = ','
	}
	et := Type{Kind: KindOther}
	if t.Elem != 0 {
		et = lookupType(t.Elem, r)
	}
	var tmp []byte
	k := 0
	var err error
	var walk func(d int) error
	walk = func(d int) error {
		dst = append(dst, '{')
		for j := int32(0); j < a.Dims[d].Len; j++ {
			if j > 0 {
				dst = append(dst, delim)
			}
			if d+1 < len(a.Dims) {
				if err := walk(d + 1); err != nil {
					return err
				}
				continue
			}
			e := a.Elems[k]
			k++
			if e == nil {
				dst = append(dst, "NULL"...)
				continue
			}
			tmp, err = AppendText(tmp[:0], et, e, r)
			if err != nil {
				return err
			}
			dst = appendArrayElem(dst, tmp, delim)
		}
		dst = append(dst, '}')
		return nil
	}
	if err := walk(0); err != nil {
		return dst, fmt.Errorf("format array: %w", err)
	}
	return dst, nil
}

// appendArrayElem appends an element, quoted when array_out would quote it.
func appendArrayElem(dst, e []byte, delim byte) []byte {
	quote := len(e) == 0 || strings.EqualFold(string(e), "NULL")
	for _, c := range e {
		if c == '"' || c == '\\' || c == '{' || c == '}' || c == delim || isSpace(c) {
			quote = true
			break
		}
	}
	if !quote {
		return append(dst, e...)
	}
	dst = append(dst, '"')
	for _, c := range e {
		if c == '"' || c == '\\' {
			dst = append(dst, '\\')
		}
		dst = append(dst, c)
	}
	return append(dst, '"')
}
