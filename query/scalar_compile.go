package query

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/freshetdb/freshet/change"
	pg "github.com/pganalyze/pg_query_go/v6"
)

// constTree reports whether n is a constant as c.constant reads it: a
// literal, a bind, or casts of one.
func constTree(n *pg.Node) bool {
	switch x := n.Node.(type) {
	case *pg.Node_AConst, *pg.Node_ParamRef:
		return true
	case *pg.Node_TypeCast:
		return constTree(x.TypeCast.Arg)
	}
	return false
}

// sexpr compiles a value expression. The result may be an operand of
// unknown type (s.u set) that the caller settles.
func (c *compiler) sexpr(n *pg.Node) (*scalar, error) {
	if err := c.tick(); err != nil {
		return nil, err
	}
	if n == nil {
		// The missing side of a prefix operator (|| 0, found by
		// FuzzCompile): only + and - have one.
		return nil, refuse(CodeOperator, "this operator needs a left operand here")
	}
	switch x := n.Node.(type) {
	case *pg.Node_ColumnRef:
		src, cat, star, err := c.resolveColumn(x.ColumnRef)
		if err != nil {
			return nil, err
		}
		if star {
			return nil, refusalAt(x.ColumnRef.Location, CodeExpression, "* is not supported in an expression")
		}
		r := c.ref(src, cat)
		col := c.column(r)
		if col.Type.Kind == change.KindEnum || col.Type.Kind == change.KindArray || familyOf(col.TypeOID) == famNone {
			return &scalar{op: sCol, col: r, oid: col.TypeOID, typmod: col.TypeMod, coll: col.Collation, cols: true, u: nil}, nil
		}
		return &scalar{op: sCol, col: r, oid: col.TypeOID, typmod: col.TypeMod, coll: col.Collation, cols: true}, nil
	case *pg.Node_AConst, *pg.Node_ParamRef:
		o, err := c.constant(n)
		if err != nil {
			return nil, err
		}
		s := c.fromTopnd(o)
		return s, canonicalJSONB(s, o.loc)
	case *pg.Node_TypeCast:
		tc := x.TypeCast
		if constTree(n) && (len(tc.TypeName.Typmods) == 0 || !constTree(tc.Arg)) {
			o, err := c.constant(n)
			if err != nil {
				return nil, err
			}
			s := c.fromTopnd(o)
			return s, canonicalJSONB(s, tc.Location)
		}
		arg, err := c.sexpr(tc.Arg)
		if err != nil {
			return nil, err
		}
		return c.castExpr(arg, tc.TypeName, tc.Location)
	case *pg.Node_AExpr:
		a := x.AExpr
		name := opName(a.Name)
		if a.Kind == pg.A_Expr_Kind_AEXPR_OP {
			if op, ok := arithNames[name]; ok {
				if a.Lexpr == nil {
					if op != opAdd && op != opSub {
						break
					}
					return c.unary(op == opSub, a.Rexpr, a.Location)
				}
				return c.arith(op, a.Lexpr, a.Rexpr, a.Location)
			}
			if name == "||" {
				return c.concatOp(a.Lexpr, a.Rexpr, a.Location)
			}
			switch name {
			case "->", "->>", "#>", "#>>", "?":
				if a.Lexpr != nil {
					return c.jsonOp(a, name)
				}
			}
			if _, ok := cmpOps[name]; !ok {
				switch name {
				case "~~", "!~~", "~~*", "!~~*", "@>", "<@", "&&":
				default:
					return nil, c.unsupported(n, "in an expression")
				}
			}
		}
		if a.Kind == pg.A_Expr_Kind_AEXPR_NULLIF {
			return c.nullif(a)
		}
		return c.predScalar(n)
	case *pg.Node_BoolExpr, *pg.Node_NullTest, *pg.Node_BooleanTest:
		return c.predScalar(n)
	case *pg.Node_FuncCall:
		return c.function(x.FuncCall, n)
	case *pg.Node_CaseExpr:
		return c.caseExpr(x.CaseExpr)
	case *pg.Node_CoalesceExpr:
		return c.coalesce(x.CoalesceExpr)
	case *pg.Node_MinMaxExpr:
		return c.extreme(x.MinMaxExpr)
	case *pg.Node_AArrayExpr:
		return c.arrayConstructor(x.AArrayExpr)
	}
	return nil, c.unsupported(n, "in an expression")
}

// fromTopnd makes a compiled constant a scalar (unsettled when its type
// is unknown).
func (c *compiler) fromTopnd(o topnd) *scalar {
	if o.unknown() {
		u := o
		return &scalar{op: sConst, typmod: -1, u: &u}
	}
	s := typedConst(o.oid, o.val)
	return s
}

// canonicalJSONB gives a jsonb constant jsonb's own text (keys sorted and
// unique, numbers as numeric, jsonb_out's spacing), as the server holds
// it; a text jsonb cannot read is refused.
func canonicalJSONB(s *scalar, loc int32) error {
	if s.oid != change.OIDJSONB || s.val == nil {
		return nil
	}
	v, err := parseJSONB(s.val.(change.JSON))
	if err != nil {
		return refusalAt(loc, CodeType, "invalid input syntax for type jsonb: %v", err)
	}
	s.val = jsonbValue(v)
	return nil
}

// settleScalar gives an operand of unknown type the type oid.
func (c *compiler) settleScalar(s *scalar, oid uint32) error {
	if s.u == nil {
		return nil
	}
	if err := c.settle(s.u, oid); err != nil {
		return err
	}
	s.oid, s.val, s.u = s.u.oid, s.u.val, nil
	return canonicalJSONB(s, -1)
}

