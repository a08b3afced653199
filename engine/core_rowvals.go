package engine

import (
	"encoding/binary"
	"math"

	"github.com/freshetdb/freshet/change"
)

// rowVals is a held row's values in the table's layout, encoded in one
// immutable string: per layout slot a tag byte and the value's payload.
// The common typed forms (integers, strings, floats, bools, bytea, json,
// numerics, dates, times, timestamps, intervals, uuids) are encoded
// exactly, so decoding gives back a value sameValue finds identical; any
// other form (arrays, ...) is kept boxed in boxes and the string holds its
// index. A row of n short columns costs one allocation of about its text
// size, and holds no pointers for the garbage collector to follow unless
// it has boxed values.
//
// Two encodings are equal exactly when sameValue holds for every slot
// (boxed values aside): a float's NaNs are encoded as one NaN, a numeric
// by its text.
type rowVals struct {
	enc   string
	boxes *[]any
}

// The tags of an encoded slot.
const (
	tagUnloaded byte = iota
	tagNull
	tagInt       // zigzag varint
	tagString    // uvarint length, bytes
	tagFalse     //
	tagTrue      //
	tagFloat     // 8 bytes, little-endian IEEE 754 bits
	tagBytes     // uvarint length, bytes
	tagJSON      // uvarint length, bytes
	tagNumeric   // uvarint length, PostgreSQL's text form
	tagTimestamp // infinity (1 byte), zigzag varint micros
	tagDate      // infinity (1 byte), zigzag varint days
	tagUUID      // 16 bytes
	tagInterval  // zigzag varints: months, days, micros
	tagTime      // zigzag varint micros
	tagTimeTZ    // zigzag varints: micros, offset
	tagBoxed     // uvarint index into boxes
)

// canonicalNaN is the one NaN encoded: sameValue holds for any two NaNs.
var canonicalNaN = math.Float64bits(math.NaN())

// appendVal appends the encoding of x to dst. A value with no compact form
// is appended to boxes and referenced by index.
func appendVal(dst []byte, x any, boxes []any) ([]byte, []any) {
	b, ok := appendCompact(dst, x)
	if ok {
		return b, boxes
	}
	boxes = append(boxes, x)
	return binary.AppendUvarint(append(dst, tagBoxed), uint64(len(boxes)-1)), boxes
}

// appendCompact appends the encoding of x, or reports that x has no
// compact form.
func appendCompact(dst []byte, x any) ([]byte, bool) {
	b := appendCompact1(dst, x)
	return b, b != nil
}

func appendCompact1(dst []byte, x any) []byte {
	switch v := x.(type) {
	case nil:
		return append(dst, tagNull)
	case unloaded:
		return append(dst, tagUnloaded)
	case int64:
		return binary.AppendVarint(append(dst, tagInt), v)
	case string:
		return append(binary.AppendUvarint(append(dst, tagString), uint64(len(v))), v...)
	case bool:
		if v {
			return append(dst, tagTrue)
		}
		return append(dst, tagFalse)
	case float64:
		bits := math.Float64bits(v)
		if v != v {
			bits = canonicalNaN
		}
		return binary.LittleEndian.AppendUint64(append(dst, tagFloat), bits)
	case []byte:
		return append(binary.AppendUvarint(append(dst, tagBytes), uint64(len(v))), v...)
	case change.JSON:
		return append(binary.AppendUvarint(append(dst, tagJSON), uint64(len(v))), v...)
	case change.Numeric:
		dst = append(dst, tagNumeric, 0)
		start := len(dst)
		dst = v.Append(dst)
		n := len(dst) - start
		if n < 0x80 {
			dst[start-1] = byte(n)
			return dst
		}
		// A long numeric: its length takes more than one byte.
		text := append([]byte(nil), dst[start:]...)
		dst = binary.AppendUvarint(dst[:start-1], uint64(n))
		return append(dst, text...)
	case change.Timestamp:
		return binary.AppendVarint(append(dst, tagTimestamp, byte(v.Inf)), v.Micros)
	case change.Date:
		return binary.AppendVarint(append(dst, tagDate, byte(v.Inf)), int64(v.Days))
	case change.UUID:
		return append(append(dst, tagUUID), v[:]...)
	case change.Interval:
		dst = binary.AppendVarint(append(dst, tagInterval), int64(v.Months))
		dst = binary.AppendVarint(dst, int64(v.Days))
		return binary.AppendVarint(dst, v.Micros)
	case change.TimeOfDay:
		return binary.AppendVarint(append(dst, tagTime), int64(v))
	case change.TimeTZ:
		return binary.AppendVarint(binary.AppendVarint(append(dst, tagTimeTZ), v.Micros), int64(v.Offset))
	}
	return nil
}

