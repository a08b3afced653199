package shape

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/jsonstr"
)

// column is one column a shape selects.
type column struct {
	name    string
	typeOID uint32
	typ     change.Type
	pkIndex int // -1: not part of the primary key
	schema  []byte
	// rec, when not nil, re-renders the intervals inside the column's
	// composite values (record.go); mayHoldRecord says the catalog must
	// be asked for it.
	rec           *textPlan
	mayHoldRecord bool
}

// renderer turns the engine's typed values into the text Electric's
// clients expect: PostgreSQL's output under bytea_output=hex,
// DateStyle=ISO, TimeZone=UTC, extra_float_digits=1 and
// IntervalStyle=iso_8601.
type renderer struct {
	types change.TypeResolver
}

// base follows domains to the type they are over.
func (r renderer) base(t change.Type) change.Type {
	for i := 0; i < 16 && t.Kind == change.KindDomain; i++ {
		b, ok := change.BuiltinType(t.Base)
		if !ok && r.types != nil {
			b, ok = r.types.Type(t.Base)
		}
		if !ok {
			break
		}
		t = b
	}
	return t
}

// appendText appends the text of one non-NULL value of type t.
func (r renderer) appendText(dst []byte, t change.Type, v any) ([]byte, error) {
	switch x := v.(type) {
	case change.Interval:
		return appendISOInterval(dst, x), nil
	case change.Array:
		if hasInterval(x) {
			return appendIntervalArray(dst, x), nil
		}
	}
	b, err := change.AppendText(dst, t, v, r.types)
	if err != nil {
		return dst, fmt.Errorf("render a %s value: %w", t.Name, err)
	}
	return b, nil
}

func hasInterval(a change.Array) bool {
	for _, e := range a.Elems {
		if _, ok := e.(change.Interval); ok {
			return true
		}
	}
	return false
}

// appendIntervalArray writes an array of intervals as PostgreSQL does
// under IntervalStyle iso_8601 (no element needs quoting).
func appendIntervalArray(dst []byte, a change.Array) []byte {
	lowers := false
	for _, d := range a.Dims {
		lowers = lowers || d.Lower != 1
	}
	if lowers {
		for _, d := range a.Dims {
			dst = fmt.Appendf(dst, "[%d:%d]", d.Lower, d.Lower+d.Len-1)
		}
		dst = append(dst, '=')
	}
	if len(a.Dims) == 0 {
		return append(dst, "{}"...)
	}
	i := 0
	var rec func(d int)
	rec = func(d int) {
		dst = append(dst, '{')
		for j := int32(0); j < a.Dims[d].Len; j++ {
			if j > 0 {
				dst = append(dst, ',')
			}
			if d+1 < len(a.Dims) {
				rec(d + 1)
				continue
			}
			if iv, ok := a.Elems[i].(change.Interval); ok {
				dst = appendISOInterval(dst, iv)
			} else {
				dst = append(dst, "NULL"...)
			}
			i++
		}
		dst = append(dst, '}')
	}
	rec(0)
	return dst
}

// appendISOInterval writes an interval as PostgreSQL's EncodeInterval does
// for IntervalStyle iso_8601: P1Y2M3DT4H5M6.5S, each part carrying its own
// sign, PT0S for zero.
func appendISOInterval(dst []byte, iv change.Interval) []byte {
	year, mon := iv.Months/12, iv.Months%12
	mday := iv.Days
	t := iv.Micros
	hour := t / 3_600_000_000
	t -= hour * 3_600_000_000
	min := t / 60_000_000
	t -= min * 60_000_000
	sec := t / 1_000_000
	fsec := t - sec*1_000_000
	if year == 0 && mon == 0 && mday == 0 && hour == 0 && min == 0 && sec == 0 && fsec == 0 {
		return append(dst, "PT0S"...)
	}
	part := func(v int64, c byte) {
		if v != 0 {
			dst = strconv.AppendInt(dst, v, 10)
			dst = append(dst, c)
		}
	}
	dst = append(dst, 'P')
	part(int64(year), 'Y')
	part(int64(mon), 'M')
	part(int64(mday), 'D')
	if hour != 0 || min != 0 || sec != 0 || fsec != 0 {
		dst = append(dst, 'T')
	}
	part(hour, 'H')
	part(min, 'M')
	if sec != 0 || fsec != 0 {
		if sec < 0 || fsec < 0 {
			dst = append(dst, '-')
		}
		if sec < 0 {
			sec = -sec
		}
		if fsec < 0 {
			fsec = -fsec
		}
		dst = strconv.AppendInt(dst, sec, 10)
		if fsec != 0 {
			f := strings.TrimRight(fmt.Sprintf("%06d", fsec), "0")
			dst = append(dst, '.')
			dst = append(dst, f...)
		}
		dst = append(dst, 'S')
	}
	return dst
}

// quoteIdent quotes a relation part for a key: "name", with / and .
// doubled as Electric's keys have them.
func appendKeyPart(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '/':
			dst = append(dst, "//"...)
		case '.':
			dst = append(dst, ".."...)
		default:
			dst = append(dst, s[i])
		}
	}
	return append(dst, '"')
}

// appendJSONString writes s as a JSON string literal.
func appendJSONString(dst []byte, s string) []byte {
	dst, _ = jsonstr.Append(dst, s, true)
	return dst
}

// pgIdent quotes an identifier for SQL.
func pgIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