// predScalar compiles a predicate used as a value: its truth as a bool.
func (c *compiler) predScalar(n *pg.Node) (*scalar, error) {
	e, err := c.pred(n)
	if err != nil {
		return nil, err
	}
	e.markRaises()
	s := &scalar{op: sPred, oid: change.OIDBool, typmod: -1, preds: []*expr{e}, raises: e.raises, cols: true}
	if e.op == opConst {
		s = typedConst(change.OIDBool, triBool(e.val))
	}
	return s, nil
}

func triBool(t Tri) any {
	switch t {
	case True:
		return true
	case False:
		return false
	}
	return nil
}

// fold finishes a node: raises and cols from its children, and a node
// over constants only is evaluated now, as PostgreSQL's planner folds
// constant expressions (an error then refuses the query: PostgreSQL's
// own read would fail).
func (c *compiler) fold(s *scalar, loc int32) (*scalar, error) {
	allConst := true
	for _, a := range s.args {
		s.raises = s.raises || a.raises
		s.cols = s.cols || a.cols
		if !a.isConst() {
			allConst = false
		}
	}
	for _, p := range s.preds {
		s.raises = s.raises || p.raises
		if !exprConst(p) {
			allConst = false
			s.cols = true
		}
	}
	if s.op == sFunc {
		// A strict function of a NULL constant is NULL: the planner folds
		// it without evaluating the other arguments.
		for _, a := range s.args {
			if a.isConst() && a.val == nil {
				r := typedConst(s.oid, nil)
				r.typmod, r.coll = s.typmod, s.coll
				return r, nil
			}
		}
	}
	if !allConst || s.op == sCol || c.lazy > 0 {
		return s, nil
	}
	var v any
	var err error
	func() {
		defer recoverEval(&err)
		v = s.eval(nil)
	}()
	if err != nil {
		var ee *EvalError
		errors.As(err, &ee)
		return nil, refusalAt(loc, CodeEvalError, "PostgreSQL would fail this query: %s", ee.Error())
	}
	r := typedConst(s.oid, v)
	r.typmod, r.coll = s.typmod, s.coll
	return r, nil
}

// exprConst reports whether a predicate depends on no row (it is
// evaluated with a nil row).
func exprConst(e *expr) bool {
	switch e.op {
	case opConst:
		return true
	case opAnd, opOr, opNot, opBoolTest:
		for _, a := range e.args {
			if !exprConst(a) {
				return false
			}
		}
		return true
	case opLike:
		return false
	}
	return e.l.col == nil && e.l.sx == nil && e.r.col == nil && e.r.sx == nil
}

// category is a type's pg_type.typcategory for common-type resolution.
func category(oid uint32) byte {
	switch oid {
	case change.OIDInt2, change.OIDInt4, change.OIDInt8, change.OIDNumeric, change.OIDFloat4, change.OIDFloat8:
		return 'N'
	case change.OIDText, change.OIDVarchar, change.OIDBPChar:
		return 'S'
	case change.OIDDate, change.OIDTimestamp, change.OIDTimestamptz:
		return 'D'
	case change.OIDBool:
		return 'B'
	}
	return 0
}

func preferred(oid uint32) bool {
	return oid == change.OIDFloat8 || oid == change.OIDText || oid == change.OIDTimestamptz || oid == change.OIDBool
}

// implicitCast reports whether PostgreSQL casts from to to implicitly,
// among the types category knows.
func implicitCast(from, to uint32) bool {
	if from == to {
		return true
	}
	switch category(from) {
	case 'N':
		return category(to) == 'N' && numericRank(to) > numericRank(from)
	case 'S':
		return category(to) == 'S'
	case 'D':
		switch from {
		case change.OIDDate:
			return to == change.OIDTimestamp || to == change.OIDTimestamptz
		case change.OIDTimestamp:
			return to == change.OIDTimestamptz
		}
	}
	return false
}

// commonType is select_common_type: the type CASE, COALESCE, GREATEST
// and LEAST results are converted to. what names the construct.
func (c *compiler) commonType(items []*scalar, what string, loc int32) (uint32, int32, error) {
	var p uint32
	var typmod int32 = -1
	for _, s := range items {
		if s.u != nil {
			continue
		}
		if category(s.oid) == 0 {
			return 0, 0, refusalAt(loc, CodeType, "%s of %s values is not supported", what, typeName(s.oid))
		}
		if p == 0 {
			p, typmod = s.oid, s.typmod
			continue
		}
		if s.oid != p {
			if category(s.oid) != category(p) {
				return 0, 0, refusalAt(loc, CodeType, "%s types %s and %s cannot be matched", what, typeName(p), typeName(s.oid))
			}
			if !preferred(p) && implicitCast(p, s.oid) && !implicitCast(s.oid, p) {
				p = s.oid
			}
		}
	}
	if p == 0 {
		return change.OIDText, -1, nil
	}
	for _, s := range items {
		if s.u != nil || s.oid != p || s.typmod != typmod {
			typmod = -1
		}
	}
	return p, typmod, nil
}

