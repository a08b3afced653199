package query

import (
	"fmt"
	"math"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/freshetdb/freshet/change"
)

// Time-dependent predicates.
//
// now(), CURRENT_TIMESTAMP, transaction_timestamp(), LOCALTIMESTAMP and
// CURRENT_DATE are served in one shape only: a top-level conjunct of
// WHERE comparing a column of the root table (date, timestamp or
// timestamptz) with one of them, plus or minus constants (intervals, or
// whole days for CURRENT_DATE), with <, <=, >, >= or BETWEEN. As the
// clock only moves forward, such a threshold only rises, so each conjunct
// changes its truth for a row at most once: a `col > now() - ...` row
// leaves the result when the clock passes it and never comes back, a
// `col < now() + ...` row enters and stays. The engine keeps, per view,
// the rows ordered by the column and moves exactly those the clock
// passed. Each such conjunct is a ClockBound; the rest of WHERE is the
// plan's filter as before.
//
// The clock is a value the caller supplies (the engine: PostgreSQL's
// now() read with each heartbeat). The result at clock t is PostgreSQL's
// answer with now() replaced by t, in a session whose TimeZone is UTC
// (the zone every Freshet session runs in): CURRENT_DATE is t's date in
// UTC, LOCALTIMESTAMP is t as a timestamp, a timestamp or date column is
// compared with a timestamptz as UTC, and months and days are added as
// on UTC's calendar.

// clockBase is the time function a threshold starts from.
type clockBase uint8

const (
	clockNow     clockBase = iota // now(), CURRENT_TIMESTAMP, transaction_timestamp(): timestamptz
	clockLocalTS                  // LOCALTIMESTAMP: timestamp
	clockDate                     // CURRENT_DATE: date
)

// clockStep is one constant added to (or subtracted from) a threshold.
type clockStep struct {
	iv   change.Interval // an interval (isDays false)
	days int64           // whole days added to a date (isDays)
	// isDays: date + integer; otherwise + interval.
	isDays bool
}

// ClockBound is a conjunct of WHERE comparing a column with a threshold
// that depends on the clock: Column Op threshold(clock).
type ClockBound struct {
	// Source and Column name the compared column (Source.Columns index).
	Source, Column int
	op             cmpOp // column op threshold
	base           clockBase
	steps          []clockStep
	ref            *colRef
	text           string // the conjunct as written, for messages
}

// Leaves reports whether the bound is of the kind rows leave by (column >
// or >= a threshold: once the rising threshold passes a row's value the
// row is out for good); otherwise rows enter by it (column < or <=).
func (b *ClockBound) Leaves() bool { return b.op == cmpGt || b.op == cmpGe }

// String is the conjunct as the query wrote it.
func (b *ClockBound) String() string { return b.text }

// TimeKey is a date, timestamp or timestamptz value on one line of
// microseconds since 2000-01-01 00:00 UTC (a date at its midnight), with
// the infinities (and dates beyond the timestamp range) at either end:
// how PostgreSQL compares those types with each other under TimeZone UTC.
type TimeKey struct {
	Inf    int8 // -1, 0 or +1
	Micros int64
}

// Cmp orders two TimeKeys.
func (k TimeKey) Cmp(o TimeKey) int {
	switch {
	case k.Inf != o.Inf:
		if k.Inf < o.Inf {
			return -1
		}
		return 1
	case k.Inf != 0 || k.Micros == o.Micros:
		return 0
	case k.Micros < o.Micros:
		return -1
	}
	return 1
}

// TimeKeyOf returns a column value's TimeKey (a change.Date, a
// change.Timestamp, or nil for NULL: ok false).
func TimeKeyOf(v any) (TimeKey, bool) {
	switch x := v.(type) {
	case change.Timestamp:
		return TimeKey{Inf: x.Inf, Micros: x.Micros}, true
	case change.Date:
		if x.Inf != 0 {
			return TimeKey{Inf: x.Inf}, true
		}
		d := int64(x.Days)
		// Dates past the timestamp range compare beyond every finite
		// timestamp (date2timestamp_no_overflow).
		if us := d * usecsPerDay; !change.TimestampInRange(us) {
			if d > 0 {
				return TimeKey{Inf: 1}, true
			}
			return TimeKey{Inf: -1}, true
		}
		return TimeKey{Micros: d * usecsPerDay}, true
	}
	return TimeKey{}, false
}

