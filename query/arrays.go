package query

import (
	"github.com/freshetdb/freshet/change"
	pg "github.com/pganalyze/pg_query_go/v6"
)

// Array operators and functions over arrays of the supported element
// types, as PostgreSQL's arraycontains, arraycontained, arrayoverlap,
// array_length and cardinality compute them: elements compared with the
// element type's =, multi-dimensional arrays seen as their elements in
// order, a NULL element equal to nothing.

// arrayKind is the operation of an opArray predicate.
type arrayKind uint8

const (
	arrContains    arrayKind = iota // l @> r
	arrContainedBy                  // l <@ r
	arrOverlap                      // l && r
)

var arrayOps = map[string]arrayKind{"@>": arrContains, "<@": arrContainedBy, "&&": arrOverlap}

// arrayElemOf returns the element type of an array type Freshet compares.
func arrayElemOf(oid uint32) (uint32, bool) {
	e, ok := arrayElem[oid]
	if !ok {
		return 0, false
	}
	switch familyOf(e) {
	case famNone, famJSON, famArray, famUnknown:
		return 0, false
	}
	return e, true
}

// arrayOp compiles l @> r, l <@ r and l && r on arrays.
func (c *compiler) arrayOp(a *pg.A_Expr, kind arrayKind, name string) (*expr, error) {
	l, err := c.sexpr(a.Lexpr)
	if err != nil {
		return nil, err
	}
	r, err := c.sexpr(a.Rexpr)
	if err != nil {
		return nil, err
	}
	switch {
	case l.u != nil && r.u != nil:
		return nil, refusalAt(a.Location, CodeType, "operator %s between two values of unknown type is not supported; cast one", name)
	case l.u != nil:
		err = c.settleScalar(l, r.oid)
	case r.u != nil:
		err = c.settleScalar(r, l.oid)
	}
	if err != nil {
		return nil, err
	}
	if familyOf(l.oid) == famJSON || familyOf(r.oid) == famJSON {
		if kind == arrOverlap {
			return nil, refusalAt(a.Location, CodeOperator, "operator && on jsonb does not exist")
		}
		return c.jsonContains(l, r, kind == arrContainedBy, a.Location)
	}
	elem, ok := arrayElemOf(l.oid)
	if !ok || l.oid != r.oid || c.arrayIsOther(l) || c.arrayIsOther(r) {
		return nil, refusalAt(a.Location, CodeOperator, "operator %s on %s and %s is not supported (arrays of one supported element type only)", name, scalarTypeName(l), scalarTypeName(r))
	}
	coll, err := mergeColl(a.Location, l, r)
	if err != nil {
		return nil, err
	}
	if coll.OID != 0 && !coll.Deterministic {
		return nil, refusalAt(a.Location, CodeCollation, "operator %s on text under the nondeterministic collation %q is not supported", name, coll.Name)
	}
	if l.isConst() && l.val == nil || r.isConst() && r.val == nil {
		return &expr{op: opConst, val: Unknown}, nil // strict
	}
	e := &expr{op: opArray, arr: kind, fam: familyOf(elem), elemOID: elem, l: operand{sx: l}, r: operand{sx: r}}
	if l.isConst() && r.isConst() {
		return &expr{op: opConst, val: e.eval(nil, nil)}, nil
	}
	return e, nil
}

// arrayIsOther reports whether s is a column whose array type is not the
// built-in one (an array of a domain or an enum).
func (c *compiler) arrayIsOther(s *scalar) bool {
	return s.col != nil && c.column(s.col).Type.Kind != change.KindArray
}

// arrayKeys returns the equality keys of an array's non-NULL elements
// (of type elem, in family fam), and whether it holds a NULL.
func arrayKeys(v any, elem uint32, fam family) (map[string]struct{}, bool) {
	arr := v.(change.Array)
	keys := make(map[string]struct{}, len(arr.Elems))
	null := false
	for _, x := range arr.Elems {
		if x == nil {
			null = true
			continue
		}
		y, ok := toFamily(x, elem, fam)
		if !ok {
			continue
		}
		keys[string(appendKey(nil, y))] = struct{}{}
	}
	return keys, null
}

// evalArray evaluates an opArray predicate.
func (e *expr) evalArray(row Row) Tri {
	a, b := e.l.sx.eval(row), e.r.sx.eval(row)
	if a == nil || b == nil {
		return Unknown
	}
	if e.arr == arrContainedBy {
		a, b = b, a
	}
	switch e.arr {
	case arrOverlap:
		bk, _ := arrayKeys(b, e.elemOID, e.fam)
		for _, x := range a.(change.Array).Elems {
			if x == nil {
				continue
			}
			if y, ok := toFamily(x, e.elemOID, e.fam); ok {
				if _, hit := bk[string(appendKey(nil, y))]; hit {
					return True
				}
			}
		}
		return False
	}
	// a contains b: every element of b (a NULL one matching nothing) is
	// in a.
	ak, _ := arrayKeys(a, e.elemOID, e.fam)
	for _, x := range b.(change.Array).Elems {
		if x == nil {
			return False
		}
		y, ok := toFamily(x, e.elemOID, e.fam)
		if !ok {
			return False
		}
		if _, hit := ak[string(appendKey(nil, y))]; !hit {
			return False
		}
	}
	return True
}

