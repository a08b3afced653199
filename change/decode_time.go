package change

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

const (
	usecsPerSec  = int64(1_000_000)
	usecsPerMin  = 60 * usecsPerSec
	usecsPerHour = 60 * usecsPerMin
	usecsPerDay  = 24 * usecsPerHour

	// unixToPG is the number of days from 1970-01-01 to 2000-01-01.
	unixToPG = 10957

	// The ranges PostgreSQL accepts: dates from 4714-11-24 BC to
	// 5874897-12-31, timestamps from 4714-11-24 00:00:00 BC up to but not
	// including 294277-01-01 00:00:00, as offsets from 2000-01-01.
	minDateDays     = -2451545
	maxDateDays     = 2145031948
	minTimestampUS  = int64(-211813488000000000)
	endTimestampUS  = int64(9223371331200000000)
	maxTZOffsetSecs = 15*3600 + 59*60 + 59
)

// daysFromCivil returns the days from 2000-01-01 to the proleptic Gregorian
// date y-m-d, y astronomical (0 is 1 BC).
func daysFromCivil(y int64, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := int64((m + 9) % 12)
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468 - unixToPG
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(days int64) (y int64, m, d int) {
	z := days + unixToPG + 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = int(mp + 3)
	} else {
		m = int(mp - 9)
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func daysIn(y int64, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// scanner reads date/time text forms.
type scanner struct {
	s string
	i int
}

func (p *scanner) eof() bool { return p.i >= len(p.s) }

func (p *scanner) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *scanner) skipSpace() {
	for p.i < len(p.s) && isSpace(p.s[p.i]) {
		p.i++
	}
}

// digits reads between min and max decimal digits.
func (p *scanner) digits(min, max int) (int64, bool) {
	start := p.i
	var v int64
	for p.i < len(p.s) && p.i-start < max && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		v = v*10 + int64(p.s[p.i]-'0')
		p.i++
	}
	return v, p.i-start >= min
}

func (p *scanner) accept(c byte) bool {
	if p.peek() == c {
		p.i++
		return true
	}
	return false
}

// acceptWord accepts a case-insensitive word.
func (p *scanner) acceptWord(w string) bool {
	if len(p.s)-p.i >= len(w) && strings.EqualFold(p.s[p.i:p.i+len(w)], w) {
		p.i += len(w)
		return true
	}
	return false
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// date reads YYYY-MM-DD (the year of at least one digit, BC handled by the
// caller) and returns the year as written, month and day.
func (p *scanner) date() (y int64, m, d int, ok bool) {
	// One or two digits would be a month or day in PostgreSQL's MDY
	// reading ("1-02-29" is 2029-01-02); refuse rather than misread.
	y, ok = p.digits(3, 9)
	if !ok || !p.accept('-') {
		return 0, 0, 0, false
	}
	mm, ok := p.digits(1, 2)
	if !ok || !p.accept('-') {
		return 0, 0, 0, false
	}
	dd, ok := p.digits(1, 2)
	if !ok {
		return 0, 0, 0, false
	}
	return y, int(mm), int(dd), true
}

// dateTime reads an ISO date with an optional time ('T' or spaces before
// it), zone offset and era: the form of timestamp, timestamptz and (with
// the time ignored, as date_in ignores it) date.
func (p *scanner) dateTime() (y int64, m, d int, clock int64, off int32, bc, ok bool) {
	y, m, d, ok = p.date()
	if !ok {
		return
	}
	save := p.i
	if p.accept('T') || p.accept('t') {
		clock, ok = p.clock()
	} else {
		p.skipSpace()
		if c := p.peek(); c >= '0' && c <= '9' {
			clock, ok = p.clock()
		} else {
			p.i = save
		}
	}
	if !ok {
		return
	}
	if p.i != save {
		save = p.i
		p.skipSpace()
		if c := p.peek(); c == '+' || c == '-' || c == 'Z' || c == 'z' {
			off, ok = p.offset()
		} else {
			p.i = save
		}
	}
	if ok {
		bc = p.era()
	}
	return
}

// clock reads HH:MM[:SS[.ffffff]] and returns microseconds since midnight
// (24:00:00 allowed; fractions beyond microseconds rounded half to even).
func (p *scanner) clock() (int64, bool) {
	h, ok := p.digits(1, 2)
	if !ok || !p.accept(':') {
		return 0, false
	}
	m, ok := p.digits(1, 2)
	if !ok || m > 59 {
		return 0, false
	}
	var sec, frac int64
	if p.accept(':') {
		if sec, ok = p.digits(1, 2); !ok || sec > 60 {
			return 0, false
		}
		if p.accept('.') {
			if frac, ok = p.fraction(); !ok {
				return 0, false
			}
		}
	}
	us := h*usecsPerHour + m*usecsPerMin + sec*usecsPerSec + frac
	if h > 24 || us > usecsPerDay {
		return 0, false
	}
	return us, true
}

// fraction reads the digits after a decimal point as microseconds.
func (p *scanner) fraction() (int64, bool) {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	return fracMicros(p.s[start:p.i])
}

// fracMicros turns the digits of a fraction of a second into microseconds.
// Past six digits it rounds as PostgreSQL's ParseFractionalSecond does:
// rint of the fraction, read as a double, times a million.
func fracMicros(ds string) (int64, bool) {
	if len(ds) > 6 {
		f, err := strconv.ParseFloat("0."+ds, 64)
		if err != nil {
			return 0, false
		}
		return int64(math.RoundToEven(f * 1e6)), true
	}
	var us int64
	for k := 0; k < 6; k++ {
		us *= 10
		if k < len(ds) {
			us += int64(ds[k] - '0')
		}
	}
	return us, true
}

// offset reads a time zone offset: Z, or +HH[:MM[:SS]] / +HHMM, and returns
// it in seconds east of UTC.
func (p *scanner) offset() (int32, bool) {
	if p.accept('Z') || p.accept('z') {
		// "ZBC" is one unknown word to PostgreSQL, not Z then BC.
		c := p.peek()
		return 0, !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z')
	}
	sign := int64(1)
	switch {
	case p.accept('+'):
	case p.accept('-'):
		sign = -1
	default:
		return 0, false
	}
	h, ok := p.digits(1, 2)
	if !ok {
		return 0, false
	}
	var m, s int64
	if p.accept(':') {
		if m, ok = p.digits(2, 2); !ok {
			return 0, false
		}
		if p.accept(':') {
			if s, ok = p.digits(2, 2); !ok {
				return 0, false
			}
		}
	} else if p.i+2 <= len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		if m, ok = p.digits(2, 2); !ok {
			return 0, false
		}
	}
	if m > 59 || s > 59 {
		return 0, false
	}
	off := h*3600 + m*60 + s
	if off > maxTZOffsetSecs {
		return 0, false
	}
	return int32(sign * off), true
}

// bc reads an optional " BC" or " AD" era marker.
func (p *scanner) era() (bc bool) {
	save := p.i
	p.skipSpace()
	if p.acceptWord("BC") {
		return true
	}
	if !p.acceptWord("AD") {
		p.i = save
	}
	return false
}

// civil checks a written date and returns its day number.
func civil(y int64, m, d int, bc bool) (int64, bool) {
	if y == 0 || m < 1 || m > 12 || d < 1 {
		return 0, false
	}
	if bc {
		y = 1 - y
	}
	if d > daysIn(y, m) {
		return 0, false
	}
	return daysFromCivil(y, m, d), true
}

// special reads PostgreSQL's special date/time words.
func special(s string) (inf int8, epoch, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "infinity", "+infinity":
		return 1, false, true
	case "-infinity":
		return -1, false, true
	case "epoch":
		return 0, true, true
	}
	return 0, false, false
}

