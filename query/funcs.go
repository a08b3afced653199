package query

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/freshetdb/freshet/change"
	pg "github.com/pganalyze/pg_query_go/v6"
)

// function compiles a call of one of the functions Freshet evaluates:
// the string functions. Anything else keeps the refusal unsupported
// gives (function, aggregate, volatile, window_function).
func (c *compiler) function(f *pg.FuncCall, n *pg.Node) (*scalar, error) {
	name := ""
	if len(f.Funcname) > 0 {
		name, _ = strVal(f.Funcname[len(f.Funcname)-1])
	}
	if len(f.Funcname) == 2 {
		if s, _ := strVal(f.Funcname[0]); s != "pg_catalog" {
			return nil, c.unsupported(n, "in an expression")
		}
	} else if len(f.Funcname) != 1 {
		return nil, c.unsupported(n, "in an expression")
	}
	if f.AggStar || f.AggDistinct || f.AggFilter != nil || f.Over != nil || len(f.AggOrder) > 0 || f.AggWithinGroup || f.FuncVariadic {
		return nil, c.unsupported(n, "in an expression")
	}
	lname := strings.ToLower(name)
	switch lname {
	case "date_trunc", "date_part", "extract", "array_length", "cardinality":
		var args []*scalar
		for _, a := range f.Args {
			s, err := c.sexpr(a)
			if err != nil {
				return nil, err
			}
			args = append(args, s)
		}
		if lname == "array_length" || lname == "cardinality" {
			return c.arrayFunc(lname, f, args)
		}
		return c.dateFunc(lname, f, args)
	}
	spec, ok := stringFuncs[lname]
	if !ok {
		return nil, c.unsupported(n, "in an expression")
	}
	nargs := len(f.Args)
	if nargs < spec.min || nargs > spec.max {
		return nil, refusalAt(f.Location, CodeFunction, "function %s() with %d arguments is not supported", name, nargs)
	}
	args := make([]*scalar, nargs)
	for i, a := range f.Args {
		s, err := c.sexpr(a)
		if err != nil {
			return nil, err
		}
		args[i] = s
	}
	if lname == "concat" {
		return c.concatFunc(args, f.Location)
	}
	// Every other one takes text first, then text or int4 arguments.
	for i, a := range args {
		kind := spec.args[min(i, len(spec.args)-1)]
		var err error
		switch kind {
		case 't':
			args[i], err = c.asText(a, name+"()", f.Location)
		case 'i':
			args[i], err = c.asInt4(a, name, f.Location)
		}
		if err != nil {
			return nil, err
		}
	}
	s := &scalar{op: sFunc, oid: spec.result, typmod: -1, args: args, raises: spec.raises}
	if spec.result == change.OIDText {
		// A function's result collation is its text arguments' (merged).
		coll, err := mergeColl(f.Location, args...)
		if err != nil {
			return nil, err
		}
		s.coll = coll
	}
	switch lname {
	case "lower", "upper":
		fold, err := c.caseMapping(s.coll, lname, f.Location)
		if err != nil {
			return nil, err
		}
		s.fn = func(a []any) any { return fold(a[0].(string)) }
	default:
		s.fn = spec.fn
	}
	return c.fold(s, f.Location)
}

// funcSpec describes a string function: its argument kinds ('t' text,
// 'i' int4; the last repeats), counts and result.
type funcSpec struct {
	min, max int
	args     string
	result   uint32
	raises   bool
	fn       func(a []any) any
}

var stringFuncs = map[string]funcSpec{
	"lower":            {1, 1, "t", change.OIDText, false, nil},
	"upper":            {1, 1, "t", change.OIDText, false, nil},
	"length":           {1, 1, "t", change.OIDInt4, false, fnLength},
	"char_length":      {1, 1, "t", change.OIDInt4, false, fnLength},
	"character_length": {1, 1, "t", change.OIDInt4, false, fnLength},
	"substr":           {2, 3, "tii", change.OIDText, true, fnSubstr},
	"substring":        {2, 3, "tii", change.OIDText, true, fnSubstr},
	"btrim":            {1, 2, "tt", change.OIDText, false, trimFn(true, true)},
	"ltrim":            {1, 2, "tt", change.OIDText, false, trimFn(true, false)},
	"rtrim":            {1, 2, "tt", change.OIDText, false, trimFn(false, true)},
	"starts_with":      {2, 2, "tt", change.OIDBool, false, func(a []any) any { return strings.HasPrefix(a[0].(string), a[1].(string)) }},
	"replace":          {3, 3, "ttt", change.OIDText, false, fnReplace},
	"left":             {2, 2, "ti", change.OIDText, false, fnLeft},
	"right":            {2, 2, "ti", change.OIDText, false, fnRight},
	"concat":           {1, 100, "", change.OIDText, false, nil},
}

// asInt4 settles an argument declared int4: int2 and int4 are taken,
// other types have no implicit cast to int4 (PostgreSQL finds no such
// function).
func (c *compiler) asInt4(s *scalar, name string, loc int32) (*scalar, error) {
	if s.u != nil {
		return s, c.settleScalar(s, change.OIDInt4)
	}
	if s.oid == change.OIDInt2 || s.oid == change.OIDInt4 {
		return retype(s, change.OIDInt4), nil
	}
	return nil, refusalAt(loc, CodeType, "function %s() with a %s argument does not exist", name, typeName(s.oid))
}

