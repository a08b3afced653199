package query

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/freshetdb/freshet/change"
	pg "github.com/pganalyze/pg_query_go/v6"
)

// topnd is an operand while compiling: a column, or a constant with its
// type. A constant of unknown type (a quoted literal, a bind sent with OID
// 0, NULL) takes its type from what it is compared with.
type topnd struct {
	col     *colRef
	oid     uint32 // the operand's type; 0 while unknown
	fam     family
	val     any    // a constant's value in its type's typed form; nil for NULL
	text    string // an unknown literal's text
	isText  bool   // an unknown literal
	param   int    // an unknown-typed bind ($n), 0 if none
	loc     int32
	collate Collation // a column's (or an expression's) collation
	sx      *scalar   // an expression over the row
}

func (o *topnd) unknown() bool { return o.col == nil && o.sx == nil && o.oid == 0 }

// numericRank orders the numeric types by PostgreSQL's implicit casts
// (int2 -> int4 -> int8 -> numeric -> float4 -> float8): the common type
// of a list is the highest; 0 for other types.
func numericRank(oid uint32) int {
	switch oid {
	case change.OIDInt2:
		return 1
	case change.OIDInt4, change.OIDOID:
		return 2
	case change.OIDInt8:
		return 3
	case change.OIDNumeric:
		return 4
	case change.OIDFloat4:
		return 5
	case change.OIDFloat8:
		return 6
	}
	return 0
}

// typeName names a type OID for messages.
func typeName(oid uint32) string {
	if t, ok := change.BuiltinType(oid); ok {
		return t.Name
	}
	return fmt.Sprintf("OID %d", oid)
}

// decodeText reads s as a value of type oid, as PostgreSQL's input
// function would (only the forms change's decoder reads; others refuse).
func decodeText(oid uint32, s string) (any, error) {
	return change.DecodeOID(oid, change.Value{Kind: change.Text, Data: []byte(s)}, nil)
}

// param returns bind n (1-based) decoded as type oid (its own OID when it
// has one; oid is then ignored).
func (c *compiler) param(n int, loc int32) (topnd, error) {
	if n < 1 || n > 65535 {
		return topnd{}, &Refusal{Code: CodeBind, Param: n, Position: int(loc) + 1, Message: fmt.Sprintf("parameter $%d is out of range", n)}
	}
	if n > c.maxParam {
		c.maxParam = n
	}
	if n > len(c.binds) {
		return topnd{}, &Refusal{Code: CodeBind, Param: n, Position: int(loc) + 1,
			Message: fmt.Sprintf("the query uses $%d but %d binds were given", n, len(c.binds))}
	}
	c.paramSeen[n-1] = true
	b := c.binds[n-1]
	oid := b.OID
	if oid == 0 {
		oid = c.paramOIDs[n-1]
	}
	if oid == 0 || oid == change.OIDUnknown {
		return topnd{param: n, loc: loc}, nil
	}
	if _, ok := change.BuiltinType(oid); !ok {
		// An enum's OID (as drivers that describe statements send it)
		// is checked against the column it is compared with.
		return topnd{param: n, loc: loc}, nil
	}
	return c.decodeParam(n, oid, familyOf(oid), loc)
}

// decodeParam decodes bind n as type oid and records it.
func (c *compiler) decodeParam(n int, oid uint32, fam family, loc int32) (topnd, error) {
	b := c.binds[n-1]
	if prev := c.paramOIDs[n-1]; prev != 0 && prev != oid {
		return topnd{}, &Refusal{Code: CodeBind, Param: n, Message: fmt.Sprintf("$%d is used both as %s and as %s", n, typeName(prev), typeName(oid))}
	}
	if b.OID != 0 && b.OID != change.OIDUnknown && b.OID != oid {
		return topnd{}, &Refusal{Code: CodeBind, Param: n, Message: fmt.Sprintf("$%d has type %s but is used as %s", n, typeName(b.OID), typeName(oid))}
	}
	if _, ok := change.BuiltinType(oid); !ok && fam != famEnum {
		return topnd{}, &Refusal{Code: CodeBind, Param: n, Message: fmt.Sprintf("$%d has type OID %d, which is not a type Freshet knows", n, oid)}
	}
	if b.Format != FormatText && b.Format != FormatBinary {
		return topnd{}, &Refusal{Code: CodeBind, Param: n, Message: fmt.Sprintf("$%d has format code %d; only 0 (text) and 1 (binary) exist", n, b.Format)}
	}
	var v any
	if b.Data != nil {
		kind := change.Text
		if b.Format == FormatBinary {
			kind = change.Binary
		}
		var err error
		if fam == famEnum && b.Format == FormatBinary {
			// An enum's binary form is its label, as its text form.
			kind = change.Text
		}
		v, err = change.DecodeOID(oid, change.Value{Kind: kind, Data: b.Data}, nil)
		if err != nil {
			return topnd{}, &Refusal{Code: CodeBind, Param: n, Message: fmt.Sprintf("$%d is not a valid %s: %v", n, typeName(oid), err)}
		}
	}
	c.params[n-1] = v
	c.paramOIDs[n-1] = oid
	return topnd{oid: oid, fam: fam, val: v, loc: loc}, nil
}

// settle gives an operand of unknown type the type oid (of fam).
func (c *compiler) settle(o *topnd, oid uint32) error {
	return c.settleFam(o, oid, familyOf(oid))
}