// ParseDate parses a date in PostgreSQL's ISO text form: "2024-01-02",
// "0044-03-15 BC", "12345-06-07", "infinity", "-infinity" (and "epoch").
func ParseDate(s string) (Date, error) {
	if inf, epoch, ok := special(s); ok {
		if epoch {
			return Date{Days: -unixToPG}, nil
		}
		return Date{Inf: inf}, nil
	}
	p := scanner{s: s}
	p.skipSpace()
	y, m, d, _, _, bc, ok := p.dateTime()
	p.skipSpace()
	if !ok || !p.eof() {
		return Date{}, fmt.Errorf("parse date %q: want YYYY-MM-DD with an optional BC, infinity or -infinity", clip(s))
	}
	days, ok := civil(y, m, d, bc)
	if !ok {
		return Date{}, fmt.Errorf("parse date %q: no such day", clip(s))
	}
	if days < minDateDays || days > maxDateDays {
		return Date{}, fmt.Errorf("parse date %q: out of PostgreSQL's range 4714-11-24 BC to 5874897-12-31", clip(s))
	}
	return Date{Days: int32(days)}, nil
}

// String returns PostgreSQL's ISO text form of d.
func (d Date) String() string { return string(d.Append(nil)) }

// Append appends PostgreSQL's ISO text form of d to dst.
func (d Date) Append(dst []byte) []byte {
	switch {
	case d.Inf > 0:
		return append(dst, "infinity"...)
	case d.Inf < 0:
		return append(dst, "-infinity"...)
	}
	y, m, dd := civilFromDays(int64(d.Days))
	dst = appendYMD(dst, y, m, dd)
	if y <= 0 {
		dst = append(dst, " BC"...)
	}
	return dst
}