// coerce converts s to type to as PostgreSQL's implicit casts do (to
// must be reachable: commonType chose it).
func (c *compiler) coerce(s *scalar, to uint32, loc int32) (*scalar, error) {
	if s.u != nil {
		if err := c.settleScalar(s, to); err != nil {
			return nil, err
		}
		return s, nil
	}
	if s.oid == to {
		return s, nil
	}
	from := s.oid
	var fn func(v any) any
	switch {
	case from == change.OIDBPChar && category(to) == 'S':
		fn = func(v any) any { return strings.TrimRight(v.(string), " ") }
	case category(from) == 'S' && category(to) == 'S':
		return retype(s, to), nil
	case category(from) == 'N':
		tf := familyOf(to)
		fn = func(v any) any { return numConvert(v, from, to, tf) }
	case from == change.OIDDate:
		fn = func(v any) any { return dateToTimestamp(v.(change.Date)) }
	case from == change.OIDTimestamp && to == change.OIDTimestamptz:
		return retype(s, to), nil
	default:
		return nil, refusalAt(loc, CodeType, "converting %s to %s is not supported", typeName(from), typeName(to))
	}
	r := &scalar{op: sFunc, oid: to, typmod: -1, coll: s.coll, args: []*scalar{s}, fn: func(a []any) any { return fn(a[0]) },
		raises: from == change.OIDDate || from == change.OIDNumeric}
	return c.fold(r, loc)
}

// retype is s seen as type to with the same Go value.
func retype(s *scalar, to uint32) *scalar {
	if s.isConst() {
		r := *s
		r.oid, r.typmod = to, -1
		return &r
	}
	return &scalar{op: sFunc, oid: to, typmod: -1, coll: s.coll, args: []*scalar{s}, fn: func(a []any) any { return a[0] },
		raises: s.raises, cols: s.cols}
}

// numConvert converts a value of numeric category type from to type to
// (of family tf), implicitly (widening).
func numConvert(v any, from, to uint32, tf family) any {
	switch x := v.(type) {
	case int64:
		switch tf {
		case famInt:
			return x
		case famNumeric:
			return intNumeric(x)
		}
		if to == change.OIDFloat4 {
			return float64(float32(x))
		}
		return float64(x)
	case change.Numeric:
		if to == change.OIDFloat4 {
			return numericFloat32(x)
		}
		return numericToFloat8(x)
	case float64:
		return x
	}
	return v
}

// numericToFloat8 is numeric_float8: a finite value too large or too
// small for float8 fails as float8in fails on its text.
func numericToFloat8(n change.Numeric) float64 {
	f := numericFloat64(n)
	if n.IsFinite() && (math.IsInf(f, 0) || f == 0 && numSign(n) != 0) {
		raise(stateOutOfRange, "%q is out of range for type double precision", n.String())
	}
	return f
}

// numericFloat32 is numeric_float4: the numeric's text read as float4.
func numericFloat32(n change.Numeric) float64 {
	f := numericFloat64(n)
	if n.IsFinite() {
		f = parseFloatExp32(n)
		if math.IsInf(f, 0) || f == 0 && numSign(n) != 0 {
			raise(stateOutOfRange, "%q is out of range for type real", n.String())
		}
	}
	return f
}

// unary compiles -x and +x.
func (c *compiler) unary(neg bool, n *pg.Node, loc int32) (*scalar, error) {
	x, err := c.sexpr(n)
	if err != nil {
		return nil, err
	}
	if x.u != nil {
		return nil, refusalAt(loc, CodeType, "a unary operator on a value of unknown type is not supported; cast it")
	}
	oid := x.oid
	if category(oid) != 'N' {
		return nil, refusalAt(loc, CodeType, "unary minus on %s is not supported", typeName(oid))
	}
	if !neg {
		return x, nil
	}
	s := &scalar{op: sFunc, oid: oid, typmod: -1, args: []*scalar{x}, raises: familyOf(oid) == famInt}
	switch familyOf(oid) {
	case famInt:
		s.fn = func(a []any) any {
			v := a[0].(int64)
			if v == math.MinInt64 {
				intRangeError(oid)
			}
			return checkInt(-v, oid)
		}
	case famNumeric:
		s.fn = func(a []any) any { return numericNeg(a[0].(change.Numeric)) }
	default:
		s.fn = func(a []any) any { return -a[0].(float64) }
	}
	return c.fold(s, loc)
}

// arith compiles l op r for the numeric types.
func (c *compiler) arith(op arithOp, ln, rn *pg.Node, loc int32) (*scalar, error) {
	l, err := c.sexpr(ln)
	if err != nil {
		return nil, err
	}
	r, err := c.sexpr(rn)
	if err != nil {
		return nil, err
	}
	opn := [...]string{"+", "-", "*", "/", "%"}[op]
	switch {
	case l.u != nil && r.u != nil:
		return nil, refusalAt(loc, CodeType, "operator %s between two values of unknown type is not supported; cast one", opn)
	case l.u != nil:
		if err := c.settleScalar(l, r.oid); err != nil {
			return nil, err
		}
	case r.u != nil:
		if err := c.settleScalar(r, l.oid); err != nil {
			return nil, err
		}
	}
	if category(l.oid) != 'N' || category(r.oid) != 'N' {
		return nil, refusalAt(loc, CodeType, "operator %s on %s and %s is not supported", opn, typeName(l.oid), typeName(r.oid))
	}
	lf, rf := familyOf(l.oid), familyOf(r.oid)
	var oid uint32
	switch {
	case lf == famInt && rf == famInt:
		oid = l.oid
		if numericRank(r.oid) > numericRank(oid) {
			oid = r.oid
		}
	case lf == famFloat || rf == famFloat:
		oid = change.OIDFloat8
		if l.oid == change.OIDFloat4 && r.oid == change.OIDFloat4 {
			oid = change.OIDFloat4
		}
		if op == opMod {
			return nil, refusalAt(loc, CodeType, "operator %% on %s and %s does not exist", typeName(l.oid), typeName(r.oid))
		}
	default:
		oid = change.OIDNumeric
	}
	if l, err = c.coerce(l, oid, loc); err != nil {
		return nil, err
	}
	if r, err = c.coerce(r, oid, loc); err != nil {
		return nil, err
	}
	s := &scalar{op: sFunc, oid: oid, typmod: -1, args: []*scalar{l, r}, raises: true}
	switch familyOf(oid) {
	case famInt:
		s.fn = func(a []any) any { return intArith(op, a[0].(int64), a[1].(int64), oid) }
	case famNumeric:
		s.fn = func(a []any) any { return numericArith(op, a[0].(change.Numeric), a[1].(change.Numeric)) }
	default:
		bits := 64
		if oid == change.OIDFloat4 {
			bits = 32
		}
		s.fn = func(a []any) any { return floatArith(op, a[0].(float64), a[1].(float64), bits) }
	}
	return c.fold(s, loc)
}

