package query

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"strings"

	"github.com/freshetdb/freshet/change"
)

// family groups types whose values compare with one another directly.
type family uint8

const (
	famNone      family = iota // not comparable here
	famUnknown                 // an untyped literal or bind: takes the other side's type
	famInt                     // int2, int4, int8, oid: int64
	famNumeric                 // numeric: change.Numeric
	famFloat                   // float4, float8: float64 (float4 widened exactly)
	famText                    // text, varchar, bpchar, name, "char": string
	famEnum                    // an enum: string label, equality only
	famBool                    // bool
	famUUID                    // uuid: change.UUID
	famBytea                   // bytea: []byte
	famDate                    // date: change.Date
	famTime                    // time: change.TimeOfDay
	famTimeTZ                  // timetz: change.TimeTZ
	famTimestamp               // timestamp, timestamptz: change.Timestamp
	famInterval                // interval: change.Interval
	famJSON                    // json, jsonb: not comparable
	famArray                   // arrays: only as the right side of ANY/ALL
	famFloat4                  // float4 as a common type (IN lists): float64 rounded to float32
)

var familyNames = [...]string{"unsupported", "unknown", "integer", "numeric", "floating-point", "text", "enum",
	"boolean", "uuid", "bytea", "date", "time", "timetz", "timestamp", "interval", "json", "array", "real"}

func (f family) String() string { return familyNames[f] }

// familyOf returns the family of a built-in type OID.
func familyOf(oid uint32) family {
	switch oid {
	case change.OIDInt2, change.OIDInt4, change.OIDInt8, change.OIDOID:
		return famInt
	case change.OIDNumeric:
		return famNumeric
	case change.OIDFloat4, change.OIDFloat8:
		return famFloat
	case change.OIDText, change.OIDVarchar, change.OIDBPChar, change.OIDName, change.OIDChar:
		return famText
	case change.OIDBool:
		return famBool
	case change.OIDUUID:
		return famUUID
	case change.OIDBytea:
		return famBytea
	case change.OIDDate:
		return famDate
	case change.OIDTime:
		return famTime
	case change.OIDTimetz:
		return famTimeTZ
	case change.OIDTimestamp, change.OIDTimestamptz:
		return famTimestamp
	case change.OIDInterval:
		return famInterval
	case change.OIDJSON, change.OIDJSONB:
		return famJSON
	case change.OIDUnknown, 0:
		return famUnknown
	}
	if _, ok := arrayElem[oid]; ok {
		return famArray
	}
	return famNone
}

// arrayElem maps the array types of the supported element types to their
// element type; elemArray is the reverse.
var arrayElem = map[uint32]uint32{
	1005: change.OIDInt2, 1007: change.OIDInt4, 1016: change.OIDInt8, 1028: change.OIDOID,
	1231: change.OIDNumeric, 1021: change.OIDFloat4, 1022: change.OIDFloat8,
	1009: change.OIDText, 1015: change.OIDVarchar, 1014: change.OIDBPChar, 1003: change.OIDName, 1002: change.OIDChar,
	1000: change.OIDBool, 2951: change.OIDUUID, 1001: change.OIDBytea, 1182: change.OIDDate, 1183: change.OIDTime,
	1270: change.OIDTimetz, 1115: change.OIDTimestamp, 1185: change.OIDTimestamptz, 1187: change.OIDInterval,
	199: change.OIDJSON, 3807: change.OIDJSONB,
}

var elemArray = func() map[uint32]uint32 {
	m := make(map[uint32]uint32, len(arrayElem))
	for a, e := range arrayElem {
		m[e] = a
	}
	return m
}()

// commonFamily returns the family two typed operands compare in, following
// PostgreSQL's operator resolution for the built-in comparison operators:
// integers with numeric compare as numeric, anything numeric with a float
// as float8, date with timestamp[tz] as timestamp.
func commonFamily(a, b family) (family, bool) {
	if a == b {
		return a, a != famNone && a != famJSON && a != famArray
	}
	num := func(f family) bool { return f == famInt || f == famNumeric || f == famFloat }
	if num(a) && num(b) {
		if a == famFloat || b == famFloat {
			return famFloat, true
		}
		return famNumeric, true
	}
	dt := func(f family) bool { return f == famDate || f == famTimestamp }
	if dt(a) && dt(b) {
		return famTimestamp, true
	}
	return famNone, false
}

const usecsPerDay = 86400 * 1000000