func (c *compiler) settleFam(o *topnd, oid uint32, fam family) error {
	if !o.unknown() {
		return nil
	}
	switch {
	case o.param > 0:
		p, err := c.decodeParam(o.param, oid, fam, o.loc)
		if err != nil {
			return err
		}
		p.fam = fam
		*o = p
		return nil
	case o.isText:
		v, err := decodeText(oid, o.text)
		if err != nil {
			return refusalAt(o.loc, CodeType, "%q cannot be read as %s here: %v", o.text, typeName(oid), err)
		}
		o.val = v
	}
	o.oid, o.fam, o.isText = oid, fam, false
	return nil
}

// constant compiles a constant expression: a literal, a bind, or a cast of
// one.
func (c *compiler) constant(n *pg.Node) (topnd, error) {
	switch x := n.Node.(type) {
	case *pg.Node_AConst:
		a := x.AConst
		o := topnd{loc: a.Location}
		if a.Isnull {
			return o, nil
		}
		switch v := a.Val.(type) {
		case *pg.A_Const_Ival:
			o.oid, o.val = change.OIDInt4, int64(v.Ival.Ival)
		case *pg.A_Const_Fval:
			s := v.Fval.Fval
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				o.oid, o.val = change.OIDInt8, i
				if i >= math.MinInt32 && i <= math.MaxInt32 {
					o.oid = change.OIDInt4
				}
			} else {
				num, ok := numericLiteral(s)
				if !ok {
					return o, refusalAt(a.Location, CodeExpression, "numeric constant %s cannot be read", s)
				}
				o.oid, o.val = change.OIDNumeric, num
			}
		case *pg.A_Const_Boolval:
			o.oid, o.val = change.OIDBool, v.Boolval.Boolval
		case *pg.A_Const_Sval:
			o.isText, o.text = true, v.Sval.Sval
		case *pg.A_Const_Bsval:
			return o, refusalAt(a.Location, CodeType, "bit string constants are not supported")
		}
		o.fam = familyOf(o.oid)
		return o, nil
	case *pg.Node_ParamRef:
		return c.param(int(x.ParamRef.Number), x.ParamRef.Location)
	case *pg.Node_TypeCast:
		tc := x.TypeCast
		to, typmod, err := c.typeOID(tc.TypeName)
		if err != nil {
			return topnd{}, err
		}
		if tc.Arg.GetColumnRef() != nil {
			return topnd{}, refusalAt(tc.Location, CodeExpression, "casting a column (%s) is not supported; compare the column with a value of another type instead", c.snippet(n))
		}
		o, err := c.constant(tc.Arg)
		if err != nil {
			return o, err
		}
		o, err = c.cast(o, to, tc.Location)
		if err == nil && typmod > 0 {
			if s, ok := o.val.(string); ok && utf8.RuneCountInString(s) > typmod {
				o.val = string([]rune(s)[:typmod])
			}
		}
		return o, err
	}
	return topnd{}, c.unsupported(n, "as a value")
}

// typeNames maps the names PostgreSQL's grammar gives built-in types to
// their OIDs.
var typeNames = map[string]uint32{
	"int2": change.OIDInt2, "smallint": change.OIDInt2, "int4": change.OIDInt4, "int": change.OIDInt4, "integer": change.OIDInt4,
	"int8": change.OIDInt8, "bigint": change.OIDInt8, "oid": change.OIDOID, "numeric": change.OIDNumeric, "decimal": change.OIDNumeric,
	"float4": change.OIDFloat4, "real": change.OIDFloat4, "float8": change.OIDFloat8, "double precision": change.OIDFloat8,
	"bool": change.OIDBool, "boolean": change.OIDBool, "text": change.OIDText, "varchar": change.OIDVarchar,
	"bpchar": change.OIDBPChar, "char": change.OIDBPChar, "character": change.OIDBPChar, "name": change.OIDName,
	"uuid": change.OIDUUID, "bytea": change.OIDBytea, "date": change.OIDDate, "time": change.OIDTime, "timetz": change.OIDTimetz,
	"timestamp": change.OIDTimestamp, "timestamptz": change.OIDTimestamptz, "interval": change.OIDInterval,
	"json": change.OIDJSON, "jsonb": change.OIDJSONB,
}

// typeOID resolves a type name in a cast, with its length modifier for
// varchar(n) and char(n) (0 when none).
func (c *compiler) typeOID(tn *pg.TypeName) (uint32, int, error) {
	var names []string
	for _, n := range tn.Names {
		s, _ := strVal(n)
		names = append(names, s)
	}
	full := strings.Join(names, ".")
	if len(names) == 2 && names[0] == "pg_catalog" {
		names = names[1:]
	}
	if len(names) != 1 || tn.Setof || tn.PctType {
		return 0, 0, refusalAt(tn.Location, CodeType, "a cast to type %s is not supported", full)
	}
	oid, ok := typeNames[strings.ToLower(names[0])]
	if !ok {
		return 0, 0, refusalAt(tn.Location, CodeType, "a cast to type %s is not supported", full)
	}
	typmod := 0
	if len(tn.Typmods) > 0 {
		// varchar(n) and char(n) cut a longer value to n characters (an
		// explicit cast does not fail); other modifiers change values in
		// ways not reproduced here.
		var n int32 = -1
		if len(tn.Typmods) == 1 {
			if c := tn.Typmods[0].GetAConst(); c != nil && c.GetIval() != nil {
				n = c.GetIval().Ival
			}
		}
		if (oid != change.OIDVarchar && oid != change.OIDBPChar) || n < 1 || len(tn.ArrayBounds) > 0 {
			return 0, 0, refusalAt(tn.Location, CodeType, "a cast with a type modifier (%s(...)) is not supported", names[0])
		}
		typmod = int(n)
	}
	switch len(tn.ArrayBounds) {
	case 0:
		return oid, typmod, nil
	case 1:
		if a, ok := elemArray[oid]; ok {
			return a, 0, nil
		}
	}
	return 0, 0, refusalAt(tn.Location, CodeType, "a cast to type %s[] is not supported", full)
}

