package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"
	"unsafe"

	"github.com/freshetdb/freshet/change"
)

// fastKind names the decoder of a common built-in type's text form that
// the read path runs without looking the type up for every value.
type fastKind uint8

const (
	fastNone fastKind = iota // decoded by change.Decode
	fastInt
	fastText
	fastBool
	fastFloat8
	fastNumeric
	fastTimestamptz
	fastTimestamp
	fastDate
	fastUUID
)

// fastKindOf returns the fast decoder of a column of type t whose values
// arrive as oid, or fastNone. The decoded forms are change.Decode's
// (TestFastDecoders).
func fastKindOf(t change.Type, oid uint32) fastKind {
	if t.OID != 0 && (t.OID != oid || t.Kind != change.KindBase) {
		return fastNone
	}
	switch oid {
	case change.OIDInt2, change.OIDInt4, change.OIDInt8:
		return fastInt
	case change.OIDText, change.OIDVarchar, change.OIDBPChar, change.OIDName:
		return fastText
	case change.OIDBool:
		return fastBool
	case change.OIDFloat8:
		return fastFloat8
	case change.OIDNumeric:
		return fastNumeric
	case change.OIDTimestamptz:
		return fastTimestamptz
	case change.OIDTimestamp:
		return fastTimestamp
	case change.OIDDate:
		return fastDate
	case change.OIDUUID:
		return fastUUID
	}
	return fastNone
}

// binaryForm reports whether a column of kind k is read in binary form:
// the fixed-size types whose send form is their typed value (an integer,
// microseconds or days since 2000-01-01, the UUID's bytes), cheaper for
// the server to print and for the read to decode than their text, and
// decoded to exactly what change.Decode gives for either form
// (TestFastBinary, FuzzFastBinary). float8 stays text: its NaN payloads
// would come through in binary.
func (k fastKind) binaryForm() bool {
	switch k {
	case fastInt, fastBool, fastTimestamptz, fastTimestamp, fastDate, fastUUID:
		return true
	}
	return false
}

// decodeBinary decodes b, the binary send form of a value of kind k (one
// whose binaryForm is true) and type oid. b may be the connection's
// buffer: nothing returned refers to it.
func (sl *slabs) decodeBinary(k fastKind, oid uint32, b []byte) (any, error) {
	be := binary.BigEndian
	switch k {
	case fastInt:
		var n int64
		switch {
		case oid == change.OIDInt2 && len(b) == 2:
			n = int64(int16(be.Uint16(b)))
		case oid == change.OIDInt4 && len(b) == 4:
			n = int64(int32(be.Uint32(b)))
		case oid == change.OIDInt8 && len(b) == 8:
			n = int64(be.Uint64(b))
		default:
			return nil, fmt.Errorf("binary integer of type %d and %d bytes, want int2 of 2, int4 of 4 or int8 of 8", oid, len(b))
		}
		p := sl.ints.next()
		*p = n
		return box(int64Word, p), nil
	case fastBool:
		if len(b) != 1 {
			return nil, fmt.Errorf("binary bool of %d bytes, want 1", len(b))
		}
		return b[0] != 0, nil
	case fastTimestamptz, fastTimestamp:
		if len(b) != 8 {
			return nil, fmt.Errorf("binary timestamp of %d bytes, want 8", len(b))
		}
		var t change.Timestamp
		switch us := int64(be.Uint64(b)); us {
		case math.MaxInt64:
			t.Inf = 1
		case math.MinInt64:
			t.Inf = -1
		default:
			t.Micros = us
		}
		p := sl.times.next()
		*p = t
		return box(timestampWord, p), nil
	case fastDate:
		if len(b) != 4 {
			return nil, fmt.Errorf("binary date of %d bytes, want 4", len(b))
		}
		var d change.Date
		switch days := int32(be.Uint32(b)); days {
		case math.MaxInt32:
			d.Inf = 1
		case math.MinInt32:
			d.Inf = -1
		default:
			d.Days = days
		}
		p := sl.dates.next()
		*p = d
		return box(dateWord, p), nil
	case fastUUID:
		if len(b) != 16 {
			return nil, fmt.Errorf("binary uuid of %d bytes, want 16", len(b))
		}
		p := sl.uuids.next()
		*p = change.UUID(b)
		return box(uuidWord, p), nil
	}
	return nil, fmt.Errorf("no binary decoder for kind %d", k)
}

// eface is the layout of an empty interface: its type word and a pointer
// to its value (for every type boxed here, none of which is
// pointer-shaped).
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