// anyArrayExpr compiles x op ANY(arr) and x op ALL(arr) where arr is a
// column or an expression.
func (c *compiler) anyArrayExpr(a *pg.A_Expr, op cmpOp, isAny bool) (*expr, error) {
	l, err := c.operand(a.Lexpr)
	if err != nil {
		return nil, err
	}
	arr, err := c.sexpr(a.Rexpr)
	if err != nil {
		return nil, err
	}
	if arr.u != nil {
		if l.unknown() {
			return nil, refusalAt(a.Location, CodeType, "ANY/ALL between values of unknown type is not supported; cast one")
		}
		ao, ok := elemArray[l.oid]
		if !ok {
			return nil, refusalAt(a.Location, CodeType, "ANY/ALL over %s values is not supported", typeName2(&l))
		}
		if err := c.settleScalar(arr, ao); err != nil {
			return nil, err
		}
	}
	elem, ok := arrayElemOf(arr.oid)
	if !ok || c.arrayIsOther(arr) {
		return nil, refusalAt(a.Location, CodeType, "ANY/ALL needs an array of a supported element type, not %s", scalarTypeName(arr))
	}
	et := topnd{oid: elem, fam: familyOf(elem), sx: arr, collate: arr.coll, loc: a.Location}
	fam, err := c.unify(&l, &et, op != cmpEq && op != cmpNe, a.Location)
	if err != nil {
		return nil, err
	}
	if fam == famEnum || (l.oid == change.OIDBPChar) != (elem == change.OIDBPChar) && fam == famText {
		return nil, refusalAt(a.Location, CodeType, "ANY/ALL comparing %s with %s elements is not supported", typeName2(&l), typeName(elem))
	}
	lo, err := c.final(&l, fam, a.Location)
	if err != nil {
		return nil, err
	}
	if arr.isConst() && arr.val == nil || lo.isNullConst() && arr.isConst() {
		return &expr{op: opConst, val: Unknown}, nil
	}
	return &expr{op: opAnyArray, any: isAny, cmp: op, fam: fam, elemOID: elem, l: lo, r: operand{sx: arr}}, nil
}

// evalAnyArray evaluates an opAnyArray predicate.
func (e *expr) evalAnyArray(row Row, vals []any) Tri {
	// Both sides are evaluated first (one that raises raises).
	v := e.l.value(row, vals, e.fam)
	av := e.r.sx.eval(row)
	if av == nil {
		return Unknown
	}
	elems := av.(change.Array).Elems
	if len(elems) == 0 {
		return triOf(!e.any)
	}
	if v == nil {
		return Unknown
	}
	res := triOf(!e.any)
	for _, x := range elems {
		t := Unknown
		if x != nil {
			if y, ok := toFamily(x, e.elemOID, e.fam); ok {
				t = triOf(e.cmp.holds(compareValues(v, y)))
			}
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
}

// arrayConstructor compiles ARRAY[...] of constants: a one-dimensional
// array of the elements' common type.
func (c *compiler) arrayConstructor(ae *pg.A_ArrayExpr) (*scalar, error) {
	elems, oid, _, err := c.commonArgs(ae.Elements, "ARRAY", ae.Location)
	if err != nil {
		return nil, err
	}
	arrOID, ok := elemArray[oid]
	if !ok || len(elems) == 0 {
		return nil, refusalAt(ae.Location, CodeExpression, "this ARRAY[...] is not supported")
	}
	vals := make([]any, len(elems))
	for i, e := range elems {
		if !e.isConst() {
			return nil, refusalAt(ae.Location, CodeExpression, "ARRAY[...] of values that are not constants is not supported")
		}
		vals[i] = e.val
	}
	return typedConst(arrOID, change.Array{Dims: []change.ArrayDim{{Len: int32(len(vals)), Lower: 1}}, Elems: vals}), nil
}

// arrayFunc compiles array_length(arr, dim) and cardinality(arr).
func (c *compiler) arrayFunc(name string, f *pg.FuncCall, args []*scalar) (*scalar, error) {
	want := 1
	if name == "array_length" {
		want = 2
	}
	if len(args) != want {
		return nil, refusalAt(f.Location, CodeFunction, "%s() with %d arguments is not supported", name, len(args))
	}
	arr := args[0]
	if arr.u != nil {
		return nil, refusalAt(f.Location, CodeType, "%s() of a value of unknown type is not supported; cast it", name)
	}
	if familyOf(arr.oid) != famArray {
		return nil, refusalAt(f.Location, CodeType, "function %s(%s) does not exist", name, typeName(arr.oid))
	}
	s := &scalar{op: sFunc, oid: change.OIDInt4, typmod: -1, args: args}
	if name == "cardinality" {
		s.fn = func(a []any) any { return int64(len(a[0].(change.Array).Elems)) }
		return c.fold(s, f.Location)
	}
	dim, err := c.asInt4(args[1], name, f.Location)
	if err != nil {
		return nil, err
	}
	s.args[1] = dim
	s.fn = func(a []any) any {
		arr, d := a[0].(change.Array), a[1].(int64)
		if d < 1 || d > int64(len(arr.Dims)) {
			return nil
		}
		return int64(arr.Dims[d-1].Len)
	}
	return c.fold(s, f.Location)
}