// cast converts a constant to type to, as an explicit cast would.
func (c *compiler) cast(o topnd, to uint32, loc int32) (topnd, error) {
	if o.unknown() {
		err := c.settle(&o, to)
		return o, err
	}
	from := o.oid
	res := topnd{oid: to, fam: familyOf(to), loc: loc}
	if o.val == nil || from == to {
		res.val = o.val
		return res, nil
	}
	bad := func() (topnd, error) {
		return topnd{}, refusalAt(loc, CodeExpression, "a cast from %s to %s is not supported", typeName(from), typeName(to))
	}
	ff, tf := familyOf(from), familyOf(to)
	switch v := o.val.(type) {
	case int64:
		switch tf {
		case famInt:
			if !intFits(v, to) {
				return topnd{}, refusalAt(loc, CodeExpression, "%d is out of range for %s", v, typeName(to))
			}
			res.val = v
		case famNumeric:
			res.val = change.Numeric{Coef: big.NewInt(v)}
		case famFloat:
			res.val = roundFloat(float64(v), to)
		case famText:
			res.val = strconv.FormatInt(v, 10)
		default:
			return bad()
		}
	case change.Numeric:
		switch tf {
		case famInt:
			i, ok := numericToInt(v)
			if !ok || !intFits(i, to) {
				return topnd{}, refusalAt(loc, CodeExpression, "%s is out of range for %s", v.String(), typeName(to))
			}
			res.val = i
		case famFloat:
			res.val = roundFloat(numericFloat64(v), to)
		default:
			return bad()
		}
	case float64:
		switch {
		case tf == famFloat:
			res.val = roundFloat(v, to)
			if r := res.val.(float64); math.IsInf(r, 0) && !math.IsInf(v, 0) || r == 0 && v != 0 {
				return topnd{}, refusalAt(loc, CodeExpression, "%v is out of range for %s", v, typeName(to))
			}
		case tf == famInt:
			r := math.RoundToEven(v)
			if math.IsNaN(r) || r < -9.223372036854775808e18 || r >= 9.223372036854775808e18 || !intFits(int64(r), to) {
				return topnd{}, refusalAt(loc, CodeExpression, "%v is out of range for %s", v, typeName(to))
			}
			res.val = int64(r)
		default:
			return bad()
		}
	case string:
		if ff == famText && tf == famText {
			if from == change.OIDBPChar && to != change.OIDBPChar {
				v = strings.TrimRight(v, " ")
			}
			res.val = v
			break
		}
		if ff != famText {
			return bad()
		}
		x, err := decodeText(to, v)
		if err != nil {
			return topnd{}, refusalAt(loc, CodeType, "%q cannot be read as %s here: %v", v, typeName(to), err)
		}
		res.val = x
	case change.Date:
		if to == change.OIDTimestamp || to == change.OIDTimestamptz {
			ts := dateTimestamp(v)
			res.val = ts
			break
		}
		return bad()
	case change.Timestamp:
		switch to {
		case change.OIDTimestamp, change.OIDTimestamptz:
			res.val = v
		case change.OIDDate:
			if v.Inf != 0 {
				res.val = change.Date{Inf: v.Inf}
			} else {
				d := v.Micros / usecsPerDay
				if v.Micros%usecsPerDay < 0 {
					d--
				}
				res.val = change.Date{Days: int32(d)}
			}
		default:
			return bad()
		}
	default:
		if ff == tf && ff != famNone {
			res.val = o.val
			break
		}
		return bad()
	}
	return res, nil
}

func intFits(v int64, oid uint32) bool {
	switch oid {
	case change.OIDInt2:
		return v >= math.MinInt16 && v <= math.MaxInt16
	case change.OIDInt4:
		return v >= math.MinInt32 && v <= math.MaxInt32
	case change.OIDOID:
		return v >= 0 && v <= math.MaxUint32
	}
	return true
}

func roundFloat(f float64, oid uint32) float64 {
	if oid == change.OIDFloat4 {
		return float64(float32(f))
	}
	return f
}

// numericToInt rounds a numeric to the nearest integer, halves away from
// zero, as numeric's cast to integer types does.
func numericToInt(n change.Numeric) (int64, bool) {
	if !n.IsFinite() {
		return 0, false
	}
	if n.Coef == nil {
		return 0, true
	}
	c := new(big.Int).Set(n.Coef)
	if n.Exp >= 0 {
		if n.Exp > 20 {
			return 0, c.Sign() == 0
		}
		c.Mul(c, new(big.Int).Exp(bigTen, big.NewInt(int64(n.Exp)), nil))
	} else {
		if -n.Exp > 200000 {
			return 0, true
		}
		d := new(big.Int).Exp(bigTen, big.NewInt(int64(-n.Exp)), nil)
		q, r := new(big.Int).QuoRem(c, d, new(big.Int))
		r.Abs(r).Mul(r, big.NewInt(2))
		if r.Cmp(d) >= 0 {
			if c.Sign() < 0 {
				q.Sub(q, big.NewInt(1))
			} else {
				q.Add(q, big.NewInt(1))
			}
		}
		c = q
	}
	if !c.IsInt64() {
		return 0, false
	}
	return c.Int64(), true
}

