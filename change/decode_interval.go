package change

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseInterval parses an interval in PostgreSQL's "postgres" style, the
// form the server prints: "1 year 2 mons 3 days 04:05:06.789",
// "-1 days +02:00:00", "00:00:00". The verbose units PostgreSQL accepts
// on input (years, months, weeks, days, hours, minutes, seconds,
// milliseconds, microseconds and their abbreviations), a leading "@" and a
// trailing "ago" are accepted too. Fractions are accepted for seconds and
// smaller units only; ISO 8601 ("P1Y2M") and SQL-standard forms are not.
func ParseInterval(s string) (Interval, error) {
	bad := func(why string) (Interval, error) {
		return Interval{}, fmt.Errorf("parse interval %q: %s", clip(s), why)
	}
	var months, days, us int64
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return bad("empty")
	}
	if fields[0] == "@" {
		fields = fields[1:]
	}
	ago := false
	if n := len(fields); n > 0 && strings.EqualFold(fields[n-1], "ago") {
		ago = true
		fields = fields[:n-1]
	}
	if len(fields) == 0 {
		return bad("no fields")
	}
	ok := true
	for k := 0; k < len(fields); k++ {
		f := fields[k]
		if strings.IndexByte(f, ':') >= 0 {
			t, good := parseIntervalClock(f)
			if !good {
				return bad(fmt.Sprintf("malformed time %q", clip(f)))
			}
			if us, ok = addInt64(us, t); !ok {
				return bad("out of range")
			}
			continue
		}
		num := f
		unit := ""
		// A number may carry its unit ("1day") or take the next field.
		if cut := strings.IndexFunc(num, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != '+' && r != '-' }); cut > 0 {
			num, unit = f[:cut], f[cut:]
		} else if k+1 < len(fields) {
			k++
			unit = fields[k]
		} else {
			unit = "s" // a bare number is seconds, as in PostgreSQL
		}
		whole, fracDigits, neg, good := splitNumber(num)
		if !good {
			return bad(fmt.Sprintf("malformed number %q", clip(num)))
		}
		u, good := intervalUnits[strings.ToLower(unit)]
		if !good {
			return bad(fmt.Sprintf("unknown unit %q", clip(unit)))
		}
		if fracDigits != "" && u.micros == 0 {
			return bad(fmt.Sprintf("fractional %s are not supported; write the value in smaller units", unit))
		}
		sign := int64(1)
		if neg {
			sign = -1
		}
		switch {
		case u.months != 0:
			v, good := mulInt64(whole, u.months)
			if !good {
				return bad("out of range")
			}
			if months, ok = addInt64(months, sign*v); !ok {
				return bad("out of range")
			}
		case u.days != 0:
			v, good := mulInt64(whole, u.days)
			if !good {
				return bad("out of range")
			}
			if days, ok = addInt64(days, sign*v); !ok {
				return bad("out of range")
			}
		default:
			v, good := mulInt64(whole, u.micros)
			if !good {
				return bad("out of range")
			}
			fr, _ := fracMicros(fracDigits)
			// fr is in microseconds per second; scale to the unit.
			switch u.micros {
			case usecsPerSec:
			case usecsPerMin, usecsPerHour:
				fr = fr * (u.micros / usecsPerSec)
			case 1000:
				fr = (fr + 500) / 1000
			case 1:
				fr = (fr + 500000) / 1000000
			}
			if v, ok = addInt64(v, fr); !ok {
				return bad("out of range")
			}
			if us, ok = addInt64(us, sign*v); !ok {
				return bad("out of range")
			}
		}
	}
	if ago {
		months, days, us = -months, -days, -us
	}
	if months > math.MaxInt32 || months < math.MinInt32 || days > math.MaxInt32 || days < math.MinInt32 {
		return bad("out of range")
	}
	return Interval{Months: int32(months), Days: int32(days), Micros: us}, nil
}

type intervalUnit struct{ months, days, micros int64 }

var intervalUnits = map[string]intervalUnit{}

func init() {
	add := func(u intervalUnit, names ...string) {
		for _, n := range names {
			intervalUnits[n] = u
		}
	}
	add(intervalUnit{months: 12000}, "millennium", "millennia", "millenniums", "mil", "mils")
	add(intervalUnit{months: 1200}, "century", "centuries", "cent", "c")
	add(intervalUnit{months: 120}, "decade", "decades", "dec", "decs")
	add(intervalUnit{months: 12}, "year", "years", "yr", "yrs", "y")
	add(intervalUnit{months: 1}, "mon", "mons", "month", "months")
	add(intervalUnit{days: 7}, "week", "weeks", "w")
	add(intervalUnit{days: 1}, "day", "days", "d")
	add(intervalUnit{micros: usecsPerHour}, "hour", "hours", "hr", "hrs", "h")
	add(intervalUnit{micros: usecsPerMin}, "minute", "minutes", "min", "mins", "m")
	add(intervalUnit{micros: usecsPerSec}, "second", "seconds", "sec", "secs", "s")
	add(intervalUnit{micros: 1000}, "millisecond", "milliseconds", "msec", "msecs", "ms")
	add(intervalUnit{micros: 1}, "microsecond", "microseconds", "usec", "usecs", "us")
}

