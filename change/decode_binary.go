package change

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
)

// decodeBinary decodes PostgreSQL's binary send form (pgoutput's binary
// mode) for the common built-in types, enums, domains over them and arrays
// of them. Other types return an error naming the type.
func decodeBinary(t Type, data []byte, r TypeResolver, depth int) (any, error) {
	t, err := resolveBase(t, r)
	if err != nil {
		return nil, err
	}
	switch t.Kind {
	case KindEnum:
		return string(data), nil
	case KindArray:
		if depth >= maxTypeDepth {
			return nil, fmt.Errorf("decode %s: arrays nested more than %d deep", t.display(), maxTypeDepth)
		}
		a, err := decodeBinaryArray(data, t, r, depth)
		if err != nil {
			return nil, fmt.Errorf("decode binary %s: %w", t.display(), err)
		}
		return a, nil
	case KindBase:
		v, err := decodeBinaryBase(t.OID, data)
		if err != nil {
			return nil, fmt.Errorf("decode binary %s: %w", t.display(), err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("decode binary %s: binary form not supported for this type; run the reader in text mode", t.display())
}

func wantLen(data []byte, n int) error {
	if len(data) != n {
		return fmt.Errorf("got %d bytes, want %d", len(data), n)
	}
	return nil
}

func decodeBinaryBase(oid uint32, data []byte) (any, error) {
	be := binary.BigEndian
	switch oid {
	case OIDBool:
		if err := wantLen(data, 1); err != nil {
			return nil, err
		}
		return data[0] != 0, nil
	case OIDInt2:
		if err := wantLen(data, 2); err != nil {
			return nil, err
		}
		return int64(int16(be.Uint16(data))), nil
	case OIDInt4:
		if err := wantLen(data, 4); err != nil {
			return nil, err
		}
		return int64(int32(be.Uint32(data))), nil
	case OIDOID:
		if err := wantLen(data, 4); err != nil {
			return nil, err
		}
		return int64(be.Uint32(data)), nil
	case OIDInt8:
		if err := wantLen(data, 8); err != nil {
			return nil, err
		}
		return int64(be.Uint64(data)), nil
	case OIDFloat4:
		if err := wantLen(data, 4); err != nil {
			return nil, err
		}
		return float64(math.Float32frombits(be.Uint32(data))), nil
	case OIDFloat8:
		if err := wantLen(data, 8); err != nil {
			return nil, err
		}
		return math.Float64frombits(be.Uint64(data)), nil
	case OIDText, OIDVarchar, OIDBPChar, OIDName, OIDChar:
		return string(data), nil
	case OIDBytea:
		return append([]byte(nil), data...), nil
	case OIDUUID:
		if err := wantLen(data, 16); err != nil {
			return nil, err
		}
		return UUID(data), nil
	case OIDJSON, OIDJSONB:
		if oid == OIDJSONB {
			if len(data) == 0 || data[0] != 1 {
				return nil, fmt.Errorf("unknown jsonb binary version")
			}
			data = data[1:]
		}
		if !json.Valid(data) {
			return nil, fmt.Errorf("not valid JSON")
		}
		return JSON(append([]byte(nil), data...)), nil
	case OIDDate:
		if err := wantLen(data, 4); err != nil {
			return nil, err
		}
		switch d := int32(be.Uint32(data)); d {
		case math.MaxInt32:
			return Date{Inf: 1}, nil
		case math.MinInt32:
			return Date{Inf: -1}, nil
		default:
			return Date{Days: d}, nil
		}
	case OIDTime:
		if err := wantLen(data, 8); err != nil {
			return nil, err
		}
		return TimeOfDay(be.Uint64(data)), nil
	case OIDTimetz:
		if err := wantLen(data, 12); err != nil {
			return nil, err
		}
		// The zone is sent in seconds west of UTC.
		return TimeTZ{Micros: int64(be.Uint64(data)), Offset: -int32(be.Uint32(data[8:]))}, nil
	case OIDTimestamp, OIDTimestamptz:
		if err := wantLen(data, 8); err != nil {
			return nil, err
		}
		switch us := int64(be.Uint64(data)); us {
		case math.MaxInt64:
			return Timestamp{Inf: 1}, nil
		case math.MinInt64:
			return Timestamp{Inf: -1}, nil
		default:
			return Timestamp{Micros: us}, nil
		}
	case OIDInterval:
		if err := wantLen(data, 16); err != nil {
			return nil, err
		}
		return Interval{Micros: int64(be.Uint64(data)), Days: int32(be.Uint32(data[8:])), Months: int32(be.Uint32(data[12:]))}, nil
	case OIDNumeric:
		return decodeBinaryNumeric(data)
	}
	name := builtinNames[oid]
	if name == "" {
		name = fmt.Sprintf("type %d", oid)
	}
	return nil, fmt.Errorf("binary form of %s not supported; run the reader in text mode", name)
}

// decodeBinaryNumeric decodes numeric_send's form: ndigits, weight, sign,
// dscale, then base-10000 digits.
func decodeBinaryNumeric(data []byte) (Numeric, error) {
	be := binary.BigEndian
	if len(data) < 8 {
		return Numeric{}, fmt.Errorf("numeric of %d bytes, want at least 8", len(data))
	}
	ndigits := int(be.Uint16(data))
	weight := int(int16(be.Uint16(data[2:])))
	sign := be.Uint16(data[4:])
	dscale := int(be.Uint16(data[6:]))
	switch sign {
	case 0xC000:
		return Numeric{NaN: true}, nil
	case 0xD000:
		return Numeric{Inf: 1}, nil
	case 0xF000:
		return Numeric{Inf: -1}, nil
	case 0x0000, 0x4000:
	default:
		return Numeric{}, fmt.Errorf("numeric sign %#x unknown", sign)
	}
	if len(data) != 8+2*ndigits {
		return Numeric{}, fmt.Errorf("numeric of %d bytes, want %d for %d digits", len(data), 8+2*ndigits, ndigits)
	}
	if dscale > 0x3FFF {
		return Numeric{}, fmt.Errorf("numeric scale %d out of range", dscale)
	}
	coef := new(big.Int)
	tenK := big.NewInt(10000)
	for i := 0; i < ndigits; i++ {
		d := be.Uint16(data[8+2*i:])
		if d >= 10000 {
			return Numeric{}, fmt.Errorf("numeric digit %d out of range", d)
		}
		coef.Mul(coef, tenK)
		coef.Add(coef, big.NewInt(int64(d)))
	}
	if sign == 0x4000 {
		coef.Neg(coef)
	}
	exp := 4 * (weight - ndigits + 1)
	if ndigits == 0 {
		exp = 0
	}
	if exp > maxNumericDigits || exp < -maxNumericDigits {
		return Numeric{}, fmt.Errorf("numeric weight %d out of range", weight)
	}
	// Bring the exponent to -dscale: the digits past dscale are zeros.
	switch {
	case exp > -dscale:
		coef.Mul(coef, new(big.Int).Exp(bigTen, big.NewInt(int64(exp+dscale)), nil))
	case exp < -dscale:
		q, m := new(big.Int).QuoRem(coef, new(big.Int).Exp(bigTen, big.NewInt(int64(-exp-dscale)), nil), new(big.Int))
		if m.Sign() != 0 {
			return Numeric{}, fmt.Errorf("numeric has digits beyond its scale %d", dscale)
		}
		coef = q
	}
	return Numeric{Coef: coef, Exp: int32(-dscale), Scale: int32(dscale)}, nil
}

// decodeBinaryArray decodes array_send's form: ndim, has-null flag, element
// OID, each dimension's length and lower bound, then each element as a
// length (-1 for NULL) and bytes.
func decodeBinaryArray(data []byte, t Type, r TypeResolver, depth int) (Array, error) {
	be := binary.BigEndian
	if len(data) < 12 {
		return Array{}, fmt.Errorf("array header of %d bytes, want at least 12", len(data))
	}
	ndim := int(int32(be.Uint32(data)))
	elemOID := be.Uint32(data[8:])
	data = data[12:]
	if ndim < 0 || ndim > maxArrayDims {
		return Array{}, fmt.Errorf("array of %d dimensions", ndim)
	}
	if ndim == 0 {
		return Array{}, nil
	}
	if len(data) < 8*ndim {
		return Array{}, fmt.Errorf("array dimensions truncated")
	}
	a := Array{Dims: make([]ArrayDim, ndim)}
	total := int64(1)
	for k := 0; k < ndim; k++ {
		n := int32(be.Uint32(data[8*k:]))
		if n < 0 {
			return Array{}, fmt.Errorf("dimension %d has negative length", k+1)
		}
		a.Dims[k] = ArrayDim{Len: n, Lower: int32(be.Uint32(data[8*k+4:]))}
		total *= int64(n)
		if total > int64(len(data)) {
			return Array{}, fmt.Errorf("array claims more elements than it has bytes")
		}
	}
	data = data[8*ndim:]
	et := t.Elem
	if et == 0 {
		et = elemOID
	}
	elemType := lookupType(et, r)
	a.Elems = make([]any, total)
	for k := range a.Elems {
		if len(data) < 4 {
			return Array{}, fmt.Errorf("element %d truncated", k+1)
		}
		n := int32(be.Uint32(data))
		data = data[4:]
		if n == -1 {
			continue
		}
		if n < 0 || int(n) > len(data) {
			return Array{}, fmt.Errorf("element %d length %d out of range", k+1, n)
		}
		v, err := decodeBinary(elemType, data[:n], r, depth+1)
		if err != nil {
			return Array{}, fmt.Errorf("element %d: %w", k+1, err)
		}
		a.Elems[k] = v
		data = data[n:]
	}
	if len(data) != 0 {
		return Array{}, fmt.Errorf("%d bytes after the last element", len(data))
	}
	if total == 0 {
		return Array{}, nil
	}
	return a, nil
}