// toFamily converts a value of type oid (in change's typed form, never nil)
// into the form of family f, as PostgreSQL's implicit casts do; ok is false
// when there is no such conversion.
func toFamily(v any, oid uint32, f family) (any, bool) {
	switch x := v.(type) {
	case int64:
		switch f {
		case famInt:
			return v, true // v, not x: boxing x again would allocate
		case famNumeric:
			return change.Numeric{Coef: big.NewInt(x)}, true
		case famFloat:
			return float64(x), true
		case famFloat4:
			return float64(float32(x)), true
		}
	case float64:
		switch {
		case f == famFloat4 || f == famFloat && oid == change.OIDFloat4:
			return float64(float32(x)), true
		case f == famFloat:
			return v, true
		}
	case change.Numeric:
		switch f {
		case famNumeric:
			return v, true
		case famFloat:
			return numericFloat64(x), true
		case famFloat4:
			return float64(float32(numericFloat64(x))), true
		}
	case string:
		if f == famText || f == famEnum {
			if oid == change.OIDBPChar {
				return strings.TrimRight(x, " "), true
			}
			return v, true
		}
	case change.Date:
		switch f {
		case famDate:
			return x, true
		case famTimestamp:
			return dateTimestamp(x), true
		}
	case change.Timestamp, bool, change.UUID, []byte, change.TimeOfDay, change.TimeTZ, change.Interval:
		if goFamily(v) == f {
			return v, true
		}
	}
	return nil, false
}

// goFamily returns the family of a value by its Go type.
func goFamily(v any) family {
	switch v.(type) {
	case int64:
		return famInt
	case float64:
		return famFloat
	case change.Numeric:
		return famNumeric
	case string:
		return famText
	case bool:
		return famBool
	case change.UUID:
		return famUUID
	case []byte:
		return famBytea
	case change.Date:
		return famDate
	case change.TimeOfDay:
		return famTime
	case change.TimeTZ:
		return famTimeTZ
	case change.Timestamp:
		return famTimestamp
	case change.Interval:
		return famInterval
	case change.JSON:
		return famJSON
	case change.Array:
		return famArray
	}
	return famNone
}

// dateTimestamp is date::timestamp: midnight of the date (an infinite date
// gives an infinite timestamp; dates past timestamp's range clamp to
// infinity as PostgreSQL's cross-type comparisons do).
func dateTimestamp(d change.Date) change.Timestamp {
	if d.Inf != 0 {
		return change.Timestamp{Inf: d.Inf}
	}
	const maxDays = math.MaxInt64 / usecsPerDay
	switch {
	case int64(d.Days) > maxDays:
		return change.Timestamp{Inf: 1}
	case int64(d.Days) < -maxDays:
		return change.Timestamp{Inf: -1}
	}
	return change.Timestamp{Micros: int64(d.Days) * usecsPerDay}
}

// numericFloat64 is numeric::float8: the nearest float64.
func numericFloat64(n change.Numeric) float64 {
	switch {
	case n.NaN:
		return math.NaN()
	case n.Inf != 0:
		return math.Inf(int(n.Inf))
	}
	if n.Coef == nil {
		return 0
	}
	// Build the exact decimal string; ParseFloat rounds it correctly.
	s := n.Coef.String()
	return parseFloatExp(s, n.Exp)
}

// compareValues orders two non-NULL values of one family (already
// converted with toFamily). Text is compared bytewise.
func compareValues(a, b any) int {
	switch x := a.(type) {
	case int64:
		return cmp3(x, b.(int64))
	case float64:
		return cmpFloat(x, b.(float64))
	case change.Numeric:
		return cmpNumeric(x, b.(change.Numeric))
	case string:
		return strings.Compare(x, b.(string))
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case change.UUID:
		y := b.(change.UUID)
		return bytes.Compare(x[:], y[:])
	case []byte:
		return bytes.Compare(x, b.([]byte))
	case change.Date:
		y := b.(change.Date)
		if x.Inf != y.Inf {
			return cmp3(x.Inf, y.Inf)
		}
		if x.Inf != 0 {
			return 0
		}
		return cmp3(x.Days, y.Days)
	case change.TimeOfDay:
		return cmp3(x, b.(change.TimeOfDay))
	case change.TimeTZ:
		// timetz_cmp: by the UTC instant, then by zone (west offsets
		// larger sort later, so east offsets larger sort earlier).
		y := b.(change.TimeTZ)
		if c := cmp3(x.Micros-int64(x.Offset)*1000000, y.Micros-int64(y.Offset)*1000000); c != 0 {
			return c
		}
		return cmp3(y.Offset, x.Offset)
	case change.Timestamp:
		y := b.(change.Timestamp)
		if x.Inf != y.Inf {
			return cmp3(x.Inf, y.Inf)
		}
		if x.Inf != 0 {
			return 0
		}
		return cmp3(x.Micros, y.Micros)
	case change.Interval:
		return cmpInterval(x, b.(change.Interval))
	}
	panic("query: compareValues on an unsupported value")
}