// operand compiles one side of a comparison: a column or a constant.
func (c *compiler) operand(n *pg.Node) (topnd, error) {
	if err := c.tick(); err != nil {
		return topnd{}, err
	}
	if n == nil {
		// The missing side of a prefix operator (~~ 0, found by
		// FuzzCompile).
		return topnd{}, refuse(CodeOperator, "this operator needs a left operand here")
	}
	if cr := n.GetColumnRef(); cr != nil {
		src, cat, star, err := c.resolveColumn(cr)
		if err != nil {
			return topnd{}, err
		}
		if star {
			return topnd{}, refusalAt(cr.Location, CodeExpression, "* is not supported in a condition")
		}
		r := c.ref(src, cat)
		col := c.column(r)
		return topnd{col: r, oid: col.TypeOID, fam: c.colFamily(col), loc: cr.Location, collate: col.Collation}, nil
	}
	if constTree(n) {
		return c.constant(n)
	}
	s, err := c.sexpr(n)
	if err != nil {
		return topnd{}, err
	}
	return c.asOperand(s, nodeLocation(n)), nil
}

// nodeLocation is an expression node's position in the SQL text, -1 when
// not known.
func nodeLocation(n *pg.Node) int32 {
	switch x := n.Node.(type) {
	case *pg.Node_AExpr:
		return x.AExpr.Location
	case *pg.Node_FuncCall:
		return x.FuncCall.Location
	case *pg.Node_TypeCast:
		return x.TypeCast.Location
	case *pg.Node_CaseExpr:
		return x.CaseExpr.Location
	case *pg.Node_CoalesceExpr:
		return x.CoalesceExpr.Location
	case *pg.Node_MinMaxExpr:
		return x.MinMaxExpr.Location
	case *pg.Node_ColumnRef:
		return x.ColumnRef.Location
	}
	return -1
}

// unify settles unknown operands and finds the family two operands compare
// in. ordering is set for <, <=, >, >= (which need an order the collation
// allows).
func (c *compiler) unify(l, r *topnd, ordering bool, loc int32) (family, error) {
	switch {
	case l.unknown() && r.unknown():
		if err := c.settle(l, change.OIDText); err != nil {
			return 0, err
		}
		if err := c.settle(r, change.OIDText); err != nil {
			return 0, err
		}
	case l.unknown():
		if err := c.settleFam(l, r.oid, r.fam); err != nil {
			return 0, err
		}
	case r.unknown():
		if err := c.settleFam(r, l.oid, l.fam); err != nil {
			return 0, err
		}
	}
	fam, ok := commonFamily(l.fam, r.fam)
	if l.fam == famEnum && r.fam == famEnum && l.oid != r.oid {
		ok = false
	}
	if !ok {
		return 0, refusalAt(loc, CodeType, "comparing %s with %s is not supported", typeName2(l), typeName2(r))
	}
	for _, o := range []*topnd{l, r} {
		if o.col == nil && o.sx == nil || fam != famText || o.collate.OID == 0 {
			continue
		}
		if ordering && !o.collate.Bytewise() {
			return 0, refusalAt(loc, CodeCollation, "ordering comparisons on %s under collation %q (%s) are not supported: only bytewise collations (C, POSIX, C.UTF-8) are reproduced",
				c.operandName(o), o.collate.Name, o.collate.Collate)
		}
		if !o.collate.Deterministic {
			return 0, refusalAt(loc, CodeCollation, "comparisons on %s under the nondeterministic collation %q are not supported", c.operandName(o), o.collate.Name)
		}
	}
	if ordering && fam == famEnum {
		return 0, refusalAt(loc, CodeType, "ordering comparisons on enum values are not supported")
	}
	if ordering && fam == famText && l.col == nil && r.col == nil && l.sx == nil && r.sx == nil {
		return 0, refusalAt(loc, CodeCollation, "ordering comparisons between two text constants are not supported")
	}
	return fam, nil
}

func typeName2(o *topnd) string {
	if o.fam == famEnum {
		return "an enum"
	}
	if o.fam == famArray && o.col == nil {
		return typeName(o.oid)
	}
	return typeName(o.oid)
}

// operandName names a column or expression operand in messages.
func (c *compiler) operandName(o *topnd) string {
	if o.col != nil {
		return c.column(o.col).Name
	}
	return "an expression"
}

// final converts a compiled operand to its runtime form in family fam.
func (c *compiler) final(o *topnd, fam family, loc int32) (operand, error) {
	if o.sx != nil {
		return operand{sx: o.sx}, nil
	}
	if o.col != nil {
		return operand{col: o.col}, nil
	}
	if o.val == nil {
		return operand{}, nil
	}
	if fam == famEnum {
		return operand{val: o.val}, nil
	}
	v, ok := toFamily(o.val, o.oid, fam)
	if !ok {
		return operand{}, refusalAt(loc, CodeType, "a %s value cannot be compared as %s", typeName(o.oid), fam)
	}
	return operand{val: v}, nil
}

var cmpOps = map[string]cmpOp{"=": cmpEq, "<>": cmpNe, "!=": cmpNe, "<": cmpLt, "<=": cmpLe, ">": cmpGt, ">=": cmpGe}

// compare compiles l op r.
func (c *compiler) compare(ln, rn *pg.Node, op cmpOp, loc int32) (*expr, error) {
	l, err := c.operand(ln)
	if err != nil {
		return nil, err
	}
	r, err := c.operand(rn)
	if err != nil {
		return nil, err
	}
	e, err := c.comparePair(&l, &r, op, loc)
	if err != nil {
		return nil, err
	}
	return strictNull(e), nil
}

