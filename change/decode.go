package change

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unsafe"
)

// ErrNotSent is returned by Decode for a value PostgreSQL did not send: an
// Absent column of a key-only old tuple, or an Unchanged TOASTed value.
// Neither is NULL; a consumer holding the row keeps its own copy.
var ErrNotSent = errors.New("value not sent")

// maxTypeDepth bounds how many domains and array levels Decode follows, so
// a resolver with a cycle cannot make it loop.
const maxTypeDepth = 32

// DecodeOID decodes v as a value of the type with the given OID. Built-in
// types are known without a resolver; r (which may be nil) is asked for any
// other OID, and a type neither knows is decoded as text (a string).
func DecodeOID(oid uint32, v Value, r TypeResolver) (any, error) {
	return Decode(lookupType(oid, r), v, r)
}

// Decode decodes v, a value of type t, into the Go form declared in
// types.go: int64, float64, Numeric, bool, string, []byte, UUID, JSON, Date,
// TimeOfDay, TimeTZ, Timestamp, Interval or Array. NULL decodes to nil.
// Absent and Unchanged values return ErrNotSent. Binary values (pgoutput's
// binary mode) decode to the same forms for the common built-in types,
// enums, domains and arrays of them; other types in binary form return an
// error naming the type. Domains decode by their
// base type and arrays by their element type, both looked up through r
// (which may be nil for built-in types). Enums, composites, ranges and
// unknown types decode to their text.
func Decode(t Type, v Value, r TypeResolver) (any, error) {
	switch v.Kind {
	case Null:
		return nil, nil
	case Text:
		// The text is read in place; decoders copy what they keep.
		return decodeText(t, unsafe.String(unsafe.SliceData(v.Data), len(v.Data)), false, r, 0)
	case Binary:
		return decodeBinary(t, v.Data, r, 0)
	}
	return nil, fmt.Errorf("decode %s: %w (kind %s)", t.display(), ErrNotSent, v.Kind)
}

// lookupType finds a type by OID: built-ins first, then r. A type neither
// knows is returned as an unknown base type (decoded as text).
func lookupType(oid uint32, r TypeResolver) Type {
	if t, ok := BuiltinType(oid); ok {
		return t
	}
	if r != nil {
		if t, ok := r.Type(oid); ok {
			if t.OID == 0 {
				t.OID = oid
			}
			return t
		}
	}
	return Type{OID: oid, Kind: KindOther}
}

// display names a type for error messages.
func (t Type) display() string {
	if t.Name != "" {
		return t.Name
	}
	if bt, ok := BuiltinType(t.OID); ok {
		return bt.Name
	}
	return "type " + strconv.FormatUint(uint64(t.OID), 10)
}

// resolveBase follows domains to the type whose form a value takes.
func resolveBase(t Type, r TypeResolver) (Type, error) {
	for depth := 0; t.Kind == KindDomain; depth++ {
		if depth >= maxTypeDepth {
			return t, fmt.Errorf("resolve domain %s: more than %d levels of domains", t.display(), maxTypeDepth)
		}
		if t.Base == 0 {
			return t, fmt.Errorf("resolve domain %s: no base type given", t.display())
		}
		t = lookupType(t.Base, r)
	}
	// A Type given by OID alone (Kind left at its zero value, KindBase) is
	// looked up: a built-in array is still an array, and the resolver may
	// know it as an enum, domain or array.
	if t.Kind == KindBase {
		if bt, ok := BuiltinType(t.OID); ok {
			if bt.Kind == KindArray {
				return bt, nil
			}
		} else if r != nil && t.Name == "" {
			if rt, ok := r.Type(t.OID); ok && rt.Kind != KindBase {
				rt.OID = t.OID
				return resolveBase(rt, r)
			}
		}
	}
	return t, nil
}

// decodeText decodes the text form s of a value of type t. Unless owned, s
// may alias memory the caller reuses, so whatever is kept is copied.
func decodeText(t Type, s string, owned bool, r TypeResolver, depth int) (any, error) {
	t, err := resolveBase(t, r)
	if err != nil {
		return nil, err
	}
	switch t.Kind {
	case KindArray:
		if depth >= maxTypeDepth {
			return nil, fmt.Errorf("decode %s: arrays nested more than %d deep", t.display(), maxTypeDepth)
		}
		a, err := parseArray(s, owned, t, r, depth)
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", t.display(), err)
		}
		return a, nil
	case KindBase:
		v, err := decodeBaseText(t.OID, s, owned)
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", t.display(), err)
		}
		return v, nil
	}
	return keep(s, owned), nil
}

// keep returns s, copied unless owned.
func keep(s string, owned bool) string {
	if owned {
		return s
	}
	return strings.Clone(s)
}

