package query

import (
	"math"
	"math/big"
	"strings"

	"github.com/freshetdb/freshet/change"
	pg "github.com/pganalyze/pg_query_go/v6"
)

// date_trunc, extract and date_part on timestamp and timestamptz, as
// PostgreSQL 15 computes them with TimeZone UTC (timestamp_trunc,
// timestamp_part_common): fields of the proleptic Gregorian calendar with
// astronomical years inside (year 0 is 1 BC), PostgreSQL's rules for BC
// decades, centuries and millennia, ISO weeks, and ±Infinity or NULL for
// an infinite timestamp.

// dtUnit is a unit of date_trunc and extract.
type dtUnit uint8

const (
	dtMicrosec dtUnit = iota + 1
	dtMillisec
	dtSecond
	dtMinute
	dtHour
	dtDay
	dtWeek
	dtMonth
	dtQuarter
	dtYear
	dtDecade
	dtCentury
	dtMillennium
	dtDow
	dtIsodow
	dtDoy
	dtIsoyear
	dtEpoch
	dtJulian
	dtTZ
	dtTZHour
	dtTZMinute
)

// dtUnits are the unit names DecodeUnits and DecodeSpecial read (after
// lowercasing and cutting to 10 characters, as PostgreSQL does).
var dtUnits = map[string]dtUnit{
	"microsecon": dtMicrosec, "us": dtMicrosec, "usec": dtMicrosec, "usecond": dtMicrosec, "useconds": dtMicrosec, "usecs": dtMicrosec,
	"millisecon": dtMillisec, "ms": dtMillisec, "msec": dtMillisec, "msecond": dtMillisec, "mseconds": dtMillisec, "msecs": dtMillisec,
	"second": dtSecond, "s": dtSecond, "sec": dtSecond, "seconds": dtSecond, "secs": dtSecond,
	"minute": dtMinute, "m": dtMinute, "min": dtMinute, "mins": dtMinute, "minutes": dtMinute,
	"hour": dtHour, "h": dtHour, "hours": dtHour, "hr": dtHour, "hrs": dtHour,
	"day": dtDay, "d": dtDay, "days": dtDay,
	"week": dtWeek, "w": dtWeek, "weeks": dtWeek,
	"month": dtMonth, "mon": dtMonth, "mons": dtMonth, "months": dtMonth,
	"quarter": dtQuarter, "qtr": dtQuarter,
	"year": dtYear, "y": dtYear, "years": dtYear, "yr": dtYear, "yrs": dtYear,
	"decade": dtDecade, "dec": dtDecade, "decades": dtDecade, "decs": dtDecade,
	"century": dtCentury, "c": dtCentury, "cent": dtCentury, "centuries": dtCentury,
	"millennium": dtMillennium, "mil": dtMillennium, "millennia": dtMillennium, "mils": dtMillennium,
	"dow": dtDow, "isodow": dtIsodow, "doy": dtDoy, "isoyear": dtIsoyear, "epoch": dtEpoch,
	"julian": dtJulian, "j": dtJulian, "jd": dtJulian,
	"timezone": dtTZ, "timezone_h": dtTZHour, "timezone_m": dtTZMinute,
}

// tmParts is a finite timestamp taken apart (timestamp2tm).
type tmParts struct {
	year           int64 // astronomical
	mon, mday      int
	hour, min, sec int64
	fsec           int64 // microseconds within the second
	days           int64 // since 2000-01-01
	julianDay      int64
	dayMicros      int64 // since midnight
}

func splitTS(us int64) tmParts {
	days := us / usecsPerDay
	if us%usecsPerDay < 0 {
		days--
	}
	return splitDays(days, us-days*usecsPerDay)
}

// splitDays takes apart the time rem microseconds after midnight of the
// day days after 2000-01-01.
func splitDays(days, rem int64) tmParts {
	y, m, d := change.CivilDate(days)
	p := tmParts{year: y, mon: m, mday: d, days: days, dayMicros: rem}
	p.hour = rem / 3600000000
	p.min = rem / 60000000 % 60
	p.sec = rem / 1000000 % 60
	p.fsec = rem % 1000000
	p.julianDay = days + 2451545
	return p
}