// Threshold computes the bound's threshold at the clock (the value now()
// takes), with PostgreSQL's arithmetic: an error (*EvalError) where
// PostgreSQL would raise one (a result out of range).
func (b *ClockBound) Threshold(clock change.Timestamp) (k TimeKey, err error) {
	defer recoverEval(&err)
	if clock.Inf != 0 {
		return TimeKey{Inf: clock.Inf}, nil
	}
	us := clock.Micros
	if b.base == clockDate {
		days := floorDiv(us, usecsPerDay)
		i := 0
		for ; i < len(b.steps) && b.steps[i].isDays; i++ {
			days += b.steps[i].days
			if days < minDateDays || days > maxDateDays {
				raise(stateDatetimeRange, "date out of range")
			}
		}
		if i == len(b.steps) {
			k, _ := TimeKeyOf(change.Date{Days: int32(days)})
			return k, nil
		}
		us = days * usecsPerDay // date + interval is a timestamp
		for _, s := range b.steps[i:] {
			us = tsPlusInterval(us, s.iv)
		}
		return TimeKey{Micros: us}, nil
	}
	for _, s := range b.steps {
		us = tsPlusInterval(us, s.iv)
	}
	return TimeKey{Micros: us}, nil
}

// Holds reports whether a row whose column has value v satisfies the
// bound at threshold thr (NULL: never).
func (b *ClockBound) Holds(v any, thr TimeKey) bool {
	k, ok := TimeKeyOf(v)
	if !ok {
		return false
	}
	return b.op.holds(k.Cmp(thr))
}

// HoldsKey is Holds for a value already taken to its TimeKey.
func (b *ClockBound) HoldsKey(k, thr TimeKey) bool { return b.op.holds(k.Cmp(thr)) }

const (

	// The date range: 4714-11-24 BC to 5874897-12-31, in days since
	// 2000-01-01.
	minDateDays = int64(-2451545)
	maxDateDays = int64(2147483494)
)

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

var daysInMonth = [2][12]int{{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}, {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}}

func isLeap(y int64) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

// tsPlusInterval is timestamp_pl_interval (and timestamptz_pl_interval
// under TimeZone UTC) on a finite timestamp: months on the calendar (the
// day clamped to the month's last), then days, then microseconds.
func tsPlusInterval(us int64, iv change.Interval) int64 {
	if iv.Months != 0 {
		p := splitTS(us)
		mon := int64(p.mon) + int64(iv.Months)
		y := p.year
		if mon > 12 {
			y += (mon - 1) / 12
			mon = (mon-1)%12 + 1
		} else if mon < 1 {
			y += mon/12 - 1
			mon = mon%12 + 12
		}
		d := p.mday
		leap := 0
		if isLeap(y) {
			leap = 1
		}
		if last := daysInMonth[leap][mon-1]; d > last {
			d = last
		}
		us = joinTS(y, int(mon), d, p.dayMicros)
	}
	if iv.Days != 0 {
		p := splitTS(us)
		days := p.days + int64(iv.Days)
		y, m, d := change.CivilDate(days)
		us = joinTS(y, m, d, p.dayMicros)
	}
	if iv.Micros != 0 {
		s := us + iv.Micros
		if (iv.Micros > 0 && s < us) || (iv.Micros < 0 && s > us) || !change.TimestampInRange(s) {
			raise(stateDatetimeRange, "timestamp out of range")
		}
		us = s
	}
	return us
}

// isClockFunc reports whether n is one of the time functions a
// ClockBound may start from, and which.
func isClockFunc(n *pg.Node) (clockBase, bool) {
	switch x := n.Node.(type) {
	case *pg.Node_FuncCall:
		f := x.FuncCall
		if len(f.Args) != 0 || f.AggStar || f.Over != nil || f.AggFilter != nil || f.AggDistinct || len(f.AggOrder) > 0 {
			return 0, false
		}
		if len(f.Funcname) == 2 {
			if s, _ := strVal(f.Funcname[0]); s != "pg_catalog" {
				return 0, false
			}
		} else if len(f.Funcname) != 1 {
			return 0, false
		}
		switch strings.ToLower(funcName(f)) {
		case "now", "transaction_timestamp":
			return clockNow, true
		}
	case *pg.Node_SqlvalueFunction:
		switch x.SqlvalueFunction.Op {
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP:
			return clockNow, true
		case pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP:
			return clockLocalTS, true
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_DATE:
			return clockDate, true
		}
	}
	return 0, false
}