// textish reports whether a type is a string type Freshet evaluates.
func textish(oid uint32) bool { return category(oid) == 'S' || oid == change.OIDName }

// asText converts a string-typed s to text (char(n) loses its trailing
// spaces, as its cast to text does); an unknown operand becomes text.
func (c *compiler) asText(s *scalar, what string, loc int32) (*scalar, error) {
	if s.u != nil {
		if err := c.settleScalar(s, change.OIDText); err != nil {
			return nil, err
		}
		return s, nil
	}
	switch {
	case s.oid == change.OIDText:
		return s, nil
	case s.oid == change.OIDBPChar:
		return c.coerce(s, change.OIDText, loc)
	case textish(s.oid):
		return retype(s, change.OIDText), nil
	}
	return nil, refusalAt(loc, CodeType, "%s of a %s value is not supported (PostgreSQL has no such function)", what, typeName(s.oid))
}

// outputText converts any supported value to its text form as
// PostgreSQL's output function writes it (what || and concat use).
func outputText(oid uint32) func(v any) string {
	return func(v any) string {
		if s, ok := v.(string); ok {
			return s
		}
		return formatText(oid, v)
	}
}

// concatOp compiles l || r: text concatenation (textcat, and anytextcat
// when one side is not text: that side is cast to text).
func (c *compiler) concatOp(ln, rn *pg.Node, loc int32) (*scalar, error) {
	l, err := c.sexpr(ln)
	if err != nil {
		return nil, err
	}
	r, err := c.sexpr(rn)
	if err != nil {
		return nil, err
	}
	lt, rt := l.u != nil || textish(l.oid), r.u != nil || textish(r.oid)
	bad := func(s *scalar) bool {
		f := familyOf(s.oid)
		return s.u == nil && (f == famNone || f == famArray || f == famJSON || f == famBytea || f == famEnum || s.col != nil && c.column(s.col).Type.Kind != change.KindBase)
	}
	if !lt && !rt || bad(l) || bad(r) {
		return nil, refusalAt(loc, CodeOperator, "operator || on %s and %s is not supported (only text concatenation is)", scalarTypeName(l), scalarTypeName(r))
	}
	side := func(s *scalar, text bool) (*scalar, error) {
		if text {
			return c.asText(s, "||", loc)
		}
		return s, nil
	}
	if l, err = side(l, lt); err != nil {
		return nil, err
	}
	if r, err = side(r, rt); err != nil {
		return nil, err
	}
	// anytextcat and textanycat are $1::text || $2::text: a bool is
	// written true/false.
	lo, ro := textCast(l.oid, change.OIDText, -1), textCast(r.oid, change.OIDText, -1)
	coll, err := mergeColl(loc, l, r)
	if err != nil {
		return nil, err
	}
	s := &scalar{op: sFunc, oid: change.OIDText, typmod: -1, coll: coll, args: []*scalar{l, r},
		fn: func(a []any) any { return lo(a[:1]).(string) + ro(a[1:]).(string) }}
	return c.fold(s, loc)
}

func scalarTypeName(s *scalar) string {
	if s.u != nil {
		return "unknown"
	}
	return typeName(s.oid)
}

// mergeColl is the collation of a result built of ss, as PostgreSQL
// derives it from implicit collations: a non-default collation wins over
// the default one; two different non-default ones conflict (refused:
// PostgreSQL cannot pick one either wherever one is needed).
func mergeColl(loc int32, ss ...*scalar) (Collation, error) {
	var res Collation
	for _, s := range ss {
		switch {
		case s.coll.OID == 0 || s.coll.OID == res.OID:
		case res.OID == 0 || res.OID == defaultCollationOID:
			res = s.coll
		case s.coll.OID == defaultCollationOID:
		default:
			return Collation{}, refusalAt(loc, CodeCollation, "text under collations %q and %q meets in one expression: PostgreSQL cannot determine which to use", res.Name, s.coll.Name)
		}
	}
	return res, nil
}

// textColl is the collation text of type oid computed with collation
// coll is compared under: a text made of no collatable input (a number
// cast to text, ->> of jsonb, a constant) has the database's default
// collation, which the catalog reports with each table (a zero one when
// it does not: then no order is assumed).
func (c *compiler) textColl(oid uint32, coll Collation) Collation {
	if familyOf(oid) != famText || coll.OID != 0 {
		return coll
	}
	if d := c.sources[0].Table.DefaultCollation; d.OID != 0 {
		return d
	}
	return Collation{OID: defaultCollationOID, Name: "default", Deterministic: true}
}

