package engine

import (
	"math"
	"reflect"
	"testing"

	"github.com/freshetdb/freshet/change"
)

// fastSamples are PostgreSQL text outputs of each type fastDecoder handles.
var fastSamples = map[uint32][]string{
	change.OIDInt2:        {"0", "-32768", "32767", "7"},
	change.OIDInt4:        {"0", "-2147483648", "2147483647", "42"},
	change.OIDInt8:        {"0", "-9223372036854775808", "9223372036854775807", "9007199254740993"},
	change.OIDText:        {"", "a", "héllo", "tab\there", "a'b\"c"},
	change.OIDVarchar:     {"", "x"},
	change.OIDBPChar:      {"ab  ", "x"},
	change.OIDName:        {"pg_class"},
	change.OIDBool:        {"t", "f"},
	change.OIDFloat8:      {"0", "-0", "1.5", "1e-10", "1.7976931348623157e+308", "Infinity", "-Infinity", "NaN", "0.1"},
	change.OIDNumeric:     {"0", "1.50", "-2.25", "100000000000000000000.1", "NaN", "Infinity", "-Infinity", "0.000"},
	change.OIDTimestamptz: {"2024-01-01 00:00:00+00", "2024-01-01 12:30:00.5+00", "infinity", "-infinity", "0044-03-15 12:00:00+00 BC"},
	change.OIDTimestamp:   {"2024-01-01 00:00:00", "1999-12-31 23:59:59.999999", "infinity"},
	change.OIDDate:        {"2024-02-29", "infinity", "-infinity", "0001-01-01 BC"},
	change.OIDUUID:        {"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "00000000-0000-0000-0000-000000000000"},
}

// sameDecoded is reflect.DeepEqual, except that floats are compared by
// their bits (NaN is itself, -0 is not 0).
func sameDecoded(a, b any) bool {
	if x, ok := a.(float64); ok {
		y, ok := b.(float64)
		return ok && (math.Float64bits(x) == math.Float64bits(y) || math.IsNaN(x) && math.IsNaN(y))
	}
	return reflect.DeepEqual(a, b)
}

// TestFastDecoders checks the read path's decoders give exactly what
// change.Decode gives.
func TestFastDecoders(t *testing.T) {
	for oid, samples := range fastSamples {
		typ, _ := change.BuiltinType(oid)
		dec := fastDecoder(typ, oid)
		if dec == nil {
			t.Errorf("fastDecoder(%d) = nil, want a decoder", oid)
			continue
		}
		for _, s := range samples {
			want, err := change.DecodeOID(oid, change.TextValue(s), nil)
			if err != nil {
				t.Fatalf("DecodeOID(%d, %q): %v", oid, s, err)
			}
			got, err := dec(s)
			if err != nil {
				t.Errorf("fast decode %d %q: %v", oid, s, err)
				continue
			}
			if !sameDecoded(got, want) {
				t.Errorf("fast decode %d %q = %#v, want %#v", oid, s, got, want)
			}
		}
	}
	if dec := fastDecoder(change.Type{OID: 99999, Kind: change.KindDomain, Base: change.OIDInt4}, 99999); dec != nil {
		t.Errorf("fastDecoder of a domain: got a decoder, want nil")
	}
}

// FuzzFastDecoders: whatever change.Decode accepts, printed back in
// PostgreSQL's text form, decodes the same through the fast path.
func FuzzFastDecoders(f *testing.F) {
	for oid, samples := range fastSamples {
		for _, s := range samples {
			f.Add(oid, s)
		}
	}
	f.Fuzz(func(t *testing.T, oid uint32, s string) {
		typ, ok := change.BuiltinType(oid)
		if !ok {
			return
		}
		dec := fastDecoder(typ, oid)
		if dec == nil {
			return
		}
		v, err := change.DecodeOID(oid, change.TextValue(s), nil)
		if err != nil || v == nil {
			return
		}
		canon, err := change.FormatOID(oid, v, nil)
		if err != nil {
			return
		}
		want, err := change.DecodeOID(oid, change.TextValue(canon), nil)
		if err != nil {
			t.Fatalf("DecodeOID(%d, %q) (printed from %q): %v", oid, canon, s, err)
		}
		got, err := dec(canon)
		if err != nil {
			t.Fatalf("fast decode %d %q: %v", oid, canon, err)
		}
		if !sameDecoded(got, want) {
			t.Fatalf("fast decode %d %q = %#v, want %#v", oid, canon, got, want)
		}
	})
}