func typeWord(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

// Type words of the values the slabs box.
var (
	int64Word     = typeWord(int64(0))
	float64Word   = typeWord(float64(0))
	stringWord    = typeWord("")
	numericWord   = typeWord(change.Numeric{})
	timestampWord = typeWord(change.Timestamp{})
	dateWord      = typeWord(change.Date{})
	uuidWord      = typeWord(change.UUID{})
)

// box returns the interface holding *p without copying it, as the runtime
// would after copying *p to a fresh allocation: the interface refers to
// the slab element itself. p must not be written again; nothing writes
// through an interface, so the value stays immutable as any boxed value.
func box[T any](typ unsafe.Pointer, p *T) any {
	e := eface{typ: typ, data: unsafe.Pointer(p)}
	return *(*any)(unsafe.Pointer(&e))
}

// slabMax bounds a slab's length; slabs start small and double, so a read
// of a few rows allocates little and a large read a few large slabs.
const (
	slabMin = 8
	slabMax = 1024
)

// slab hands out elements of T from arrays allocated a batch at a time.
type slab[T any] struct {
	free []T
	size int
}

func (s *slab[T]) next() *T {
	if len(s.free) == 0 {
		s.size = min(max(2*s.size, slabMin), slabMax)
		s.free = make([]T, s.size)
	}
	p := &s.free[0]
	s.free = s.free[1:]
	return p
}

// textMax bounds a text chunk; a value longer than a quarter of it gets
// its own allocation.
const (
	textMin = 256
	textMax = 32 << 10
)

// slabs decodes one read's values into batch-allocated storage: one
// allocation per batch of values of a type rather than one (or, for a
// numeric, four) per value, and strings sharing one backing chunk. A value
// is never written once decoded, so rows may share slabs; a slab stays
// alive while any value in it is held.
type slabs struct {
	ints   slab[int64]
	floats slab[float64]
	strs   slab[string]
	nums   slab[change.Numeric]
	bigs   slab[big.Int]
	words  []big.Word
	times  slab[change.Timestamp]
	dates  slab[change.Date]
	uuids  slab[change.UUID]

	text     []byte
	textSize int
	wordSize int
}

// decode decodes s, the text form of a value of kind k (not fastNone).
// s may be the connection's buffer: nothing returned refers to it.
func (sl *slabs) decode(k fastKind, s string) (any, error) {
	switch k {
	case fastInt:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, err
		}
		p := sl.ints.next()
		*p = n
		return box(int64Word, p), nil
	case fastText:
		p := sl.strs.next()
		*p = sl.clone(s)
		return box(stringWord, p), nil
	case fastBool:
		switch s {
		case "t":
			return true, nil
		case "f":
			return false, nil
		}
		return nil, fmt.Errorf("parse bool %q: want t or f", s)
	case fastFloat8:
		f, err := change.ParseFloat(s, 64)
		if err != nil {
			return nil, err
		}
		p := sl.floats.next()
		*p = f
		return box(float64Word, p), nil
	case fastNumeric:
		n, err := sl.numeric(s)
		if err != nil {
			return nil, err
		}
		p := sl.nums.next()
		*p = n
		return box(numericWord, p), nil
	case fastTimestamptz, fastTimestamp:
		var t change.Timestamp
		var err error
		if k == fastTimestamptz {
			t, err = change.ParseTimestamptz(s)
		} else {
			t, err = change.ParseTimestamp(s)
		}
		if err != nil {
			return nil, err
		}
		p := sl.times.next()
		*p = t
		return box(timestampWord, p), nil
	case fastDate:
		d, err := change.ParseDate(s)
		if err != nil {
			return nil, err
		}
		p := sl.dates.next()
		*p = d
		return box(dateWord, p), nil
	case fastUUID:
		u, err := change.ParseUUID(s)
		if err != nil {
			return nil, err
		}
		p := sl.uuids.next()
		*p = u
		return box(uuidWord, p), nil
	}
	return nil, fmt.Errorf("no fast decoder for kind %d", k)
}

// clone copies s into the current text chunk.
func (sl *slabs) clone(s string) string {
	if len(s) == 0 {
		return ""
	}
	if len(s) > textMax/4 {
		return strings.Clone(s)
	}
	if cap(sl.text)-len(sl.text) < len(s) {
		sl.textSize = min(max(2*sl.textSize, textMin), textMax)
		sl.text = make([]byte, 0, max(sl.textSize, len(s)))
	}
	start := len(sl.text)
	sl.text = append(sl.text, s...)
	return unsafe.String(&sl.text[start], len(s))
}

// numeric parses a numeric's text form. The form numeric_out prints for
// up to 18 digits ("-123.45", "0.00") is parsed here into a coefficient
// held in the slabs, exactly as change.ParseNumeric would parse it (a
// coefficient with leading zeros dropped, Exp = -Scale = -digits after the
// point); anything else goes to change.ParseNumeric.
func (sl *slabs) numeric(s string) (change.Numeric, error) {
	if bits.UintSize != 64 {
		return change.ParseNumeric(s)
	}
	t := s
	neg := false
	if t != "" && t[0] == '-' {
		neg = true
		t = t[1:]
	}
	var coef uint64
	nd, frac, dot := 0, 0, false
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c >= '0' && c <= '9':
			coef = coef*10 + uint64(c-'0')
			nd++
			if dot {
				frac++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return change.ParseNumeric(s)
		}
	}
	if nd == 0 || nd > 18 {
		return change.ParseNumeric(s)
	}
	z := sl.bigs.next()
	if coef != 0 {
		if len(sl.words) == 0 {
			sl.wordSize = min(max(2*sl.wordSize, slabMin), slabMax)
			sl.words = make([]big.Word, sl.wordSize)
		}
		w := sl.words[:1:1]
		sl.words = sl.words[1:]
		w[0] = big.Word(coef)
		z.SetBits(w)
		if neg {
			z.Neg(z)
		}
	}
	return change.Numeric{Coef: z, Exp: int32(-frac), Scale: int32(frac)}, nil
}