// mentionsTime reports whether a time function a ClockBound may start
// from appears under n (CURRENT_TIME and the others stay volatile).
func mentionsTime(n *pg.Node) bool {
	found := false
	walkNodes(n, func(m *pg.Node) bool {
		if found {
			return false
		}
		_, found = isClockFunc(m)
		return !found
	})
	return found
}

// conjuncts appends the top-level conjuncts of a WHERE clause.
func conjuncts(dst []*pg.Node, n *pg.Node) []*pg.Node {
	if b := n.GetBoolExpr(); b != nil && b.Boolop == pg.BoolExprType_AND_EXPR {
		for _, a := range b.Args {
			dst = conjuncts(dst, a)
		}
		return dst
	}
	return append(dst, n)
}

// clockWhere takes the ClockBounds out of a WHERE clause: it returns the
// clause without them (nil when nothing is left), or a refusal for a
// time function anywhere else.
func (c *compiler) clockWhere(p *Plan, where *pg.Node) (*pg.Node, error) {
	if !mentionsTime(where) {
		return where, nil
	}
	var rest []*pg.Node
	for _, n := range conjuncts(nil, where) {
		if !mentionsTime(n) {
			rest = append(rest, n)
			continue
		}
		bs, err := c.clockConjunct(n)
		if err != nil {
			return nil, err
		}
		p.Clock = append(p.Clock, bs...)
	}
	switch len(rest) {
	case 0:
		return nil, nil
	case 1:
		return rest[0], nil
	}
	return pg.MakeBoolExprNode(pg.BoolExprType_AND_EXPR, rest, -1), nil
}

func clockShape(n *pg.Node, why string) error {
	return refusalAt(nodeLocation(n), CodeClock, "%s; a time function is served only in a WHERE condition of the form column > now() - interval '...' (also <, <=, >=, BETWEEN; CURRENT_TIMESTAMP, LOCALTIMESTAMP, CURRENT_DATE, transaction_timestamp()), ANDed with the rest", why)
}

// clockConjunct compiles one conjunct that mentions the time.
func (c *compiler) clockConjunct(n *pg.Node) ([]ClockBound, error) {
	a := n.GetAExpr()
	text := c.snippet(n)
	if a == nil {
		return nil, clockShape(n, fmt.Sprintf("%s uses the time", text))
	}
	switch a.Kind {
	case pg.A_Expr_Kind_AEXPR_OP:
		if len(a.Name) != 1 {
			break
		}
		name, _ := strVal(a.Name[0])
		var op cmpOp
		switch name {
		case "<":
			op = cmpLt
		case "<=":
			op = cmpLe
		case ">":
			op = cmpGt
		case ">=":
			op = cmpGe
		default:
			return nil, clockShape(n, fmt.Sprintf("%s compares the time with %s", text, name))
		}
		l, r := a.Lexpr, a.Rexpr
		if l.GetColumnRef() == nil {
			l, r, op = r, l, op.flip()
		}
		b, err := c.clockBound(n, l, r, op, text)
		if err != nil {
			return nil, err
		}
		return []ClockBound{b}, nil
	case pg.A_Expr_Kind_AEXPR_BETWEEN:
		list := a.Rexpr.GetList()
		if list == nil || len(list.Items) != 2 {
			break
		}
		lo, err := c.clockBound(n, a.Lexpr, list.Items[0], cmpGe, text)
		if err != nil {
			return nil, err
		}
		hi, err := c.clockBound(n, a.Lexpr, list.Items[1], cmpLe, text)
		if err != nil {
			return nil, err
		}
		return []ClockBound{lo, hi}, nil
	}
	return nil, clockShape(n, fmt.Sprintf("%s uses the time", text))
}

// clockBound compiles col op threshold.
func (c *compiler) clockBound(whole, colNode, thrNode *pg.Node, op cmpOp, text string) (ClockBound, error) {
	cr := colNode.GetColumnRef()
	if cr == nil {
		return ClockBound{}, clockShape(whole, fmt.Sprintf("%s compares the time with an expression, not a column", text))
	}
	col, err := c.operand(colNode)
	if err != nil {
		return ClockBound{}, err
	}
	if col.col.src != 0 {
		return ClockBound{}, clockShape(whole, fmt.Sprintf("%s compares the time with a joined table's column", text))
	}
	switch col.oid {
	case change.OIDDate, change.OIDTimestamp, change.OIDTimestamptz:
	default:
		return ClockBound{}, clockShape(whole, fmt.Sprintf("%s compares the time with a column of type %s, not date, timestamp or timestamptz", text, typeName(col.oid)))
	}
	b := ClockBound{op: op, ref: col.col, text: text}
	if err := c.threshold(whole, thrNode, &b); err != nil {
		return ClockBound{}, err
	}
	return b, nil
}

