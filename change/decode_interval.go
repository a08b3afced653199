package change

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseInterval parses an interval as PostgreSQL's interval input does in
// the "postgres" style: the form the server prints ("1 year 2 mons 3 days
// 04:05:06.789", "-1 days +02:00:00", "00:00:00") and the verbose forms
// people write ("@ 1 minute ago", "1.5 days", "3 weeks 2 hours"). Fields
// are read right to left as PostgreSQL reads them: a number takes the unit
// after it, a bare rightmost number is seconds, a number before a time or
// after an hours field is days, each unit may appear once, and fractional
// units spill into smaller ones with PostgreSQL's arithmetic ("1.5 mons" is
// 1 mon 15 days). ISO 8601 ("P1Y2M") and SQL-standard ("1-2") forms are not
// accepted.
func ParseInterval(s string) (Interval, error) {
	bad := func(why string) (Interval, error) {
		return Interval{}, fmt.Errorf("parse interval %q: %s", clip(s), why)
	}
	var fields []string
	for _, f := range strings.Fields(s) {
		// A number may carry its unit: "1day" is "1 day".
		if cut := strings.IndexFunc(f, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != '+' && r != '-' && r != ':' }); cut > 0 {
			fields = append(fields, f[:cut], f[cut:])
		} else if f != "@" {
			fields = append(fields, f)
		}
	}
	if len(fields) == 0 {
		return bad("no fields")
	}
	var months, days, us int64
	var fmask uint
	ago, agoUnit := false, false
	unit, haveUnit := intervalUnit{}, false
	for k := len(fields) - 1; k >= 0; k-- {
		f := fields[k]
		var tmask uint
		switch {
		case strings.EqualFold(f, "ago"):
			// PostgreSQL 15 takes "ago" anywhere, but not right after a
			// number ("1 ago").
			ago = true
			unit, haveUnit, agoUnit = intervalUnit{}, true, true
			continue
		case strings.IndexByte(f, ':') >= 0:
			t, good := parseIntervalClock(f)
			if !good {
				return bad(fmt.Sprintf("malformed time %q", clip(f)))
			}
			var ok bool
			if us, ok = addInt64(us, t); !ok {
				return bad("out of range")
			}
			tmask = maskHour | maskMinute | maskSecond | maskMilli | maskMicro
			unit, haveUnit = intervalUnits["day"], true
		case f[0] >= '0' && f[0] <= '9' || f[0] == '.' || f[0] == '+' || f[0] == '-':
			whole, fracDigits, neg, good := splitNumber(f)
			if !good {
				return bad(fmt.Sprintf("malformed number %q", clip(f)))
			}
			u := unit
			if !haveUnit {
				u = intervalUnits["second"] // a bare rightmost number is seconds
			}
			if agoUnit && u.mask == 0 {
				return bad(fmt.Sprintf("number %q before \"ago\" has no unit", clip(f)))
			}
			fval := 0.0
			if fracDigits != "" {
				fval, _ = strconv.ParseFloat("0."+fracDigits, 64)
			}
			if neg {
				whole, fval = -whole, -fval
			}
			// PostgreSQL's arithmetic (DecodeInterval and its Adjust*
			// helpers), in float64 where it uses double, so fractional
			// units round the same way.
			good = true
			switch {
			case u.months == 1:
				months, good = addMul(months, whole, 1)
				if good {
					days, us, good = fractDays(days, us, fval, 30)
				}
			case u.months != 0:
				months, good = addMul(months, whole, u.months)
				if good {
					months, good = addInt64(months, int64(math.RoundToEven(fval*float64(u.months/12)*12)))
				}
			case u.days == 1:
				days, good = addMul(days, whole, 1)
				if good {
					us, good = fractMicros(us, fval, usecsPerDay)
				}
			case u.days != 0:
				days, good = addMul(days, whole, u.days)
				if good {
					days, us, good = fractDays(days, us, fval, u.days)
				}
			default:
				us, good = addMul(us, whole, u.micros)
				if good {
					us, good = fractMicros(us, fval, u.micros)
				}
			}
			if !good || days > math.MaxInt32 || days < math.MinInt32 || months > math.MaxInt32 || months < math.MinInt32 {
				return bad("out of range")
			}
			tmask = u.mask
			if u.mask == maskSecond && fval != 0 {
				tmask = maskSecond | maskMilli | maskMicro
			}
			if u.mask == maskHour {
				unit, haveUnit = intervalUnits["day"], true // a number before hours is days
			} else {
				unit, haveUnit = u, true
			}
		default:
			// A unit without a number is ignored, as PostgreSQL 15 does.
			u, ok := intervalUnits[strings.ToLower(f)]
			if !ok {
				return bad(fmt.Sprintf("unknown unit %q", clip(f)))
			}
			unit, haveUnit = u, true
		}
		if tmask&fmask != 0 {
			return bad(fmt.Sprintf("%q repeats a field", clip(f)))
		}
		fmask |= tmask
	}
	if fmask == 0 {
		return bad("no fields")
	}
	if ago {
		months, days, us = -months, -days, -us
	}
	return Interval{Months: int32(months), Days: int32(days), Micros: us}, nil
}