// joinTS is tm2timestamp: the timestamp of y-m-d at the time of day.
func joinTS(y int64, m, d int, dayMicros int64) int64 {
	if y > 300000 || y < -5000 {
		raise(stateDatetimeRange, "timestamp out of range")
	}
	us := change.CivilDays(y, m, d)*usecsPerDay + dayMicros
	if !change.TimestampInRange(us) {
		raise(stateDatetimeRange, "timestamp out of range")
	}
	return us
}

// j2day is the day of the week of a Julian day, 0 for Sunday.
func j2day(j int64) int64 {
	j = (j + 1) % 7
	if j < 0 {
		j += 7
	}
	return j
}

func date2j(y int64, m, d int) int64 { return change.CivilDays(y, m, d) + 2451545 }

// isoWeek is date2isoweek and date2isoyear.
func isoWeek(y int64, m, d int) (week, year int64) {
	dayn := date2j(y, m, d)
	day4 := date2j(y, 1, 4)
	day0 := j2day(day4 - 1)
	year = y
	if dayn < day4-day0 {
		day4 = date2j(y-1, 1, 4)
		day0 = j2day(day4 - 1)
		year--
	}
	week = (dayn-(day4-day0))/7 + 1
	if week >= 52 {
		day4n := date2j(year+1, 1, 4)
		day0n := j2day(day4n - 1)
		if dayn >= day4n-day0n {
			week = (dayn-(day4n-day0n))/7 + 1
			year++
		}
	}
	return week, year
}

// dateTrunc is timestamp_trunc (and timestamptz_trunc under UTC).
func dateTrunc(u dtUnit, ts change.Timestamp) change.Timestamp {
	if ts.Inf != 0 {
		return ts
	}
	p := splitTS(ts.Micros)
	y, mon, mday := p.year, p.mon, p.mday
	var keep int64 // the time of day kept, in microseconds
	switch u {
	case dtWeek:
		d := p.days - (j2day(p.julianDay)+6)%7 // back to Monday
		return change.Timestamp{Micros: joinDays(d)}
	case dtMillennium:
		if y > 0 {
			y = (y+999)/1000*1000 - 999
		} else {
			y = -((999-(y-1))/1000)*1000 + 1
		}
		mon, mday = 1, 1
	case dtCentury:
		if y > 0 {
			y = (y+99)/100*100 - 99
		} else {
			y = -((99-(y-1))/100)*100 + 1
		}
		mon, mday = 1, 1
	case dtDecade:
		if y > 0 {
			y = y / 10 * 10
		} else {
			y = -((8 - (y - 1)) / 10) * 10
		}
		mon, mday = 1, 1
	case dtYear:
		mon, mday = 1, 1
	case dtQuarter:
		mon, mday = 3*((mon-1)/3)+1, 1
	case dtMonth:
		mday = 1
	case dtDay:
	case dtHour:
		keep = p.hour * 3600000000
	case dtMinute:
		keep = p.hour*3600000000 + p.min*60000000
	case dtSecond:
		keep = p.dayMicros - p.fsec
	case dtMillisec:
		keep = p.dayMicros - p.fsec%1000
	case dtMicrosec:
		keep = p.dayMicros
	}
	return change.Timestamp{Micros: joinTS(y, mon, mday, keep)}
}

func joinDays(d int64) int64 {
	us := d * usecsPerDay
	if !change.TimestampInRange(us) {
		raise(stateDatetimeRange, "timestamp out of range")
	}
	return us
}

