package query

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// exprOp is the kind of a compiled predicate node.
type exprOp uint8

const (
	opConst    exprOp = iota // a constant truth value (val)
	opAnd                    // all of args
	opOr                     // any of args
	opNot                    // not args[0]
	opCmp                    // l cmp r
	opDistinct               // l IS [NOT] DISTINCT FROM r (negate: NOT DISTINCT)
	opIsNull                 // l IS [NOT] NULL (negate: NOT NULL)
	opBoolTest               // args[0] IS [NOT] TRUE/FALSE/UNKNOWN
	opBoolCol                // l, a boolean operand, as a predicate
	opIn                     // l [NOT] IN set (negate: NOT IN)
	opAnyAll                 // l cmp ANY/ALL (list)
	opLike                   // l [NOT] LIKE/ILIKE pattern (negate: NOT)
	opArray                  // l @> r, l <@ r, l && r on arrays (arr), l and r expressions
	opAnyArray               // l cmp ANY/ALL (r), r an array-valued expression
)

// cmpOp is a comparison operator.
type cmpOp uint8

const (
	cmpEq cmpOp = iota
	cmpNe
	cmpLt
	cmpLe
	cmpGt
	cmpGe
)

var cmpNames = [...]string{"=", "<>", "<", "<=", ">", ">="}

func (c cmpOp) String() string { return cmpNames[c] }

func (c cmpOp) holds(r int) bool {
	switch c {
	case cmpEq:
		return r == 0
	case cmpNe:
		return r != 0
	case cmpLt:
		return r < 0
	case cmpLe:
		return r <= 0
	case cmpGt:
		return r > 0
	}
	return r >= 0
}

// flip returns the operator with its operands swapped (a < b is b > a).
func (c cmpOp) flip() cmpOp {
	switch c {
	case cmpLt:
		return cmpGt
	case cmpLe:
		return cmpGe
	case cmpGt:
		return cmpLt
	case cmpGe:
		return cmpLe
	}
	return c
}

// negated returns the operator that holds exactly when c does not, for
// non-NULL operands.
func (c cmpOp) negated() cmpOp {
	switch c {
	case cmpEq:
		return cmpNe
	case cmpNe:
		return cmpEq
	case cmpLt:
		return cmpGe
	case cmpLe:
		return cmpGt
	case cmpGt:
		return cmpLe
	}
	return cmpLt
}

// boolTest is the kind of an IS [NOT] TRUE/FALSE/UNKNOWN test.
type boolTest uint8

const (
	testTrue boolTest = iota
	testNotTrue
	testFalse
	testNotFalse
	testUnknown
	testNotUnknown
)

// colRef is a column of a source. cat is its index in the catalog table;
// idx, filled when the plan is finished, its index in Source.Columns.
type colRef struct {
	src, cat, idx int32  // 16 bytes in all: a plan of distinct binds holds its own
	oid           uint32 // the column's type
}

// operand is one side of a comparison: a column, or a constant already in
// the comparison family's form (nil for NULL).
type operand struct {
	col  *colRef
	sx   *scalar // an expression over the row (col and val unused)
	val  any
	trim bool  // drop trailing spaces (a varchar compared as bpchar)
	slot int32 // > 0: a constant, the plan's value vals[slot-1] (val unused)
}

// constant returns a constant operand's value (neither col nor sx) given
// the plan's values.
func (o *operand) constant(vals []any) any {
	if o.slot > 0 {
		return vals[o.slot-1]
	}
	return o.val
}

// value returns the operand's value in family fam, nil for NULL, given the
// plan's values.
func (o *operand) value(row Row, vals []any, fam family) any {
	if o.sx != nil {
		v := o.sx.eval(row)
		if v == nil {
			return nil
		}
		x, ok := toFamily(v, o.sx.oid, fam)
		if !ok {
			return nil
		}
		if o.trim {
			return strings.TrimRight(x.(string), " ")
		}
		return x
	}
	if o.col == nil {
		return o.constant(vals)
	}
	rv := row[o.col.src]
	if rv == nil {
		return nil
	}
	v := rv[o.col.idx]
	if v == nil {
		return nil
	}
	x, ok := toFamily(v, o.col.oid, fam)
	if !ok {
		return nil
	}
	if o.trim {
		return strings.TrimRight(x.(string), " ")
	}
	return x
}

