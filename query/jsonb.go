package query

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/freshetdb/freshet/change"
	pg "github.com/pganalyze/pg_query_go/v6"
)

// jsonb access and tests (->, ->>, #>, #>>, ?, @>, <@) as PostgreSQL
// computes them on jsonb: objects hold each key once (the last one
// given), ordered by length then bytes; numbers are numeric; a top-level
// scalar acts as an array of that one element where PostgreSQL's raw
// scalar does (-> of an integer, ?, containment). Results are jsonb's
// canonical text, as jsonb_out writes it.

// jv is a parsed jsonb value.
type jv struct {
	kind  byte // 'o' object, 'a' array, 's' string, 'n' number, 't' true, 'f' false, 'z' null
	str   string
	num   change.Numeric
	keys  []string // 'o': sorted as jsonb sorts them
	vals  []*jv
	elems []*jv // 'a'
}

func (v *jv) container() bool { return v.kind == 'o' || v.kind == 'a' }

// parseJSONB reads a json text as jsonb would store it.
func parseJSONB(b []byte) (*jv, error) {
	if !utf8.Valid(b) {
		return nil, errors.New("invalid UTF-8")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := parseJV(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the value")
	}
	return v, nil
}

func parseJV(d *json.Decoder, depth int) (*jv, error) {
	if depth > 1000 {
		return nil, errors.New("nested too deeply")
	}
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch x := t.(type) {
	case json.Delim:
		switch x {
		case '{':
			m := map[string]*jv{}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("object key is not a string")
				}
				if strings.IndexByte(k, 0) >= 0 {
					return nil, errors.New(`\u0000 cannot be converted to text`)
				}
				v, err := parseJV(d, depth+1)
				if err != nil {
					return nil, err
				}
				m[k] = v // the last of duplicate keys wins
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			o := &jv{kind: 'o'}
			for k := range m {
				o.keys = append(o.keys, k)
			}
			sort.Slice(o.keys, func(i, j int) bool { return jsonbKeyLess(o.keys[i], o.keys[j]) })
			for _, k := range o.keys {
				o.vals = append(o.vals, m[k])
			}
			return o, nil
		case '[':
			a := &jv{kind: 'a', elems: []*jv{}}
			for d.More() {
				v, err := parseJV(d, depth+1)
				if err != nil {
					return nil, err
				}
				a.elems = append(a.elems, v)
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			return a, nil
		}
	case string:
		if strings.IndexByte(x, 0) >= 0 {
			return nil, errors.New(`\u0000 cannot be converted to text`)
		}
		return &jv{kind: 's', str: x}, nil
	case json.Number:
		n, err := change.ParseNumeric(string(x))
		if err != nil {
			return nil, err
		}
		return &jv{kind: 'n', num: n}, nil
	case bool:
		if x {
			return &jv{kind: 't'}, nil
		}
		return &jv{kind: 'f'}, nil
	case nil:
		return &jv{kind: 'z'}, nil
	}
	return nil, fmt.Errorf("unexpected %v", t)
}

// jsonbKeyLess orders object keys as jsonb does: shorter first, then by
// bytes.
func jsonbKeyLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// appendJSONB writes v as jsonb_out does.
func appendJSONB(dst []byte, v *jv) []byte {
	switch v.kind {
	case 'o':
		dst = append(dst, '{')
		for i, k := range v.keys {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = appendJSONBString(dst, k)
			dst = append(dst, ": "...)
			dst = appendJSONB(dst, v.vals[i])
		}
		return append(dst, '}')
	case 'a':
		dst = append(dst, '[')
		for i, e := range v.elems {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = appendJSONB(dst, e)
		}
		return append(dst, ']')
	case 's':
		return appendJSONBString(dst, v.str)
	case 'n':
		return v.num.Append(dst)
	case 't':
		return append(dst, "true"...)
	case 'f':
		return append(dst, "false"...)
	}
	return append(dst, "null"...)
}

// appendJSONBString is escape_json.
func appendJSONBString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\b':
			dst = append(dst, `\b`...)
		case '\f':
			dst = append(dst, `\f`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		case '"':
			dst = append(dst, `\"`...)
		case '\\':
			dst = append(dst, `\\`...)
		default:
			if c < ' ' {
				dst = append(dst, fmt.Sprintf(`\u%04x`, c)...)
			} else {
				dst = append(dst, c)
			}
		}
	}
	return append(dst, '"')
}