// threshold reads now()-like ± constants into b.
func (c *compiler) threshold(whole, n *pg.Node, b *ClockBound) error {
	if base, ok := isClockFunc(n); ok {
		b.base = base
		return nil
	}
	a := n.GetAExpr()
	if a == nil || a.Kind != pg.A_Expr_Kind_AEXPR_OP || len(a.Name) != 1 || a.Lexpr == nil {
		return clockShape(whole, fmt.Sprintf("%s computes the time in a way not served", c.snippet(n)))
	}
	name, _ := strVal(a.Name[0])
	if name != "+" && name != "-" {
		return clockShape(whole, fmt.Sprintf("%s computes the time with %s", c.snippet(n), name))
	}
	timeSide, constSide := a.Lexpr, a.Rexpr
	if name == "+" && !mentionsTime(timeSide) {
		timeSide, constSide = constSide, timeSide
	}
	if !mentionsTime(timeSide) || mentionsTime(constSide) {
		return clockShape(whole, fmt.Sprintf("%s computes the time in a way not served", c.snippet(n)))
	}
	if err := c.threshold(whole, timeSide, b); err != nil {
		return err
	}
	if !constTree(constSide) {
		return clockShape(whole, fmt.Sprintf("%s adds to the time something that is not a constant", c.snippet(n)))
	}
	o, err := c.constant(constSide)
	if err != nil {
		return err
	}
	dateSoFar := b.base == clockDate
	for _, s := range b.steps {
		dateSoFar = dateSoFar && s.isDays
	}
	if o.unknown() {
		if err := c.settle(&o, change.OIDInterval); err != nil {
			return err
		}
	}
	if o.val == nil {
		// now() - NULL is NULL, and so the condition: no row.
		return clockShape(whole, fmt.Sprintf("%s adds NULL to the time", c.snippet(n)))
	}
	var st clockStep
	switch v := o.val.(type) {
	case change.Interval:
		if name == "-" {
			if v.Months == math.MinInt32 || v.Days == math.MinInt32 || v.Micros == math.MinInt64 {
				return refusalAt(nodeLocation(constSide), CodeEvalError, "%s: interval out of range", c.snippet(n))
			}
			v = change.Interval{Months: -v.Months, Days: -v.Days, Micros: -v.Micros}
		}
		st.iv = v
	case int64:
		if !dateSoFar || (o.oid != change.OIDInt4 && o.oid != change.OIDInt2) {
			return clockShape(whole, fmt.Sprintf("%s adds a number to a timestamp", c.snippet(n)))
		}
		st.isDays, st.days = true, v
		if name == "-" {
			st.days = -v
		}
	default:
		return clockShape(whole, fmt.Sprintf("%s adds a %s to the time", c.snippet(n), typeName(o.oid)))
	}
	b.steps = append(b.steps, st)
	return nil
}

// fixClock fills in the bounds' column indexes once the plan's layout is
// known.
func (p *Plan) fixClock() {
	for i := range p.Clock {
		p.Clock[i].Source, p.Clock[i].Column = int(p.Clock[i].ref.src), int(p.Clock[i].ref.idx)
	}
}

// Clocked reports whether the plan's result depends on the clock (it has
// ClockBounds).
func (p *Plan) Clocked() bool { return len(p.Clock) > 0 }

// Thresholds computes every bound's threshold at the clock, in Clock
// order, into dst.
func (p *Plan) Thresholds(dst []TimeKey, clock change.Timestamp) ([]TimeKey, error) {
	dst = dst[:0]
	for i := range p.Clock {
		k, err := p.Clock[i].Threshold(clock)
		if err != nil {
			return dst, err
		}
		dst = append(dst, k)
	}
	return dst, nil
}

// EvalAt is EvalRow at a clock, given as the bounds' thresholds there
// (Thresholds): the filter and every ClockBound. Eval and EvalRow
// evaluate the filter alone.
func (p *Plan) EvalAt(row Row, thr []TimeKey) (Tri, error) {
	t, err := p.EvalRow(row)
	if err != nil || t != True {
		return t, err
	}
	for i := range p.Clock {
		b := &p.Clock[i]
		if !b.Holds(cell(row, b.Source, b.Column), thr[i]) {
			return False, nil
		}
	}
	return True, nil
}