// decodeBaseText decodes the text form of a built-in base type; other OIDs
// stay text.
func decodeBaseText(oid uint32, s string, owned bool) (any, error) {
	switch oid {
	case OIDInt2:
		return parseInt(s, 16)
	case OIDInt4:
		return parseInt(s, 32)
	case OIDInt8:
		return parseInt(s, 64)
	case OIDOID:
		// As oidin: an unsigned 32-bit number, or a negative one down to
		// -2147483648 that wraps around (for backward compatibility).
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || v > math.MaxUint32 || v < math.MinInt32 {
			return nil, fmt.Errorf("parse %q: want an unsigned 32-bit integer", clip(s))
		}
		return int64(uint32(v)), nil
	case OIDFloat4:
		return ParseFloat(s, 32)
	case OIDFloat8:
		return ParseFloat(s, 64)
	case OIDNumeric:
		return ParseNumeric(s)
	case OIDBool:
		return ParseBool(s)
	case OIDChar:
		c, err := parseChar(s)
		return keep(c, owned), err
	case OIDBytea:
		return ParseBytea(s)
	case OIDUUID:
		return ParseUUID(s)
	case OIDJSON, OIDJSONB:
		if !json.Valid([]byte(s)) {
			return nil, fmt.Errorf("parse %q: not valid JSON", clip(s))
		}
		return JSON(s), nil // a copy
	case OIDDate:
		return ParseDate(s)
	case OIDTime:
		return ParseTimeOfDay(s)
	case OIDTimetz:
		return ParseTimeTZ(s)
	case OIDTimestamp:
		return ParseTimestamp(s)
	case OIDTimestamptz:
		return ParseTimestamptz(s)
	case OIDInterval:
		return ParseInterval(s)
	}
	return keep(s, owned), nil
}

func parseInt(s string, bits int) (any, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, bits)
	if err != nil || strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("parse %q: want a %d-bit integer", clip(s), bits)
	}
	return v, nil
}

// ParseFloat parses float4 (bits 32) or float8 (bits 64) text as
// PostgreSQL's strtod-based input does: decimal or exponent notation, the
// hexadecimal form (0x1.8p1), NaN, Infinity, -Infinity (case-insensitive,
// "inf" too); overflow and underflow are errors. A float4 is returned as the float64 of its float32 value.
func ParseFloat(s string, bits int) (float64, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "nan", "+nan", "-nan":
		return math.NaN(), nil
	case "infinity", "+infinity", "inf", "+inf":
		return math.Inf(1), nil
	case "-infinity", "-inf":
		return math.Inf(-1), nil
	}
	hexForm := strings.ContainsAny(t, "xX")
	for i := 0; i < len(t); i++ {
		c := t[i]
		ok := c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' ||
			hexForm && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == 'x' || c == 'X' || c == 'p' || c == 'P')
		if !ok {
			return 0, fmt.Errorf("parse %q: want a decimal number, NaN, Infinity or -Infinity", clip(s))
		}
	}
	if hexForm && !strings.ContainsAny(t, "pP") {
		t += "p0" // strtod's hexadecimal form without a binary exponent
	}
	f, err := strconv.ParseFloat(t, bits)
	if err == nil && f == 0 && nonZeroMantissa(t) {
		err = strconv.ErrRange // underflow: PostgreSQL refuses it too
	}
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("parse %q: out of range for float%d", clip(s), bits/8)
		}
		return 0, fmt.Errorf("parse %q: want a decimal number, NaN, Infinity or -Infinity", clip(s))
	}
	return f, nil
}

// nonZeroMantissa reports whether a decimal number's digits before any
// exponent include one that is not 0.
func nonZeroMantissa(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == 'e' || c == 'E':
			return false
		case c >= '1' && c <= '9':
			return true
		}
	}
	return false
}

// ParseBool parses a bool as PostgreSQL's boolin does: t/f as the server
// prints them, and true/false, yes/no, on/off, 1/0 and their unique
// prefixes, case-insensitive.
func ParseBool(s string) (bool, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t != "" {
		switch {
		case t == "1", strings.HasPrefix("true", t), strings.HasPrefix("yes", t), len(t) >= 2 && strings.HasPrefix("on", t):
			return true, nil
		case t == "0", strings.HasPrefix("false", t), strings.HasPrefix("no", t), len(t) >= 2 && strings.HasPrefix("off", t):
			return false, nil
		}
	}
	return false, fmt.Errorf("parse bool %q: want t or f (or true/false, yes/no, on/off, 1/0)", clip(s))
}

// parseChar decodes "char": one byte, printed by PostgreSQL as \ooo when it
// is not ASCII.
func parseChar(s string) (string, error) {
	if len(s) == 4 && s[0] == '\\' && isOct(s[1]) && isOct(s[2]) && isOct(s[3]) {
		return string([]byte{(s[1]-'0')<<6 | (s[2]-'0')<<3 | (s[3] - '0')}), nil
	}
	if len(s) > 1 {
		s = s[:1] // charin keeps the first byte, as PostgreSQL does
	}
	return s, nil
}

