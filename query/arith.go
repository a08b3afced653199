package query

import (
	"math"
	"math/big"
	"strconv"

	"github.com/freshetdb/freshet/change"
)

// Arithmetic with PostgreSQL's semantics: integer operators check the
// result against their result type (int2pl, int48mul, ...), numeric is
// exact with PostgreSQL's result scales (add_var, mul_var,
// select_div_scale), float8 and float4 follow float.h's checks (an
// infinite result from finite inputs is an overflow, a zero result from
// non-zero inputs an underflow).

// arithOp is a binary arithmetic operator.
type arithOp uint8

const (
	opAdd arithOp = iota
	opSub
	opMul
	opDiv
	opMod
)

var arithNames = map[string]arithOp{"+": opAdd, "-": opSub, "*": opMul, "/": opDiv, "%": opMod}

// intRangeError raises the error of an integer type's overflow.
func intRangeError(oid uint32) {
	switch oid {
	case change.OIDInt2:
		raise(stateOutOfRange, "smallint out of range")
	case change.OIDInt8:
		raise(stateOutOfRange, "bigint out of range")
	}
	raise(stateOutOfRange, "integer out of range")
}

func checkInt(v int64, oid uint32) int64 {
	if !intFits(v, oid) {
		intRangeError(oid)
	}
	return v
}

// intArith computes a op b for integers of result type oid.
func intArith(op arithOp, a, b int64, oid uint32) int64 {
	switch op {
	case opAdd:
		r := a + b
		if (r > a) != (b > 0) {
			intRangeError(oid)
		}
		return checkInt(r, oid)
	case opSub:
		r := a - b
		if (r < a) != (b > 0) {
			intRangeError(oid)
		}
		return checkInt(r, oid)
	case opMul:
		if a == 0 || b == 0 {
			return 0
		}
		r := a * b
		if r/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
			intRangeError(oid)
		}
		return checkInt(r, oid)
	case opDiv:
		if b == 0 {
			raise(stateDivisionByZero, "division by zero")
		}
		if b == -1 {
			if a == math.MinInt64 {
				intRangeError(oid)
			}
			return checkInt(-a, oid)
		}
		return a / b
	}
	if b == 0 {
		raise(stateDivisionByZero, "division by zero")
	}
	if b == -1 {
		return 0 // int4mod: avoids the overflow of MIN % -1
	}
	return a % b
}

// floatArith computes a op b in float8 (bits 64) or float4 (bits 32).
func floatArith(op arithOp, a, b float64, bits int) float64 {
	var r float64
	switch op {
	case opAdd:
		r = a + b
	case opSub:
		r = a - b
	case opMul:
		r = a * b
	case opDiv:
		if b == 0 && !math.IsNaN(a) {
			raise(stateDivisionByZero, "division by zero")
		}
		r = a / b
	}
	if bits == 32 {
		switch op {
		case opAdd:
			r = float64(float32(a) + float32(b))
		case opSub:
			r = float64(float32(a) - float32(b))
		case opMul:
			r = float64(float32(a) * float32(b))
		case opDiv:
			r = float64(float32(a) / float32(b))
		}
	}
	ainf, binf := math.IsInf(a, 0), math.IsInf(b, 0)
	switch op {
	case opAdd, opSub:
		if math.IsInf(r, 0) && !ainf && !binf {
			raise(stateOutOfRange, "value out of range: overflow")
		}
	case opMul:
		if math.IsInf(r, 0) && !ainf && !binf {
			raise(stateOutOfRange, "value out of range: overflow")
		}
		if r == 0 && a != 0 && b != 0 {
			raise(stateOutOfRange, "value out of range: underflow")
		}
	case opDiv:
		if math.IsInf(r, 0) && !ainf {
			raise(stateOutOfRange, "value out of range: overflow")
		}
		if r == 0 && a != 0 && !binf {
			raise(stateOutOfRange, "value out of range: underflow")
		}
	}
	return r
}

// numParts returns a finite numeric as coef × 10^-scale with scale its
// display scale (or more, when its exponent asks for more digits).
func numParts(n change.Numeric) (*big.Int, int32) {
	c := n.Coef
	if c == nil {
		c = new(big.Int)
	}
	s := max(n.Scale, 0)
	switch e := n.Exp; {
	case e > -s:
		c = new(big.Int).Mul(c, pow10(int64(e+s)))
	case e < -s:
		s = -e
	}
	return c, s
}