func appendYMD(dst []byte, y int64, m, d int) []byte {
	if y <= 0 {
		y = 1 - y
	}
	dst = appendPad(dst, y, 4)
	dst = append(dst, '-')
	dst = appendPad(dst, int64(m), 2)
	dst = append(dst, '-')
	return appendPad(dst, int64(d), 2)
}

func appendPad(dst []byte, v int64, width int) []byte {
	var buf [20]byte
	b := strconv.AppendInt(buf[:0], v, 10)
	for k := len(b); k < width; k++ {
		dst = append(dst, '0')
	}
	return append(dst, b...)
}

// Cmp compares dates as PostgreSQL orders them (-infinity first, infinity
// last). It returns -1, 0 or +1.
func (d Date) Cmp(e Date) int {
	if d.Inf != 0 || e.Inf != 0 {
		return cmpInt(int(d.Inf), int(e.Inf))
	}
	return cmpInt(int(d.Days), int(e.Days))
}

// Time returns d as midnight UTC, and false for the infinities.
func (d Date) Time() (time.Time, bool) {
	if d.Inf != 0 {
		return time.Time{}, false
	}
	return time.Unix((int64(d.Days)+unixToPG)*86400, 0).UTC(), true
}

// ParseTimeOfDay parses a time without time zone: "HH:MM[:SS[.ffffff]]",
// 24:00:00 included; a zone offset is ignored, as PostgreSQL ignores it.
func ParseTimeOfDay(s string) (TimeOfDay, error) {
	p := scanner{s: s}
	p.skipSpace()
	us, ok := p.clock()
	if ok {
		// A zone offset is allowed and ignored, as time_in ignores it.
		save := p.i
		p.skipSpace()
		if c := p.peek(); c == '+' || c == '-' || c == 'Z' || c == 'z' {
			_, ok = p.offset()
		} else {
			p.i = save
		}
	}
	p.skipSpace()
	if !ok || !p.eof() {
		return 0, fmt.Errorf("parse time %q: want HH:MM:SS with an optional fraction, at most 24:00:00", clip(s))
	}
	return TimeOfDay(us), nil
}

// String returns PostgreSQL's text form of t, e.g. "04:05:06.789".
func (t TimeOfDay) String() string { return string(t.Append(nil)) }

// Append appends PostgreSQL's text form of t to dst.
func (t TimeOfDay) Append(dst []byte) []byte { return appendClock(dst, int64(t)) }

func appendClock(dst []byte, us int64) []byte {
	dst = appendPad(dst, us/usecsPerHour, 2)
	dst = append(dst, ':')
	dst = appendPad(dst, us/usecsPerMin%60, 2)
	dst = append(dst, ':')
	return appendSeconds(dst, us/usecsPerSec%60, us%usecsPerSec)
}

