package change

import "math/big"

// This file declares the typed forms Decode produces from a value's text
// form. The mapping from PostgreSQL types to Go types is:
//
//	int2, int4, int8, oid        int64
//	float4, float8               float64 (NaN, +Inf, -Inf kept)
//	numeric                      Numeric (exact, arbitrary precision)
//	bool                         bool
//	text, varchar, bpchar, name,
//	char, enums, unknown types   string
//	bytea                        []byte
//	uuid                         UUID
//	json, jsonb                  JSON
//	date                         Date
//	time                         TimeOfDay
//	timetz                       TimeTZ
//	timestamp, timestamptz       Timestamp (timestamptz in UTC)
//	interval                     Interval
//	arrays of any of these       Array
//	domains                      their base type's form
//
// NULL decodes to nil.

// TypeKind says what kind of type a Type is (pg_type.typtype, with arrays
// told apart).
type TypeKind uint8

// The kinds of type.
const (
	KindBase      TypeKind = iota // a built-in or extension base type
	KindEnum                      // an enum: values are labels
	KindDomain                    // a domain over Base
	KindArray                     // an array of Elem
	KindComposite                 // a row type (kept as text)
	KindRange                     // a range (kept as text)
	KindOther                     // anything else (kept as text)
)

// Type is what decoding needs to know about a PostgreSQL type.
type Type struct {
	OID    uint32
	Schema string
	Name   string
	Kind   TypeKind
	Base   uint32 // KindDomain: the base type
	Elem   uint32 // KindArray: the element type
	Delim  byte   // KindArray: the element delimiter (',' for all but box)
}

// TypeResolver finds types by OID. Built-in types are known without one;
// enums, domains and arrays of them need the catalog (pgwal resolves them
// from pg_type when a pgoutput Type message or an unknown OID appears).
type TypeResolver interface {
	Type(oid uint32) (Type, bool)
}

// Numeric is an exact numeric: Coef × 10^Exp, or NaN or an infinity.
// Scale is the number of digits after the decimal point PostgreSQL printed,
// kept so the value prints back exactly (1.50 stays 1.50).
type Numeric struct {
	Coef  *big.Int // nil for NaN and infinities
	Exp   int32
	Scale int32
	Inf   int8 // +1 or -1 for ±Infinity, 0 otherwise
	NaN   bool
}

// UUID is a 128-bit UUID.
type UUID [16]byte

// JSON is a json or jsonb value's text.
type JSON []byte

// Date is a calendar date as days since 2000-01-01 (PostgreSQL's epoch),
// proleptic Gregorian, BC dates negative, or an infinity.
type Date struct {
	Days int32
	Inf  int8 // +1 infinity, -1 -infinity
}

// TimeOfDay is a time without time zone: microseconds since midnight
// (24:00:00 is 86400000000).
type TimeOfDay int64

// TimeTZ is a time with time zone: microseconds since midnight and the
// zone's offset east of UTC in seconds.
type TimeTZ struct {
	Micros int64
	Offset int32
}

// Timestamp is a timestamp as microseconds since 2000-01-01 00:00:00 (UTC
// for timestamptz), or an infinity. It covers PostgreSQL's whole range,
// 4713 BC to 294276 AD.
type Timestamp struct {
	Micros int64
	Inf    int8 // +1 infinity, -1 -infinity
}

// Interval is PostgreSQL's interval: months, days and microseconds, kept
// apart as PostgreSQL keeps them.
type Interval struct {
	Months int32
	Days   int32
	Micros int64
}

// Array is a one- or multi-dimensional array. Elems holds the elements in
// row-major order, each decoded by the element type (nil for NULL).
type Array struct {
	Dims  []ArrayDim
	Elems []any
}

// ArrayDim is one dimension of an Array.
type ArrayDim struct {
	Len   int32
	Lower int32 // lower bound, 1 unless the text form said otherwise
}