// encodeVals encodes a layout row, using buf as scratch.
func encodeVals(buf []byte, vals []any) (rowVals, []byte) {
	b := buf[:0]
	var boxes []any
	for _, x := range vals {
		b, boxes = appendVal(b, x, boxes)
	}
	rv := rowVals{enc: string(b)}
	if boxes != nil {
		rv.boxes = &boxes
	}
	return rv, b
}

// held reports whether rv describes a row (the zero rowVals does not).
func (rv rowVals) held() bool { return rv.enc != "" }

// slot returns the encoded slot starting at i of s: its tag, its payload
// and the index of the next slot.
func slotAt(s string, i int) (tag byte, payload string, next int) {
	tag = s[i]
	i++
	switch tag {
	case tagUnloaded, tagNull, tagFalse, tagTrue:
		return tag, "", i
	case tagInt, tagTime, tagBoxed:
		n := uvarintLen(s, i)
		return tag, s[i : i+n], i + n
	case tagString, tagBytes, tagJSON, tagNumeric:
		l, n := uvarint(s, i)
		return tag, s[i+n : i+n+int(l)], i + n + int(l)
	case tagFloat:
		return tag, s[i : i+8], i + 8
	case tagUUID:
		return tag, s[i : i+16], i + 16
	case tagTimestamp, tagDate:
		n := 1 + uvarintLen(s, i+1)
		return tag, s[i : i+n], i + n
	case tagInterval:
		n := uvarintLen(s, i)
		n += uvarintLen(s, i+n)
		n += uvarintLen(s, i+n)
		return tag, s[i : i+n], i + n
	case tagTimeTZ:
		n := uvarintLen(s, i)
		n += uvarintLen(s, i+n)
		return tag, s[i : i+n], i + n
	}
	panic("engine: corrupt row encoding")
}

func uvarintLen(s string, i int) int {
	n := 1
	for s[i+n-1] >= 0x80 {
		n++
	}
	return n
}