// strictNull folds a comparison with a NULL constant to NULL: the
// operator is strict, and the planner folds it without evaluating the
// other side.
func strictNull(e *expr) *expr {
	if e.op == opCmp && (e.l.isNullConst() || e.r.isNullConst()) {
		return &expr{op: opConst, val: Unknown}
	}
	return e
}

// isNullConst reports whether the operand is the constant NULL.
func (o *operand) isNullConst() bool { return o.col == nil && o.sx == nil && o.val == nil }

func (c *compiler) comparePair(l, r *topnd, op cmpOp, loc int32) (*expr, error) {
	return c.comparePairIn(l, r, op, loc, famNone)
}

// comparePairIn is comparePair in family force (when set and both operands
// promote to it).
func (c *compiler) comparePairIn(l, r *topnd, op cmpOp, loc int32, force family) (*expr, error) {
	fam, err := c.unify(l, r, op != cmpEq && op != cmpNe, loc)
	if err != nil {
		return nil, err
	}
	if force != famNone && force != fam {
		if f, ok := commonFamily(fam, force); ok && f == force {
			fam = force
		} else if force == famFloat4 && (fam == famFloat || fam == famNumeric || fam == famInt) {
			fam = force
		}
	}
	e := &expr{op: opCmp, cmp: op, fam: fam}
	if e.l, err = c.final(l, fam, loc); err != nil {
		return nil, err
	}
	if e.r, err = c.final(r, fam, loc); err != nil {
		return nil, err
	}
	// bpchar against varchar (or bpchar) compares as bpchar: trailing
	// spaces of both sides are insignificant. Against text it compares as
	// text (only the bpchar side loses its trailing spaces).
	if fam == famText && force == famNone && (l.oid == change.OIDBPChar && r.oid == change.OIDVarchar || l.oid == change.OIDVarchar && r.oid == change.OIDBPChar) {
		for _, o := range []*operand{&e.l, &e.r} {
			if o.col != nil || o.sx != nil {
				o.trim = true
			} else if s, ok := o.val.(string); ok {
				o.val = strings.TrimRight(s, " ")
			}
		}
	}
	// Keep the column on the left where there is one (an expression
	// after it).
	if e.l.col == nil && e.r.col != nil || e.l.col == nil && e.l.sx == nil && e.r.sx != nil {
		e.l, e.r = e.r, e.l
		e.cmp = op.flip()
	}
	return e, nil
}

// pred compiles a predicate.
func (c *compiler) pred(n *pg.Node) (*expr, error) {
	if err := c.tick(); err != nil {
		return nil, err
	}
	switch x := n.Node.(type) {
	case *pg.Node_BoolExpr:
		b := x.BoolExpr
		var op exprOp
		switch b.Boolop {
		case pg.BoolExprType_AND_EXPR:
			op = opAnd
		case pg.BoolExprType_OR_EXPR:
			op = opOr
		default:
			op = opNot
		}
		e := &expr{op: op}
		for _, a := range b.Args {
			ae, err := c.pred(a)
			if err != nil {
				return nil, err
			}
			e.args = append(e.args, ae)
		}
		return e, nil
	case *pg.Node_AExpr:
		return c.aexpr(x.AExpr, n)
	case *pg.Node_NullTest:
		t := x.NullTest
		if t.Argisrow {
			return nil, refusalAt(t.Location, CodeExpression, "row IS NULL tests are not supported")
		}
		o, err := c.operand(t.Arg)
		if err != nil {
			return nil, err
		}
		if o.unknown() {
			if err := c.settle(&o, change.OIDText); err != nil {
				return nil, err
			}
		}
		e := &expr{op: opIsNull, negate: t.Nulltesttype == pg.NullTestType_IS_NOT_NULL, fam: o.fam}
		if o.sx != nil {
			e.l = operand{sx: o.sx}
		} else if o.col != nil {
			e.l = operand{col: o.col}
		} else {
			e.l = operand{val: o.val}
			if o.val != nil {
				// Any non-NULL constant: keep it as is, it is only tested for NULL.
				e.fam = famNone
			}
		}
		return e, nil
	case *pg.Node_BooleanTest:
		t := x.BooleanTest
		arg, err := c.pred(t.Arg)
		if err != nil {
			return nil, err
		}
		return &expr{op: opBoolTest, args: []*expr{arg}, test: boolTest(t.Booltesttype - pg.BoolTestType_IS_TRUE)}, nil
	case *pg.Node_ColumnRef, *pg.Node_AConst, *pg.Node_ParamRef, *pg.Node_TypeCast, *pg.Node_FuncCall, *pg.Node_CaseExpr,
		*pg.Node_CoalesceExpr, *pg.Node_MinMaxExpr:
		o, err := c.operand(n)
		if err != nil {
			return nil, err
		}
		if o.unknown() {
			if err := c.settle(&o, change.OIDBool); err != nil {
				return nil, err
			}
		}
		if o.fam != famBool {
			return nil, refusalAt(o.loc, CodeType, "a %s value used as a condition: conditions must be boolean", typeName(o.oid))
		}
		if o.col != nil || o.sx != nil {
			return &expr{op: opBoolCol, l: operand{col: o.col, sx: o.sx}, fam: famBool}, nil
		}
		if o.val == nil {
			return &expr{op: opConst, val: Unknown}, nil
		}
		return &expr{op: opConst, val: triOf(o.val.(bool))}, nil
	}
	return nil, c.unsupported(n, "in WHERE")
}