func isOct(c byte) bool { return c >= '0' && c <= '7' }

// ParseBytea parses bytea text in the hex form ("\x0aff") or the older
// escape form ("a\\b\012").
func ParseBytea(s string) ([]byte, error) {
	if strings.HasPrefix(s, `\x`) || strings.HasPrefix(s, `\X`) {
		h := s[2:]
		out := make([]byte, 0, len(h)/2)
		for i := 0; i < len(h); {
			if isSpace(h[i]) {
				i++
				continue
			}
			if i+1 >= len(h) {
				return nil, fmt.Errorf("parse bytea %q: odd number of hex digits", clip(s))
			}
			b, err := hex.DecodeString(h[i : i+2])
			if err != nil {
				return nil, fmt.Errorf("parse bytea %q: invalid hex digit", clip(s))
			}
			out = append(out, b[0])
			i += 2
		}
		return out, nil
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		switch {
		case i+1 < len(s) && s[i+1] == '\\':
			out = append(out, '\\')
			i++
		case i+3 < len(s) && s[i+1] >= '0' && s[i+1] <= '3' && isOct(s[i+2]) && isOct(s[i+3]):
			out = append(out, (s[i+1]-'0')<<6|(s[i+2]-'0')<<3|(s[i+3]-'0'))
			i += 3
		default:
			return nil, fmt.Errorf("parse bytea %q: invalid escape at byte %d (want \\\\ or \\ooo)", clip(s), i)
		}
	}
	return out, nil
}

// AppendBytea appends b in PostgreSQL's hex text form (\x...).
func AppendBytea(dst, b []byte) []byte {
	dst = append(dst, '\\', 'x')
	return hex.AppendEncode(dst, b)
}

// ParseUUID parses a UUID as PostgreSQL's uuid_in does: 32 hex digits,
// optionally in braces, with a hyphen allowed after any group of four.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	t := s
	if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") && len(t) >= 2 {
		t = t[1 : len(t)-1]
	}
	n := 0
	for i := 0; i < len(t); i++ {
		if t[i] == '-' && n > 0 && n%4 == 0 && n < 32 && i+1 < len(t) && t[i-1] != '-' {
			continue
		}
		if n == 32 {
			n++
			break
		}
		v := unhex(t[i])
		if v < 0 {
			n = -1
			break
		}
		if n%2 == 0 {
			u[n/2] = byte(v) << 4
		} else {
			u[n/2] |= byte(v)
		}
		n++
	}
	if n != 32 {
		return UUID{}, fmt.Errorf("parse uuid %q: want 32 hex digits like a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", clip(s))
	}
	return u, nil
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// String returns the UUID in PostgreSQL's canonical text form.
func (u UUID) String() string { return string(u.Append(nil)) }

// Append appends the canonical text form of u to dst.
func (u UUID) Append(dst []byte) []byte {
	dst = hex.AppendEncode(dst, u[0:4])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, u[4:6])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, u[6:8])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, u[8:10])
	dst = append(dst, '-')
	return hex.AppendEncode(dst, u[10:16])
}

// String returns the JSON text.
func (j JSON) String() string { return string(j) }

// AppendFloat appends f in PostgreSQL's float4 (bits 32) or float8 (bits
// 64) text form with the default extra_float_digits: the shortest decimal
// that reads back exactly, "NaN", "Infinity", "-Infinity".
func AppendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	if f == 0 {
		if math.Signbit(f) {
			return append(dst, "-0"...)
		}
		return append(dst, '0')
	}
	var buf [32]byte
	e := shortestDigits(buf[:0], f, bits)
	// e is [-]d[.ddd]e±XX; take it apart.
	neg := e[0] == '-'
	if neg {
		e = e[1:]
	}
	mant, expPart, _ := strings.Cut(string(e), "e")
	exp, _ := strconv.Atoi(expPart)
	ds := strings.Replace(mant, ".", "", 1)
	if neg {
		dst = append(dst, '-')
	}
	limit := 15
	if bits == 32 {
		limit = 6
	}
	if exp < -4 || exp >= limit {
		dst = append(dst, ds[0])
		if len(ds) > 1 {
			dst = append(dst, '.')
			dst = append(dst, ds[1:]...)
		}
		dst = append(dst, 'e')
		if exp < 0 {
			dst = append(dst, '-')
			exp = -exp
		} else {
			dst = append(dst, '+')
		}
		return appendPad(dst, int64(exp), 2)
	}
	if exp < 0 {
		dst = append(dst, "0."...)
		for k := -1; k > exp; k-- {
			dst = append(dst, '0')
		}
		return append(dst, ds...)
	}
	if len(ds) <= exp+1 {
		dst = append(dst, ds...)
		for k := len(ds); k <= exp; k++ {
			dst = append(dst, '0')
		}
		return dst
	}
	dst = append(dst, ds[:exp+1]...)
	dst = append(dst, '.')
	return append(dst, ds[exp+1:]...)
}