func pow10(e int64) *big.Int { return new(big.Int).Exp(bigTen, big.NewInt(e), nil) }

// mkNumeric builds a finite numeric from coef × 10^-scale, raising
// PostgreSQL's overflow error past numeric's limits.
func mkNumeric(c *big.Int, scale int32) change.Numeric {
	if scale > 16383 {
		raise(stateOutOfRange, "value overflows numeric format")
	}
	if c.Sign() != 0 {
		if d := int64(len(new(big.Int).Abs(c).Text(10))) - int64(scale); d > 131072 {
			raise(stateOutOfRange, "value overflows numeric format")
		}
	}
	return change.Numeric{Coef: c, Exp: -scale, Scale: scale}
}

var numNaN = change.Numeric{NaN: true}

func numSign(n change.Numeric) int {
	if n.Inf != 0 {
		return int(n.Inf)
	}
	if n.Coef == nil {
		return 0
	}
	return n.Coef.Sign()
}

// numericArith computes a op b as numeric_add, numeric_sub, numeric_mul,
// numeric_div and numeric_mod do.
func numericArith(op arithOp, a, b change.Numeric) change.Numeric {
	if !a.IsFinite() || !b.IsFinite() {
		return numericSpecial(op, a, b)
	}
	ca, sa := numParts(a)
	cb, sb := numParts(b)
	align := func() (*big.Int, *big.Int, int32) {
		s := max(sa, sb)
		x, y := ca, cb
		if sa < s {
			x = new(big.Int).Mul(ca, pow10(int64(s-sa)))
		}
		if sb < s {
			y = new(big.Int).Mul(cb, pow10(int64(s-sb)))
		}
		return x, y, s
	}
	switch op {
	case opAdd:
		x, y, s := align()
		return mkNumeric(new(big.Int).Add(x, y), s)
	case opSub:
		x, y, s := align()
		return mkNumeric(new(big.Int).Sub(x, y), s)
	case opMul:
		s := sa + sb
		r := new(big.Int).Mul(ca, cb)
		if s > 16383 {
			r = roundHalfAway(r, pow10(int64(s-16383)))
			s = 16383
		}
		return mkNumeric(r, s)
	case opDiv:
		if cb.Sign() == 0 {
			raise(stateDivisionByZero, "division by zero")
		}
		rs := divScale(ca, sa, cb, sb)
		// a/b at scale rs: ca·10^(sb+rs) / (cb·10^sa), rounded half away
		// from zero as div_var rounds.
		num := new(big.Int).Mul(ca, pow10(int64(sb+rs)))
		den := new(big.Int).Mul(cb, pow10(int64(sa)))
		return mkNumeric(roundHalfAway(num, den), rs)
	}
	if cb.Sign() == 0 {
		raise(stateDivisionByZero, "division by zero")
	}
	x, y, s := align()
	return mkNumeric(new(big.Int).Rem(x, y), s)
}