// HoldsAt reports whether a row the filter keeps may be in the result at
// this clock or a later one: every bound rows leave by holds (a bound
// rows enter by may hold later).
func (p *Plan) HoldsAt(row Row, thr []TimeKey) bool {
	for i := range p.Clock {
		b := &p.Clock[i]
		v := cell(row, b.Source, b.Column)
		if b.Leaves() && !b.Holds(v, thr[i]) {
			return false
		}
		if _, ok := TimeKeyOf(v); !ok {
			return false // NULL: never true
		}
	}
	return true
}

// clockServed refuses the plans with ClockBounds the engine does not keep:
// joins, and a window (ORDER BY, LIMIT, OFFSET over rows) with a bound
// rows enter by (the window would have to hold the rows that have not
// entered yet beside the ones it shows).
func (c *compiler) clockServed(p *Plan) error {
	if len(p.Clock) == 0 {
		return nil
	}
	if len(c.sources) > 1 {
		return refuse(CodeClock, "a time condition (%s) on a join is not served", p.Clock[0].text)
	}
	if p.Agg != nil || p.Count {
		return nil
	}
	ordered := len(p.Order) > 0 || p.Limit >= 0 || p.Offset > 0
	for i := range p.Clock {
		if b := &p.Clock[i]; ordered && !b.Leaves() {
			return refuse(CodeClock, "%s lets rows enter the result as time passes, which is not served with ORDER BY, LIMIT or OFFSET (a condition rows leave by, column > now() - ..., is)", b.text)
		}
	}
	return nil
}

// clockLiteral is the constant Render puts in place of a time function
// at the clock t.
func clockLiteral(base clockBase, t change.Timestamp) *pg.Node {
	var sql string
	switch base {
	case clockDate:
		d := change.Date{Inf: t.Inf}
		if t.Inf == 0 {
			d.Days = int32(floorDiv(t.Micros, usecsPerDay))
		}
		sql = "SELECT '" + formatText(change.OIDDate, d) + "'::date"
	case clockLocalTS:
		sql = "SELECT '" + formatText(change.OIDTimestamp, t) + "'::timestamp"
	default:
		sql = "SELECT '" + formatText(change.OIDTimestamptz, t) + "'::timestamptz"
	}
	tree, err := pg.Parse(sql)
	if err != nil {
		panic("query: parse clock literal: " + err.Error())
	}
	return tree.Stmts[0].Stmt.GetSelectStmt().TargetList[0].GetResTarget().Val
}

// renderClock rewrites a WHERE clause for RenderOptions.At (nil: the
// time functions stay) and Hold.
func renderClock(where *pg.Node, at *change.Timestamp, hold bool) *pg.Node {
	var out []*pg.Node
	for _, n := range conjuncts(nil, where) {
		if !mentionsTime(n) {
			out = append(out, n)
			continue
		}
		if hold {
			a := n.GetAExpr()
			if a == nil {
				continue // not compiled as a bound; cannot happen
			}
			switch a.Kind {
			case pg.A_Expr_Kind_AEXPR_BETWEEN:
				// Keep the lower end: x >= lo.
				n = pg.MakeAExprNode(pg.A_Expr_Kind_AEXPR_OP, []*pg.Node{pg.MakeStrNode(">=")}, a.Lexpr, a.Rexpr.GetList().Items[0], -1)
			case pg.A_Expr_Kind_AEXPR_OP:
				name, _ := strVal(a.Name[0])
				colLeft := a.Lexpr.GetColumnRef() != nil
				enters := (name == "<" || name == "<=") == colLeft
				if enters {
					continue
				}
			}
		}
		if at != nil {
			walkMsg(n.ProtoReflect(), func(m *pg.Node) *pg.Node { return replaceClock(m, *at) })
		}
		out = append(out, n)
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return pg.MakeBoolExprNode(pg.BoolExprType_AND_EXPR, out, -1)
}

// replaceClock returns the node to put in place of n: a clock literal
// for a time function, else n with those under it replaced.
func replaceClock(n *pg.Node, at change.Timestamp) *pg.Node {
	if n == nil {
		return nil
	}
	if b, ok := isClockFunc(n); ok {
		return clockLiteral(b, at)
	}
	walkMsg(n.ProtoReflect(), func(m *pg.Node) *pg.Node { return replaceClock(m, at) })
	return nil
}