// defaultCollationOID is pg_collation's "default".
const defaultCollationOID = 100

// nullif compiles NULLIF(a, b): a, or NULL when a = b.
func (c *compiler) nullif(a *pg.A_Expr) (*scalar, error) {
	l, err := c.sexpr(a.Lexpr)
	if err != nil {
		return nil, err
	}
	r, err := c.sexpr(a.Rexpr)
	if err != nil {
		return nil, err
	}
	lo, ro := c.asOperand(l, a.Location), c.asOperand(r, a.Location)
	e, err := c.comparePair(&lo, &ro, cmpEq, a.Location)
	if err != nil {
		return nil, err
	}
	e.markRaises()
	// The comparison settled an unknown first argument.
	if l.u != nil {
		if err := c.settleScalar(l, lo.oid); err != nil {
			return nil, err
		}
	}
	if r.u != nil {
		if err := c.settleScalar(r, ro.oid); err != nil {
			return nil, err
		}
	}
	// NULLIF returns the first argument of the = it implies, converted to
	// that operator's left input type.
	oid := eqLeftType(l.oid, r.oid)
	typmod := l.typmod
	if oid != l.oid {
		typmod = -1
		if l, err = c.coerce(l, oid, a.Location); err != nil {
			return nil, err
		}
	}
	coll, err := mergeColl(a.Location, l, r)
	if err != nil {
		return nil, err
	}
	switch {
	case l.isConst() && l.val == nil:
		// The planner: a NULL argument cannot be equal; NULLIF(NULL, x)
		// is NULL, NULLIF(x, NULL) is x.
		nc := typedConst(oid, nil)
		nc.typmod, nc.coll = typmod, coll
		return nc, nil
	case r.isConst() && r.val == nil:
		rl := *l
		rl.typmod, rl.coll = typmod, coll
		return &rl, nil
	}
	s := &scalar{op: sNullif, oid: oid, typmod: typmod, coll: coll, args: []*scalar{l}, preds: []*expr{e}}
	return c.fold(s, a.Location)
}

// asOperand wraps a scalar as a comparison operand.
func (c *compiler) asOperand(s *scalar, loc int32) topnd {
	if s.u != nil {
		return *s.u
	}
	if s.isConst() {
		return topnd{oid: s.oid, fam: familyOf(s.oid), val: s.val, loc: loc}
	}
	if s.op == sCol {
		return topnd{col: s.col, oid: s.oid, fam: c.colFamily(c.column(s.col)), loc: loc, collate: s.coll}
	}
	return topnd{sx: s, oid: s.oid, fam: familyOf(s.oid), loc: loc, collate: c.textColl(s.oid, s.coll)}
}

// caseExpr compiles CASE, simple (CASE x WHEN v ...) or searched. As
// PostgreSQL's planner does, an arm whose condition is a constant false
// or NULL is dropped without its result being folded, and a constant
// true one ends the CASE (later arms and ELSE are never reached): a
// constant error there raises nothing. Every arm still counts for the
// result's type, as in parse analysis.
func (c *compiler) caseExpr(ce *pg.CaseExpr) (*scalar, error) {
	var arg *scalar
	if ce.Arg != nil {
		var err error
		if arg, err = c.sexpr(ce.Arg); err != nil {
			return nil, err
		}
	}
	type arm struct {
		p    *expr
		r    *scalar
		dead bool
	}
	var arms []arm
	reached := true // no constant-true arm yet
	var results []*scalar
	for _, w := range ce.Args {
		cw := w.GetCaseWhen()
		if cw == nil {
			return nil, refusalAt(ce.Location, CodeExpression, "this CASE is not supported")
		}
		var p *expr
		var err error
		if !reached {
			c.lazy++
		}
		if arg != nil {
			v, err := c.sexpr(cw.Expr)
			if err != nil {
				return nil, err
			}
			lo, ro := c.asOperand(arg, cw.Location), c.asOperand(v, cw.Location)
			if p, err = c.comparePair(&lo, &ro, cmpEq, cw.Location); err != nil {
				return nil, err
			}
			p = strictNull(p)
		} else if p, err = c.pred(cw.Expr); err != nil {
			return nil, err
		}
		p.markRaises()
		dead, always := !reached, false
		if reached && exprConst(p) {
			t := p.eval(nil, nil)
			dead, always = t != True, t == True
		}
		if dead && reached {
			c.lazy++
		}
		r, err := c.sexpr(cw.Result)
		if dead {
			c.lazy--
		}
		if err != nil {
			return nil, err
		}
		arms = append(arms, arm{p, r, dead})
		results = append(results, r)
		if always {
			reached = false
		}
	}
	var def *scalar
	if ce.Defresult != nil {
		if !reached {
			c.lazy++
		}
		r, err := c.sexpr(ce.Defresult)
		if !reached {
			c.lazy--
		}
		if err != nil {
			return nil, err
		}
		def = r
		results = append(results, r)
	}
	// transformCaseExpr puts the ELSE result first when choosing the
	// type ("the most significant type").
	order := results
	if def != nil {
		order = append([]*scalar{def}, results[:len(results)-1]...)
	}
	oid, typmod, err := c.commonType(order, "CASE", ce.Location)
	if err != nil {
		return nil, err
	}
	conv := func(r *scalar, dead bool) (*scalar, error) {
		if dead {
			c.lazy++
			defer func() { c.lazy-- }()
		}
		return c.coerce(r, oid, ce.Location)
	}
	coll, err := mergeColl(ce.Location, results...)
	if err != nil {
		return nil, err
	}
	s := &scalar{op: sCase, oid: oid, typmod: typmod, coll: coll}
	var final *scalar // the result of a constant-true arm
	for _, a := range arms {
		r, err := conv(a.r, a.dead)
		if err != nil {
			return nil, err
		}
		switch {
		case a.dead:
		case exprConst(a.p):
			final = r
		default:
			s.preds = append(s.preds, a.p)
			s.args = append(s.args, r)
		}
		if final != nil {
			break
		}
	}
	if final == nil && def != nil {
		if final, err = conv(def, false); err != nil {
			return nil, err
		}
	}
	if final == nil {
		final = typedConst(oid, nil)
	}
	if len(s.preds) == 0 {
		r := *final
		r.typmod, r.coll = typmod, coll
		return &r, nil
	}
	s.args = append(s.args, final)
	return c.fold(s, ce.Location)
}