// dtPart is timestamp_part_common: the field u of ts as numeric (extract)
// or float8 (date_part); nil for an oscillating field of an infinite one.
func dtPart(u dtUnit, ts change.Timestamp, numeric bool) any {
	if ts.Inf != 0 {
		switch u {
		case dtYear, dtDecade, dtCentury, dtMillennium, dtJulian, dtIsoyear, dtEpoch:
			if numeric {
				return change.Numeric{Inf: ts.Inf}
			}
			return math.Inf(int(ts.Inf))
		}
		return nil
	}
	p := splitTS(ts.Micros)
	switch u {
	case dtEpoch:
		const epoch = -946684800000000 // 1970-01-01 from 2000-01-01
		if ts.Micros < math.MaxInt64+epoch {
			if !numeric {
				return float64(ts.Micros-epoch) / 1000000.0
			}
			return change.Numeric{Coef: big.NewInt(ts.Micros - epoch), Exp: -6, Scale: 6}
		}
		if !numeric {
			return (float64(ts.Micros) - epoch) / 1000000.0
		}
		return numericArith(opDiv, numericArith(opSub, intNumeric(ts.Micros), intNumeric(epoch)), intNumeric(1000000))
	case dtJulian:
		if !numeric {
			return float64(p.julianDay) + (float64(p.hour*3600+p.min*60+p.sec)+float64(p.fsec)/1000000.0)/86400.0
		}
		return numericArith(opAdd, intNumeric(p.julianDay), numericArith(opDiv, intNumeric(p.dayMicros), intNumeric(86400000000)))
	}
	return dtField(u, p, numeric)
}

// dtField is a field of a finite timestamp taken apart (not epoch or
// julian, which depend on what was taken apart).
func dtField(u dtUnit, p tmParts, numeric bool) any {
	num := func(v int64, scale int32) any {
		if numeric {
			return change.Numeric{Coef: big.NewInt(v), Exp: -scale, Scale: scale}
		}
		return float64(v) / math.Pow10(int(scale))
	}
	ival := func(v int64) any { return num(v, 0) }
	switch u {
	case dtMicrosec:
		return ival(p.sec*1000000 + p.fsec)
	case dtMillisec:
		if !numeric {
			return float64(p.sec)*1000.0 + float64(p.fsec)/1000.0
		}
		return num(p.sec*1000000+p.fsec, 3)
	case dtSecond:
		if !numeric {
			return float64(p.sec) + float64(p.fsec)/1000000.0
		}
		return num(p.sec*1000000+p.fsec, 6)
	case dtMinute:
		return ival(p.min)
	case dtHour:
		return ival(p.hour)
	case dtDay:
		return ival(int64(p.mday))
	case dtMonth:
		return ival(int64(p.mon))
	case dtQuarter:
		return ival(int64((p.mon-1)/3 + 1))
	case dtWeek:
		w, _ := isoWeek(p.year, p.mon, p.mday)
		return ival(w)
	case dtYear:
		if p.year > 0 {
			return ival(p.year)
		}
		return ival(p.year - 1)
	case dtDecade:
		if p.year >= 0 {
			return ival(p.year / 10)
		}
		return ival(-((8 - (p.year - 1)) / 10))
	case dtCentury:
		if p.year > 0 {
			return ival((p.year + 99) / 100)
		}
		return ival(-((99 - (p.year - 1)) / 100))
	case dtMillennium:
		if p.year > 0 {
			return ival((p.year + 999) / 1000)
		}
		return ival(-((999 - (p.year - 1)) / 1000))
	case dtIsoyear:
		_, y := isoWeek(p.year, p.mon, p.mday)
		if y <= 0 {
			y--
		}
		return ival(y)
	case dtDow, dtIsodow:
		d := j2day(p.julianDay)
		if u == dtIsodow && d == 0 {
			d = 7
		}
		return ival(d)
	case dtDoy:
		return ival(p.julianDay - date2j(p.year, 1, 1) + 1)
	case dtTZ, dtTZHour, dtTZMinute:
		return ival(0)
	}
	return nil
}

