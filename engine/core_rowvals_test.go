package engine

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
)

func mustNumeric(t *testing.T, s string) change.Numeric {
	t.Helper()
	n, err := change.ParseNumeric(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRowValsRoundTrip encodes every typed form the engine holds and
// decodes it back: the value must be identical (sameValue, which is text
// identity) and each slot must compare equal to itself and unequal to its
// neighbours.
func TestRowValsRoundTrip(t *testing.T) {
	long := strings.Repeat("x", 300)
	vals := []any{
		unloaded{}, nil,
		int64(0), int64(-1), int64(math.MaxInt64), int64(math.MinInt64), int64(300),
		"", "fruit", long, "ünïcode",
		false, true,
		0.0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 1.5e-300,
		[]byte{}, []byte{0, 1, 0xff},
		change.JSON(`{"a": [1, 2]}`),
		mustNumeric(t, "1.50"), mustNumeric(t, "1.5"), mustNumeric(t, "-0.001"), mustNumeric(t, "NaN"),
		mustNumeric(t, "Infinity"), mustNumeric(t, "-Infinity"), mustNumeric(t, "1"+strings.Repeat("0", 200)+".25"),
		change.Numeric{Coef: big.NewInt(15), Exp: -1, Scale: 2}, // prints 1.50, like mustNumeric("1.50")
		change.Timestamp{Micros: -1}, change.Timestamp{Inf: 1}, change.Timestamp{Inf: -1},
		change.Date{Days: -800000}, change.Date{Inf: -1},
		change.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		change.Interval{Months: -1, Days: 30, Micros: -5},
		change.TimeOfDay(86400000000),
		change.TimeTZ{Micros: 1, Offset: -19800},
		change.Array{Dims: []change.ArrayDim{{Len: 2, Lower: 1}}, Elems: []any{int64(1), nil}},
	}
	var buf []byte
	rv, _ := encodeVals(buf, vals)
	got := rv.values()
	if len(got) != len(vals) {
		t.Fatalf("decoded %d slots, want %d", len(got), len(vals))
	}
	var scratch []byte
	for i, want := range vals {
		if !sameValue(got[i], want) && !(isUnloaded(want) && isUnloaded(got[i])) {
			t.Errorf("slot %d: decoded %#v, want %#v", i, got[i], want)
		}
		if x := rv.val(i); !sameValue(x, want) && !(isUnloaded(want) && isUnloaded(x)) {
			t.Errorf("val(%d) = %#v, want %#v", i, x, want)
		}
		if !rv.sameAt(i, want, &scratch) {
			t.Errorf("sameAt(%d, %#v) = false, want true", i, want)
		}
		for _, j := range []int{i - 1, i + 1} {
			if j < 0 || j >= len(vals) {
				continue
			}
			same := sameValue(vals[j], want) || isUnloaded(vals[j]) && isUnloaded(want)
			if got := rv.sameAt(i, vals[j], &scratch); got != same {
				t.Errorf("sameAt(%d, %#v) = %v, want %v", i, vals[j], got, same)
			}
		}
	}
	if x := rv.val(len(vals)); !isUnloaded(x) {
		t.Errorf("val past the last slot = %#v, want unloaded", x)
	}
	// pickInto with slabs, as an Accepted decodes its rows: the same
	// values, of the same types.
	all := make([]int, len(vals))
	for i := range all {
		all[i] = i
	}
	var sl slabs
	into := make([]any, len(all))
	rv.pickInto(into, all, &sl)
	for i, want := range vals {
		if isUnloaded(want) {
			if !isUnloaded(into[i]) {
				t.Errorf("pickInto: slot %d = %#v, want unloaded", i, into[i])
			}
			continue
		}
		if !sameValue(into[i], want) || fmt.Sprintf("%T", into[i]) != fmt.Sprintf("%T", want) {
			t.Errorf("pickInto: slot %d = %#v, want %#v", i, into[i], want)
		}
	}
	cols := []int{5, 0, len(vals) + 3, 9}
	picked := rv.pick(cols)
	for j, slot := range cols {
		want := any(unloaded{})
		if slot < len(vals) {
			want = vals[slot]
		}
		if !sameValue(picked[j], want) && !(isUnloaded(want) && isUnloaded(picked[j])) {
			t.Errorf("pick: slot %d = %#v, want %#v", slot, picked[j], want)
		}
	}
}

// TestRowValsTextIdentity pins that values PostgreSQL finds equal but
// prints differently encode differently, and NaNs encode alike.
func TestRowValsTextIdentity(t *testing.T) {
	tests := []struct {
		name string
		a, b any
		same bool
	}{
		{"zero and minus zero", 0.0, math.Copysign(0, -1), false},
		{"two NaNs", math.NaN(), math.Float64frombits(0x7ff8000000000001), true},
		{"numeric scale", mustNumeric(t, "1.5"), mustNumeric(t, "1.50"), false},
		{"numeric coefficient scaled", mustNumeric(t, "1.50"), change.Numeric{Coef: big.NewInt(15), Exp: -1, Scale: 2}, true},
		{"interval month and days", change.Interval{Months: 1}, change.Interval{Days: 30}, false},
		{"null and empty string", nil, "", false},
		{"int and string", int64(1), "1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := encodeVals(nil, []any{tt.a})
			b, _ := encodeVals(nil, []any{tt.b})
			if got := a.enc == b.enc; got != tt.same {
				t.Errorf("encodings equal = %v, want %v", got, tt.same)
			}
			var scratch []byte
			if got := a.sameAt(0, tt.b, &scratch); got != tt.same {
				t.Errorf("sameAt = %v, want %v", got, tt.same)
			}
			if got := sameValue(tt.a, tt.b); got != tt.same {
				t.Errorf("sameValue = %v, want %v (the encoding must agree with it)", got, tt.same)
			}
		})
	}
}

// TestDecodeFast: streamed integers and text decode as change.Decode
// decodes them, and what decodeFast does not take is left to it.
func TestDecodeFast(t *testing.T) {
	tests := []struct {
		oid  uint32
		text string
		done bool
	}{
		{change.OIDInt2, "-32768", true},
		{change.OIDInt2, "32768", false}, // out of range: change.Decode refuses it
		{change.OIDInt4, "2147483647", true},
		{change.OIDInt8, "-9223372036854775808", true},
		{change.OIDInt8, " 7", false},
		{change.OIDText, "", true},
		{change.OIDText, "ünï\\x", true},
		{change.OIDVarchar, "abc", true},
		{change.OIDBPChar, "ab  ", true},
		{change.OIDNumeric, "1.50", false},
	}
	for _, tt := range tests {
		typ, _ := change.BuiltinType(tt.oid)
		lc := &layoutCol{typ: typ, typeOID: tt.oid, typed: true, fast: fastKindOf(typ, tt.oid)}
		v := change.TextValue(tt.text)
		got, done := decodeFast(lc, v, nil)
		if done != tt.done {
			t.Errorf("decodeFast(%d, %q) done = %v, want %v", tt.oid, tt.text, done, tt.done)
			continue
		}
		if !done {
			continue
		}
		want, err := change.Decode(typ, v, nil)
		if err != nil || !sameValue(got, want) {
			t.Errorf("decodeFast(%d, %q) = %#v, change.Decode = %#v, %v", tt.oid, tt.text, got, want, err)
		}
	}
}

// TestRecord checks that a record reads back its key, its encoding and
// whether it has boxed values, for keys and encodings whose lengths take
// one and two bytes and more.
func TestRecord(t *testing.T) {
	var rt rowTable
	for _, kn := range []int{1, 9, 63, 64, 300} {
		for _, pad := range []int{0, 100, 250, 40 << 10} {
			key := strings.Repeat("k", kn)
			vals := []any{int64(7), strings.Repeat("p", pad), nil}
			if pad == 100 {
				vals[2] = change.Array{Dims: []change.ArrayDim{{Len: 1, Lower: 1}}, Elems: []any{int64(1)}}
			}
			want, _ := encodeVals(nil, vals)
			id := rt.insert(key, vals)
			if got := rt.key(id); got != key {
				t.Fatalf("key %d, pad %d: key = %q, want %q", kn, pad, got, key)
			}
			got := rt.vals(id)
			if got.enc != want.enc || (got.boxes != nil) != (want.boxes != nil) {
				t.Fatalf("key %d, pad %d: encoding = %q (boxed %v), want %q (boxed %v)", kn, pad, got.enc, got.boxes != nil, want.enc, want.boxes != nil)
			}
			if !sameValues(got.values(), vals) {
				t.Fatalf("key %d, pad %d: values = %v, want %v", kn, pad, got.values(), vals)
			}
			if rt.lookup(key) != id {
				t.Fatalf("key %d, pad %d: lookup = %d, want %d", kn, pad, rt.lookup(key), id)
			}
			rt.drop(id)
		}
	}
}