// coalesce compiles COALESCE(a, b, ...). As the planner does, NULL
// constants are dropped and a non-NULL constant ends the list: what
// follows it is never reached (nor folded).
func (c *compiler) coalesce(ce *pg.CoalesceExpr) (*scalar, error) {
	var args []*scalar
	stop := -1
	for i, n := range ce.Args {
		if stop >= 0 {
			c.lazy++
		}
		a, err := c.sexpr(n)
		if stop >= 0 {
			c.lazy--
		}
		if err != nil {
			return nil, err
		}
		if stop < 0 && a.isConst() && a.val != nil {
			stop = i
		}
		args = append(args, a)
	}
	oid, typmod, err := c.commonType(args, "COALESCE", ce.Location)
	if err != nil {
		return nil, err
	}
	coll, err := mergeColl(ce.Location, args...)
	if err != nil {
		return nil, err
	}
	var live []*scalar
	for i, a := range args {
		if stop >= 0 && i > stop {
			c.lazy++
		}
		a, err = c.coerce(a, oid, ce.Location)
		if stop >= 0 && i > stop {
			c.lazy--
		}
		if err != nil {
			return nil, err
		}
		if stop >= 0 && i > stop || a.isConst() && a.val == nil {
			continue
		}
		live = append(live, a)
	}
	if len(live) == 0 {
		r := typedConst(oid, nil)
		r.typmod, r.coll = typmod, coll
		return r, nil
	}
	return c.fold(&scalar{op: sCoalesce, oid: oid, typmod: typmod, coll: coll, args: live}, ce.Location)
}

// extreme compiles GREATEST and LEAST.
func (c *compiler) extreme(mm *pg.MinMaxExpr) (*scalar, error) {
	what := "GREATEST"
	if mm.Op == pg.MinMaxOp_IS_LEAST {
		what = "LEAST"
	}
	args, oid, typmod, err := c.commonArgs(mm.Args, what, mm.Location)
	if err != nil {
		return nil, err
	}
	coll, err := mergeColl(mm.Location, args...)
	if err != nil {
		return nil, err
	}
	if coll = c.textColl(oid, coll); familyOf(oid) == famText && !coll.Bytewise() {
		return nil, refusalAt(mm.Location, CodeCollation, "%s on text under collation %q (%s) is not supported: only bytewise collations (C, POSIX, C.UTF-8) are reproduced", what, coll.Name, coll.Collate)
	}
	return c.fold(&scalar{op: sExtreme, oid: oid, typmod: typmod, coll: coll, args: args, desc: mm.Op == pg.MinMaxOp_IS_GREATEST}, mm.Location)
}

func (c *compiler) commonArgs(nodes []*pg.Node, what string, loc int32) ([]*scalar, uint32, int32, error) {
	var args []*scalar
	for _, n := range nodes {
		a, err := c.sexpr(n)
		if err != nil {
			return nil, 0, 0, err
		}
		args = append(args, a)
	}
	oid, typmod, err := c.commonType(args, what, loc)
	if err != nil {
		return nil, 0, 0, err
	}
	for i, a := range args {
		if args[i], err = c.coerce(a, oid, loc); err != nil {
			return nil, 0, 0, err
		}
	}
	return args, oid, typmod, nil
}

