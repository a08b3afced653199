package query

import (
	"math/big"
	"strconv"
	"strings"

	"github.com/freshetdb/freshet/change"
)

// parseFloatExp returns the float64 nearest to digits × 10^exp, digits being
// a decimal integer's text (with an optional sign).
func parseFloatExp(digits string, exp int32) float64 {
	f, _ := strconv.ParseFloat(digits+"e"+strconv.Itoa(int(exp)), 64)
	return f
}

// numericLiteral reads the text of a numeric constant as PostgreSQL's lexer
// passes it on ("1.50", "1e-3", ".5"): digits, an optional fraction and an
// optional exponent.
func numericLiteral(s string) (change.Numeric, bool) {
	var mant strings.Builder
	exp := 0
	i, scale, digits := 0, 0, 0
	neg := false
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		neg = s[i] == '-'
		i++
	}
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		mant.WriteByte(s[i])
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			mant.WriteByte(s[i])
			digits++
			scale++
		}
	}
	if digits == 0 {
		return change.Numeric{}, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > 1<<20 || e < -(1<<20) {
			return change.Numeric{}, false
		}
		exp = e
		i = len(s)
	}
	if i != len(s) {
		return change.Numeric{}, false
	}
	c, ok := new(big.Int).SetString(mant.String(), 10)
	if !ok {
		return change.Numeric{}, false
	}
	if neg {
		c.Neg(c)
	}
	sc := scale - exp
	if sc < 0 {
		sc = 0
	}
	return change.Numeric{Coef: c, Exp: int32(exp - scale), Scale: int32(sc)}, true
}