// jvOf parses a jsonb value held in change's form (always valid: it
// came from PostgreSQL or was checked when compiled).
func jvOf(v any) *jv {
	j, err := parseJSONB(v.(change.JSON))
	if err != nil {
		raise(stateInvalidText, "invalid input syntax for type json: %v", err)
	}
	return j
}

func jsonbValue(v *jv) change.JSON { return change.JSON(appendJSONB(nil, v)) }

// field is v -> key.
func (v *jv) field(k string) *jv {
	if v.kind != 'o' {
		return nil
	}
	i := sort.Search(len(v.keys), func(i int) bool { return !jsonbKeyLess(v.keys[i], k) })
	if i < len(v.keys) && v.keys[i] == k {
		return v.vals[i]
	}
	return nil
}

// elem is v -> i: an array's element (negative from the end), a
// top-level scalar being an array of itself.
func (v *jv) elem(i int64) *jv {
	elems := v.elems
	switch {
	case v.kind == 'o':
		return nil
	case v.kind != 'a':
		elems = []*jv{v}
	}
	n := int64(len(elems))
	if i < 0 {
		if -i > n {
			return nil
		}
		i += n
	}
	if i >= n {
		return nil
	}
	return elems[i]
}

// path is v #> path (nil for a path that leads nowhere; unlike ->, a
// top-level scalar is not indexed).
func (v *jv) path(p []any) *jv {
	for _, e := range p {
		if e == nil {
			return nil
		}
		s := e.(string)
		switch v.kind {
		case 'o':
			v = v.field(s)
		case 'a':
			i, ok := strtoint(s)
			if !ok {
				return nil
			}
			v = v.elem(int64(i))
		default:
			return nil // a scalar (even a top-level one) has no path into it
		}
		if v == nil {
			return nil
		}
	}
	return v
}

// strtoint is PostgreSQL's strtoint as jsonb paths use it: optional
// leading spaces and sign, digits, nothing after, within int32.
func strtoint(s string) (int32, bool) {
	t := strings.TrimLeft(s, " \t\n\r\f\v")
	if t == "" {
		return 0, false
	}
	i, err := strconv.ParseInt(t, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(i), true
}

// asText is ->> and #>>: a string's own text, NULL for null, else the
// jsonb text.
func (v *jv) asText() any {
	switch v.kind {
	case 's':
		return v.str
	case 'z':
		return nil
	}
	return string(appendJSONB(nil, v))
}

// scalarEqual compares two jsonb scalars (numbers by value).
func scalarEqual(a, b *jv) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case 's':
		return a.str == b.str
	case 'n':
		return cmpNumeric(a.num, b.num) == 0
	}
	return true
}

// jsonbContains is a @> b (JsonbDeepContains from the top).
func jsonbContains(a, b *jv) bool {
	if !a.container() {
		return !b.container() && scalarEqual(a, b)
	}
	if !b.container() {
		if a.kind != 'a' {
			return false
		}
		b = &jv{kind: 'a', elems: []*jv{b}}
	}
	return deepContains(a, b)
}