// castExpr compiles an explicit cast of an expression (a column, or
// anything built of columns).
func (c *compiler) castExpr(arg *scalar, tn *pg.TypeName, loc int32) (*scalar, error) {
	to, p, sc, err := c.castTarget(tn)
	if err != nil {
		return nil, err
	}
	if arg.u != nil {
		if err := c.settleScalar(arg, to); err != nil {
			return nil, err
		}
		if to != change.OIDNumeric && to != change.OIDVarchar && to != change.OIDBPChar || p < 0 {
			return arg, nil
		}
	}
	from := arg.oid
	s := &scalar{op: sFunc, oid: to, typmod: -1, coll: arg.coll, args: []*scalar{arg}}
	bad := func() (*scalar, error) {
		return nil, refusalAt(loc, CodeType, "a cast from %s to %s is not supported", typeName(from), typeName(to))
	}
	tf := familyOf(to)
	switch {
	case from == to && p < 0:
		return retype(arg, to), nil // the value as it is, without a type modifier
	case textish(to) && to != change.OIDName:
		if !textish(from) && (category(from) == 0 && familyOf(from) != famUUID && familyOf(from) != famInterval &&
			familyOf(from) != famTime && familyOf(from) != famTimeTZ && from != change.OIDJSONB || arg.col != nil && c.column(arg.col).Type.Kind != change.KindBase) {
			return bad()
		}
		s.fn = textCast(from, to, p)
		if p >= 0 {
			s.typmod = p + 4
		}
	case tf == famInt:
		switch {
		case category(from) == 'N':
			s.raises = true
			s.fn = func(a []any) any { return toInt(a[0], to) }
		case textish(from):
			s.raises = true
			s.fn = func(a []any) any { return parseInt(textValue(a[0], from), to) }
		case from == change.OIDBool && to == change.OIDInt4:
			s.fn = func(a []any) any {
				if a[0].(bool) {
					return int64(1)
				}
				return int64(0)
			}
		default:
			return bad()
		}
	case to == change.OIDNumeric:
		switch {
		case category(from) == 'N':
			s.fn = func(a []any) any {
				switch x := a[0].(type) {
				case int64:
					return intNumeric(x)
				case float64:
					if from == change.OIDFloat4 {
						return floatNumeric(x, 32)
					}
					return floatNumeric(x, 64)
				}
				return a[0]
			}
		case textish(from):
			s.fn = func(a []any) any {
				n, err := change.ParseNumeric(textValue(a[0], from))
				if err != nil {
					raise(stateInvalidText, "invalid input syntax for type numeric: %q", a[0])
				}
				return n
			}
		default:
			return bad()
		}
		s.raises = true
		if p >= 0 {
			s.typmod = (p<<16 | sc&0x7ff) + 4
			inner := s.fn
			s.fn = func(a []any) any { return numericRound(inner(a).(change.Numeric), p, sc) }
		}
	case tf == famFloat:
		if category(from) != 'N' {
			return bad()
		}
		s.raises = true
		s.fn = func(a []any) any {
			switch x := a[0].(type) {
			case int64:
				if to == change.OIDFloat4 {
					return float64(float32(x))
				}
				return float64(x)
			case change.Numeric:
				if to == change.OIDFloat4 {
					return numericFloat32(x)
				}
				return numericToFloat8(x)
			case float64:
				if to == change.OIDFloat4 {
					r := float64(float32(x))
					if math.IsInf(r, 0) && !math.IsInf(x, 0) {
						raise(stateOutOfRange, "value out of range: overflow")
					}
					if r == 0 && x != 0 {
						raise(stateOutOfRange, "value out of range: underflow")
					}
					return r
				}
				return x
			}
			return a[0]
		}
	case to == change.OIDDate:
		if familyOf(from) != famTimestamp {
			return bad()
		}
		s.fn = func(a []any) any {
			v := a[0].(change.Timestamp)
			if v.Inf != 0 {
				return change.Date{Inf: v.Inf}
			}
			d := v.Micros / usecsPerDay
			if v.Micros%usecsPerDay < 0 {
				d--
			}
			return change.Date{Days: int32(d)}
		}
	case to == change.OIDTimestamp || to == change.OIDTimestamptz:
		switch familyOf(from) {
		case famDate:
			s.raises = true
			s.fn = func(a []any) any { return dateToTimestamp(a[0].(change.Date)) }
		case famTimestamp:
			s.fn = func(a []any) any { return a[0] }
		default:
			return bad()
		}
	default:
		return bad()
	}
	return c.fold(s, loc)
}

// castTarget reads a cast's type with its modifiers: for varchar(n) and
// char(n) p is n, for numeric(p,s) p and s; p is -1 without modifiers.
func (c *compiler) castTarget(tn *pg.TypeName) (oid uint32, p, s int32, err error) {
	var names []string
	for _, n := range tn.Names {
		str, _ := strVal(n)
		names = append(names, str)
	}
	if len(names) == 2 && names[0] == "pg_catalog" {
		names = names[1:]
	}
	full := strings.Join(names, ".")
	if len(names) != 1 || tn.Setof || tn.PctType || len(tn.ArrayBounds) > 0 {
		return 0, 0, 0, refusalAt(tn.Location, CodeType, "a cast to type %s is not supported here", full)
	}
	oid, ok := typeNames[strings.ToLower(names[0])]
	if !ok {
		return 0, 0, 0, refusalAt(tn.Location, CodeType, "a cast to type %s is not supported", full)
	}
	var mods []int32
	for _, m := range tn.Typmods {
		ac := m.GetAConst()
		if ac == nil || ac.GetIval() == nil {
			return 0, 0, 0, refusalAt(tn.Location, CodeType, "a type modifier that is not an integer is not supported")
		}
		mods = append(mods, ac.GetIval().Ival)
	}
	p, s = -1, 0
	switch {
	case len(mods) == 0:
	case (oid == change.OIDVarchar || oid == change.OIDBPChar) && len(mods) == 1 && mods[0] >= 1 && mods[0] <= 10485760:
		p = mods[0]
	case oid == change.OIDNumeric && len(mods) >= 1 && len(mods) <= 2 && mods[0] >= 1 && mods[0] <= 1000:
		p = mods[0]
		if len(mods) == 2 {
			s = mods[1]
		}
		if s < -1000 || s > 1000 {
			return 0, 0, 0, refusalAt(tn.Location, CodeType, "NUMERIC scale %d must be between -1000 and 1000", s)
		}
	default:
		return 0, 0, 0, refusalAt(tn.Location, CodeType, "a cast with the type modifier %s(...) is not supported", names[0])
	}
	return oid, p, s, nil
}