// roundHalfAway returns num/den rounded to the nearest integer, halves
// away from zero.
func roundHalfAway(num, den *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	if r.Sign() == 0 {
		return q
	}
	r2 := new(big.Int).Abs(r)
	r2.Lsh(r2, 1)
	if r2.Cmp(new(big.Int).Abs(den)) >= 0 {
		if (num.Sign() < 0) != (den.Sign() < 0) {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q
}

// nbaseDigit returns the weight of c × 10^-s in base 10000 and its first
// base-10000 digit, as numeric's NumericVar holds it (0, 0 for zero).
func nbaseDigit(c *big.Int, s int32) (weight int64, first int64) {
	if c.Sign() == 0 {
		return 0, 0
	}
	abs := new(big.Int).Abs(c)
	e10 := int64(len(abs.Text(10))) - 1 - int64(s) // 10^e10 <= |v| < 10^(e10+1)
	w := e10 / 4
	if e10 < 0 && e10%4 != 0 {
		w--
	}
	// first = floor(|v| / 10^(4w)) = floor(abs / 10^(s+4w)).
	sh := int64(s) + 4*w
	var f *big.Int
	if sh >= 0 {
		f = new(big.Int).Quo(abs, pow10(sh))
	} else {
		f = new(big.Int).Mul(abs, pow10(-sh))
	}
	return w, f.Int64()
}

// divScale is select_div_scale: the result scale of numeric division.
func divScale(ca *big.Int, sa int32, cb *big.Int, sb int32) int32 {
	w1, f1 := nbaseDigit(ca, sa)
	w2, f2 := nbaseDigit(cb, sb)
	qw := w1 - w2
	if f1 <= f2 {
		qw--
	}
	rs := 16 - qw*4
	rs = max(rs, int64(sa), int64(sb), 0)
	rs = min(rs, 1000)
	return int32(rs)
}

// numericSpecial is numeric arithmetic with NaN or an infinity.
func numericSpecial(op arithOp, a, b change.Numeric) change.Numeric {
	if a.NaN || b.NaN {
		return numNaN
	}
	sa, sb := numSign(a), numSign(b)
	inf := func(s int) change.Numeric { return change.Numeric{Inf: int8(s)} }
	switch op {
	case opAdd:
		switch {
		case a.Inf != 0 && b.Inf != 0:
			if a.Inf != b.Inf {
				return numNaN
			}
			return a
		case a.Inf != 0:
			return a
		}
		return b
	case opSub:
		switch {
		case a.Inf != 0 && b.Inf != 0:
			if a.Inf == b.Inf {
				return numNaN
			}
			return a
		case a.Inf != 0:
			return a
		}
		return inf(-int(b.Inf))
	case opMul:
		if sa == 0 || sb == 0 {
			return numNaN
		}
		return inf(sa * sb)
	case opDiv:
		if a.Inf != 0 {
			if b.Inf != 0 {
				return numNaN
			}
			if sb == 0 {
				raise(stateDivisionByZero, "division by zero")
			}
			return inf(sa * sb)
		}
		return change.Numeric{Coef: new(big.Int)} // finite / ±Infinity
	}
	// mod
	if a.Inf != 0 {
		if sb == 0 {
			raise(stateDivisionByZero, "division by zero")
		}
		return numNaN
	}
	return a // finite % ±Infinity
}

// numericNeg is numeric_uminus.
func numericNeg(n change.Numeric) change.Numeric {
	switch {
	case n.NaN:
		return n
	case n.Inf != 0:
		return change.Numeric{Inf: -n.Inf}
	}
	c, s := numParts(n)
	return change.Numeric{Coef: new(big.Int).Neg(c), Exp: -s, Scale: s}
}

// intNumeric is an integer as numeric (scale 0).
func intNumeric(v int64) change.Numeric { return change.Numeric{Coef: big.NewInt(v)} }

// floatNumeric is float8_numeric (bits 64) or float4_numeric (bits 32):
// the value printed with DBL_DIG (15) or FLT_DIG (6) significant digits
// and read back.
func floatNumeric(f float64, bits int) change.Numeric {
	switch {
	case math.IsNaN(f):
		return numNaN
	case math.IsInf(f, 0):
		if f > 0 {
			return change.Numeric{Inf: 1}
		}
		return change.Numeric{Inf: -1}
	}
	digits := 15
	if bits == 32 {
		digits = 6
	}
	n, err := change.ParseNumeric(strconv.FormatFloat(f, 'g', digits, bits))
	if err != nil {
		raise(stateOutOfRange, "value overflows numeric format")
	}
	return n
}

// numericRound rounds n to scale s (numeric's typmod rounding, halves
// away from zero) and checks it has at most p-s digits before the point.
func numericRound(n change.Numeric, p, s int32) change.Numeric {
	if n.NaN {
		return n
	}
	if n.Inf != 0 {
		raise(stateOutOfRange, "numeric field overflow")
	}
	c, sc := numParts(n)
	var r *big.Int
	switch {
	case sc > s:
		r = roundHalfAway(c, pow10(int64(sc-s)))
	case sc < s:
		r = new(big.Int).Mul(c, pow10(int64(s-sc)))
	default:
		r = c
	}
	if r.Sign() != 0 {
		if d := int64(len(new(big.Int).Abs(r).Text(10))) - int64(s); d > int64(p-s) {
			raise(stateOutOfRange, "numeric field overflow")
		}
	}
	return change.Numeric{Coef: r, Exp: -s, Scale: s}
}