func (c *compiler) aexpr(a *pg.A_Expr, n *pg.Node) (*expr, error) {
	name := opName(a.Name)
	switch a.Kind {
	case pg.A_Expr_Kind_AEXPR_OP:
		if op, ok := cmpOps[name]; ok && a.Lexpr != nil {
			return c.compare(a.Lexpr, a.Rexpr, op, a.Location)
		}
		switch name {
		case "~~", "!~~", "~~*", "!~~*":
			return c.like(a, strings.HasPrefix(name, "!"), strings.HasSuffix(name, "*"))
		}
		if kind, ok := arrayOps[name]; ok && a.Lexpr != nil {
			return c.arrayOp(a, kind, name)
		}
		if name == "?" && a.Lexpr != nil {
			s, err := c.jsonOp(a, name)
			if err != nil {
				return nil, err
			}
			if s.isConst() {
				return &expr{op: opConst, val: triOfValue(s.val)}, nil
			}
			return &expr{op: opBoolCol, l: operand{sx: s}, fam: famBool}, nil
		}
		return nil, c.unsupported(n, "in WHERE")
	case pg.A_Expr_Kind_AEXPR_LIKE, pg.A_Expr_Kind_AEXPR_ILIKE:
		return c.like(a, name == "!~~" || name == "!~~*", a.Kind == pg.A_Expr_Kind_AEXPR_ILIKE)
	case pg.A_Expr_Kind_AEXPR_DISTINCT, pg.A_Expr_Kind_AEXPR_NOT_DISTINCT:
		l, err := c.operand(a.Lexpr)
		if err != nil {
			return nil, err
		}
		r, err := c.operand(a.Rexpr)
		if err != nil {
			return nil, err
		}
		e, err := c.comparePair(&l, &r, cmpEq, a.Location)
		if err != nil {
			return nil, err
		}
		e.op, e.negate = opDistinct, a.Kind == pg.A_Expr_Kind_AEXPR_NOT_DISTINCT
		return e, nil
	case pg.A_Expr_Kind_AEXPR_IN:
		return c.in(a, name == "<>")
	case pg.A_Expr_Kind_AEXPR_OP_ANY, pg.A_Expr_Kind_AEXPR_OP_ALL:
		op, ok := cmpOps[name]
		if !ok {
			return nil, refusalAt(a.Location, CodeOperator, "operator %s with ANY/ALL is not supported", name)
		}
		if !constTree(a.Rexpr) && a.Rexpr.GetAArrayExpr() == nil {
			return c.anyArrayExpr(a, op, a.Kind == pg.A_Expr_Kind_AEXPR_OP_ANY)
		}
		return c.anyAll(a, op, a.Kind == pg.A_Expr_Kind_AEXPR_OP_ANY)
	case pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN, pg.A_Expr_Kind_AEXPR_BETWEEN_SYM, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM:
		l := a.Rexpr.GetList()
		if l == nil || len(l.Items) != 2 {
			return nil, refusalAt(a.Location, CodeExpression, "this BETWEEN is not supported")
		}
		lo, hi := l.Items[0], l.Items[1]
		between := func(lo, hi *pg.Node) (*expr, error) {
			ge, err := c.compare(a.Lexpr, lo, cmpGe, a.Location)
			if err != nil {
				return nil, err
			}
			le, err := c.compare(a.Lexpr, hi, cmpLe, a.Location)
			if err != nil {
				return nil, err
			}
			return &expr{op: opAnd, args: []*expr{ge, le}}, nil
		}
		e, err := between(lo, hi)
		if err != nil {
			return nil, err
		}
		if a.Kind == pg.A_Expr_Kind_AEXPR_BETWEEN_SYM || a.Kind == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM {
			e2, err := between(hi, lo)
			if err != nil {
				return nil, err
			}
			e = &expr{op: opOr, args: []*expr{e, e2}}
		}
		if a.Kind == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN || a.Kind == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM {
			e = &expr{op: opNot, args: []*expr{e}}
		}
		return e, nil
	case pg.A_Expr_Kind_AEXPR_NULLIF:
		s, err := c.nullif(a)
		if err != nil {
			return nil, err
		}
		o := c.asOperand(s, a.Location)
		if o.fam != famBool {
			return nil, refusalAt(a.Location, CodeType, "a %s value used as a condition: conditions must be boolean", typeName(o.oid))
		}
		if o.sx == nil {
			return &expr{op: opConst, val: Unknown}, nil // NULLIF of constants: folded; equal ones give NULL
		}
		return &expr{op: opBoolCol, l: operand{sx: o.sx}, fam: famBool}, nil
	case pg.A_Expr_Kind_AEXPR_SIMILAR:
		return nil, refusalAt(a.Location, CodeOperator, "SIMILAR TO is not supported")
	}
	return nil, c.unsupported(n, "in WHERE")
}