func deepContains(a, b *jv) bool {
	if a.kind != b.kind {
		return false
	}
	if a.kind == 'o' {
		if len(a.keys) < len(b.keys) {
			return false
		}
		for i, k := range b.keys {
			bv, av := b.vals[i], a.field(k)
			switch {
			case av == nil:
				return false
			case !bv.container():
				if av.container() || !scalarEqual(av, bv) {
					return false
				}
			case !deepContains(av, bv):
				return false
			}
		}
		return true
	}
	for _, be := range b.elems {
		found := false
		for _, ae := range a.elems {
			if !be.container() && !ae.container() && scalarEqual(ae, be) ||
				be.container() && ae.container() && deepContains(ae, be) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// jsonbExists is v ? key: a top-level key, or a string element of a
// top-level array (or the top-level string itself).
func jsonbExists(v *jv, k string) bool {
	switch v.kind {
	case 'o':
		return v.field(k) != nil
	case 'a':
		for _, e := range v.elems {
			if e.kind == 's' && e.str == k {
				return true
			}
		}
		return false
	case 's':
		return v.str == k
	}
	return false
}

// isJSONB reports whether a scalar is jsonb; json (not jsonb) is refused
// by the callers.
func isJSONB(s *scalar) bool { return s.u == nil && s.oid == change.OIDJSONB }

// jsonOp compiles ->, ->>, #>, #>> and ? on jsonb.
func (c *compiler) jsonOp(a *pg.A_Expr, name string) (*scalar, error) {
	l, err := c.sexpr(a.Lexpr)
	if err != nil {
		return nil, err
	}
	r, err := c.sexpr(a.Rexpr)
	if err != nil {
		return nil, err
	}
	if l.u != nil {
		return nil, refusalAt(a.Location, CodeType, "operator %s on a value of unknown type is not supported; cast it to jsonb", name)
	}
	if !isJSONB(l) {
		return nil, refusalAt(a.Location, CodeOperator, "operator %s on %s is not supported (only on jsonb)", name, scalarTypeName(l))
	}
	s := &scalar{op: sFunc, typmod: -1, args: []*scalar{l, r}, raises: l.raises || r.raises}
	switch name {
	case "->", "->>":
		if r.u != nil {
			if err := c.settleScalar(r, change.OIDText); err != nil {
				return nil, err
			}
		}
		text := name == "->>"
		s.oid = change.OIDJSONB
		if text {
			s.oid = change.OIDText
		}
		get := func(v *jv) any {
			if v == nil {
				return nil
			}
			if text {
				return v.asText()
			}
			return jsonbValue(v)
		}
		switch {
		case textish(r.oid):
			r = retypeText(r)
			s.args[1] = r
			s.fn = func(a []any) any { return get(jvOf(a[0]).field(textValue(a[1], change.OIDText))) }
		case r.oid == change.OIDInt4 || r.oid == change.OIDInt2:
			s.fn = func(a []any) any { return get(jvOf(a[0]).elem(a[1].(int64))) }
		default:
			return nil, refusalAt(a.Location, CodeType, "operator %s with a %s key does not exist", name, typeName(r.oid))
		}
	case "#>", "#>>":
		if r.u != nil {
			if err := c.settleScalar(r, 1009); err != nil { // text[]
				return nil, err
			}
		}
		if r.oid != 1009 || c.arrayIsOther(r) {
			return nil, refusalAt(a.Location, CodeType, "operator %s needs a text[] path, not %s", name, scalarTypeName(r))
		}
		text := name == "#>>"
		s.oid = change.OIDJSONB
		if text {
			s.oid = change.OIDText
		}
		s.fn = func(a []any) any {
			v := jvOf(a[0]).path(a[1].(change.Array).Elems)
			switch {
			case v == nil:
				return nil
			case text:
				return v.asText()
			}
			return jsonbValue(v)
		}
	case "?":
		if r.u != nil {
			if err := c.settleScalar(r, change.OIDText); err != nil {
				return nil, err
			}
		}
		if !textish(r.oid) {
			return nil, refusalAt(a.Location, CodeType, "operator ? with a %s key does not exist", typeName(r.oid))
		}
		s.oid = change.OIDBool
		s.fn = func(a []any) any { return jsonbExists(jvOf(a[0]), textValue(a[1], r.oid)) }
	default:
		return nil, refusalAt(a.Location, CodeOperator, "operator %s on jsonb is not supported", name)
	}
	if s.oid == change.OIDText {
		s.coll = Collation{} // the database's default (textColl)
	}
	return c.fold(s, a.Location)
}

// retypeText is a string-typed value as text for a key.
func retypeText(s *scalar) *scalar {
	if s.oid == change.OIDText {
		return s
	}
	return retype(s, change.OIDText)
}

// jsonContains compiles l @> r and l <@ r on jsonb (l and r settled).
func (c *compiler) jsonContains(l, r *scalar, by bool, loc int32) (*expr, error) {
	if !isJSONB(l) || !isJSONB(r) {
		return nil, refusalAt(loc, CodeOperator, "containment between %s and %s is not supported (jsonb with jsonb only)", scalarTypeName(l), scalarTypeName(r))
	}
	s := &scalar{op: sFunc, oid: change.OIDBool, typmod: -1, args: []*scalar{l, r}, fn: func(a []any) any {
		x, y := jvOf(a[0]), jvOf(a[1])
		if by {
			x, y = y, x
		}
		return jsonbContains(x, y)
	}}
	s, err := c.fold(s, loc)
	if err != nil {
		return nil, err
	}
	if s.isConst() {
		return &expr{op: opConst, val: triOfValue(s.val)}, nil
	}
	return &expr{op: opBoolCol, l: operand{sx: s}, fam: famBool}, nil
}

func triOfValue(v any) Tri {
	if v == nil {
		return Unknown
	}
	return triOf(v.(bool))
}