// dateFunc compiles date_trunc(unit, ts), extract(unit FROM ts) and
// date_part(unit, ts).
func (c *compiler) dateFunc(name string, f *pg.FuncCall, args []*scalar) (*scalar, error) {
	if len(args) != 2 {
		return nil, refusalAt(f.Location, CodeFunction, "%s() with %d arguments is not supported (the time zone form is not)", name, len(args))
	}
	unitArg, ts := args[0], args[1]
	if unitArg.u != nil {
		if err := c.settleScalar(unitArg, change.OIDText); err != nil {
			return nil, err
		}
	}
	if !unitArg.isConst() || !textish(unitArg.oid) {
		return nil, refusalAt(f.Location, CodeFunction, "%s() with a unit that is not a constant text is not supported", name)
	}
	if unitArg.val == nil {
		return c.fold(&scalar{op: sFunc, oid: dtResult(name, ts.oid), typmod: -1, args: args, fn: func([]any) any { return nil }}, f.Location)
	}
	uname := strings.ToLower(unitArg.val.(string))
	if len(uname) > 10 {
		uname = uname[:10]
	}
	u, ok := dtUnits[uname]
	if !ok {
		return nil, refusalAt(f.Location, CodeFunction, "%s() unit %q is not recognized", name, unitArg.val)
	}
	if ts.u != nil {
		return nil, refusalAt(f.Location, CodeType, "%s() of a value of unknown type is not supported; cast it", name)
	}
	from := ts.oid
	if from == change.OIDDate {
		switch name {
		case "extract":
			// extract_date: the date's own fields.
			switch u {
			case dtDay, dtMonth, dtYear, dtDecade, dtCentury, dtMillennium, dtQuarter, dtWeek, dtDow, dtIsodow, dtDoy, dtIsoyear, dtJulian, dtEpoch:
			default:
				return nil, refusalAt(f.Location, CodeFunction, "extract() unit %q is not supported for type date", unitArg.val)
			}
			s := &scalar{op: sFunc, oid: change.OIDNumeric, typmod: -1, args: []*scalar{unitArg, ts},
				fn: func(a []any) any { return datePart(u, a[1].(change.Date)) }}
			return c.fold(s, f.Location)
		case "date_trunc":
			// date_trunc(text, timestamptz): the date at midnight, UTC.
			to := change.OIDTimestamptz
			var err error
			if ts, err = c.coerce(ts, to, f.Location); err != nil {
				return nil, err
			}
			from = to
		default:
			// date_part(text, date) is date_part($1, $2::timestamp).
			to := change.OIDTimestamp
			var err error
			if ts, err = c.coerce(ts, to, f.Location); err != nil {
				return nil, err
			}
			from = to
		}
	}
	if from != change.OIDTimestamp && from != change.OIDTimestamptz {
		return nil, refusalAt(f.Location, CodeType, "%s() of a %s value is not supported (only timestamp and timestamptz are)", name, typeName(from))
	}
	s := &scalar{op: sFunc, oid: dtResult(name, from), typmod: -1, args: []*scalar{unitArg, ts}}
	switch name {
	case "date_trunc":
		if u > dtMillennium {
			return nil, refusalAt(f.Location, CodeFunction, "date_trunc() unit %q is not supported for %s", unitArg.val, typeName(from))
		}
		s.raises = true
		s.fn = func(a []any) any { return dateTrunc(u, a[1].(change.Timestamp)) }
	default:
		if u >= dtTZ && from == change.OIDTimestamp {
			return nil, refusalAt(f.Location, CodeFunction, "%s() unit %q is not supported for timestamp without time zone", name, unitArg.val)
		}
		numeric := name == "extract"
		s.fn = func(a []any) any { return dtPart(u, a[1].(change.Timestamp), numeric) }
	}
	return c.fold(s, f.Location)
}

// dtResult is the result type of a date function over type from.
func dtResult(name string, from uint32) uint32 {
	switch name {
	case "extract":
		return change.OIDNumeric
	case "date_part":
		return change.OIDFloat8
	}
	if from == change.OIDDate {
		return change.OIDTimestamptz
	}
	return from
}

// datePart is extract_date: a date's field as numeric.
func datePart(u dtUnit, d change.Date) any {
	if d.Inf != 0 {
		switch u {
		case dtYear, dtDecade, dtCentury, dtMillennium, dtJulian, dtIsoyear, dtEpoch:
			return change.Numeric{Inf: d.Inf}
		}
		return nil
	}
	days := int64(d.Days)
	switch u {
	case dtEpoch:
		return intNumeric((days + 10957) * 86400)
	case dtJulian:
		return intNumeric(days + 2451545)
	}
	p := splitDays(days, 0)
	return dtField(u, p, true)
}
