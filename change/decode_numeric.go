package change

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// The limits of PostgreSQL's numeric: at most 131072 digits before the
// decimal point and 16383 after. ParseNumeric refuses what numeric_in
// refuses ("value overflows numeric format"), so a short hostile input such
// as "1e999999999" cannot ask for a huge number.
const (
	maxNumericIntDigits = 131072
	maxNumericScale     = 16383
	maxNumericDigits    = maxNumericIntDigits + maxNumericScale
)

var bigTen = big.NewInt(10)

// ParseNumeric parses a numeric in PostgreSQL's text form ("-12.3400",
// "NaN", "Infinity", "-Infinity"; numeric_in's exponent form "1.5e-3" and
// surrounding spaces are accepted too). The scale is kept: "1.50" prints
// back as "1.50".
func ParseNumeric(s string) (Numeric, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "nan":
		return Numeric{NaN: true}, nil
	case "infinity", "+infinity", "inf", "+inf":
		return Numeric{Inf: 1}, nil
	case "-infinity", "-inf":
		return Numeric{Inf: -1}, nil
	}
	bad := func(why string) (Numeric, error) {
		return Numeric{}, fmt.Errorf("parse numeric %q: %s", clip(s), why)
	}
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	digits := make([]byte, 0, min(len(t)+1, 64))
	if neg {
		digits = append(digits, '-')
	}
	frac, seenDot, nd, sig := 0, false, 0, 0
	i := 0
	for ; i < len(t); i++ {
		c := t[i]
		switch {
		case c >= '0' && c <= '9':
			nd++
			if seenDot {
				frac++
			}
			if c == '0' && sig == 0 {
				continue // leading zeros carry nothing
			}
			digits = append(digits, c)
			sig++
		case c == '.' && !seenDot:
			seenDot = true
		default:
			goto rest
		}
	}
rest:
	if nd == 0 {
		return bad("want digits, an optional fraction and exponent, NaN or Infinity")
	}
	exp := 0
	if i < len(t) {
		if t[i] != 'e' && t[i] != 'E' {
			return bad(fmt.Sprintf("unexpected %q", t[i]))
		}
		e, err := strconv.Atoi(t[i+1:])
		if err != nil || t[i+1:] == "" {
			return bad("malformed exponent")
		}
		if e > 2*maxNumericDigits || e < -2*maxNumericDigits {
			return bad("value overflows numeric format")
		}
		exp = e
	}
	scale := max(0, frac-exp)
	if scale > maxNumericScale || sig+exp-frac > maxNumericIntDigits {
		return bad(fmt.Sprintf("value overflows numeric format (at most %d digits before the decimal point and %d after)", maxNumericIntDigits, maxNumericScale))
	}
	if sig == 0 {
		digits = append(digits, '0')
	}
	coef, ok := new(big.Int).SetString(string(digits), 10)
	if !ok {
		return bad("malformed digits")
	}
	// Bring the exponent to -scale.
	if e := exp - frac + scale; e > 0 {
		coef.Mul(coef, new(big.Int).Exp(bigTen, big.NewInt(int64(e)), nil))
	}
	return Numeric{Coef: coef, Exp: int32(-scale), Scale: int32(scale)}, nil
}

// IsFinite reports whether n is neither NaN nor an infinity.
func (n Numeric) IsFinite() bool { return !n.NaN && n.Inf == 0 }

// String returns PostgreSQL's text form of n, with Scale digits after the
// decimal point (more if Exp asks for them: nothing is ever rounded).
func (n Numeric) String() string { return string(n.Append(nil)) }

// Append appends PostgreSQL's text form of n to dst.
func (n Numeric) Append(dst []byte) []byte {
	switch {
	case n.NaN:
		return append(dst, "NaN"...)
	case n.Inf > 0:
		return append(dst, "Infinity"...)
	case n.Inf < 0:
		return append(dst, "-Infinity"...)
	}
	coef := n.Coef
	if coef == nil {
		coef = new(big.Int)
	}
	scale := int(n.Scale)
	if scale < 0 {
		scale = 0
	}
	if e := int(n.Exp); e > -scale {
		coef = new(big.Int).Mul(coef, new(big.Int).Exp(bigTen, big.NewInt(int64(e+scale)), nil))
	} else if e < -scale {
		scale = -e
	}
	if coef.Sign() < 0 {
		dst = append(dst, '-')
	}
	start := len(dst)
	dst = new(big.Int).Abs(coef).Append(dst, 10)
	if scale == 0 {
		return dst
	}
	nd := len(dst) - start
	if nd <= scale { // pad to 0.00ddd
		pad := scale - nd + 1
		dst = append(dst, make([]byte, pad)...)
		copy(dst[start+pad:], dst[start:start+nd])
		for i := 0; i < pad; i++ {
			dst[start+i] = '0'
		}
		nd += pad
	}
	dst = append(dst, 0)
	point := start + nd - scale
	copy(dst[point+1:], dst[point:start+nd])
	dst[point] = '.'
	return dst
}

// Cmp compares a and b as PostgreSQL orders numerics: by value (1.5 equals
// 1.50), -Infinity below every finite value, Infinity above, and NaN equal
// to itself and above everything else. It returns -1, 0 or +1.
func (n Numeric) Cmp(b Numeric) int {
	ra, rb := n.rank(), b.rank()
	if ra != rb || ra != 1 {
		return cmpInt(ra, rb)
	}
	ca, cb := n.Coef, b.Coef
	if ca == nil {
		ca = new(big.Int)
	}
	if cb == nil {
		cb = new(big.Int)
	}
	if n.Exp == b.Exp {
		return ca.Cmp(cb)
	}
	if sa, sb := ca.Sign(), cb.Sign(); sa != sb {
		return cmpInt(sa, sb)
	}
	// Scale the one with the larger exponent down to the smaller one.
	if n.Exp > b.Exp {
		return scaleUp(ca, int64(n.Exp-b.Exp)).Cmp(cb)
	}
	return ca.Cmp(scaleUp(cb, int64(b.Exp-n.Exp)))
}

// rank orders the classes of numeric: -Infinity, finite, Infinity, NaN.
func (n Numeric) rank() int {
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

func scaleUp(x *big.Int, e int64) *big.Int {
	return new(big.Int).Mul(x, new(big.Int).Exp(bigTen, big.NewInt(e), nil))
}

// Rat returns n's exact value, or nil for NaN and the infinities.
func (n Numeric) Rat() *big.Rat {
	if !n.IsFinite() {
		return nil
	}
	r := new(big.Rat)
	if n.Coef != nil {
		r.SetInt(n.Coef)
	}
	if n.Exp > 0 {
		return r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(bigTen, big.NewInt(int64(n.Exp)), nil)))
	}
	if n.Exp < 0 {
		return r.Quo(r, new(big.Rat).SetInt(new(big.Int).Exp(bigTen, big.NewInt(int64(-n.Exp)), nil)))
	}
	return r
}

// Float64 returns the float64 nearest to n, as PostgreSQL's numeric to
// float8 cast gives it (NaN and infinities carried over).
func (n Numeric) Float64() float64 {
	switch {
	case n.NaN:
		return math.NaN()
	case n.Inf != 0:
		return math.Inf(int(n.Inf))
	}
	f, _ := strconv.ParseFloat(n.String(), 64)
	return f
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
