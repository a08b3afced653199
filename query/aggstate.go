package query

import (
	"math/big"

	"github.com/freshetdb/freshet/change"
)

// AggState is one group's running state of one aggregate, kept so that a
// row entering or leaving the group costs O(log n) in the group's size
// and the result is computed without the group's rows:
//
//   - COUNT(*), COUNT(x): a count;
//   - SUM, AVG: the count of non-NULL values and their exact sum (int64
//     for int2/int4, an integer coefficient at the largest scale seen for
//     int8 and numeric), the count of values of each display scale
//     (numeric's result takes the largest scale among the group's values),
//     and the counts of NaN and infinities;
//   - MIN, MAX: a balanced tree of the distinct values with a count each;
//   - COUNT(DISTINCT x): a count per distinct value (by its equality
//     encoding);
//   - bool_and, bool_or: the counts of true and false values.
//
// The zero value is a group without rows.
type AggState struct {
	n        int64 // non-NULL values
	i        int64 // SUM/AVG of int2/int4
	sum      *big.Int
	scale    int32 // sum is sum × 10^-scale
	scales   map[int32]int64
	nan      int64
	pinf     int64
	ninf     int64
	tree     *multiset
	distinct map[string]int64
	t, f     int64
	kb       []byte
}

// Add adds (sign 1) or removes (sign -1) one row's argument value v (nil
// for NULL; ignored for COUNT(*), which the group's row count answers).
// Removing a value the state does not hold is a bug and panics.
func (a *Aggregate) Add(st *AggState, v any, sign int) {
	if a.Kind == AggCountStar || v == nil {
		return
	}
	d := int64(sign)
	st.n += d
	switch a.Kind {
	case AggCountDistinct:
		if st.distinct == nil {
			st.distinct = make(map[string]int64)
		}
		st.kb = AppendKey(st.kb[:0], a.ArgOID, v)
		k := string(st.kb)
		if st.distinct[k] += d; st.distinct[k] == 0 {
			delete(st.distinct, k)
		}
	case AggSum, AggAvg:
		switch a.ArgOID {
		case change.OIDInt2, change.OIDInt4:
			st.i += d * v.(int64)
		case change.OIDInt8:
			st.addBig(big.NewInt(v.(int64)), 0, d)
		default:
			n := v.(change.Numeric)
			switch {
			case n.NaN:
				st.nan += d
			case n.Inf > 0:
				st.pinf += d
			case n.Inf < 0:
				st.ninf += d
			default:
				c, s := numParts(n)
				if st.scales == nil {
					st.scales = make(map[int32]int64)
				}
				if st.scales[s] += d; st.scales[s] == 0 {
					delete(st.scales, s)
				}
				st.addBig(c, s, d)
			}
		}
	case AggMin, AggMax:
		if st.tree == nil {
			st.tree = &multiset{oid: a.ArgOID}
		}
		if sign > 0 {
			st.tree.add(v)
		} else {
			st.tree.remove(v)
		}
	case AggBoolAnd, AggBoolOr:
		if v.(bool) {
			st.t += d
		} else {
			st.f += d
		}
	}
}

// addBig adds d × c × 10^-s to the sum.
func (st *AggState) addBig(c *big.Int, s int32, d int64) {
	if st.sum == nil {
		st.sum = new(big.Int)
	}
	if s > st.scale {
		st.sum.Mul(st.sum, pow10(int64(s-st.scale)))
		st.scale = s
	}
	x := new(big.Int).Set(c)
	if s < st.scale {
		x.Mul(x, pow10(int64(st.scale-s)))
	}
	if d < 0 {
		st.sum.Sub(st.sum, x)
	} else {
		st.sum.Add(st.sum, x)
	}
}