// appendSeconds appends SS[.ffffff] with trailing zeros of the fraction
// dropped, as PostgreSQL's AppendSeconds does (absolute values).
func appendSeconds(dst []byte, sec, frac int64) []byte {
	if sec < 0 {
		sec = -sec
	}
	if frac < 0 {
		frac = -frac
	}
	dst = appendPad(dst, sec, 2)
	if frac == 0 {
		return dst
	}
	dst = append(dst, '.')
	start := len(dst)
	dst = appendPad(dst, frac, 6)
	end := len(dst)
	for end > start && dst[end-1] == '0' {
		end--
	}
	return dst[:end]
}

// ParseTimeTZ parses a time with time zone: "HH:MM:SS[.ffffff]+HH[:MM[:SS]]";
// without an offset the time is taken as UTC (the session's zone).
func ParseTimeTZ(s string) (TimeTZ, error) {
	p := scanner{s: s}
	p.skipSpace()
	us, ok := p.clock()
	var off int32
	if ok {
		// Without an offset the session's zone applies: UTC.
		p.skipSpace()
		if !p.eof() {
			off, ok = p.offset()
		}
	}
	p.skipSpace()
	if !ok || !p.eof() {
		return TimeTZ{}, fmt.Errorf("parse timetz %q: want HH:MM:SS with an optional fraction and a zone offset like +05:30", clip(s))
	}
	return TimeTZ{Micros: us, Offset: off}, nil
}

// String returns PostgreSQL's text form of t, e.g. "04:05:06+05:30".
func (t TimeTZ) String() string { return string(t.Append(nil)) }

// Append appends PostgreSQL's text form of t to dst.
func (t TimeTZ) Append(dst []byte) []byte {
	return appendOffset(appendClock(dst, t.Micros), t.Offset)
}

// appendOffset appends a zone offset as PostgreSQL's EncodeTimezone does:
// +HH, +HH:MM or +HH:MM:SS.
func appendOffset(dst []byte, east int32) []byte {
	off := int64(east)
	if off < 0 {
		dst = append(dst, '-')
		off = -off
	} else {
		dst = append(dst, '+')
	}
	h, m, s := off/3600, off/60%60, off%60
	dst = appendPad(dst, h, 2)
	if m != 0 || s != 0 {
		dst = append(dst, ':')
		dst = appendPad(dst, m, 2)
	}
	if s != 0 {
		dst = append(dst, ':')
		dst = appendPad(dst, s, 2)
	}
	return dst
}

