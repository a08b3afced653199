package change

import (
	"errors"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
)

func TestParseNumeric(t *testing.T) {
	tests := []struct {
		in, str   string
		coef      string
		exp, scal int32
	}{
		{"0", "0", "0", 0, 0},
		{"1.50", "1.50", "150", -2, 2},
		{"-0.001", "-0.001", "-1", -3, 3},
		{"-0", "0", "0", 0, 0},
		{"  42  ", "42", "42", 0, 0},
		{"+7", "7", "7", 0, 0},
		{".5", "0.5", "5", -1, 1},
		{"5.", "5", "5", 0, 0},
		{"1e5", "100000", "100000", 0, 0},
		{"1.5e-3", "0.0015", "15", -4, 4},
		{"1.50E1", "15.0", "150", -1, 1},
		{"123456789012345678901234567890.000000000000000000001", "123456789012345678901234567890.000000000000000000001",
			"123456789012345678901234567890000000000000000000001", -21, 21},
	}
	for _, tt := range tests {
		n, err := ParseNumeric(tt.in)
		if err != nil {
			t.Errorf("ParseNumeric(%q): %v", tt.in, err)
			continue
		}
		if got := n.String(); got != tt.str {
			t.Errorf("ParseNumeric(%q).String() = %q, want %q", tt.in, got, tt.str)
		}
		if n.Coef.String() != tt.coef || n.Exp != tt.exp || n.Scale != tt.scal {
			t.Errorf("ParseNumeric(%q) = %s×10^%d scale %d, want %s×10^%d scale %d", tt.in, n.Coef, n.Exp, n.Scale, tt.coef, tt.exp, tt.scal)
		}
	}
	for _, in := range []string{"NaN", "nan", "Infinity", "-Infinity", "inf", "-inf"} {
		n, err := ParseNumeric(in)
		if err != nil || n.IsFinite() {
			t.Errorf("ParseNumeric(%q) = %v, %v; want a special value", in, n, err)
		}
	}
	for _, in := range []string{"", " ", "-", ".", "1..2", "1e", "1e+", "abc", "1.2.3", "1e131072", "1e-16384", "1_000", "--1", "1 2"} {
		if n, err := ParseNumeric(in); err == nil {
			t.Errorf("ParseNumeric(%q) = %v, want an error", in, n)
		}
	}
}

func TestNumericCmp(t *testing.T) {
	ordered := []string{"-Infinity", "-1e30", "-1.5", "-0.0001", "0", "0.0001", "1", "1.000001", "1e30", "Infinity", "NaN"}
	for i, a := range ordered {
		for j, b := range ordered {
			na, nb := mustNumeric(t, a), mustNumeric(t, b)
			if got, want := na.Cmp(nb), cmpInt(i, j); got != want {
				t.Errorf("Cmp(%s, %s) = %d, want %d", a, b, got, want)
			}
		}
	}
	equal := [][2]string{{"1.5", "1.50"}, {"0", "-0.000"}, {"100", "1e2"}, {"NaN", "nan"}}
	for _, p := range equal {
		if c := mustNumeric(t, p[0]).Cmp(mustNumeric(t, p[1])); c != 0 {
			t.Errorf("Cmp(%s, %s) = %d, want 0", p[0], p[1], c)
		}
	}
	// A hand-built value with Exp > -Scale and the zero value.
	n := Numeric{Coef: big.NewInt(15), Exp: 1, Scale: 2}
	if got := n.String(); got != "150.00" {
		t.Errorf("String() = %q, want 150.00", got)
	}
	if got := (Numeric{}).String(); got != "0" {
		t.Errorf("zero Numeric String() = %q, want 0", got)
	}
	if got := (Numeric{Coef: big.NewInt(12345), Exp: -4}).String(); got != "1.2345" {
		t.Errorf("String() = %q, want 1.2345 (Exp wins over a smaller Scale)", got)
	}
	if r := mustNumeric(t, "-1.25").Rat(); r.String() != "-5/4" {
		t.Errorf("Rat() = %v, want -5/4", r)
	}
	if f := mustNumeric(t, "0.1").Float64(); f != 0.1 {
		t.Errorf("Float64() = %v, want 0.1", f)
	}
}