// textValue is a string-typed value as text (char(n) without its
// trailing spaces).
func textValue(v any, oid uint32) string {
	s := v.(string)
	if oid == change.OIDBPChar {
		return strings.TrimRight(s, " ")
	}
	return s
}

// textCast is the cast of a value of type from to text, varchar(n) or
// char(n) (n = p, -1 for none): bool is written true/false (booltext),
// char(n) loses its trailing spaces, other types their output function's
// text; a length modifier cuts (and char(n) pads) to n characters.
func textCast(from, to uint32, p int32) func(a []any) any {
	return func(a []any) any {
		var s string
		switch v := a[0].(type) {
		case bool:
			s = "false"
			if v {
				s = "true"
			}
		case string:
			s = v
			if from == change.OIDBPChar && to != change.OIDBPChar {
				s = strings.TrimRight(s, " ")
			}
		default:
			s = formatText(from, v)
		}
		if p >= 0 {
			n := 0
			for i := range s {
				if n == int(p) {
					s = s[:i]
					break
				}
				n++
			}
			if to == change.OIDBPChar && n < int(p) {
				s += strings.Repeat(" ", int(p)-n)
			}
		}
		return s
	}
}

// toInt converts a numeric-category value to an integer type, as the
// explicit casts do: numeric rounds halves away from zero, floats to even.
func toInt(v any, to uint32) any {
	switch x := v.(type) {
	case int64:
		return checkInt(x, to)
	case change.Numeric:
		if x.NaN {
			raise(stateFeature, "cannot convert NaN to %s", typeName(to))
		}
		if x.Inf != 0 {
			raise(stateFeature, "cannot convert infinity to %s", typeName(to))
		}
		i, ok := numericToInt(x)
		if !ok {
			intRangeError(to)
		}
		return checkInt(i, to)
	case float64:
		r := math.RoundToEven(x)
		if math.IsNaN(r) || r < -9.223372036854775808e18 || r >= 9.223372036854775808e18 {
			intRangeError(to)
		}
		return checkInt(int64(r), to)
	}
	return v
}

// parseInt is int2in/int4in/int8in (pg_strtoint16/32/64): spaces, a
// sign, at least one digit, spaces; a value past the type's range fails
// as soon as its digits pass it, before what follows them is looked at.
func parseInt(s string, to uint32) any {
	isSpace := func(b byte) bool { return b == ' ' || b >= '\t' && b <= '\r' }
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		neg = s[i] == '-'
		i++
	}
	bad := func() { raise(stateInvalidText, "invalid input syntax for type %s: %q", pgIntName(to), s) }
	if i >= len(s) || s[i] < '0' || s[i] > '9' {
		bad()
	}
	lo := int64(math.MinInt64)
	switch to {
	case change.OIDInt2:
		lo = math.MinInt16
	case change.OIDInt4:
		lo = math.MinInt32
	}
	var acc int64 // accumulated negatively, as PostgreSQL does
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		d := int64(s[i] - '0')
		if acc < (lo+d)/10 || acc*10 < lo+d {
			raise(stateOutOfRange, "value %q is out of range for type %s", s, pgIntName(to))
		}
		acc = acc*10 - d
	}
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	if i < len(s) {
		bad()
	}
	if !neg {
		if acc == lo {
			raise(stateOutOfRange, "value %q is out of range for type %s", s, pgIntName(to))
		}
		acc = -acc
	}
	return acc
}

func pgIntName(oid uint32) string {
	switch oid {
	case change.OIDInt2:
		return "smallint"
	case change.OIDInt8:
		return "bigint"
	}
	return "integer"
}

// dateToTimestamp is date_timestamp: midnight of the date; a date past
// timestamp's last day (294276-12-31) fails.
func dateToTimestamp(d change.Date) change.Timestamp {
	if d.Inf == 0 && d.Days >= 106751983 {
		raise(stateDatetimeRange, "date out of range for timestamp")
	}
	return dateTimestamp(d)
}

// parseFloatExp32 is a finite numeric read as float4 (correctly rounded
// from its decimal text, as float4in reads it).
func parseFloatExp32(n change.Numeric) float64 {
	f, err := strconv.ParseFloat(n.String(), 32)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return math.NaN()
	}
	return f
}

// eqLeftType is the left input type of the = operator PostgreSQL picks
// for l = r: the cross-type integer, float and datetime operators keep
// the left type; integers and numeric meet in numeric, anything with a
// float on the right in float8; varchar and char(n) against text compare
// as text, varchar against char(n) as char(n).
func eqLeftType(l, r uint32) uint32 {
	switch {
	case l == change.OIDName && textish(r):
		return l // nameeq, nameeqtext
	case r == change.OIDName && textish(l):
		return change.OIDText // texteqname
	}
	switch cl, cr := category(l), category(r); {
	case l == r:
		if l == change.OIDVarchar {
			return change.OIDText
		}
		return l
	case cl == 'N' && cr == 'N':
		lf, rf := familyOf(l), familyOf(r)
		switch {
		case lf == rf:
			return l
		case lf == famFloat:
			return l
		case rf == famFloat:
			return change.OIDFloat8
		}
		return change.OIDNumeric
	case cl == 'S' && cr == 'S':
		if l == change.OIDText || r == change.OIDText {
			return change.OIDText
		}
		return change.OIDBPChar
	case cl == 'D' && cr == 'D':
		return l
	}
	return l
}