// splitNumber splits [+-]digits[.digits] into its whole part, fraction
// digits and sign.
func splitNumber(s string) (whole int64, frac string, neg, ok bool) {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	w, f, _ := strings.Cut(s, ".")
	if w == "" && f == "" {
		return 0, "", false, false
	}
	for i := 0; i < len(f); i++ {
		if f[i] < '0' || f[i] > '9' {
			return 0, "", false, false
		}
	}
	if w != "" {
		v, err := strconv.ParseUint(w, 10, 63)
		if err != nil || w[0] == '+' {
			return 0, "", false, false
		}
		whole = int64(v)
	}
	return whole, f, neg, true
}

// parseIntervalClock parses [+-]H:MM[:SS[.f]] with any number of hours.
func parseIntervalClock(f string) (int64, bool) {
	neg := false
	if f[0] == '+' || f[0] == '-' {
		neg = f[0] == '-'
		f = f[1:]
	}
	parts := strings.Split(f, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, false
	}
	h, err := strconv.ParseUint(parts[0], 10, 63)
	if err != nil || parts[0] == "" || parts[0][0] == '+' {
		return 0, false
	}
	m, err := strconv.ParseUint(parts[1], 10, 8)
	if err != nil || len(parts[1]) > 2 || parts[1][0] == '+' || m > 59 {
		return 0, false
	}
	var sec, fr int64
	if len(parts) == 3 {
		w, fd, ok := strings.Cut(parts[2], ".")
		sv, err := strconv.ParseUint(w, 10, 8)
		if err != nil || len(w) > 2 || w[0] == '+' || sv > 60 || (ok && fd == "") {
			return 0, false
		}
		for i := 0; i < len(fd); i++ {
			if fd[i] < '0' || fd[i] > '9' {
				return 0, false
			}
		}
		sec = int64(sv)
		fr, _ = fracMicros(fd)
	}
	us, ok := mulInt64(int64(h), usecsPerHour)
	if !ok {
		return 0, false
	}
	if us, ok = addInt64(us, int64(m)*usecsPerMin+sec*usecsPerSec+fr); !ok {
		return 0, false
	}
	if neg {
		us = -us
	}
	return us, true
}

func addInt64(a, b int64) (int64, bool) {
	c := a + b
	if (c > a) != (b > 0) {
		return 0, false
	}
	return c, true
}

func mulInt64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return c, true
}

// String returns PostgreSQL's text form of iv in the "postgres" interval
// style: "1 year 2 mons 3 days 04:05:06.789", "-1 days +02:00:00".
func (iv Interval) String() string { return string(iv.Append(nil)) }

// Append appends PostgreSQL's "postgres" style text form of iv to dst, as
// EncodeInterval does.
func (iv Interval) Append(dst []byte) []byte {
	isZero, isBefore := true, false
	part := func(v int64, unit string) {
		if v == 0 {
			return
		}
		if !isZero {
			dst = append(dst, ' ')
		}
		if isBefore && v > 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, v, 10)
		dst = append(dst, ' ')
		dst = append(dst, unit...)
		if v != 1 {
			dst = append(dst, 's')
		}
		isBefore = v < 0
		isZero = false
	}
	part(int64(iv.Months/12), "year")
	part(int64(iv.Months%12), "mon")
	part(int64(iv.Days), "day")
	t := iv.Micros
	hour := t / usecsPerHour
	t -= hour * usecsPerHour
	min := t / usecsPerMin
	t -= min * usecsPerMin
	sec := t / usecsPerSec
	frac := t - sec*usecsPerSec
	if isZero || hour != 0 || min != 0 || sec != 0 || frac != 0 {
		minus := hour < 0 || min < 0 || sec < 0 || frac < 0
		if !isZero {
			dst = append(dst, ' ')
		}
		if minus {
			dst = append(dst, '-')
		} else if isBefore {
			dst = append(dst, '+')
		}
		dst = appendPad(dst, abs64(hour), 2)
		dst = append(dst, ':')
		dst = appendPad(dst, abs64(min), 2)
		dst = append(dst, ':')
		dst = appendSeconds(dst, sec, frac)
	}
	return dst
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// Cmp compares intervals as PostgreSQL's interval_cmp does: by their span
// with a month counted as 30 days and a day as 24 hours, so "1 mon" equals
// "30 days". It returns -1, 0 or +1.
func (iv Interval) Cmp(o Interval) int {
	ad, ar := iv.span()
	bd, br := o.span()
	if ad != bd {
		return cmpInt64(ad, bd)
	}
	return cmpInt64(ar, br)
}

// span returns the interval as whole days and a remainder in [0, 1 day).
func (iv Interval) span() (days, rem int64) {
	q := floorDiv(iv.Micros, usecsPerDay)
	return int64(iv.Months)*30 + int64(iv.Days) + q, iv.Micros - q*usecsPerDay
}