func mustNumeric(t *testing.T, s string) Numeric {
	t.Helper()
	n, err := ParseNumeric(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestParseDate(t *testing.T) {
	tests := []struct {
		in   string
		days int32
		inf  int8
		str  string
	}{
		{"2000-01-01", 0, 0, "2000-01-01"},
		{"1999-12-31", -1, 0, "1999-12-31"},
		{"2024-02-29", 8825, 0, "2024-02-29"},
		{"0001-01-01", -730119, 0, "0001-01-01"},
		{"0001-12-31 BC", -730120, 0, "0001-12-31 BC"},
		{"0044-03-15 BC", -746117, 0, "0044-03-15 BC"},
		{"4714-11-24 BC", -2451545, 0, "4714-11-24 BC"},
		{"5874897-12-31", 2145031948, 0, "5874897-12-31"},
		{"12345-06-07", 3778591, 0, "12345-06-07"},
		{"infinity", 0, 1, "infinity"},
		{"-infinity", 0, -1, "-infinity"},
		{"epoch", -10957, 0, "1970-01-01"},
		{"2024-1-2", 8767, 0, "2024-01-02"},
	}
	for _, tt := range tests {
		d, err := ParseDate(tt.in)
		if err != nil {
			t.Errorf("ParseDate(%q): %v", tt.in, err)
			continue
		}
		if d.Days != tt.days || d.Inf != tt.inf {
			t.Errorf("ParseDate(%q) = %+v, want days %d inf %d", tt.in, d, tt.days, tt.inf)
		}
		if got := d.String(); got != tt.str {
			t.Errorf("ParseDate(%q).String() = %q, want %q", tt.in, got, tt.str)
		}
	}
	for _, in := range []string{"", "2024-02-30", "2023-02-29", "0004-02-29 BC", "0000-01-01", "4714-11-23 BC", "5874898-01-01",
		"2024-13-01", "2024-01-01x", "2024/01/01", "01-02-2024", "2024-01-01 XX"} {
		if d, err := ParseDate(in); err == nil {
			t.Errorf("ParseDate(%q) = %v, want an error", in, d)
		}
	}
	if tm, ok := mustDate(t, "0044-03-15 BC").Time(); !ok || tm.Year() != -43 || tm.Month() != 3 || tm.Day() != 15 {
		t.Errorf("Time() = %v, %v; want year -43 (44 BC), March 15", tm, ok)
	}
	if _, ok := (Date{Inf: 1}).Time(); ok {
		t.Errorf("infinity Time() ok = true, want false")
	}
}

func mustDate(t *testing.T, s string) Date {
	t.Helper()
	d, err := ParseDate(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestParseTimes(t *testing.T) {
	tod := []struct {
		in  string
		us  int64
		str string
	}{
		{"00:00:00", 0, "00:00:00"},
		{"04:05:06.789", 14706789000, "04:05:06.789"},
		{"24:00:00", 86400000000, "24:00:00"},
		{"12:00", 43200000000, "12:00:00"},
		{"01:02:03.1234565", 3723123456, "01:02:03.123456"},
		{"01:02:03.1234575", 3723123458, "01:02:03.123458"},
		{"00:00:00.0000051", 5, "00:00:00.000005"},
	}
	for _, tt := range tod {
		v, err := ParseTimeOfDay(tt.in)
		if err != nil || int64(v) != tt.us || v.String() != tt.str {
			t.Errorf("ParseTimeOfDay(%q) = %d %q, %v; want %d %q", tt.in, v, v.String(), err, tt.us, tt.str)
		}
	}
	for _, in := range []string{"", "24:00:01", "25:00:00", "12:60:00", "12:00:61", "12", "12:", "12:00:00+", "12:00:00.x"} {
		if v, err := ParseTimeOfDay(in); err == nil {
			t.Errorf("ParseTimeOfDay(%q) = %v, want an error", in, v)
		}
	}
	tz := []struct {
		in     string
		us     int64
		offset int32
		str    string
	}{
		{"04:05:06+05:30", 14706000000, 19800, "04:05:06+05:30"},
		{"04:05:06-03", 14706000000, -10800, "04:05:06-03"},
		{"04:05:06.5+05:30:15", 14706500000, 19815, "04:05:06.5+05:30:15"},
		{"00:00:00+00", 0, 0, "00:00:00+00"},
		{"00:00:00-00:00:01", 0, -1, "00:00:00-00:00:01"},
		{"12:00:00+0530", 43200000000, 19800, "12:00:00+05:30"},
		{"12:00:00Z", 43200000000, 0, "12:00:00+00"},
	}
	for _, tt := range tz {
		v, err := ParseTimeTZ(tt.in)
		if err != nil || v.Micros != tt.us || v.Offset != tt.offset || v.String() != tt.str {
			t.Errorf("ParseTimeTZ(%q) = %+v %q, %v; want %d %d %q", tt.in, v, v.String(), err, tt.us, tt.offset, tt.str)
		}
	}
	for _, in := range []string{"12:00:00+", "12:00:00+16", "12:00:00+05:60", "12:00:00 05"} {
		if v, err := ParseTimeTZ(in); err == nil {
			t.Errorf("ParseTimeTZ(%q) = %v, want an error", in, v)
		}
	}
}

func TestParseTimestamp(t *testing.T) {
	tests := []struct {
		in     string
		tz     bool
		micros int64
		inf    int8
		str    string
	}{
		{"2000-01-01 00:00:00", false, 0, 0, "2000-01-01 00:00:00"},
		{"2024-01-02 03:04:05.123456", false, 757479845123456, 0, "2024-01-02 03:04:05.123456"},
		{"2024-01-02T03:04:05", false, 757479845000000, 0, "2024-01-02 03:04:05"},
		{"2024-01-02 03:04:05+05", false, 757479845000000, 0, "2024-01-02 03:04:05"},
		{"2024-01-02 03:04:05+05", true, 757479845000000 - 5*3600e6, 0, "2024-01-01 22:04:05+00"},
		{"2024-01-02 03:04:05.5-03:30:15", true, 757479845500000 + 12615e6, 0, "2024-01-02 06:34:20.5+00"},
		{"2024-01-02", false, 757468800000000, 0, "2024-01-02 00:00:00"},
		{"0044-03-15 12:00:00 BC", false, -746117*usecsPerDay + 12*usecsPerHour, 0, "0044-03-15 12:00:00 BC"},
		{"0044-03-15 12:00:00+00 BC", true, -746117*usecsPerDay + 12*usecsPerHour, 0, "0044-03-15 12:00:00+00 BC"},
		{"4714-11-24 00:00:00 BC", false, minTimestampUS, 0, "4714-11-24 00:00:00 BC"},
		{"294276-12-31 23:59:59.999999", false, endTimestampUS - 1, 0, "294276-12-31 23:59:59.999999"},
		{"1999-12-31 23:59:59.999999", false, -1, 0, "1999-12-31 23:59:59.999999"},
		{"infinity", true, 0, 1, "infinity"},
		{"-infinity", false, 0, -1, "-infinity"},
	}
	for _, tt := range tests {
		var v Timestamp
		var err error
		if tt.tz {
			v, err = ParseTimestamptz(tt.in)
		} else {
			v, err = ParseTimestamp(tt.in)
		}
		str := v.String()
		if tt.tz {
			str = v.StringTZ()
		}
		if err != nil || v.Micros != tt.micros || v.Inf != tt.inf || str != tt.str {
			t.Errorf("parse %q (tz %v) = %+v %q, %v; want %d inf %d %q", tt.in, tt.tz, v, str, err, tt.micros, tt.inf, tt.str)
		}
	}
	for _, in := range []string{"", "2024-01-02 25:00:00", "294277-01-01 00:00:00", "4714-11-23 23:59:59 BC", "2024-01-02 03:04",
		"2024-01-02 03:04:05 junk", "2024-02-30 00:00:00", "999999999-01-01"} {
		if v, err := ParseTimestamp(in); err == nil && in != "2024-01-02 03:04" {
			t.Errorf("ParseTimestamp(%q) = %v, want an error", in, v)
		}
	}
	// 294276-12-31 23:59:59+00 is in range; pushed past the end by a
	// negative offset it is not.
	if v, err := ParseTimestamptz("294276-12-31 23:00:00-02"); err == nil {
		t.Errorf("ParseTimestamptz past the end = %v, want an error", v)
	}
	tm, ok := Timestamp{Micros: -1}.Time()
	if !ok || tm.Format("2006-01-02 15:04:05.000000") != "1999-12-31 23:59:59.999999" {
		t.Errorf("Time() = %v, %v", tm, ok)
	}
	if got := TimestampFromTime(tm); got.Micros != -1 {
		t.Errorf("TimestampFromTime(%v) = %d, want -1", tm, got.Micros)
	}
	if c := (Timestamp{Inf: -1}).Cmp(Timestamp{Micros: minTimestampUS}); c != -1 {
		t.Errorf("-infinity Cmp min = %d, want -1", c)
	}
}

func TestParseInterval(t *testing.T) {
	tests := []struct {
		in     string
		months int32
		days   int32
		micros int64
		str    string
	}{
		{"1 year 2 mons 3 days 04:05:06.789", 14, 3, 14706789000, "1 year 2 mons 3 days 04:05:06.789"},
		{"-1 days +02:00:00", 0, -1, 2 * usecsPerHour, "-1 days +02:00:00"},
		{"00:00:00", 0, 0, 0, "00:00:00"},
		{"1 day", 0, 1, 0, "1 day"},
		{"-1 years -2 mons", -14, 0, 0, "-1 years -2 mons"},
		{"1 mon -1 days", 1, -1, 0, "1 mon -1 days"},
		{"1 year -1 days +00:00:01", 12, -1, usecsPerSec, "1 year -1 days +00:00:01"},
		{"3 days -04:05:06", 0, 3, -14706000000, "3 days -04:05:06"},
		{"-00:00:00.000001", 0, 0, -1, "-00:00:00.000001"},
		{"@ 1 minute ago", 0, 0, -usecsPerMin, "-00:01:00"},
		{"1 week 2 hours", 0, 7, 2 * usecsPerHour, "7 days 02:00:00"},
		{"1.5 seconds", 0, 0, 1500000, "00:00:01.5"},
		{"12 ms", 0, 0, 12000, "00:00:00.012"},
		{"7 us", 0, 0, 7, "00:00:00.000007"},
		{"1.25 minutes", 0, 0, 75 * usecsPerSec, "00:01:15"},
		{"2 decades 1 century", 1440, 0, 0, "120 years"},
		{"1day", 0, 1, 0, "1 day"},
		{"1.5 days", 0, 1, 12 * usecsPerHour, "1 day 12:00:00"},
		{"-1.5 days", 0, -1, -12 * usecsPerHour, "-1 days -12:00:00"},
		{"1.5 mons", 1, 15, 0, "1 mon 15 days"},
		{"1.5 years", 18, 0, 0, "1 year 6 mons"},
		{"5", 0, 0, 5 * usecsPerSec, "00:00:05"},
		{"2562047788:00:54.775807", 0, 0, math.MaxInt64, "2562047788:00:54.775807"},
		{"-2562047788:00:54.775807", 0, 0, -math.MaxInt64, "-2562047788:00:54.775807"},
		{"178956970 years 7 mons", math.MaxInt32, 0, 0, "178956970 years 7 mons"},
	}
	for _, tt := range tests {
		v, err := ParseInterval(tt.in)
		if err != nil || v.Months != tt.months || v.Days != tt.days || v.Micros != tt.micros || v.String() != tt.str {
			t.Errorf("ParseInterval(%q) = %+v %q, %v; want %d %d %d %q", tt.in, v, v.String(), err, tt.months, tt.days, tt.micros, tt.str)
		}
	}
	for _, in := range []string{"", "@", "ago", "1 fortnight", "1 2", "P1Y", "99999999999 years",
		"9999999999999:00:00", "1 day 1:0x:00", "- 1 day"} {
		if v, err := ParseInterval(in); err == nil {
			t.Errorf("ParseInterval(%q) = %v, want an error", in, v)
		}
	}
	if c := (Interval{Months: 1}).Cmp(Interval{Days: 30}); c != 0 {
		t.Errorf("1 mon Cmp 30 days = %d, want 0", c)
	}
	if c := (Interval{Days: 1}).Cmp(Interval{Micros: 24*usecsPerHour + 1}); c != -1 {
		t.Errorf("1 day Cmp 24:00:00.000001 = %d, want -1", c)
	}
	if c := (Interval{Months: math.MaxInt32}).Cmp(Interval{Micros: math.MaxInt64}); c != 1 {
		t.Errorf("max months Cmp max micros = %d, want 1", c)
	}
}

func TestDecodeScalars(t *testing.T) {
	tests := []struct {
		oid  uint32
		in   string
		want any
	}{
		{OIDInt2, "-32768", int64(-32768)},
		{OIDInt4, "2147483647", int64(2147483647)},
		{OIDInt8, "-9223372036854775808", int64(math.MinInt64)},
		{OIDOID, "4294967295", int64(4294967295)},
		{OIDFloat8, "1.5", 1.5},
		{OIDFloat8, "0e-400", 0.0},
		{OIDFloat8, "-0.000", math.Copysign(0, -1)},
		{OIDFloat8, "-Infinity", math.Inf(-1)},
		{OIDFloat4, "0.1", float64(float32(0.1))},
		{OIDBool, "t", true},
		{OIDBool, "off", false},
		{OIDText, "héllo", "héllo"},
		{OIDVarchar, "", ""},
		{OIDBPChar, "ab   ", "ab   "},
		{OIDName, "pg_class", "pg_class"},
		{OIDChar, `\303`, "\xc3"},
		{OIDBytea, `\x00ff`, []byte{0, 0xff}},
		{OIDBytea, `a\\b\001`, []byte{'a', '\\', 'b', 1}},
		{OIDUUID, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", UUID{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}},
		{OIDJSONB, `{"a": 1}`, JSON(`{"a": 1}`)},
		{OIDInet, "10.0.0.1", "10.0.0.1"},
		{99999, "whatever (unknown type)", "whatever (unknown type)"},
	}
	for _, tt := range tests {
		got, err := DecodeOID(tt.oid, TextValue(tt.in), nil)
		if err != nil {
			t.Errorf("DecodeOID(%d, %q): %v", tt.oid, tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("DecodeOID(%d, %q) = %#v, want %#v", tt.oid, tt.in, got, tt.want)
		}
	}
	if v, err := DecodeOID(OIDFloat8, TextValue("NaN"), nil); err != nil || !math.IsNaN(v.(float64)) {
		t.Errorf("DecodeOID(float8, NaN) = %v, %v", v, err)
	}
	bad := []struct {
		oid uint32
		in  string
	}{
		{OIDInt2, "32768"}, {OIDInt4, "1.5"}, {OIDInt8, ""}, {OIDOID, "-2147483649"}, {OIDOID, "4294967296"}, {OIDFloat8, "1e400"}, {OIDFloat8, "0x"}, {OIDFloat8, "00x10"},
		{OIDFloat4, "1e39"}, {OIDFloat8, "1e-400"}, {OIDFloat4, "1e-50"}, {OIDBool, "maybe"}, {OIDBool, "o"}, {OIDBytea, `\x0`}, {OIDBytea, `\xzz`}, {OIDBytea, `a\b`},
		{OIDUUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1"}, {OIDUUID, "a0eebc99--9c0b-4ef8-bb6d-6bb9bd380a11"},
		{OIDUUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-"}, {OIDJSON, `{"a":`}, {OIDNumeric, "x"}, {OIDDate, "yesterday"},
	}
	for _, tt := range bad {
		if v, err := DecodeOID(tt.oid, TextValue(tt.in), nil); err == nil {
			t.Errorf("DecodeOID(%d, %q) = %#v, want an error", tt.oid, tt.in, v)
		} else if !strings.Contains(err.Error(), "decode ") {
			t.Errorf("DecodeOID(%d, %q) error %q does not name the type", tt.oid, tt.in, err)
		}
	}
}

func TestDecodeKinds(t *testing.T) {
	if v, err := DecodeOID(OIDInt4, Value{Kind: Null}, nil); v != nil || err != nil {
		t.Errorf("decode NULL = %v, %v; want nil, nil", v, err)
	}
	for _, k := range []Kind{Absent, Unchanged} {
		if _, err := DecodeOID(OIDInt4, Value{Kind: k}, nil); !errors.Is(err, ErrNotSent) {
			t.Errorf("decode %s: err = %v, want ErrNotSent", k, err)
		}
	}
}

type mapResolver map[uint32]Type

func (m mapResolver) Type(oid uint32) (Type, bool) { t, ok := m[oid]; return t, ok }

func TestDecodeResolved(t *testing.T) {
	r := mapResolver{
		50000: {Name: "mood", Kind: KindEnum},
		50001: {Name: "_mood", Kind: KindArray, Elem: 50000, Delim: ','},
		50002: {Name: "price", Kind: KindDomain, Base: OIDNumeric},
		50003: {Name: "smallprice", Kind: KindDomain, Base: 50002},
		50004: {Name: "_smallprice", Kind: KindArray, Elem: 50003},
		50005: {Name: "loop", Kind: KindDomain, Base: 50005},
		50006: {Name: "pair", Kind: KindComposite},
	}
	tests := []struct {
		oid  uint32
		in   string
		want string
	}{
		{50000, "happy", "happy"},
		{50001, `{sad,"happy day"}`, `{sad,"happy day"}`},
		{50003, "1.50", "1.50"},
		{50004, "{1.50,NULL}", "{1.50,NULL}"},
		{50006, `(1,"a b")`, `(1,"a b")`},
	}
	for _, tt := range tests {
		v, err := DecodeOID(tt.oid, TextValue(tt.in), r)
		if err != nil {
			t.Errorf("DecodeOID(%d, %q): %v", tt.oid, tt.in, err)
			continue
		}
		got, err := FormatOID(tt.oid, v, r)
		if err != nil || got != tt.want {
			t.Errorf("FormatOID(%d, %#v) = %q, %v; want %q", tt.oid, v, got, err, tt.want)
		}
	}
	if v, _ := DecodeOID(50003, TextValue("1.50"), r); reflect.TypeOf(v) != reflect.TypeOf(Numeric{}) {
		t.Errorf("domain over domain over numeric decoded to %T, want Numeric", v)
	}
	if _, err := DecodeOID(50005, TextValue("1"), r); err == nil || !strings.Contains(err.Error(), "levels of domains") {
		t.Errorf("domain cycle: err = %v, want a depth error", err)
	}
	if v, err := Decode(Type{OID: 50004}, TextValue("{1.5}"), r); err != nil || reflect.TypeOf(v) != reflect.TypeOf(Array{}) {
		t.Errorf("Decode(Type{OID: array of domain}) = %#v, %v; want an Array through the resolver", v, err)
	}
	if _, err := DecodeOID(50002, TextValue("1"), nil); err != nil {
		t.Errorf("unknown OID without resolver: %v, want text", err)
	}
}

func TestDecodeArray(t *testing.T) {
	tests := []struct {
		oid   uint32
		in    string
		dims  []ArrayDim
		elems []any
		str   string
	}{
		{OIDInt4Array, "{}", nil, nil, "{}"},
		{OIDInt4Array, "{1,NULL,3}", []ArrayDim{{3, 1}}, []any{int64(1), nil, int64(3)}, "{1,NULL,3}"},
		{OIDInt4Array, " { 1 , 2 } ", []ArrayDim{{2, 1}}, []any{int64(1), int64(2)}, "{1,2}"},
		{OIDInt4Array, "[0:1]={1,2}", []ArrayDim{{2, 0}}, []any{int64(1), int64(2)}, "[0:1]={1,2}"},
		{OIDInt4Array, "[-1:0][1:2]={{1,2},{3,4}}", []ArrayDim{{2, -1}, {2, 1}}, []any{int64(1), int64(2), int64(3), int64(4)}, "[-1:0][1:2]={{1,2},{3,4}}"},
		{OIDInt4Array, "{{1,2},{3,4}}", []ArrayDim{{2, 1}, {2, 1}}, []any{int64(1), int64(2), int64(3), int64(4)}, "{{1,2},{3,4}}"},
		{OIDInt4Array, "{{{1}},{{2}}}", []ArrayDim{{2, 1}, {1, 1}, {1, 1}}, []any{int64(1), int64(2)}, "{{{1}},{{2}}}"},
		{OIDTextArray, `{"a\"b","c\\d","NULL",NULL,"", " x ",nuLL,a\,b,  pad  }`, []ArrayDim{{9, 1}},
			[]any{`a"b`, `c\d`, "NULL", nil, "", " x ", nil, "a,b", "pad"}, `{"a\"b","c\\d","NULL",NULL,""," x ",NULL,"a,b",pad}`},
		{OIDTextArray, `{\NULL,"{}",é}`, []ArrayDim{{3, 1}}, []any{"NULL", "{}", "é"}, `{"NULL","{}",é}`},
		{OIDBoxArray, "{(1,1),(0,0);(2,2),(1,1)}", []ArrayDim{{2, 1}}, []any{"(1,1),(0,0)", "(2,2),(1,1)"}, "{(1,1),(0,0);(2,2),(1,1)}"},
		{OIDTimestamptzArray, `{"2024-01-02 03:04:05+00",infinity}`, []ArrayDim{{2, 1}},
			[]any{Timestamp{Micros: 757479845000000}, Timestamp{Inf: 1}}, `{"2024-01-02 03:04:05+00",infinity}`},
		{OIDFloat4Array, "{0.1,NaN}", []ArrayDim{{2, 1}}, nil, "{0.1,NaN}"},
	}
	for _, tt := range tests {
		v, err := DecodeOID(tt.oid, TextValue(tt.in), nil)
		if err != nil {
			t.Errorf("DecodeOID(%d, %q): %v", tt.oid, tt.in, err)
			continue
		}
		a := v.(Array)
		if !reflect.DeepEqual(a.Dims, tt.dims) {
			t.Errorf("DecodeOID(%q) dims = %v, want %v", tt.in, a.Dims, tt.dims)
		}
		if tt.elems != nil && !reflect.DeepEqual(a.Elems, tt.elems) {
			t.Errorf("DecodeOID(%q) elems = %#v, want %#v", tt.in, a.Elems, tt.elems)
		}
		if got, err := FormatOID(tt.oid, a, nil); err != nil || got != tt.str {
			t.Errorf("FormatOID(%q) = %q, %v; want %q", tt.in, got, err, tt.str)
		}
	}
	if got := (Array{Dims: []ArrayDim{{2, 1}}, Elems: []any{"a b", int64(1)}}).String(); got != `{"a b",1}` {
		t.Errorf("Array.String() = %q", got)
	}
	for _, in := range []string{"", "{", "}", "{1,}", "{,1}", "{1,2", "{{1,2},{3}}", "{{1},2}", "{1,{2}}", "{1}x", `{"a}`,
		"{a\"b}", "[1:3]={1,2}", "[1:2]={{1,2}}", "[2:1]={}", "{{}}", "{{{{{{{1}}}}}}}", "[1:2={1,2}", "[1:2]{1,2}", "{1 2,3}x", "{x}", `{1\`} {
		if v, err := DecodeOID(OIDInt4Array, TextValue(in), nil); err == nil {
			t.Errorf("DecodeOID(int4[], %q) = %v, want an error", in, v)
		}
	}
}

func TestAppendFloat(t *testing.T) {
	tests := []struct {
		f    float64
		bits int
		want string
	}{
		{0, 64, "0"}, {math.Copysign(0, -1), 64, "-0"}, {1e6, 64, "1000000"}, {1e15, 64, "1e+15"},
		{123456789012345, 64, "123456789012345"}, {1e-4, 64, "0.0001"}, {1e-5, 64, "1e-05"},
		{5e-324, 64, "5e-324"}, {1e100, 64, "1e+100"}, {-2.5, 64, "-2.5"},
		{float64(float32(0.1)), 32, "0.1"}, {1e6, 32, "1e+06"}, {999999, 32, "999999"}, {float64(float32(3.4028235e38)), 32, "3.4028235e+38"}, {-129577056, 32, "-1.29577056e+08"}, {57328048, 32, "5.7328048e+07"},
	}
	for _, tt := range tests {
		if got := string(AppendFloat(nil, tt.f, tt.bits)); got != tt.want {
			t.Errorf("AppendFloat(%v, %d) = %q, want %q", tt.f, tt.bits, got, tt.want)
		}
	}
}

func TestFormatErrors(t *testing.T) {
	if _, err := FormatOID(OIDInt4, nil, nil); err == nil {
		t.Error("FormatOID(nil) = nil error, want NULL has no text form")
	}
	if _, err := FormatOID(OIDInt4, struct{}{}, nil); err == nil {
		t.Error("FormatOID(struct{}) = nil error, want an error")
	}
	if _, err := FormatOID(OIDInt4Array, Array{Dims: []ArrayDim{{3, 1}}, Elems: []any{int64(1)}}, nil); err == nil {
		t.Error("FormatOID(bad Array) = nil error, want an error")
	}
}

func BenchmarkDecode(b *testing.B) {
	cases := []struct {
		name string
		oid  uint32
		text string
	}{
		{"int4", OIDInt4, "123456"},
		{"float8", OIDFloat8, "3.141592653589793"},
		{"numeric", OIDNumeric, "12345678901234.5678"},
		{"text", OIDText, "a short text value"},
		{"uuid", OIDUUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{"timestamptz", OIDTimestamptz, "2024-01-02 03:04:05.123456+00"},
		{"date", OIDDate, "2024-01-02"},
		{"interval", OIDInterval, "1 year 2 mons 3 days 04:05:06.789"},
		{"int4[]", OIDInt4Array, "{1,2,3,4,5,6,7,8}"},
		{"text[]", OIDTextArray, `{a,"b c",NULL,"d\"e"}`},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			v := TextValue(c.text)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := DecodeOID(c.oid, v, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDecodeDoesNotAlias checks decoded values do not share memory with
// the Value's Data, which the reader may reuse.
func TestDecodeDoesNotAlias(t *testing.T) {
	r := mapResolver{50000: {Name: "mood", Kind: KindEnum}}
	tests := []struct {
		oid  uint32
		in   string
		want string
	}{
		{OIDText, "hello", "hello"},
		{OIDChar, "x", "x"},
		{OIDJSON, `{"a":1}`, `{"a":1}`},
		{OIDInet, "10.0.0.1", "10.0.0.1"},
		{50000, "happy", "happy"},
		{OIDTextArray, `{abc,"d e",NULL,"f\"g"}`, `{abc,"d e",NULL,"f\"g"}`},
		{OIDBytea, `\x6869`, `\x6869`},
	}
	for _, tt := range tests {
		data := []byte(tt.in)
		v, err := DecodeOID(tt.oid, Value{Kind: Text, Data: data}, r)
		if err != nil {
			t.Fatalf("DecodeOID(%q): %v", tt.in, err)
		}
		for i := range data {
			data[i] = '#'
		}
		if got, err := FormatOID(tt.oid, v, r); err != nil || got != tt.want {
			t.Errorf("after reusing the input, DecodeOID(%q) prints %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