// in compiles x [NOT] IN (list).
func (c *compiler) in(a *pg.A_Expr, negate bool) (*expr, error) {
	list := a.Rexpr.GetList()
	if list == nil {
		return nil, c.unsupported(a.Rexpr, "in IN")
	}
	l, err := c.operand(a.Lexpr)
	if err != nil {
		return nil, err
	}
	var items []topnd
	allConst := l.col != nil || l.sx != nil
	for _, it := range list.Items {
		o, err := c.operand(it)
		if err != nil {
			return nil, err
		}
		if o.col != nil || o.sx != nil {
			allConst = false
		}
		items = append(items, o)
	}
	if err := c.settleInList(&l, items); err != nil {
		return nil, err
	}
	// PostgreSQL resolves x IN (constants...) in the common type of x and
	// all the items (int8 IN (1, 1.5::float8) compares as float8); with
	// columns among the items, each x = item on its own.
	// A single item is x = item exactly.
	force := famNone
	if allConst && len(items) > 1 {
		force = l.fam
		rank := numericRank(l.oid)
		for _, it := range items {
			if it.unknown() {
				continue
			}
			f, ok := commonFamily(force, it.fam)
			if !ok {
				force = famNone
				break
			}
			force = f
			if r := numericRank(it.oid); r > rank {
				rank = r
			}
		}
		if force == famFloat && rank == 5 {
			force = famFloat4
		}
	}
	var fam family
	cmps := make([]*expr, len(items))
	for i := range items {
		lc := l
		e, err := c.comparePairIn(&lc, &items[i], cmpEq, a.Location, force)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			fam = e.fam
		} else if e.fam != fam {
			allConst = false
		}
		cmps[i] = e
	}
	if force == famText && l.oid == change.OIDBPChar {
		// select_common_type keeps the first type when both directions
		// coerce implicitly, as all string types do: the list compares
		// as char(n), every item losing its trailing spaces.
		for _, ce := range cmps {
			if s, ok := ce.r.val.(string); ok {
				ce.r.val = strings.TrimRight(s, " ")
			}
		}
	}
	if allConst && fam != famEnum {
		e := &expr{op: opIn, negate: negate, fam: fam, l: operand{col: l.col, sx: l.sx, trim: cmps[0].l.trim}, set: &exprSet{keys: make(map[string]struct{})}}
		for _, ce := range cmps {
			if ce.r.val == nil {
				e.null = true
				continue
			}
			k := string(appendKey(nil, ce.r.val))
			if _, dup := e.set.keys[k]; !dup {
				e.set.keys[k] = struct{}{}
				e.set.vals = append(e.set.vals, ce.r.val)
			}
		}
		return e, nil
	}
	e := &expr{op: opOr, args: cmps}
	if negate {
		for _, ce := range cmps {
			ce.cmp = ce.cmp.negated()
		}
		e.op = opAnd
	}
	return e, nil
}

// settleInList gives the untyped items of x IN (...) (binds of OID 0,
// quoted literals) the type PostgreSQL gives them: with more than one item
// that is not a column, transformAExprIn resolves x and those items in one
// common type (select_common_type), and an untyped item takes that type,
// not x's. So int4col IN (12, $1, 9000000000) reads $1 as int8 (a text
// '9000000000' is valid, a 4-byte binary one is not). Only the numeric
// types are promoted here (the highest of int2, int4, int8, numeric,
// float4, float8 among x and the typed items); otherwise the items take
// x's type as comparePairIn gives it.
func (c *compiler) settleInList(l *topnd, items []topnd) error {
	nonCol := 0
	for i := range items {
		if items[i].col == nil {
			nonCol++
		}
	}
	if nonCol < 2 || l.unknown() {
		return nil
	}
	best, bestRank := l.oid, numericRank(l.oid)
	if bestRank == 0 {
		return nil
	}
	for i := range items {
		it := &items[i]
		if it.col != nil || it.unknown() {
			continue
		}
		r := numericRank(it.oid)
		if r == 0 {
			return nil // not all numeric: comparePairIn decides
		}
		if r > bestRank {
			best, bestRank = it.oid, r
		}
	}
	if best == l.oid {
		return nil
	}
	for i := range items {
		if it := &items[i]; it.col == nil && it.unknown() {
			if err := c.settle(it, best); err != nil {
				return err
			}
		}
	}
	return nil
}