func uvarint(s string, i int) (uint64, int) {
	var x uint64
	var shift uint
	for n := 0; ; n++ {
		c := s[i+n]
		if c < 0x80 {
			return x | uint64(c)<<shift, n + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
}

func varint(s string, i int) (int64, int) {
	ux, n := uvarint(s, i)
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x, n
}

// find returns the start of slot p, or -1 when the row has fewer slots.
func (rv rowVals) find(slot int) int {
	i := 0
	for ; slot > 0 && i < len(rv.enc); slot-- {
		_, _, i = slotAt(rv.enc, i)
	}
	if i >= len(rv.enc) {
		return -1
	}
	return i
}

// val decodes the value in layout slot p (unloaded beyond the row's
// slots).
func (rv rowVals) val(slot int) any {
	i := rv.find(slot)
	if i < 0 {
		return unloaded{}
	}
	tag, payload, _ := slotAt(rv.enc, i)
	return rv.decode(tag, payload)
}

// values decodes every slot.
func (rv rowVals) values() []any {
	if rv.enc == "" {
		return nil
	}
	var vals []any
	for i := 0; i < len(rv.enc); {
		tag, payload, next := slotAt(rv.enc, i)
		vals = append(vals, rv.decode(tag, payload))
		i = next
	}
	return vals
}

// decode turns one slot back into its typed form.
func (rv rowVals) decode(tag byte, payload string) any {
	switch tag {
	case tagUnloaded:
		return unloaded{}
	case tagNull:
		return nil
	case tagInt:
		x, _ := varint(payload, 0)
		return x
	case tagString:
		return payload
	case tagFalse:
		return false
	case tagTrue:
		return true
	case tagFloat:
		var b [8]byte
		copy(b[:], payload)
		return math.Float64frombits(binary.LittleEndian.Uint64(b[:]))
	case tagBytes:
		return []byte(payload)
	case tagJSON:
		return change.JSON(payload)
	case tagNumeric:
		n, err := change.ParseNumeric(payload)
		if err != nil {
			panic("engine: corrupt numeric in row encoding: " + err.Error())
		}
		return n
	case tagTimestamp:
		x, _ := varint(payload, 1)
		return change.Timestamp{Micros: x, Inf: int8(payload[0])}
	case tagDate:
		x, _ := varint(payload, 1)
		return change.Date{Days: int32(x), Inf: int8(payload[0])}
	case tagUUID:
		var u change.UUID
		copy(u[:], payload)
		return u
	case tagInterval:
		m, n := varint(payload, 0)
		d, n2 := varint(payload, n)
		us, _ := varint(payload, n+n2)
		return change.Interval{Months: int32(m), Days: int32(d), Micros: us}
	case tagTime:
		x, _ := varint(payload, 0)
		return change.TimeOfDay(x)
	case tagTimeTZ:
		us, n := varint(payload, 0)
		off, _ := varint(payload, n)
		return change.TimeTZ{Micros: us, Offset: int32(off)}
	case tagBoxed:
		i, _ := uvarint(payload, 0)
		return (*rv.boxes)[i]
	}
	panic("engine: corrupt row encoding")
}

// sameAt reports whether slot p holds a value sameValue finds identical
// to x, comparing encodings (scratch is reused to encode x).
func (rv rowVals) sameAt(slot int, x any, scratch *[]byte) bool {
	i := rv.find(slot)
	if i < 0 {
		return isUnloaded(x)
	}
	tag, payload, next := slotAt(rv.enc, i)
	if tag == tagBoxed {
		return sameValue(rv.decode(tag, payload), x)
	}
	b, ok := appendCompact((*scratch)[:0], x)
	if !ok {
		return false // x has no compact form, the slot has one
	}
	*scratch = b
	return string(b) == rv.enc[i:next]
}

// pick decodes the slots col lists, in that order (a source's columns).
func (rv rowVals) pick(col []int) []any {
	out := make([]any, len(col))
	rv.pickInto(out, col, nil)
	return out
}

// pickInto is pick into out (len(col) long); integers, strings, numerics
// and timestamps are boxed in sl's slabs when sl is not nil (a numeric
// parsed by slabs.numeric, as a read parses its text).
func (rv rowVals) pickInto(out []any, col []int, sl *slabs) {
	hi := -1
	for _, slot := range col {
		hi = max(hi, slot)
	}
	// The start of each slot up to the highest asked for.
	var starts [16]int
	at := starts[:0]
	for i := 0; len(at) <= hi && i < len(rv.enc); {
		at = append(at, i)
		_, _, i = slotAt(rv.enc, i)
	}
	for j, slot := range col {
		if slot >= len(at) {
			out[j] = unloaded{}
			continue
		}
		tag, payload, _ := slotAt(rv.enc, at[slot])
		switch {
		case sl != nil && tag == tagInt:
			p := sl.ints.next()
			*p, _ = varint(payload, 0)
			out[j] = box(int64Word, p)
		case sl != nil && tag == tagTimestamp:
			p := sl.times.next()
			x, _ := varint(payload, 1)
			*p = change.Timestamp{Micros: x, Inf: int8(payload[0])}
			out[j] = box(timestampWord, p)
		case sl != nil && tag == tagString:
			p := sl.strs.next()
			*p = payload
			out[j] = box(stringWord, p)
		case sl != nil && tag == tagNumeric:
			x, err := sl.decode(fastNumeric, payload)
			if err != nil {
				panic("engine: corrupt numeric in row encoding: " + err.Error())
			}
			out[j] = x
		default:
			out[j] = rv.decode(tag, payload)
		}
	}
}