// The interval fields, for refusing a unit given twice as PostgreSQL does.
const (
	maskMicro uint = 1 << iota
	maskMilli
	maskSecond
	maskMinute
	maskHour
	maskDay
	maskWeek
	maskMonth
	maskYear
	maskDecade
	maskCentury
	maskMillennium
)

type intervalUnit struct {
	months, days, micros int64
	mask                 uint
}

var intervalUnits = map[string]intervalUnit{}

func init() {
	add := func(u intervalUnit, names ...string) {
		for _, n := range names {
			intervalUnits[n] = u
		}
	}
	add(intervalUnit{months: 12000, mask: maskMillennium}, "millennium", "millennia", "millenniums", "mil", "mils")
	add(intervalUnit{months: 1200, mask: maskCentury}, "century", "centuries", "cent", "c")
	add(intervalUnit{months: 120, mask: maskDecade}, "decade", "decades", "dec", "decs")
	add(intervalUnit{months: 12, mask: maskYear}, "year", "years", "yr", "yrs", "y")
	add(intervalUnit{months: 1, mask: maskMonth}, "mon", "mons", "month", "months")
	add(intervalUnit{days: 7, mask: maskWeek}, "week", "weeks", "w")
	add(intervalUnit{days: 1, mask: maskDay}, "day", "days", "d")
	add(intervalUnit{micros: usecsPerHour, mask: maskHour}, "hour", "hours", "hr", "hrs", "h")
	add(intervalUnit{micros: usecsPerMin, mask: maskMinute}, "minute", "minutes", "min", "mins", "m")
	add(intervalUnit{micros: usecsPerSec, mask: maskSecond}, "second", "seconds", "sec", "secs", "s")
	add(intervalUnit{micros: 1000, mask: maskMilli}, "millisecond", "milliseconds", "msec", "msecs", "ms")
	add(intervalUnit{micros: 1, mask: maskMicro}, "microsecond", "microseconds", "usec", "usecs", "us")
}

// addMul returns acc + v*scale, or false on overflow.
func addMul(acc, v, scale int64) (int64, bool) {
	p, ok := mulInt64(v, scale)
	if !ok {
		return 0, false
	}
	return addInt64(acc, p)
}

// fractMicros adds frac units of scale microseconds, as PostgreSQL's
// AdjustFractMicroseconds: truncate, then round the fractional microsecond
// half to even.
func fractMicros(us int64, frac float64, scale int64) (int64, bool) {
	if frac == 0 {
		return us, true
	}
	frac *= float64(scale)
	if frac >= math.MaxInt64 || frac <= math.MinInt64 {
		return 0, false
	}
	u := int64(frac)
	u += int64(math.RoundToEven(frac - float64(u)))
	return addInt64(us, u)
}

// fractDays adds frac units of scale days, as AdjustFractDays: whole days,
// then the rest in microseconds.
func fractDays(days, us int64, frac float64, scale int64) (int64, int64, bool) {
	if frac == 0 {
		return days, us, true
	}
	frac *= float64(scale)
	extra := int64(frac)
	days += extra
	us, ok := fractMicros(us, frac-float64(extra), usecsPerDay)
	return days, us, ok
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