// anyAll compiles x op ANY(array) and x op ALL(array).
func (c *compiler) anyAll(a *pg.A_Expr, op cmpOp, isAny bool) (*expr, error) {
	l, err := c.operand(a.Lexpr)
	if err != nil {
		return nil, err
	}
	if l.unknown() {
		return nil, refusalAt(a.Location, CodeType, "the left side of ANY/ALL must have a type")
	}
	elemOID := l.oid
	if l.fam == famEnum || l.fam == famNone || l.fam == famArray || l.fam == famJSON {
		return nil, refusalAt(a.Location, CodeType, "ANY/ALL over %s values is not supported", typeName2(&l))
	}
	arrOID, ok := elemArray[elemOID]
	if !ok {
		return nil, refusalAt(a.Location, CodeType, "ANY/ALL over %s values is not supported", typeName(elemOID))
	}
	var elems []topnd
	var probe *topnd // a NULL of a typed array's element type
	isNull := false
	if ae := a.Rexpr.GetAArrayExpr(); ae != nil {
		for _, it := range ae.Elements {
			o, err := c.constant(it)
			if err != nil {
				return nil, err
			}
			elems = append(elems, o)
		}
	} else {
		arr, err := c.constant(a.Rexpr)
		if err != nil {
			return nil, err
		}
		if arr.unknown() {
			if err := c.settle(&arr, arrOID); err != nil {
				return nil, err
			}
		}
		if familyOf(arr.oid) != famArray {
			return nil, refusalAt(a.Location, CodeType, "ANY/ALL needs an array, not %s", typeName(arr.oid))
		}
		if arr.val == nil {
			isNull = true
		} else {
			av, ok := arr.val.(change.Array)
			if !ok {
				return nil, refusalAt(a.Location, CodeType, "ANY/ALL needs an array")
			}
			eo := arrayElem[arr.oid]
			probe = &topnd{oid: eo, fam: familyOf(eo)}
			for _, v := range av.Elems {
				elems = append(elems, topnd{oid: eo, fam: familyOf(eo), val: v})
			}
		}
	}
	if c.opts.MaxInValues > 0 {
		c.inCount += len(elems)
		if c.inCount > c.opts.MaxInValues {
			return nil, refuse(CodeTooManyInValues, "the query lists more than %d IN/ANY values, counting bound arrays' elements (MaxInValues)", c.opts.MaxInValues)
		}
	}
	if isNull {
		return &expr{op: opConst, val: Unknown}, nil
	}
	var fam family
	vals := make([]any, len(elems))
	for i := range elems {
		lc := l
		e, err := c.comparePair(&lc, &elems[i], op, a.Location)
		if err != nil {
			return nil, err
		}
		if i > 0 && e.fam != fam {
			return nil, refusalAt(a.Location, CodeType, "array elements of mixed types are not supported")
		}
		fam = e.fam
		vals[i] = e.r.val
		if e.l.col == nil && e.l.sx == nil && (l.col != nil || l.sx != nil) {
			vals[i] = e.l.val
		}
	}
	if len(elems) == 0 {
		fam = l.fam
		if probe != nil {
			// An empty array is typed too: PostgreSQL resolves the
			// operator from the element type whatever the elements
			// (float8 = ANY('{}'::text[]) is an error), so it must
			// compare with the left side like an element would.
			lc := l
			if _, err := c.comparePair(&lc, probe, op, a.Location); err != nil {
				return nil, err
			}
		}
	}
	if l.col == nil && l.sx == nil {
		return nil, refusalAt(a.Location, CodeExpression, "ANY/ALL with a constant on the left is not supported")
	}
	if (op == cmpEq && isAny) || (op == cmpNe && !isAny) {
		e := &expr{op: opIn, negate: !isAny, fam: fam, l: operand{col: l.col, sx: l.sx}, set: &exprSet{keys: make(map[string]struct{})}}
		for _, v := range vals {
			if v == nil {
				e.null = true
				continue
			}
			k := string(appendKey(nil, v))
			if _, dup := e.set.keys[k]; !dup {
				e.set.keys[k] = struct{}{}
				e.set.vals = append(e.set.vals, v)
			}
		}
		return e, nil
	}
	return &expr{op: opAnyAll, any: isAny, cmp: op, fam: fam, l: operand{col: l.col, sx: l.sx}, set: &exprSet{vals: vals}}, nil
}

// like compiles x [NOT] LIKE/ILIKE pattern [ESCAPE e].
func (c *compiler) like(a *pg.A_Expr, negate, ilike bool) (*expr, error) {
	l, err := c.operand(a.Lexpr)
	if err != nil {
		return nil, err
	}
	if l.col == nil && l.sx == nil {
		return nil, refusalAt(a.Location, CodeExpression, "LIKE with a constant on the left is not supported")
	}
	if l.fam != famText {
		return nil, refusalAt(a.Location, CodeType, "LIKE on a %s column is not supported", typeName2(&l))
	}
	patNode, escNode := a.Rexpr, (*pg.Node)(nil)
	if f := a.Rexpr.GetFuncCall(); f != nil && len(f.Args) == 2 {
		if fn, _ := strVal(f.Funcname[len(f.Funcname)-1]); fn == "like_escape" {
			patNode, escNode = f.Args[0], f.Args[1]
		}
	}
	pat, err := c.constant(patNode)
	if err != nil {
		return nil, err
	}
	if err := c.settle(&pat, change.OIDText); err != nil {
		return nil, err
	}
	if pat.fam != famText {
		return nil, refusalAt(a.Location, CodeType, "a LIKE pattern must be text, not %s", typeName(pat.oid))
	}
	escape := rune('\\')
	if escNode != nil {
		esc, err := c.constant(escNode)
		if err != nil {
			return nil, err
		}
		if err := c.settle(&esc, change.OIDText); err != nil {
			return nil, err
		}
		if esc.fam != famText {
			return nil, refusalAt(a.Location, CodeType, "a LIKE escape must be text")
		}
		if esc.val == nil {
			return &expr{op: opConst, val: Unknown}, nil
		}
		s := esc.val.(string)
		switch n := len([]rune(s)); n {
		case 0:
			escape = -1
		case 1:
			escape = []rune(s)[0]
		default:
			return nil, refusalAt(a.Location, CodeExpression, "invalid escape string %q: it must be empty or one character", s)
		}
	}
	if pat.val == nil {
		return &expr{op: opConst, val: Unknown}, nil
	}
	coll := l.collate
	if coll.OID != 0 && !coll.Deterministic {
		return nil, refusalAt(a.Location, CodeCollation, "LIKE under the nondeterministic collation %q is not supported", coll.Name)
	}
	fold := FoldNone
	if ilike {
		switch {
		case coll.OID == 0 || coll.Provider == 'c' && (coll.Collate == "C" || coll.Collate == "POSIX"):
			fold = FoldASCII
		case coll.Provider == 'c' && (coll.Collate == "C.UTF-8" || coll.Collate == "C.utf8"):
			fold = FoldUnicode
		default:
			return nil, refusalAt(a.Location, CodeCollation, "ILIKE under collation %q (%s) is not supported: its case folding is not reproduced", coll.Name, coll.Collate)
		}
	}
	ps := pat.val.(string)
	if pat.oid == change.OIDBPChar {
		ps = strings.TrimRight(ps, " ")
	}
	m, ok := compileLike(ps, escape, fold)
	if !ok {
		return nil, refusalAt(a.Location, CodeExpression, "LIKE pattern %q must not end with the escape character", ps)
	}
	return &expr{op: opLike, l: operand{col: l.col, sx: l.sx}, fam: famText, negate: negate, set: &exprSet{like: m}}, nil
}