// caseMapping returns lower() or upper() under a collation, as
// PostgreSQL's libc provider maps case: bytewise ASCII under "C" and
// "POSIX", each character's simple mapping (towlower, towupper) under
// "C.UTF-8". Other collations are refused: their mappings are the
// locale's. Text without a collation (a constant) has the database's.
func (c *compiler) caseMapping(coll Collation, name string, loc int32) (func(string) string, error) {
	upper := name == "upper"
	if coll.OID == 0 {
		// Constants: the database's default collation.
		coll = c.sources[0].Table.DefaultCollation
		if coll.OID == 0 {
			return nil, refusalAt(loc, CodeCollation, "%s() of text without a known collation is not supported", name)
		}
	}
	switch {
	case coll.Provider == 'c' && (coll.Collate == "C" || coll.Collate == "POSIX"):
		if upper {
			return asciiUpper, nil
		}
		return asciiLower, nil
	case coll.Provider == 'c' && (coll.Collate == "C.UTF-8" || coll.Collate == "C.utf8"):
		if upper {
			return func(s string) string { return strings.Map(unicode.ToUpper, s) }, nil
		}
		return unicodeLower, nil
	}
	return nil, refusalAt(loc, CodeCollation, "%s() under collation %q (%s) is not supported: its case mapping is the locale's; only C, POSIX and C.UTF-8 are reproduced", name, coll.Name, coll.Collate)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// asciiUpper is upper() under "C": ASCII only.
func asciiUpper(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if ch >= 'a' && ch <= 'z' {
			b[i] = ch - 'a' + 'A'
		}
	}
	return string(b)
}

func fnLength(a []any) any { return int64(utf8.RuneCountInString(a[0].(string))) }

// fnSubstr is text_substr: characters from start (1-based) for count;
// a start before 1 shortens what is taken; a negative count fails.
func fnSubstr(a []any) any {
	s := a[0].(string)
	start := a[1].(int64)
	if len(a) == 3 {
		n := a[2].(int64)
		if n < 0 {
			raise(stateSubstringLength, "negative substring length not allowed")
		}
		end := start + n // int4 + int4 fits in int64
		if end <= 1 {
			return ""
		}
		return runeSlice(s, start, end)
	}
	return runeSlice(s, start, -1)
}

// runeSlice returns the characters at 1-based positions [from, to) (to
// -1: to the end).
func runeSlice(s string, from, to int64) string {
	if from < 1 {
		from = 1
	}
	if to >= 0 && to <= from {
		return ""
	}
	pos := int64(1)
	b := -1
	for i := range s {
		if pos == from {
			b = i
		}
		if to >= 0 && pos == to {
			if b < 0 {
				return ""
			}
			return s[b:i]
		}
		pos++
	}
	if b < 0 {
		return ""
	}
	return s[b:]
}

// trimFn is btrim, ltrim and rtrim: remove the characters of the set
// (default one space) from the chosen ends.
func trimFn(left, right bool) func(a []any) any {
	return func(a []any) any {
		s := a[0].(string)
		set := " "
		if len(a) > 1 {
			set = a[1].(string)
		}
		if set == "" {
			return s
		}
		if left {
			s = strings.TrimLeft(s, set)
		}
		if right {
			s = strings.TrimRight(s, set)
		}
		return s
	}
}

func fnReplace(a []any) any {
	s, from, to := a[0].(string), a[1].(string), a[2].(string)
	if from == "" {
		return s
	}
	return strings.ReplaceAll(s, from, to)
}

// fnLeft is left(s, n): the first n characters; a negative n drops the
// last -n.
func fnLeft(a []any) any {
	s, n := a[0].(string), a[1].(int64)
	if n < 0 {
		k := int64(utf8.RuneCountInString(s)) + n
		if k <= 0 {
			return ""
		}
		return runeSlice(s, 1, k+1)
	}
	return runeSlice(s, 1, n+1)
}

// fnRight is right(s, n): the last n characters; a negative n drops the
// first -n.
func fnRight(a []any) any {
	s, n := a[0].(string), a[1].(int64)
	total := int64(utf8.RuneCountInString(s))
	if n == -1<<31 {
		return s // text_right negates n in int32: it stays negative and nothing is cut
	}
	if n < 0 {
		return runeSlice(s, -n+1, -1)
	}
	if n >= total {
		return s
	}
	return runeSlice(s, total-n+1, -1)
}

// concatFunc compiles concat(...): every non-NULL argument's text (its
// output function's: true is "t", char(n) keeps its padding), NULLs
// skipped.
func (c *compiler) concatFunc(args []*scalar, loc int32) (*scalar, error) {
	outs := make([]func(any) string, len(args))
	for i, a := range args {
		if a.u != nil {
			if err := c.settleScalar(a, change.OIDText); err != nil {
				return nil, err
			}
		}
		f := familyOf(a.oid)
		if f == famNone || f == famArray || f == famJSON || f == famEnum || f == famBytea || a.col != nil && c.column(a.col).Type.Kind != change.KindBase {
			return nil, refusalAt(loc, CodeFunction, "concat() of a %s value is not supported", typeName(a.oid))
		}
		outs[i] = outputText(a.oid)
	}
	coll, err := mergeColl(loc, args...)
	if err != nil {
		return nil, err
	}
	s := &scalar{op: sCall, oid: change.OIDText, typmod: -1, coll: coll, args: args, fn: func(a []any) any {
		var b strings.Builder
		for i, v := range a {
			if v != nil {
				b.WriteString(outs[i](v))
			}
		}
		return b.String()
	}}
	return c.fold(s, loc)
}