// Cmp compares as PostgreSQL's timetz_cmp: first by the UTC instant, then
// (for equal instants) the zone further west is greater. It returns -1, 0
// or +1.
func (t TimeTZ) Cmp(u TimeTZ) int {
	a := t.Micros - int64(t.Offset)*usecsPerSec
	b := u.Micros - int64(u.Offset)*usecsPerSec
	if a != b {
		return cmpInt64(a, b)
	}
	return cmpInt(int(-t.Offset), int(-u.Offset))
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ParseTimestamp parses a timestamp without time zone in PostgreSQL's ISO
// text form: "2024-01-02 03:04:05.123456", "0044-03-15 12:00:00 BC",
// "infinity". A time zone offset, if present, is ignored, as PostgreSQL
// ignores it for timestamp.
func ParseTimestamp(s string) (Timestamp, error) { return parseTimestamp(s, false) }

// ParseTimestamptz parses a timestamp with time zone in PostgreSQL's ISO
// text form ("2024-01-02 03:04:05.123456+00", "0044-03-15 12:00:00+00 BC")
// into UTC. A form without offset is taken as UTC (the session's zone).
func ParseTimestamptz(s string) (Timestamp, error) { return parseTimestamp(s, true) }

func parseTimestamp(s string, tz bool) (Timestamp, error) {
	name := "timestamp"
	if tz {
		name = "timestamptz"
	}
	if inf, epoch, ok := special(s); ok {
		if epoch {
			return Timestamp{Micros: -unixToPG * usecsPerDay}, nil
		}
		return Timestamp{Inf: inf}, nil
	}
	p := scanner{s: s}
	p.skipSpace()
	y, m, d, clock, off, bc, ok := p.dateTime()
	p.skipSpace()
	if !ok || !p.eof() {
		return Timestamp{}, fmt.Errorf("parse %s %q: want YYYY-MM-DD HH:MM:SS with an optional fraction, zone offset and BC, or infinity", name, clip(s))
	}
	days, ok := civil(y, m, d, bc)
	if !ok {
		return Timestamp{}, fmt.Errorf("parse %s %q: no such day", name, clip(s))
	}
	if days < minDateDays-1 || days > endTimestampUS/usecsPerDay+1 {
		return Timestamp{}, fmt.Errorf("parse %s %q: out of PostgreSQL's range 4714-11-24 BC to 294276-12-31", name, clip(s))
	}
	us := days*usecsPerDay + clock
	if tz {
		us -= int64(off) * usecsPerSec
	}
	if us < minTimestampUS || us >= endTimestampUS {
		return Timestamp{}, fmt.Errorf("parse %s %q: out of PostgreSQL's range 4714-11-24 BC to 294276-12-31", name, clip(s))
	}
	return Timestamp{Micros: us}, nil
}

// String returns PostgreSQL's text form of t as a timestamp without time
// zone, e.g. "2024-01-02 03:04:05.123456" or "0044-03-15 12:00:00 BC".
func (t Timestamp) String() string { return string(t.Append(nil, false)) }

// StringTZ returns PostgreSQL's text form of t as a timestamptz in a UTC
// session, e.g. "2024-01-02 03:04:05.123456+00".
func (t Timestamp) StringTZ() string { return string(t.Append(nil, true)) }

// Append appends t's text form to dst, as timestamptz in UTC when tz is set.
func (t Timestamp) Append(dst []byte, tz bool) []byte {
	switch {
	case t.Inf > 0:
		return append(dst, "infinity"...)
	case t.Inf < 0:
		return append(dst, "-infinity"...)
	}
	days := floorDiv(t.Micros, usecsPerDay)
	y, m, d := civilFromDays(days)
	dst = appendYMD(dst, y, m, d)
	dst = append(dst, ' ')
	dst = appendClock(dst, t.Micros-days*usecsPerDay)
	if tz {
		dst = append(dst, "+00"...)
	}
	if y <= 0 {
		dst = append(dst, " BC"...)
	}
	return dst
}

// Cmp compares timestamps as PostgreSQL orders them (-infinity first,
// infinity last). It returns -1, 0 or +1.
func (t Timestamp) Cmp(u Timestamp) int {
	if t.Inf != 0 || u.Inf != 0 {
		return cmpInt(int(t.Inf), int(u.Inf))
	}
	return cmpInt64(t.Micros, u.Micros)
}

// Time returns t as a time.Time in UTC, and false for the infinities.
func (t Timestamp) Time() (time.Time, bool) {
	if t.Inf != 0 {
		return time.Time{}, false
	}
	sec := floorDiv(t.Micros, usecsPerSec)
	us := t.Micros - sec*usecsPerSec
	return time.Unix(sec+unixToPG*86400, us*1000).UTC(), true
}

// TimestampFromTime returns the Timestamp of tm, truncated to microseconds.
func TimestampFromTime(tm time.Time) Timestamp {
	sec := tm.Unix() - unixToPG*86400
	return Timestamp{Micros: sec*usecsPerSec + int64(tm.Nanosecond()/1000)}
}

// CivilDate returns the proleptic Gregorian date days after 2000-01-01,
// with an astronomical year (0 is 1 BC, -1 is 2 BC).
func CivilDate(days int64) (y int64, m, d int) { return civilFromDays(days) }

// CivilDays is the inverse of CivilDate: the days from 2000-01-01 to y-m-d.
func CivilDays(y int64, m, d int) int64 { return daysFromCivil(y, m, d) }

// TimestampInRange reports whether micros (from 2000-01-01 00:00:00) is
// within PostgreSQL's timestamp range (4714-11-24 BC up to 294277-01-01).
func TimestampInRange(micros int64) bool {
	return micros >= minTimestampUS && micros < endTimestampUS
}