func cmp3[T ~int8 | ~int32 | ~int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpFloat orders float8 as PostgreSQL does: NaN equals NaN and sorts
// above everything; -0 equals 0.
func cmpFloat(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func numericClass(n change.Numeric) int {
	switch {
	case n.NaN:
		return 3
	case n.Inf > 0:
		return 2
	case n.Inf < 0:
		return 0
	}
	return 1
}

var bigTen = big.NewInt(10)

// cmpNumeric orders numerics exactly: -Infinity < finite < Infinity < NaN.
func cmpNumeric(a, b change.Numeric) int {
	ra, rb := numericClass(a), numericClass(b)
	if ra != rb || ra != 1 {
		return cmp3(int64(ra), int64(rb))
	}
	ca, cb := a.Coef, b.Coef
	if ca == nil {
		ca = new(big.Int)
	}
	if cb == nil {
		cb = new(big.Int)
	}
	sa, sb := ca.Sign(), cb.Sign()
	if sa != sb || sa == 0 {
		return cmp3(int64(sa), int64(sb))
	}
	if a.Exp == b.Exp {
		return ca.Cmp(cb)
	}
	// Compare magnitudes by their leading digit's position first, so that
	// wildly different exponents never build huge powers of ten.
	la := int64(len(new(big.Int).Abs(ca).String())) + int64(a.Exp)
	lb := int64(len(new(big.Int).Abs(cb).String())) + int64(b.Exp)
	if la != lb {
		if sa > 0 {
			return cmp3(la, lb)
		}
		return cmp3(lb, la)
	}
	if a.Exp > b.Exp {
		return scale10(ca, int64(a.Exp-b.Exp)).Cmp(cb)
	}
	return ca.Cmp(scale10(cb, int64(b.Exp-a.Exp)))
}

func scale10(x *big.Int, e int64) *big.Int {
	return new(big.Int).Mul(x, new(big.Int).Exp(bigTen, big.NewInt(e), nil))
}

// cmpInterval orders intervals as interval_cmp: by the total span with 30-day
// months and 24-hour days.
func cmpInterval(a, b change.Interval) int {
	ad, ar := intervalSpan(a)
	bd, br := intervalSpan(b)
	if ad != bd {
		return cmp3(ad, bd)
	}
	return cmp3(ar, br)
}

func intervalSpan(iv change.Interval) (days, rem int64) {
	q := iv.Micros / usecsPerDay
	r := iv.Micros % usecsPerDay
	if r < 0 {
		q--
		r += usecsPerDay
	}
	return int64(iv.Months)*30 + int64(iv.Days) + q, r
}

// appendKey appends the equality key of v, a non-NULL value already in its
// family's form: values equal under compareValues get equal keys.
// AppendIntKey is AppendKey of an integer (int2, int4, int8 or oid)
// value, for callers that hold it unboxed.
func AppendIntKey(dst []byte, x int64) []byte {
	dst = append(dst, 'i')
	return binary.BigEndian.AppendUint64(dst, uint64(x))
}

func appendKey(dst []byte, v any) []byte {
	switch x := v.(type) {
	case int64:
		dst = append(dst, 'i')
		return binary.BigEndian.AppendUint64(dst, uint64(x))
	case float64:
		dst = append(dst, 'f')
		switch {
		case math.IsNaN(x):
			x = math.NaN()
		case x == 0:
			x = 0
		}
		return binary.BigEndian.AppendUint64(dst, math.Float64bits(x))
	case change.Numeric:
		dst = append(dst, 'n')
		switch {
		case x.NaN:
			return append(dst, "NaN"...)
		case x.Inf > 0:
			return append(dst, "+Inf"...)
		case x.Inf < 0:
			return append(dst, "-Inf"...)
		}
		c, e := normalizeNumeric(x)
		dst = append(dst, c...)
		dst = append(dst, 'e')
		return binary.BigEndian.AppendUint64(dst, uint64(e))
	case string:
		dst = append(dst, 's')
		return append(dst, x...)
	case bool:
		if x {
			return append(dst, 'b', 1)
		}
		return append(dst, 'b', 0)
	case change.UUID:
		dst = append(dst, 'u')
		return append(dst, x[:]...)
	case []byte:
		dst = append(dst, 'y')
		return append(dst, x...)
	case change.Date:
		dst = append(dst, 'd', byte(x.Inf))
		if x.Inf != 0 {
			return dst
		}
		return binary.BigEndian.AppendUint32(dst, uint32(x.Days))
	case change.TimeOfDay:
		dst = append(dst, 't')
		return binary.BigEndian.AppendUint64(dst, uint64(x))
	case change.TimeTZ:
		dst = append(dst, 'z')
		dst = binary.BigEndian.AppendUint64(dst, uint64(x.Micros))
		return binary.BigEndian.AppendUint32(dst, uint32(x.Offset))
	case change.Timestamp:
		dst = append(dst, 'T', byte(x.Inf))
		if x.Inf != 0 {
			return dst
		}
		return binary.BigEndian.AppendUint64(dst, uint64(x.Micros))
	case change.Interval:
		d, r := intervalSpan(x)
		dst = append(dst, 'v')
		dst = binary.BigEndian.AppendUint64(dst, uint64(d))
		return binary.BigEndian.AppendUint64(dst, uint64(r))
	}
	panic("query: appendKey on an unsupported value")
}

// normalizeNumeric returns a finite numeric's coefficient digits (with
// sign) without trailing zeros, and the matching exponent (0 as "0", 0).
// It works on the decimal text, so a bind with a million trailing zeros
// costs linear time, not quadratic.
func normalizeNumeric(n change.Numeric) (string, int64) {
	if n.Coef == nil || n.Coef.Sign() == 0 {
		return "0", 0
	}
	d := n.Coef.Text(10)
	t := strings.TrimRight(d, "0")
	return t, int64(n.Exp) + int64(len(d)-len(t))
}

// AppendKey appends to dst an encoding of v, a value of type typeOID in
// change's typed form (nil for NULL), such that values of one family
// (integers; text types, bpchar without trailing spaces; ...) get equal
// encodings exactly when PostgreSQL's = holds under a deterministic
// collation: 1.0 and 1.00 as numeric, 0 and -0 as float8, '1 mon' and
// '30 days' as interval. float4 values are widened as PostgreSQL widens them
// to float8. Values of an unknown OID are keyed by their Go type.
func AppendKey(dst []byte, typeOID uint32, v any) []byte {
	if v == nil {
		return append(dst, 0)
	}
	if x, ok := v.(int64); ok {
		return AppendIntKey(dst, x) // what toFamily and appendKey make of it, unboxed
	}
	if x, ok := toFamily(v, typeOID, goFamily(v)); ok {
		v = x
	}
	if goFamily(v) == famNone || goFamily(v) == famJSON || goFamily(v) == famArray {
		switch x := v.(type) {
		case change.JSON:
			return append(append(dst, 'j'), x...)
		case change.Array:
			// Dimensions, then each element's key: arrays that differ in
			// any element key differently (plans keyed by an array
			// bind must not share a view).
			dst = append(dst, 'a')
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(x.Dims)))
			for _, d := range x.Dims {
				dst = binary.BigEndian.AppendUint32(dst, uint32(d.Len))
				dst = binary.BigEndian.AppendUint32(dst, uint32(d.Lower))
			}
			elem := arrayElem[typeOID]
			for _, e := range x.Elems {
				k := AppendKey(nil, elem, e)
				dst = binary.BigEndian.AppendUint32(dst, uint32(len(k)))
				dst = append(dst, k...)
			}
			return dst
		}
		return append(dst, '?')
	}
	return appendKey(dst, v)
}

// CompareValues orders two non-NULL values of type typeOID in change's
// typed form as PostgreSQL's btree operators do (text bytewise: meaningful
// under a bytewise collation only). Values of types that have no order here
// (json, arrays) compare as equal.
func CompareValues(typeOID uint32, a, b any) int {
	f := goFamily(a)
	x, ok1 := toFamily(a, typeOID, f)
	y, ok2 := toFamily(b, typeOID, f)
	if !ok1 || !ok2 || goFamily(y) != goFamily(x) {
		return 0
	}
	return compareValues(x, y)
}