// expr is a compiled predicate.
type expr struct {
	// The small fields first, in one word and a half (a filter's nodes are
	// held by every plan: plans of one shape with distinct binds each
	// have their own).
	op     exprOp
	fam    family // the family l and r (or l and the set) compare in
	cmp    cmpOp
	negate bool
	any    bool // opAnyAll: ANY (else ALL)
	test   boolTest
	val    Tri  // opConst
	null   bool // opIn: the list holds a NULL
	raises bool // evaluating it can raise: AND and OR evaluate every part
	// opArray, opAnyArray: the operation and the arrays' element type.
	arr     arrayKind
	elemOID uint32

	args []*expr
	l, r operand
	// set is the right-hand side of opIn, opAnyAll and opLike, behind a
	// pointer: most nodes are comparisons, which need none of it.
	set *exprSet
}

// exprSet is the right-hand side of an IN, ANY/ALL or LIKE node.
type exprSet struct {
	keys map[string]struct{} // opIn: keys of the non-NULL values
	vals []any               // opIn: the non-NULL values (for constraints); opAnyAll: elements (nil = NULL)
	like *likeMatcher        // opLike
}

// setVals is e's list: opIn's non-NULL values, opAnyAll's elements; nil
// for other nodes.
func (e *expr) setVals() []any {
	if e.set == nil {
		return nil
	}
	return e.set.vals
}

// markRaises sets raises on e and the nodes under it and returns it.
func (e *expr) markRaises() bool {
	r := e.l.sx != nil && e.l.sx.raises || e.r.sx != nil && e.r.sx.raises
	for _, a := range e.args {
		if a.markRaises() {
			r = true
		}
	}
	e.raises = r
	return r
}

func triNot(t Tri) Tri {
	switch t {
	case True:
		return False
	case False:
		return True
	}
	return Unknown
}

func triOf(b bool) Tri {
	if b {
		return True
	}
	return False
}

// eval evaluates the predicate over row with three-valued logic, its
// slots naming vals (the plan's values).
func (e *expr) eval(row Row, vals []any) Tri {
	switch e.op {
	case opConst:
		return e.val
	case opAnd:
		// PostgreSQL does not define the order it evaluates conditions
		// in: when one can raise, every one is evaluated, so a row for
		// which any would raise raises (see docs/queries.md).
		res := True
		for _, a := range e.args {
			switch a.eval(row, vals) {
			case False:
				if !e.raises {
					return False
				}
				res = False
			case Unknown:
				if res != False {
					res = Unknown
				}
			}
		}
		return res
	case opOr:
		res := False
		for _, a := range e.args {
			switch a.eval(row, vals) {
			case True:
				if !e.raises {
					return True
				}
				res = True
			case Unknown:
				if res != True {
					res = Unknown
				}
			}
		}
		return res
	case opNot:
		return triNot(e.args[0].eval(row, vals))
	case opCmp:
		a := e.l.value(row, vals, e.fam)
		if a == nil && !e.raises {
			return Unknown
		}
		b := e.r.value(row, vals, e.fam)
		if a == nil || b == nil {
			return Unknown
		}
		return triOf(e.cmp.holds(compareValues(a, b)))
	case opDistinct:
		a, b := e.l.value(row, vals, e.fam), e.r.value(row, vals, e.fam)
		var distinct bool
		switch {
		case a == nil && b == nil:
			distinct = false
		case a == nil || b == nil:
			distinct = true
		default:
			distinct = compareValues(a, b) != 0
		}
		return triOf(distinct != e.negate)
	case opIsNull:
		// Tested on the value as held: json and arrays have no family
		// form, and any non-NULL value is not NULL.
		var isNull bool
		switch {
		case e.l.sx != nil:
			isNull = e.l.sx.eval(row) == nil
		case e.l.col != nil:
			rv := row[e.l.col.src]
			isNull = rv == nil || rv[e.l.col.idx] == nil
		default:
			isNull = e.l.constant(vals) == nil
		}
		return triOf(isNull != e.negate)
	case opBoolTest:
		t := e.args[0].eval(row, vals)
		switch e.test {
		case testTrue:
			return triOf(t == True)
		case testNotTrue:
			return triOf(t != True)
		case testFalse:
			return triOf(t == False)
		case testNotFalse:
			return triOf(t != False)
		case testUnknown:
			return triOf(t == Unknown)
		}
		return triOf(t != Unknown)
	case opBoolCol:
		v := e.l.value(row, vals, famBool)
		if v == nil {
			return Unknown
		}
		return triOf(v.(bool))
	case opIn:
		if e.raises {
			e.l.value(row, vals, e.fam) // evaluated before the list is looked at
		}
		if len(e.setVals()) == 0 && !e.null {
			// x = ANY('{}') is false and x <> ALL('{}') true, even for NULL x.
			return triOf(e.negate)
		}
		v := e.l.value(row, vals, e.fam)
		if v == nil {
			return Unknown
		}
		var kb [64]byte
		if _, ok := e.set.keys[string(appendKey(kb[:0], v))]; ok {
			return triOf(!e.negate)
		}
		if e.null {
			return Unknown
		}
		return triOf(e.negate)
	case opAnyAll:
		if e.raises {
			e.l.value(row, vals, e.fam)
		}
		if len(e.setVals()) == 0 {
			return triOf(!e.any)
		}
		v := e.l.value(row, vals, e.fam)
		if v == nil {
			return Unknown
		}
		res := triOf(!e.any)
		for _, x := range e.setVals() {
			t := Unknown
			if x != nil {
				t = triOf(e.cmp.holds(compareValues(v, x)))
			}
			switch {
			case e.any && t == True:
				return True
			case !e.any && t == False:
				return False
			case t == Unknown:
				res = Unknown
			}
		}
		return res
	case opArray:
		return e.evalArray(row)
	case opAnyArray:
		return e.evalAnyArray(row, vals)
	case opLike:
		// LIKE sees a bpchar with its padding: no trimming here.
		if e.l.sx != nil {
			v := e.l.sx.eval(row)
			if v == nil {
				return Unknown
			}
			return triOf(e.set.like.match(v.(string)) != e.negate)
		}
		rv := row[e.l.col.src]
		if rv == nil || rv[e.l.col.idx] == nil {
			return Unknown
		}
		s, ok := rv[e.l.col.idx].(string)
		if !ok {
			return Unknown
		}
		return triOf(e.set.like.match(s) != e.negate)
	}
	return Unknown
}