// shortestDigits appends f in 'e' form with the fewest digits that lie
// strictly inside the interval of decimals that read back as f. Go's
// shortest form also accepts a decimal exactly halfway to a neighbour
// (when f's mantissa is even); PostgreSQL's Ryu-based output does not, and
// prints one more digit then (float4 129577056 is "1.29577056e+08", not
// "1.2957706e+08").
func shortestDigits(dst []byte, f float64, bits int) []byte {
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', -1, bits)
	if !onBoundary(dst[start:], f, bits) {
		return dst
	}
	max := 17
	if bits == 32 {
		max = 9
	}
	nd := 0
	for _, c := range dst[start:] {
		if c == 'e' {
			break
		}
		if c >= '0' && c <= '9' {
			nd++
		}
	}
	for prec := nd + 1; prec <= max; prec++ {
		dst = strconv.AppendFloat(dst[:start], f, 'e', prec-1, bits)
		if !onBoundary(dst[start:], f, bits) {
			break
		}
	}
	// Drop trailing zeros of the mantissa the fixed precision may add.
	e := bytes.IndexByte(dst[start:], 'e') + start
	m := e
	for m > start && dst[m-1] == '0' {
		m--
	}
	if dst[m-1] == '.' {
		m--
	}
	return append(dst[:m], dst[e:]...)
}

// onBoundary reports whether the decimal d is exactly halfway between f
// and one of its neighbours.
func onBoundary(d []byte, f float64, bits int) bool {
	r, ok := new(big.Rat).SetString(string(d))
	if !ok {
		return false
	}
	fr := new(big.Rat)
	if fr.SetFloat64(f) == nil {
		return false
	}
	var lo, hi float64
	if bits == 32 {
		f32 := float32(f)
		lo, hi = float64(math.Nextafter32(f32, float32(math.Inf(-1)))), float64(math.Nextafter32(f32, float32(math.Inf(1))))
	} else {
		lo, hi = math.Nextafter(f, math.Inf(-1)), math.Nextafter(f, math.Inf(1))
	}
	for _, n := range []float64{lo, hi} {
		if math.IsInf(n, 0) {
			continue
		}
		nr := new(big.Rat).SetFloat64(n)
		mid := nr.Add(nr, fr)
		mid.Quo(mid, big.NewRat(2, 1))
		if mid.Cmp(r) == 0 {
			return true
		}
	}
	return false
}

// FormatOID returns PostgreSQL's text form of x, a value Decode produced
// for the type with the given OID: the inverse of DecodeOID.
func FormatOID(oid uint32, x any, r TypeResolver) (string, error) {
	b, err := AppendText(nil, lookupType(oid, r), x, r)
	return string(b), err
}

// AppendText appends PostgreSQL's text form of x, a value Decode produced
// for type t, to dst: the inverse of Decode for text values. It fails on
// nil (NULL has no text form) and on a Go value that is not t's form.
func AppendText(dst []byte, t Type, x any, r TypeResolver) ([]byte, error) {
	t, err := resolveBase(t, r)
	if err != nil {
		return dst, err
	}
	switch v := x.(type) {
	case nil:
		return dst, fmt.Errorf("format %s: NULL has no text form", t.display())
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case float64:
		bits := 64
		if t.OID == OIDFloat4 {
			bits = 32
		}
		return AppendFloat(dst, v, bits), nil
	case bool:
		if v {
			return append(dst, 't'), nil
		}
		return append(dst, 'f'), nil
	case string:
		if t.OID == OIDChar && len(v) == 1 && v[0] >= 0x80 {
			c := v[0]
			return append(dst, '\\', '0'+c>>6, '0'+(c>>3)&7, '0'+c&7), nil
		}
		return append(dst, v...), nil
	case []byte:
		return AppendBytea(dst, v), nil
	case Numeric:
		return v.Append(dst), nil
	case UUID:
		return v.Append(dst), nil
	case JSON:
		return append(dst, v...), nil
	case Date:
		return v.Append(dst), nil
	case TimeOfDay:
		return v.Append(dst), nil
	case TimeTZ:
		return v.Append(dst), nil
	case Timestamp:
		return v.Append(dst, t.OID == OIDTimestamptz), nil
	case Interval:
		return v.Append(dst), nil
	case Array:
		if t.Kind != KindArray {
			return dst, fmt.Errorf("format %s: got an Array for a non-array type", t.display())
		}
		return appendArray(dst, t, v, r)
	}
	return dst, fmt.Errorf("format %s: unexpected Go type %T", t.display(), x)
}