// Result is the aggregate's value for a group of rows rows, as
// PostgreSQL computes it (nil for NULL: SUM, AVG, MIN, MAX, bool_and and
// bool_or of no non-NULL value). It reports the error PostgreSQL would
// raise computing it.
func (a *Aggregate) Result(st *AggState, rows int64) (v any, err error) {
	defer recoverEval(&err)
	switch a.Kind {
	case AggCountStar:
		return rows, nil
	case AggCount:
		return st.n, nil
	case AggCountDistinct:
		return int64(len(st.distinct)), nil
	case AggMin:
		if st.tree == nil {
			return nil, nil
		}
		return st.tree.first(), nil
	case AggMax:
		if st.tree == nil {
			return nil, nil
		}
		return st.tree.last(), nil
	case AggBoolAnd, AggBoolOr:
		if st.n == 0 {
			return nil, nil
		}
		if a.Kind == AggBoolAnd {
			return st.f == 0, nil
		}
		return st.t > 0, nil
	}
	// SUM and AVG.
	if st.n == 0 {
		return nil, nil
	}
	var sum change.Numeric
	switch a.ArgOID {
	case change.OIDInt2, change.OIDInt4:
		if a.Kind == AggSum {
			return st.i, nil
		}
		sum = intNumeric(st.i)
	default:
		switch {
		case st.nan > 0 || st.pinf > 0 && st.ninf > 0:
			return numNaN, nil
		case st.pinf > 0:
			return change.Numeric{Inf: 1}, nil
		case st.ninf > 0:
			return change.Numeric{Inf: -1}, nil
		}
		// The display scale is the largest among the values summed.
		ds := int32(0)
		for s := range st.scales {
			ds = max(ds, s)
		}
		c := new(big.Int)
		if st.sum != nil {
			c.Set(st.sum)
		}
		if st.scale > ds {
			c.Quo(c, pow10(int64(st.scale-ds)))
		}
		sum = change.Numeric{Coef: c, Exp: -ds, Scale: ds}
		if a.Kind == AggSum {
			return sum, nil
		}
	}
	// numeric_avg and int8_avg: numeric_div(sum, count).
	return numericArith(opDiv, sum, intNumeric(st.n)), nil
}

// multiset is a balanced (AVL) tree of values with a count each, ordered
// as PostgreSQL orders the type. It holds only types whose equal values
// print alike: min and max of the others are refused (compiler.aggregate), so
// the value a group shows is the one PostgreSQL shows.
type multiset struct {
	oid  uint32
	by   func(a, b any) int // when set, the order (DISTINCT ON's rows)
	root *msNode
}

type msNode struct {
	v           any
	n           int64
	h           int8
	left, right *msNode
}

func (m *multiset) cmp(v any, x *msNode) int {
	if m.by != nil {
		return m.by(v, x.v)
	}
	return CompareValues(m.oid, v, x.v)
}

func (m *multiset) add(v any) { m.root = m.insert(m.root, v) }

func (m *multiset) remove(v any) { m.root = m.delete(m.root, v) }

func (m *multiset) first() any {
	x := m.root
	if x == nil {
		return nil
	}
	for x.left != nil {
		x = x.left
	}
	return x.v
}

func (m *multiset) last() any {
	x := m.root
	if x == nil {
		return nil
	}
	for x.right != nil {
		x = x.right
	}
	return x.v
}

func height(x *msNode) int8 {
	if x == nil {
		return 0
	}
	return x.h
}

func (x *msNode) fix() { x.h = 1 + max(height(x.left), height(x.right)) }

func rotRight(x *msNode) *msNode {
	l := x.left
	x.left, l.right = l.right, x
	x.fix()
	l.fix()
	return l
}

func rotLeft(x *msNode) *msNode {
	r := x.right
	x.right, r.left = r.left, x
	x.fix()
	r.fix()
	return r
}

func balance(x *msNode) *msNode {
	x.fix()
	switch b := height(x.left) - height(x.right); {
	case b > 1:
		if height(x.left.left) < height(x.left.right) {
			x.left = rotLeft(x.left)
		}
		return rotRight(x)
	case b < -1:
		if height(x.right.right) < height(x.right.left) {
			x.right = rotRight(x.right)
		}
		return rotLeft(x)
	}
	return x
}

func (m *multiset) insert(x *msNode, v any) *msNode {
	if x == nil {
		return &msNode{v: v, n: 1, h: 1}
	}
	switch c := m.cmp(v, x); {
	case c < 0:
		x.left = m.insert(x.left, v)
	case c > 0:
		x.right = m.insert(x.right, v)
	default:
		x.n++
		return x
	}
	return balance(x)
}

func (m *multiset) delete(x *msNode, v any) *msNode {
	if x == nil {
		panic("query: aggregate state: removing a value it does not hold")
	}
	switch c := m.cmp(v, x); {
	case c < 0:
		x.left = m.delete(x.left, v)
	case c > 0:
		x.right = m.delete(x.right, v)
	default:
		if x.n > 1 {
			x.n--
			return x
		}
		if x.left == nil {
			return x.right
		}
		if x.right == nil {
			return x.left
		}
		// Replace by the smallest node on the right.
		s := x.right
		for s.left != nil {
			s = s.left
		}
		x.v, x.n = s.v, s.n
		s.n = 1
		x.right = m.delete(x.right, s.v)
	}
	return balance(x)
}