// likeMatcher matches LIKE and ILIKE patterns. The pattern is split into
// literal runs and the wildcards % (any run of characters) and _ (one
// character); matching is the greedy two-pointer walk, O(len(s)·len(p)) at
// worst, never exponential.
type likeMatcher struct {
	pat   []likeTok
	fold  func(string) string // ILIKE: the collation's lower(); nil for LIKE
	folds Fold                // which fold that is
}

type likeTok struct {
	kind byte // 'l' literal rune, '_' any one character, '%' any run
	r    rune
}

// compileLike reads a pattern with the given escape character (-1: none).
func compileLike(pattern string, escape rune, folds Fold) (*likeMatcher, bool) {
	fold := folds.fn()
	if fold != nil {
		pattern = fold(pattern)
	}
	m := &likeMatcher{fold: fold, folds: folds}
	for i := 0; i < len(pattern); {
		r, n := utf8.DecodeRuneInString(pattern[i:])
		i += n
		switch {
		case escape >= 0 && r == escape:
			if i >= len(pattern) {
				return nil, false // LIKE pattern must not end with escape character
			}
			r, n = utf8.DecodeRuneInString(pattern[i:])
			i += n
			m.pat = append(m.pat, likeTok{kind: 'l', r: r})
		case r == '%':
			if len(m.pat) > 0 && m.pat[len(m.pat)-1].kind == '%' {
				continue
			}
			m.pat = append(m.pat, likeTok{kind: '%'})
		case r == '_':
			m.pat = append(m.pat, likeTok{kind: '_'})
		default:
			m.pat = append(m.pat, likeTok{kind: 'l', r: r})
		}
	}
	return m, true
}

// literals returns the pattern's literal runs (the characters between two
// wildcards, escapes resolved, folded as match folds its input): every
// string the pattern matches holds each of them, folded, as a substring.
// A run is cut at U+FFFD, which match also takes for an invalid byte of
// its input: only runs that stand for their own bytes are returned.
func (m *likeMatcher) literals() []string {
	var out []string
	var b []byte
	flush := func() {
		if len(b) > 0 {
			out = append(out, string(b))
			b = b[:0]
		}
	}
	for _, t := range m.pat {
		if t.kind != 'l' || t.r == utf8.RuneError {
			flush()
			continue
		}
		b = utf8.AppendRune(b, t.r)
	}
	flush()
	return out
}

func (m *likeMatcher) match(s string) bool {
	if m.fold != nil {
		s = m.fold(s)
	}
	p := m.pat
	si, pi := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch t := p[pi]; t.kind {
			case '%':
				starP, starS = pi, si
				pi++
				continue
			case '_':
				_, n := utf8.DecodeRuneInString(s[si:])
				si += n
				pi++
				continue
			default:
				r, n := utf8.DecodeRuneInString(s[si:])
				if r == t.r {
					si += n
					pi++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		si = starS
		pi = starP + 1
	}
	for pi < len(p) && p[pi].kind == '%' {
		pi++
	}
	return pi == len(p)
}

// asciiLower is lower() under the "C" and "POSIX" collations: ASCII only.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// unicodeLower is lower() under glibc's C.UTF-8: each character mapped by
// its simple lowercase mapping (towlower).
func unicodeLower(s string) string {
	return strings.Map(unicode.ToLower, s)
}
