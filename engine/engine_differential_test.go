package engine

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
	"github.com/jackc/pgx/v5/pgconn"
)

// The randomized differential test: random schemas, random subscriptions
// drawn from the supported grammar, random writes interleaved with
// subscribes and unsubscribes, all through real PostgreSQL, the real
// pgwal.Reader and the Engine. Whenever the writes quiesce, every live
// subscription's client state (its Accepted with every Delta applied) must
// equal PostgreSQL's answer to the same query, row for row and in order
// (rows that tie on ORDER BY compared as multisets; a LIMIT's cut is
// compared with ties broken by primary key, as the engine defines its
// windows). And at every position the engine acknowledges to its source
// (what the s2s server's lag frames vouch for, and the read cache serves
// by), not only once the stream is quiet: the writer reads every rows-mode
// subscription's answer after each commit, and every client state taken at
// an acknowledgement must be the answer of the transactions committed
// before it (passWatch).
//
// Queries are filters, joins, counts, windows, expressions and aggregates,
// each maybe with an uncorrelated IN or NOT IN (subquery) ANDed in ("+in",
// "+notin": a join column of the outer query against one of a table's,
// duplicates and NULLs among its values, the subquery reading the outer
// query's own table at times), in rows and touch mode.
//
// Clocked queries ("+clock", one a round, drawn apart from the others:
// dgen.crng) AND a condition of s0.ts, a timestamptz every table has,
// with now(), CURRENT_TIMESTAMP or transaction_timestamp() (rows leave
// by ts > now() - N, enter by ts < now() + N, both by BETWEEN; a window
// takes only the first) to a filter, count, window, aggregate or
// DISTINCT of one table; ts is written as the database's now() give or
// take 1.5 seconds, so the clock passes rows during the run. Their answer
// is the query at the clock their client state carries (Output.Clock of
// its last Accepted or Delta), which the writer's answers are not at, so
// passWatch does not follow them: once a round's writes are still (and a
// few heartbeats later), every client state after an Accepted or Delta
// past the last commit, and a new subscriber's Accepted, is matched with
// PostgreSQL's answer to the query with now() replaced by that clock
// (checkClocked), with coverage floors for +clock and for deltas. One
// clocked query a round (drawn from dgen.tcrng, or a rows-mode one's
// again) is subscribed in touch mode before the writes: every commit and
// every heartbeat with no write after its Accepted that changed
// PostgreSQL's answer at the clock the engine was given there must have
// been touched at its position (clockTouch, engine_difftouch_test.go),
// with floors for the subscriptions, the commits and the heartbeats.
//
// LIKE-routed queries ("likeix", two a round in rows mode and one in touch
// mode, drawn apart from the others: dgen.lrng) filter, count or join a
// table by a LIKE, ILIKE, ~~ or ~~* of s0.lk with a literal run of three
// bytes or more (a literal or a bind; maybe a second pattern, or a range
// of s0.r, which the LIKE outranks) and by nothing else, so the engine
// routes their table's changes by its LIKE index alone. lk, a text every
// table has, is written from values each pattern matches or misses, in
// either case and with multibyte text (dgen.lkValue), by inserts and by
// half the updates, so rows move in and out of those results throughout
// the run: a LIKE index that finds no candidates fails each of the 16
// CI seeds run one by one, and the floors count likeix results compared
// after a delta and touch-mode likeix results a transaction changed. The
// "+like" shapes (a LIKE ANDed to other draws) remain, often routed by
// another constraint.
//
// Columns are drawn from integers, numeric, float8, text, varchar, bool,
// timestamptz, date, uuid, jsonb, json, int4[] and text[], bytea and
// interval; binds are text or binary (and untyped); LIMIT and OFFSET are
// drawn from the whole range of bigint, extremes near 2^63 included. A
// subscription refused or ended by the engine fails the run unless a
// schema change of one of its tables explains it (table_dropped,
// schema_changed): internal, read_failed, timeout... are failures. Over
// the CI seeds, coverage floors per shape (joins, windows, counts, LIKE
// with a literal run the LIKE index routes by, LIKE-routed results
// the index changed and touch-mode results it touched, ordered results,
// aggregates, DISTINCT and DISTINCT ON in rows and touch mode, IN and NOT
// IN (subquery) in rows and touch mode, binary binds, touch mode,
// acknowledged positions, clocked results and the deltas the clock
// moved, clocked touch-mode results and the heartbeats that changed
// them) fail a run in which a regression refuses a
// whole shape, and touches for transactions that changed nothing may be
// at most a quarter of all touches.
//
// Touch-mode subscriptions ride along: after every committed write the
// writer runs each one's query on PostgreSQL, and every transaction that
// changed its result must have been touched at its own commit LSN (a
// touch for a transaction that left the result as it was is allowed, and
// counted). Schema changes are interleaved with the writes (a column
// added, dropped or retyped, a table dropped and made again): a
// subscription still live at the comparison must still equal PostgreSQL's
// answer, so one the change broke must have ended.
//
// A seed fixes the schema, the data, the queries and the writes; the
// interleaving of writes with hydration reads is left to the scheduler,
// so a failing seed is rerun a few times when it does not fail at once. A
// failure prints the command that reruns its seed.
//
//	go test ./engine/ -run TestDifferential                        # CI seeds
//	go test ./engine/ -count=1 -run 'TestDifferential$' -args -diff.seed=12345 -diff.v  # one seed
//	go test ./engine/ -run TestDifferential -soak=500              # more seeds
//	go test ./engine/ -run TestDifferential -soak.time=10m -timeout=0
var (
	diffSeed     = flag.Uint64("diff.seed", 0, "run TestDifferential for this seed only")
	diffSoak     = flag.Int("soak", 0, "TestDifferential: run this many seeds beyond the CI ones")
	diffSoakTime = flag.Duration("soak.time", 0, "TestDifferential: keep running new seeds for this long")
	diffVerbose  = flag.Bool("diff.v", false, "TestDifferential: log every query and write")
)

// diffCISeeds is how many seeds run in CI (about 1-2 minutes on 2 cores).
const diffCISeeds = 16

// diffJoins turns INNER and LEFT join subscriptions on (the core has had
// joins since e6289d7). Turn it off only to tell a join bug from others;
// the test then logs that joins are excluded.
const diffJoins = true

// diffExprs draws value expressions (computed outputs, conditions on
// expressions, expression ORDER BY keys: "+expr" shapes). Turn it off
// only to tell an expression bug from others.
const diffExprs = true

// diffSubqueries draws uncorrelated IN (subquery) conditions ("+in"
// shapes) in rows and touch mode. Turn it off only to tell a semi-join bug
// from others.
const diffSubqueries = true

func TestDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("differential test: skipped with -short")
	}
	var seeds []uint64
	switch {
	case *diffSeed != 0:
		seeds = []uint64{*diffSeed}
	default:
		for i := range diffCISeeds + *diffSoak {
			seeds = append(seeds, uint64(1000+i))
		}
	}
	if !diffJoins {
		t.Log("excluded: JOIN subscriptions (diffJoins = false)")
	}
	total := diffTotals{refused: map[string]int{}, ended: map[string]int{}, shapes: map[string]int{}, ddl: map[string]int{}, touchShapes: map[string]int{}}
	for _, seed := range seeds {
		if !t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runDifferential(t, seed, &total) }) {
			return
		}
	}
	if *diffSoakTime > 0 {
		deadline := time.Now().Add(*diffSoakTime)
		for seed := uint64(time.Now().UnixNano()); time.Now().Before(deadline); seed++ {
			if !t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runDifferential(t, seed, &total) }) {
				return
			}
		}
	}
	t.Logf("compared %d results (%d ordered, %d counts) of %d subscriptions over %d seeds; %d writes committed, %d rolled back",
		total.compared, total.ordered, total.counts, total.subs, total.seeds, total.commits, total.rollbacks)
	t.Logf("compared by shape: %v", total.shapes)
	t.Logf("touch-mode subscriptions checked by shape: %v", total.touchShapes)
	t.Logf("refused by the query layer: %v", total.refused)
	t.Logf("refused or ended by the engine: %v", total.ended)
	t.Logf("schema changes: %v", total.ddl)
	t.Logf("touch mode: %d subscriptions checked; %d committed transactions changed their results, every one touched at its commit; %d touches, %d of them (%.1f%%) for a transaction that left the result as it was or at a re-read's landing",
		total.touchSubs, total.touchChanged, total.touches, total.falseTouches, 100*float64(total.falseTouches)/float64(max(total.touches, 1)))
	t.Logf("subqueries: %d IN and %d NOT IN results compared; %d committed transactions changed a touch-mode IN or NOT IN (subquery) result",
		shapeCount(total.shapes, "+in"), shapeCount(total.shapes, "+notin"), total.touchInChanged)
	t.Logf("compared %d client states at positions the engine acknowledged (what lag frames vouch for); %d results of queries with binary binds at quiet points",
		total.passed, total.binary)
	t.Logf("LIKE index (likeix): %d results compared, %d of them after a delta; %d committed transactions changed a touch-mode likeix result",
		shapeCount(total.shapes, "likeix"), total.likeDeltas, total.touchLikeChanged)
	t.Logf("clocked (now()): %d results compared, %d client states matched with PostgreSQL at the clock they carry, %d of them after a delta",
		shapeCount(total.shapes, "+clock"), total.clocked, total.clockDeltas)
	t.Logf("clocked touch mode: %d subscriptions checked; %d committed transactions and %d heartbeats with no write changed their results at the clock, every one touched at its position; %d touches, %d of them explained by no such step",
		total.touchClockSubs, total.touchClockTxns, total.touchClockBeats, total.touchClockTouches, total.touchClockFalse)
	if total.compared == 0 {
		t.Fatalf("no result was compared")
	}
	if total.touchChanged == 0 && total.seeds >= diffCISeeds {
		t.Fatalf("no touch-mode subscription saw a change")
	}
	// A false touch costs a cache a read of PostgreSQL; a few are the
	// price of views re-reading their rows, many mean touches are
	// spent where nothing changed.
	if total.touches >= 50 && total.falseTouches*4 > total.touches {
		t.Errorf("%d of %d touches (over a quarter) were for transactions that left the result as it was", total.falseTouches, total.touches)
	}
	if total.touchClockTouches >= 50 && total.touchClockFalse*4 > total.touchClockTouches {
		t.Errorf("%d of %d touches of clocked touch-mode subscriptions (over a quarter) were for no step that changed the result", total.touchClockFalse, total.touchClockTouches)
	}
	if total.seeds >= diffCISeeds {
		// Coverage floors, about a third of what the CI seeds reach: a
		// regression that refuses (or ends) every query of a shape must
		// fail the run, not shrink it silently.
		count := func(sub string) int { return shapeCount(total.shapes, sub) }
		// Of the touch-mode subscriptions that are not clocked (those
		// have floors of their own).
		countTouch := func(sub string) int {
			n := 0
			for shape, c := range total.touchShapes {
				if strings.Contains(shape, sub) && !strings.Contains(shape, "+clock") {
					n += c
				}
			}
			return n
		}
		floors := []struct {
			what      string
			got, want int
		}{
			{"join results compared", count("join"), 35},
			{"results of queries with expressions compared", count("+expr"), 30},
			{"results of queries with a LIKE of a 3-byte literal compared", count("+like"), 8},
			{"results of queries routed by the LIKE index alone (likeix) compared", count("likeix"), 55},
			{"likeix results compared after a delta (rows the LIKE index routed)", total.likeDeltas, 30},
			{"transactions that changed a likeix touch-mode result", total.touchLikeChanged, 15},
			{"results of windows (ORDER BY ... LIMIT) compared", count("+limit"), 35},
			{"counts compared", total.counts, 25},
			{"aggregate results compared", count("agg"), 18},
			{"grouped aggregate results compared", count("+group"), 8},
			{"aggregate results over joins compared", count("agg+join"), 7},
			{"SELECT DISTINCT results compared", count("distinct") - count("distinct-on"), 6},
			{"SELECT DISTINCT ON results compared", count("distinct-on"), 7},
			{"DISTINCT and DISTINCT ON touch-mode subscriptions checked", countTouch("distinct"), 1},
			{"ordered results compared", total.ordered, 55},
			{"results of queries with binary binds compared", total.binary, 15},
			{"results of IN (subquery) queries compared", count("+in"), 12},
			{"results of NOT IN (subquery) queries compared", count("+notin"), 11},
			{"touch-mode subscriptions checked", total.touchSubs, 13},
			{"transactions that changed an IN or NOT IN (subquery) touch-mode result", total.touchInChanged, 8},
			{"transactions that changed a touch-mode result", total.touchChanged, 35},
			{"client states compared at acknowledged positions", total.passed, 2000},
			{"clocked (now()) subscriptions' results compared", count("+clock"), 30},
			{"clocked client states compared at the clock they carry", total.clocked, 35},
			{"clocked client states compared after a delta (rows the clock passed)", total.clockDeltas, 5},
			{"clocked touch-mode subscriptions checked", total.touchClockSubs, 14},
			{"transactions that changed a clocked touch-mode result at its clock", total.touchClockTxns, 30},
			{"heartbeats with no write whose clock changed a touch-mode result", total.touchClockBeats, 5},
		}
		for _, f := range floors {
			if f.got < f.want {
				t.Errorf("coverage floor: %d %s over %d seeds, want at least %d (is a whole shape refused or ended?)", f.got, f.what, total.seeds, f.want)
			}
		}
	}
}

// diffTotals are counters over every seed, to show what was covered.
type diffTotals struct {
	seeds, subs, compared, ordered, counts, commits, rollbacks int
	touchSubs, touchChanged, touches, falseTouches             int
	touchInChanged                                             int // touchChanged of IN (subquery) queries
	touchLikeChanged                                           int // touchChanged of likeix queries
	likeDeltas                                                 int // likeix results compared after a Delta
	binary                                                     int // compared results of queries with a binary bind
	passed                                                     int // client states compared at acknowledged positions
	clocked                                                    int // clocked client states compared at their clocks
	clockDeltas                                                int // of which after a Delta
	// Clocked touch-mode subscriptions checked; of the steps that changed
	// their results (each touched), commits and heartbeats with no write;
	// their touches, and those no such step explains.
	touchClockSubs, touchClockTxns, touchClockBeats int
	touchClockTouches, touchClockFalse              int
	refused, ended, shapes, ddl                     map[string]int
	touchShapes                                     map[string]int // touch-mode subscriptions checked, by shape
}

// shapeCount is how many of shapes' counts are of shapes naming sub.
func shapeCount(shapes map[string]int, sub string) int {
	n := 0
	for shape, c := range shapes {
		if strings.Contains(shape, sub) {
			n += c
		}
	}
	return n
}

// dcol is a column of a generated table.
type dcol struct {
	name     string
	typ      string // SQL type name
	oid      uint32
	notNull  bool
	values   []string // the text forms values are drawn from
	ordering bool     // < > BETWEEN apply
	text     bool     // LIKE applies
	boolean  bool
	// noEq: only IS NULL tests and output (json has no = operator; the
	// query layer refuses comparing and ordering arrays and jsonb).
	noEq bool
	// binary encodes a value's text form in PostgreSQL's binary format,
	// for binds (nil: binds of the type are sent as text).
	binary func(v string) []byte
}

// dtable is a generated table: k (int4) first, then maybe k2 (text) in the
// primary key, r (int4, a reference to some table's k), then random
// columns.
type dtable struct {
	name string
	cols []dcol
	pk   []string
}

func (tb *dtable) col(name string) *dcol {
	for i := range tb.cols {
		if tb.cols[i].name == name {
			return &tb.cols[i]
		}
	}
	return nil
}

// diffTypes are the column types tables are made of, each with the values
// drawn for it: few, so filters and joins match often.
func diffTypes(long string) []dcol {
	return []dcol{
		{typ: "int4", oid: 23, values: []string{"-3", "0", "1", "2", "3", "5", "7", "10", "12"}, ordering: true, binary: binInt(32)},
		{typ: "int8", oid: 20, values: []string{"-9223372036854775808", "0", "1", "2", "5", "9007199254740993", "11"}, ordering: true, binary: binInt(64)},
		{typ: "numeric", oid: 1700, values: []string{"0", "1.5", "1.50", "-2.25", "10", "3.14159", "100000000000000000000.1", "NaN", "2"}, ordering: true},
		{typ: "text", oid: 25, values: []string{"", "a", "ab", "B", "abc", "a%b", "a_c", "z", "é", "Ab", "ß", long}, ordering: true, text: true, binary: binText},
		{typ: "bool", oid: 16, values: []string{"true", "false"}, boolean: true, binary: binBool},
		{typ: "timestamptz", oid: 1184, values: []string{"2024-01-01 00:00:00+00", "2024-01-01 12:30:00.5+00", "2023-12-31 23:59:59.999999+00", "infinity", "-infinity", "2024-06-01 00:00:00+02"}, ordering: true},
		{typ: "date", oid: 1082, values: []string{"2024-01-01", "2024-02-29", "1999-12-31", "infinity", "2024-01-02"}, ordering: true},
		{typ: "float8", oid: 701, values: []string{"0", "-0", "1.5", "2", "1e-10", "-3.25", "Infinity", "NaN"}, ordering: true, binary: binFloat8},
		{typ: "uuid", oid: 2950, values: []string{"00000000-0000-0000-0000-000000000001", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "ffffffff-ffff-ffff-ffff-ffffffffffff"}, ordering: true, binary: binUUID},
		{typ: "varchar(12)", oid: 1043, values: []string{"", "a", "ab", "B", "a%b", "é", "Ab", "zz top"}, ordering: true, text: true, binary: binText},
		{typ: "jsonb", oid: 3802, values: []string{`{"a": 1}`, `[]`, `null`, `"x"`, `{"b": [1, 2]}`, `1.50`, `1.5`, `{}`}, noEq: true, binary: binJSONB},
		{typ: "json", oid: 114, values: []string{`{"a":1}`, `{"a": 1}`, `[1, 2]`, `"x"`}, noEq: true},
		{typ: "int4[]", oid: 1007, values: []string{"{}", "{1,2}", "{2}", "{NULL}", "{1,2,3}", "{-3}"}, noEq: true},
		{typ: "text[]", oid: 1009, values: []string{"{}", "{a}", "{a,b}", `{"",NULL}`, "{é}"}, noEq: true},
		{typ: "bytea", oid: 17, values: []string{`\x`, `\x00`, `\xdeadbeef`, `\x61`, `\x6162`}, ordering: true, binary: binBytea},
		{typ: "interval", oid: 1186, values: []string{"1 mon", "30 days", "1 day", "24:00:00", "-1 day", "0", "1 year 2 mons 3 days 04:05:06.789"}, ordering: true},
	}
}

// Binary encodings of values' text forms, for binary-format binds.
func binInt(bits int) func(string) []byte {
	return func(v string) []byte {
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			panic(err)
		}
		b := make([]byte, bits/8)
		for i := range b {
			b[len(b)-1-i] = byte(n >> (8 * i))
		}
		return b
	}
}

func binText(v string) []byte { return []byte(v) }

func binBool(v string) []byte {
	if v == "true" {
		return []byte{1}
	}
	return []byte{0}
}

func binFloat8(v string) []byte {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		panic(err)
	}
	return binary.BigEndian.AppendUint64(nil, math.Float64bits(f))
}

func binUUID(v string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(v, "-", ""))
	if err != nil {
		panic(err)
	}
	return b
}

func binBytea(v string) []byte {
	b, err := hex.DecodeString(strings.TrimPrefix(v, `\x`))
	if err != nil {
		panic(err)
	}
	return b
}

func binJSONB(v string) []byte { return append([]byte{1}, v...) }

// dgen generates one seed's schema, queries and writes.
type dgen struct {
	rng    *rand.Rand
	tables []*dtable
	types  []dcol // what columns are made of
	nextC  int    // the number of the next column added
	// crng draws what concerns the clock (ts values, clocked queries),
	// apart from rng so that the seeds' other draws stay as they were.
	crng *rand.Rand
	// tcrng draws the clocked touch-mode queries, apart from both.
	tcrng *rand.Rand
	// clock: the query being drawn ANDs a condition on s0.ts with the
	// database's clock (a "+clock" shape, clockCond).
	clock bool
	// lrng draws what concerns the LIKE index (lk values, "likeix"
	// queries), apart from rng so that the seeds' other draws stay as
	// they were.
	lrng *rand.Rand
}

func newDgen(seed uint64) *dgen {
	g := &dgen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), crng: rand.New(rand.NewPCG(seed^0x5bd1e995, seed)),
		tcrng: rand.New(rand.NewPCG(seed^0x27d4eb2f, seed^0x165667b1)),
		lrng:  rand.New(rand.NewPCG(seed^0x85ebca6b, seed+1))}
	var lb strings.Builder
	for range 3000 {
		lb.WriteByte(byte('a' + g.rng.IntN(26)))
	}
	types := diffTypes(lb.String())
	g.types = types
	g.nextC = 10
	for i := range 2 + g.rng.IntN(2) {
		tb := &dtable{name: fmt.Sprintf("t%d", i)}
		keys := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17", "18", "19", "20"}
		tb.cols = append(tb.cols, dcol{name: "k", typ: "int4", oid: 23, notNull: true, values: keys, ordering: true})
		tb.pk = []string{"k"}
		if g.rng.IntN(2) == 0 {
			tb.cols = append(tb.cols, dcol{name: "k2", typ: "text", oid: 25, notNull: true, values: []string{"a", "b", "c"}, ordering: true, text: true})
			tb.pk = append(tb.pk, "k2")
		}
		tb.cols = append(tb.cols, dcol{name: "r", typ: "int4", oid: 23, values: keys[:12], ordering: true})
		for j := range 2 + g.rng.IntN(4) {
			c := types[g.rng.IntN(len(types))]
			c.name = fmt.Sprintf("c%d", j+1)
			c.notNull = g.rng.IntN(3) == 0
			tb.cols = append(tb.cols, c)
		}
		g.tables = append(g.tables, tb)
	}
	return g
}

func (g *dgen) pick(vs []string) string { return vs[g.rng.IntN(len(vs))] }

func lit(c *dcol, v string) string {
	return "'" + strings.ReplaceAll(v, "'", "''") + "'::" + c.typ
}

// value is a literal for c (NULL sometimes when c allows it).
func (g *dgen) value(c *dcol) string {
	if !c.notNull && g.rng.IntN(5) == 0 {
		return "NULL"
	}
	return lit(c, g.pick(c.values))
}

func (g *dgen) ddl() string {
	var b strings.Builder
	for _, tb := range g.tables {
		b.WriteString(tb.create())
	}
	return b.String()
}

// create is the table's CREATE TABLE.
func (tb *dtable) create() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (", tb.name)
	for _, c := range tb.cols {
		fmt.Fprintf(&b, "%s %s%s, ", c.name, c.typ, map[bool]string{true: " NOT NULL"}[c.notNull])
	}
	// ts: near the database's clock at write time (dgen.tsValue), so that
	// the clock passes rows during the run; clocked queries compare it
	// with now(). It is not among cols: queries other than clocked ones
	// see it only in SELECT *.
	b.WriteString("ts timestamptz, ")
	// lk: text that LIKE patterns with a literal run of 3 bytes or more
	// match often (dgen.lkValue), for the likeix queries, which the
	// engine routes by its LIKE index alone. Not among cols either.
	b.WriteString("lk text, ")
	fmt.Fprintf(&b, "PRIMARY KEY (%s));\n", strings.Join(tb.pk, ", "))
	return b.String()
}

// schemaChange returns a DDL statement changing a random table, and
// changes the model to match: a column added, dropped or retyped, or the
// table dropped and made again (empty, with a new OID). Key columns and
// r (which joins use) are left alone. kind names it, for the totals.
func (g *dgen) schemaChange() (sql, kind string) {
	tb := g.tables[g.rng.IntN(len(g.tables))]
	var free []int // the columns that may change
	for i, c := range tb.cols {
		if strings.HasPrefix(c.name, "c") {
			free = append(free, i)
		}
	}
	n := g.rng.IntN(4)
	if len(free) == 0 && (n == 1 || n == 2) {
		n = 0
	}
	switch n {
	case 0:
		c := g.types[g.rng.IntN(len(g.types))]
		c.name = fmt.Sprintf("c%d", g.nextC)
		g.nextC++
		tb.cols = append(tb.cols, c)
		return fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", tb.name, c.name, c.typ), "add column"
	case 1:
		i := free[g.rng.IntN(len(free))]
		name := tb.cols[i].name
		tb.cols = slices.Delete(tb.cols, i, i+1)
		return fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", tb.name, name), "drop column"
	case 2:
		c := &tb.cols[free[g.rng.IntN(len(free))]]
		if c.typ == "int4" {
			c.typ, c.oid, c.binary = "int8", 20, binInt(64)
			return fmt.Sprintf("ALTER TABLE %s ALTER %s TYPE int8", tb.name, c.name), "retype column"
		}
		sql := fmt.Sprintf("ALTER TABLE %s ALTER %s TYPE text USING %s::text", tb.name, c.name, c.name)
		c.typ, c.oid, c.ordering, c.text, c.boolean, c.noEq, c.binary = "text", 25, true, true, false, false, binText
		return sql, "retype column"
	}
	return "DROP TABLE " + tb.name + "; " + strings.TrimSuffix(tb.create(), ";\n"), "drop and make again"
}

// --- queries

// dquery is a generated subscription: its SQL and binds, and the
// reference query PostgreSQL answers for comparison.
type dquery struct {
	sql     string
	ref     string
	binds   []query.Bind
	ordered bool
	shape   string
	tables  []string // the tables it reads
	// clock: it compares s0.ts with now() ("+clock"): its answer is the
	// query at the clock its client state carries (Output.Clock).
	clock bool
}

// binary reports whether a bind of the query is in binary format.
func (dq *dquery) binary() bool {
	for _, b := range dq.binds {
		if b.Format == query.FormatBinary {
			return true
		}
	}
	return false
}

// dsrc is a table in a query's FROM.
type dsrc struct {
	tb    *dtable
	alias string
}

type qbuilder struct {
	g     *dgen
	srcs  []dsrc
	binds []query.Bind
	like  bool // a LIKE pattern with a literal run of 3 bytes or more was drawn
}

// operand is a value for column c: a literal, or a bind.
func (q *qbuilder) operand(c *dcol) string {
	v := q.g.pick(c.values)
	if q.g.rng.IntN(3) == 0 {
		oid := c.oid
		if q.g.rng.IntN(3) == 0 {
			oid = 0 // inferred from the column, as PostgreSQL would
		}
		b := query.Bind{OID: oid, Format: query.FormatText, Data: []byte(v)}
		if c.binary != nil && q.g.rng.IntN(2) == 0 {
			b.Format, b.Data = query.FormatBinary, c.binary(v)
		}
		q.binds = append(q.binds, b)
		return fmt.Sprintf("$%d", len(q.binds))
	}
	return lit(c, v)
}

// column picks a column of one of the sources.
func (q *qbuilder) column() (string, *dcol) {
	s := q.srcs[q.g.rng.IntN(len(q.srcs))]
	c := &s.tb.cols[q.g.rng.IntN(len(s.tb.cols))]
	return s.alias + "." + c.name, c
}

// dexpr is an expression over one column: its SQL, whether ORDER BY and
// ordering comparisons apply to it, and a constant to compare it with.
type dexpr struct {
	sql, cmp  string
	orderable bool
}

// expression draws an expression over a column of one of the sources,
// from those PostgreSQL evaluates without an error on every value the
// run writes (an error would end the subscription, eval_error, which
// the run must not see): arithmetic on small numbers, string functions,
// CASE, COALESCE, casts, date functions, jsonb and array access.
func (q *qbuilder) expression() dexpr {
	g := q.g
	for {
		name, c := q.column()
		pick := func(es ...dexpr) dexpr { return es[g.rng.IntN(len(es))] }
		switch c.typ {
		case "int4":
			return pick(dexpr{name + " * 2 + 1", "5", true}, dexpr{name + " % 3", "1", true}, dexpr{"- " + name, "-2", true},
				dexpr{"CASE WHEN " + name + " > 2 THEN " + name + " ELSE 0 END", "3", true}, dexpr{"COALESCE(" + name + ", -1)", "-1", true},
				dexpr{name + "::text", "'1'", true}, dexpr{"GREATEST(" + name + ", 2)", "2", true}, dexpr{"NULLIF(" + name + ", 0)", "1", true})
		case "int8":
			return pick(dexpr{name + " / 2", "0", true}, dexpr{"COALESCE(" + name + ", 0)", "1", true}, dexpr{name + "::numeric * 2", "4", true})
		case "numeric":
			return pick(dexpr{name + " * 2", "3.00", true}, dexpr{name + " + 1.5", "3", true}, dexpr{name + " / 3", "0.5", true},
				dexpr{name + "::numeric(40,1)", "1.5", true})
		case "float8":
			return pick(dexpr{name + " * 2", "3", true}, dexpr{name + " + 1", "2.5", true}, dexpr{name + "::numeric", "1.5", true})
		case "text", "varchar(12)":
			return pick(dexpr{"lower(" + name + ")", "'ab'", true}, dexpr{"upper(" + name + ")", "'AB'", true}, dexpr{name + " || 'x'", "'ax'", true},
				dexpr{"length(" + name + ")", "2", true}, dexpr{"substr(" + name + ", 2, 2)", "'b'", true}, dexpr{"COALESCE(" + name + ", '-')", "'-'", true},
				dexpr{"left(" + name + ", 1)", "'a'", true}, dexpr{"starts_with(" + name + ", 'a')", "true", false},
				dexpr{"CASE WHEN " + name + " LIKE 'a%' THEN 'A' ELSE " + name + " END", "'A'", true})
		case "bool":
			return pick(dexpr{"CASE WHEN " + name + " THEN 1 ELSE 0 END", "1", true}, dexpr{"COALESCE(" + name + ", false)", "true", false})
		case "timestamptz":
			return pick(dexpr{"date_trunc('day', " + name + ")", "'2024-01-01 00:00:00+00'", true}, dexpr{"extract(year from " + name + ")", "2024", true},
				dexpr{"date_part('hour', " + name + ")", "0", true})
		case "date":
			return pick(dexpr{"extract(dow from " + name + ")", "1", true}, dexpr{"date_trunc('month', " + name + ")", "'2024-01-01 00:00:00+00'", true})
		case "uuid":
			return dexpr{name + "::text", "'a'", true}
		case "jsonb":
			return pick(dexpr{name + " ->> 'a'", "'1'", true}, dexpr{name + " -> 'b'", "", false}, dexpr{name + " ? 'a'", "true", false},
				dexpr{name + " @> '{\"a\": 1}'", "true", false}, dexpr{name + " #>> '{b,0}'", "'1'", true})
		case "int4[]", "text[]":
			return pick(dexpr{"cardinality(" + name + ")", "1", true}, dexpr{"array_length(" + name + ", 1)", "2", true})
		}
	}
}

// orderColumn picks a column ORDER BY can sort by.
func (q *qbuilder) orderColumn() string {
	for {
		if name, c := q.column(); !c.noEq {
			return name
		}
	}
}

// pred generates a filter.
func (q *qbuilder) pred(depth int) string {
	g := q.g
	if depth > 0 && g.rng.IntN(3) > 0 {
		switch g.rng.IntN(5) {
		case 0, 1:
			return "(" + q.pred(depth-1) + " AND " + q.pred(depth-1) + ")"
		case 2, 3:
			return "(" + q.pred(depth-1) + " OR " + q.pred(depth-1) + ")"
		default:
			return "NOT (" + q.pred(depth-1) + ")"
		}
	}
	name, c := q.column()
	if c.noEq {
		return name + " IS " + map[bool]string{true: "NOT "}[g.rng.IntN(2) == 0] + "NULL"
	}
	switch k := g.rng.IntN(12); {
	case c.boolean && k < 3:
		return []string{name, "NOT " + name, name + " IS TRUE", name + " IS NOT FALSE", name + " IS UNKNOWN"}[g.rng.IntN(5)]
	case c.text && (k == 3 || k == 8):
		return q.likePred(name)
	case k < 4:
		ops := []string{"=", "<>"}
		if c.ordering {
			ops = append(ops, "<", "<=", ">", ">=")
		}
		return name + " " + g.pick(ops) + " " + q.operand(c)
	case k < 5 && c.ordering:
		not := map[bool]string{true: "NOT "}[g.rng.IntN(4) == 0]
		return name + " " + not + "BETWEEN " + q.operand(c) + " AND " + q.operand(c)
	case k < 7:
		var items []string
		for range 1 + g.rng.IntN(4) {
			items = append(items, q.operand(c))
		}
		if g.rng.IntN(8) == 0 {
			items = append(items, "NULL")
		}
		not := map[bool]string{true: "NOT "}[g.rng.IntN(3) == 0]
		return name + " " + not + "IN (" + strings.Join(items, ", ") + ")"
	case k < 8:
		return name + " IS " + map[bool]string{true: "NOT "}[g.rng.IntN(2) == 0] + "NULL"
	case k < 10:
		return name + " IS " + map[bool]string{true: "NOT "}[g.rng.IntN(2) == 0] + "DISTINCT FROM " + q.operand(c)
	case k < 11 && (c.typ == "int4" || c.typ == "text"):
		var items []string
		for range g.rng.IntN(4) {
			v := g.pick(c.values)
			items = append(items, `"`+strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v)+`"`)
		}
		oid := uint32(1007)
		if c.typ == "text" {
			oid = 1009
		}
		q.binds = append(q.binds, query.Bind{OID: oid, Format: query.FormatText, Data: []byte("{" + strings.Join(items, ",") + "}")})
		return fmt.Sprintf("%s = ANY($%d)", name, len(q.binds))
	}
	return name + " = " + q.operand(c)
}

// likePred is a LIKE condition on a text column.
func (q *qbuilder) likePred(name string) string {
	g := q.g
	// The later patterns have a literal run of three bytes or more,
	// which the engine's LIKE index routes by (core_route.go).
	pats := []string{"a%", "%b", "_", "a\\_%", "%", "%é%", "A%", "%c",
		"%abc%", "%ABC%", "a\\_c%", "%a\\%b", "%zz top%", "_abc%", "%Ab_%abc%"}
	op := g.pick([]string{"LIKE", "NOT LIKE", "LIKE", "ILIKE", "~~", "~~*", "ILIKE"})
	pat := g.pick(pats)
	if slices.Index(pats, pat) >= 8 {
		q.like = true
	}
	return name + " " + op + " '" + pat + "'"
}

// keyPred constrains a join column (k or r, int4) of one of the sources to
// a value or a short list, maybe NULL too.
func (q *qbuilder) keyPred() string {
	g := q.g
	s := q.srcs[g.rng.IntN(len(q.srcs))]
	c := s.tb.col(g.pick([]string{"k", "k", "r"}))
	name := s.alias + "." + c.name
	switch g.rng.IntN(4) {
	case 0:
		items := []string{q.operand(c), q.operand(c)}
		if g.rng.IntN(3) == 0 {
			items = append(items, "NULL")
		}
		return name + " IN (" + strings.Join(items, ", ") + ")"
	case 1:
		return "(" + name + " = " + q.operand(c) + " OR " + name + " IS NULL)"
	}
	return name + " = " + q.operand(c)
}

// inSubquery draws an uncorrelated IN or NOT IN (subquery) condition on
// a join column (k or r, int4) of one of the sources ("+in" and "+notin"
// shapes): the subquery reads one table (maybe one of the sources' own,
// under its own alias), outputs its k or r (duplicates and NULLs among
// them), maybe with DISTINCT, and filters by a predicate over its own
// columns, or none. It returns the condition, the table it reads and its
// shape.
func (q *qbuilder) inSubquery() (string, *dtable, string) {
	g := q.g
	s := q.srcs[g.rng.IntN(len(q.srcs))]
	outer := s.alias + "." + g.pick([]string{"k", "r"})
	tb := g.tables[g.rng.IntN(len(g.tables))]
	sub := &qbuilder{g: g, srcs: []dsrc{{tb: tb, alias: "sq"}}, binds: q.binds}
	where := ""
	if g.rng.IntN(4) > 0 {
		where = " WHERE " + sub.pred(1)
	}
	q.binds = sub.binds
	op := g.pick([]string{"IN", "IN", "= ANY", "NOT IN", "NOT IN", "<> ALL"})
	shape := "+in"
	if op == "NOT IN" || op == "<> ALL" {
		shape = "+notin"
	}
	return fmt.Sprintf("%s %s (SELECT %ssq.%s FROM %s sq%s)", outer, op,
		g.pick([]string{"", "", "DISTINCT "}), g.pick([]string{"k", "r", "r"}), tb.name, where), tb, shape
}

// withSubquery adds an IN (subquery) condition to a WHERE clause (" WHERE
// ..." or ""), ANDed with all of it.
func (q *qbuilder) withSubquery(where string) (string, *dtable, string) {
	cond, tb, shape := q.inSubquery()
	if where == "" {
		return " WHERE " + cond, tb, shape
	}
	return " WHERE " + cond + " AND (" + where[len(" WHERE "):] + ")", tb, shape
}

// joinOn links source i to an earlier one; "" when none fits.
func (q *qbuilder) joinOn(i int) string {
	b := q.srcs[i]
	a := q.srcs[q.g.rng.IntN(i)]
	switch q.g.rng.IntN(3) {
	case 0:
		return fmt.Sprintf("%s.r = %s.k", b.alias, a.alias)
	case 1:
		return fmt.Sprintf("%s.k = %s.r", b.alias, a.alias)
	}
	on := fmt.Sprintf("%s.k = %s.k", b.alias, a.alias)
	if b.tb.col("k2") != nil && a.tb.col("k2") != nil {
		on += fmt.Sprintf(" AND %s.k2 = %s.k2", b.alias, a.alias)
	}
	return on
}

func (g *dgen) query() dquery {
	q := &qbuilder{g: g}
	nsrc := 1
	if diffJoins && !g.clock && g.rng.IntN(3) == 0 {
		nsrc = 2 + g.rng.IntN(2)
	}
	var from strings.Builder
	var kinds []string
	for i := range nsrc {
		tb := g.tables[g.rng.IntN(len(g.tables))]
		q.srcs = append(q.srcs, dsrc{tb: tb, alias: fmt.Sprintf("s%d", i)})
		if i == 0 {
			fmt.Fprintf(&from, "%s s0", tb.name)
			continue
		}
		kind := g.pick([]string{"JOIN", "LEFT JOIN"})
		kinds = append(kinds, kind)
		fmt.Fprintf(&from, " %s %s s%d ON %s", kind, tb.name, i, q.joinOn(i))
	}
	shape := "filter"
	if nsrc > 1 {
		shape = "join"
	}

	if g.rng.IntN(6) == 0 {
		return q.aggregate(from.String())
	}
	if g.rng.IntN(6) == 0 {
		return q.distinct(from.String())
	}
	count := g.rng.IntN(6) == 0
	var targets []string
	if count {
		targets = []string{"count(*)"}
		shape += "+count"
	} else if g.rng.IntN(5) == 0 {
		targets = []string{"*"}
	} else {
		for range 1 + g.rng.IntN(4) {
			name, _ := q.column()
			if g.rng.IntN(4) == 0 {
				name += fmt.Sprintf(" AS out%d", len(targets))
			}
			targets = append(targets, name)
		}
	}
	exprs := diffExprs && g.rng.IntN(3) == 0
	if exprs && !count {
		// Computed outputs.
		for range 1 + g.rng.IntN(2) {
			targets = append(targets, fmt.Sprintf("%s AS e%d", q.expression().sql, len(targets)))
		}
	}
	where := ""
	if g.rng.IntN(7) > 0 {
		where = " WHERE " + q.pred(2)
	}
	if exprs && g.rng.IntN(2) == 0 {
		// A condition on an expression.
		var e dexpr
		for e.cmp == "" {
			e = q.expression()
		}
		op := "="
		if e.orderable {
			op = g.pick([]string{"=", "<>", "<", ">=", "IS DISTINCT FROM"})
		}
		cond := e.sql + " " + op + " " + e.cmp
		if where == "" {
			where = " WHERE " + cond
		} else {
			where += " AND " + cond
		}
	}
	if g.rng.IntN(2) == 0 {
		// A LIKE on a text column, ANDed: the LIKE index routes such
		// views (TestDifferential's "+like" floor).
		for range 8 {
			if name, c := q.column(); c.text {
				if where == "" {
					where = " WHERE " + q.likePred(name)
				} else {
					where += " AND " + q.likePred(name)
				}
				break
			}
		}
	}
	if exprs {
		shape += "+expr"
	}
	if q.like {
		shape += "+like"
	}
	if nsrc > 1 && g.rng.IntN(2) == 0 {
		// A lookup by a join column (the ORM's "this parent and its
		// children"): the ON equalities carry its values to the other
		// sources.
		key := q.keyPred()
		if where == "" {
			where = " WHERE " + key
		} else {
			where = " WHERE " + key + " AND (" + where[len(" WHERE "):] + ")"
		}
		shape += "+key"
	}
	var subTables []*dtable
	if diffSubqueries && !g.clock && g.rng.IntN(4) == 0 {
		var tb *dtable
		var sub string
		where, tb, sub = q.withSubquery(where)
		subTables = append(subTables, tb)
		shape += sub
	}
	var order []string
	limit, offset := "", ""
	if !count && g.rng.IntN(2) == 0 {
		for range 1 + g.rng.IntN(2) {
			name := q.orderColumn()
			if exprs && g.rng.IntN(2) == 0 {
				// An expression key (one ORDER BY can sort by).
				for e := q.expression(); ; e = q.expression() {
					if e.orderable {
						name = e.sql
						break
					}
				}
			}
			dir := g.pick([]string{"", " ASC", " DESC"})
			nulls := g.pick([]string{"", "", " NULLS FIRST", " NULLS LAST"})
			order = append(order, name+dir+nulls)
		}
		shape += "+order"
		if g.rng.IntN(5) < 3 {
			limit = " LIMIT " + q.count(g.windowCount())
			shape += "+limit"
			if g.rng.IntN(2) == 0 {
				offset = " OFFSET " + q.count(g.windowCount())
			}
		}
	}
	where = q.andClock(where, len(order) == 0)
	sel := "SELECT " + strings.Join(targets, ", ") + " FROM " + from.String() + where
	dq := dquery{binds: q.binds, shape: shape, ordered: len(order) > 0}
	for _, src := range q.srcs {
		if !slices.Contains(dq.tables, src.tb.name) {
			dq.tables = append(dq.tables, src.tb.name)
		}
	}
	for _, tb := range subTables {
		if !slices.Contains(dq.tables, tb.name) {
			dq.tables = append(dq.tables, tb.name)
		}
	}
	dq.sql = sel
	dq.ref = sel
	if len(order) > 0 {
		ob := " ORDER BY " + strings.Join(order, ", ")
		dq.sql += ob + limit + offset
		// The reference adds each row's tie group and, under a LIMIT,
		// breaks ties by the sources' primary keys as the engine's
		// windows do.
		ties := ""
		if limit != "" {
			for _, s := range q.srcs {
				for _, k := range s.tb.pk {
					ties += ", " + s.alias + "." + k + " ASC NULLS LAST"
				}
			}
		}
		dq.ref = "SELECT " + strings.Join(targets, ", ") + ", dense_rank() OVER (" + ob[1:] + ") FROM " + from.String() + where +
			ob + ties + limit + offset
	}
	return dq
}

// aggregate draws an aggregating query of the sources ("agg" shapes,
// "agg+join" over a join):
// aggregates beside each other or grouped by one or two columns, maybe
// HAVING, maybe ordered by an aggregate and every key (a total order)
// with a LIMIT. It keeps to what PostgreSQL answers independently of row
// order: no min/max of numeric or float8 (their generated values include
// equal ones that print differently: 1.5 and 1.50, 0 and -0), no sum/avg
// of floats (refused), no keys of those types; likewise interval ('1 day'
// and '24:00:00').
func (q *qbuilder) aggregate(from string) dquery {
	g := q.g
	shape := "agg"
	if len(q.srcs) > 1 {
		shape += "+join"
	}
	// col draws a column of one of the sources, with its qualified name.
	col := func() (*dcol, string) {
		s := q.srcs[g.rng.IntN(len(q.srcs))]
		c := &s.tb.cols[g.rng.IntN(len(s.tb.cols))]
		return c, s.alias + "." + c.name
	}
	var keys []string
	keyOrderable := true
	for range g.rng.IntN(3) {
		c, name := col()
		switch c.typ {
		case "int4", "int8", "text", "bool", "date", "timestamptz", "uuid", "varchar(12)", "bytea":
		default:
			continue
		}
		if slices.Contains(keys, name) {
			continue
		}
		keys = append(keys, name)
		keyOrderable = keyOrderable && c.ordering
	}
	if len(keys) > 0 {
		shape += "+group"
	}
	var aggs []string
	for range 1 + g.rng.IntN(4) {
		c, name := col()
		var opts []string
		switch c.typ {
		case "int4", "int8", "numeric":
			opts = append(opts, "sum", "avg")
		case "bool":
			opts = append(opts, "bool_and", "bool_or", "every")
		}
		switch {
		case c.ordering && c.typ != "numeric" && c.typ != "float8" && c.typ != "interval" && c.typ != "uuid" && c.typ != "bytea":
			opts = append(opts, "min", "max")
		}
		opts = append(opts, "count", "count(*)")
		if !c.noEq {
			opts = append(opts, "count distinct")
		}
		switch f := g.pick(opts); f {
		case "count(*)":
			aggs = append(aggs, "count(*)")
		case "count distinct":
			aggs = append(aggs, "count(DISTINCT "+name+")")
		default:
			aggs = append(aggs, f+"("+name+")")
		}
	}
	targets := append(slices.Clone(keys), aggs...)
	for i := range targets {
		targets[i] += fmt.Sprintf(" AS o%d", i)
	}
	where := ""
	if g.rng.IntN(3) > 0 {
		where = " WHERE " + q.pred(2)
	}
	var subTable *dtable
	if diffSubqueries && !g.clock && g.rng.IntN(4) == 0 {
		var sub string
		where, subTable, sub = q.withSubquery(where)
		shape += sub
	}
	where = q.andClock(where, true)
	group := ""
	if len(keys) > 0 {
		group = " GROUP BY " + strings.Join(keys, ", ")
	}
	if g.rng.IntN(3) == 0 {
		group += g.pick([]string{" HAVING count(*) > 1", " HAVING count(*) < 3", " HAVING " + aggs[0] + " IS NOT NULL"})
		shape += "+having"
	}
	sel := "SELECT " + strings.Join(targets, ", ") + " FROM " + from + where + group
	dq := dquery{sql: sel, ref: sel, binds: q.binds}
	for _, src := range q.srcs {
		if !slices.Contains(dq.tables, src.tb.name) {
			dq.tables = append(dq.tables, src.tb.name)
		}
	}
	if subTable != nil && !slices.Contains(dq.tables, subTable.name) {
		dq.tables = append(dq.tables, subTable.name)
	}
	if len(keys) > 0 && keyOrderable && g.rng.IntN(2) == 0 {
		// A leaderboard: by an aggregate, then every key (groups are
		// unique by their keys, so the order is total).
		ob := " ORDER BY " + aggs[0] + g.pick([]string{" DESC NULLS LAST", "", " DESC"})
		for _, k := range keys {
			ob += ", " + k
		}
		limit := ""
		if g.rng.IntN(3) > 0 {
			limit = " LIMIT " + q.count(int64(g.rng.IntN(5)))
			shape += "+limit"
		}
		dq.binds = q.binds
		dq.sql = sel + ob + limit
		dq.ref = "SELECT " + strings.Join(targets, ", ") + ", dense_rank() OVER (" + ob[1:] + ") FROM " + from + where + group + ob + limit
		dq.ordered = true
		shape += "+order"
	}
	dq.shape = shape
	return dq
}

// distinct draws a SELECT DISTINCT ("distinct" shapes) or a SELECT
// DISTINCT ON ("distinct-on"), "+join" over a join. DISTINCT's outputs
// are columns of types whose equal values print alike (as GROUP BY keys),
// maybe ordered by every output (a total order) with a LIMIT. DISTINCT
// ON's expressions are such columns too, its ORDER BY starts with them
// (in any order and direction) and either ends with every source's
// primary key (its outputs are then any columns) or shows only its
// DISTINCT ON and ORDER BY columns (tied rows show alike); a LIMIT may cut
// the groups.
func (q *qbuilder) distinct(from string) dquery {
	g := q.g
	col := func() (*dcol, string) {
		s := q.srcs[g.rng.IntN(len(q.srcs))]
		c := &s.tb.cols[g.rng.IntN(len(s.tb.cols))]
		return c, s.alias + "." + c.name
	}
	alike := func(c *dcol) bool {
		switch c.typ {
		case "int4", "int8", "text", "bool", "date", "timestamptz", "uuid", "varchar(12)", "bytea":
			return true
		}
		return false
	}
	// keys draws up to n distinct columns that print alike.
	keys := func(n int, orderable bool) []string {
		var out []string
		for range n * 3 {
			c, name := col()
			if !alike(c) || orderable && !c.ordering || slices.Contains(out, name) {
				continue
			}
			if out = append(out, name); len(out) == n {
				break
			}
		}
		return out
	}
	sort := func(name string) string {
		return name + g.pick([]string{"", " ASC", " DESC"}) + g.pick([]string{"", "", " NULLS FIRST", " NULLS LAST"})
	}
	where := ""
	if g.rng.IntN(3) > 0 {
		where = " WHERE " + q.pred(2)
	}
	where = q.andClock(where, false)
	join := ""
	if len(q.srcs) > 1 {
		join = "+join"
	}
	dq := dquery{binds: q.binds}
	for _, src := range q.srcs {
		if !slices.Contains(dq.tables, src.tb.name) {
			dq.tables = append(dq.tables, src.tb.name)
		}
	}
	limit := func() string {
		if g.rng.IntN(2) == 0 {
			return ""
		}
		dq.shape += "+limit"
		l := " LIMIT " + q.count(int64(g.rng.IntN(6)))
		if g.rng.IntN(3) == 0 {
			l += " OFFSET " + q.count(int64(g.rng.IntN(3)))
		}
		return l
	}
	if g.rng.IntN(2) == 0 {
		dq.shape = "distinct" + join
		outs := keys(1+g.rng.IntN(3), false)
		if len(outs) == 0 {
			outs = []string{q.srcs[0].alias + ".k"}
		}
		targets := slices.Clone(outs)
		for i := range targets {
			targets[i] += fmt.Sprintf(" AS o%d", i)
		}
		sel := "SELECT DISTINCT " + strings.Join(targets, ", ") + " FROM " + from + where
		dq.sql, dq.ref = sel, sel
		orderable := true
		for _, o := range outs {
			orderable = orderable && q.colOf(o).ordering
		}
		if orderable && g.rng.IntN(2) == 0 {
			// By every output, in any order: distinct rows never tie.
			var ob []string
			for _, i := range g.rng.Perm(len(outs)) {
				ob = append(ob, sort(outs[i]))
			}
			dq.shape += "+order"
			lim := limit()
			order := " ORDER BY " + strings.Join(ob, ", ")
			dq.sql = sel + order + lim
			dq.ref = "SELECT DISTINCT " + strings.Join(targets, ", ") + ", dense_rank() OVER (" + order[1:] + ") FROM " + from + where + order + lim
			dq.ordered = true
		}
		dq.binds = q.binds
		return dq
	}
	dq.shape = "distinct-on" + join
	on := keys(1+g.rng.IntN(2), true)
	if len(on) == 0 {
		on = []string{q.srcs[0].alias + ".k"}
	}
	var prefix []string
	for _, i := range g.rng.Perm(len(on)) {
		prefix = append(prefix, sort(on[i]))
	}
	order := slices.Clone(prefix)
	var outs []string
	if g.rng.IntN(4) > 0 {
		// Ends with every primary key: no two rows tie.
		// (A DISTINCT ON column again would be dropped: PostgreSQL drops
		// an ORDER BY item that repeats an earlier one.)
		for range g.rng.IntN(3) {
			if c := q.orderColumn(); !slices.Contains(on, c) {
				order = append(order, sort(c))
			}
		}
		for _, s := range q.srcs {
			for _, k := range s.tb.pk {
				if c := s.alias + "." + k; !slices.Contains(on, c) {
					order = append(order, sort(c))
				}
			}
		}
		for range 1 + g.rng.IntN(3) {
			_, name := col()
			outs = append(outs, name)
		}
	} else {
		// Shows only DISTINCT ON and ORDER BY columns that print alike.
		dq.shape += "+ties"
		more := keys(g.rng.IntN(3), true)
		for _, m := range more {
			if !slices.Contains(on, m) {
				order = append(order, sort(m))
			}
		}
		all := append(slices.Clone(on), more...)
		for range 1 + g.rng.IntN(3) {
			outs = append(outs, all[g.rng.IntN(len(all))])
		}
	}
	targets := slices.Clone(outs)
	for i := range targets {
		targets[i] += fmt.Sprintf(" AS o%d", i)
	}
	ob := " ORDER BY " + strings.Join(order, ", ")
	lim := limit()
	head := "SELECT DISTINCT ON (" + strings.Join(on, ", ") + ") " + strings.Join(targets, ", ")
	dq.sql = head + " FROM " + from + where + ob + lim
	// One row per group, the groups ordered by the DISTINCT ON prefix:
	// the rank by that prefix is the row's tie group.
	dq.ref = head + ", dense_rank() OVER (ORDER BY " + strings.Join(prefix, ", ") + ") FROM " + from + where + ob + lim
	dq.ordered = true
	dq.binds = q.binds
	return dq
}

// colOf returns the column a qualified name (alias.column) names.
func (q *qbuilder) colOf(name string) *dcol {
	alias, c, _ := strings.Cut(name, ".")
	for _, s := range q.srcs {
		if s.alias == alias {
			return s.tb.col(c)
		}
	}
	return nil
}

// windowCount draws a LIMIT or OFFSET from the whole range of bigint:
// mostly small (windows that move), sometimes hundreds, sometimes the
// extremes where OFFSET + LIMIT + the margin overflows.
func (g *dgen) windowCount() int64 {
	switch n := g.rng.IntN(20); {
	case n < 13:
		return int64(g.rng.IntN(12))
	case n < 16:
		return int64(12 + g.rng.IntN(1000))
	}
	return g.pickInt([]int64{1<<31 - 1, 1 << 31, 1 << 62, math.MaxInt64 - 32 - int64(g.rng.IntN(8)), math.MaxInt64 - 1, math.MaxInt64})
}

func (g *dgen) pickInt(vs []int64) int64 { return vs[g.rng.IntN(len(vs))] }

// count writes a LIMIT or OFFSET: a constant or an int8 bind (text or
// binary).
func (q *qbuilder) count(n int64) string {
	if q.g.rng.IntN(4) > 0 {
		return fmt.Sprint(n)
	}
	b := query.Bind{OID: 20, Format: query.FormatText, Data: []byte(fmt.Sprint(n))}
	if q.g.rng.IntN(2) == 0 {
		b.Format, b.Data = query.FormatBinary, binary.BigEndian.AppendUint64(nil, uint64(n))
	}
	q.binds = append(q.binds, b)
	return fmt.Sprintf("$%d", len(q.binds))
}

// --- writes

// write returns one statement changing a random table.
func (g *dgen) write() string {
	tb := g.tables[g.rng.IntN(len(g.tables))]
	k := tb.col("k")
	keyPred := func() string {
		switch g.rng.IntN(4) {
		case 0:
			return fmt.Sprintf("k BETWEEN %s AND %s", g.pick(k.values), g.pick(k.values))
		case 1:
			c := &tb.cols[g.rng.IntN(len(tb.cols))]
			if c.noEq {
				return c.name + " IS NULL"
			}
			return fmt.Sprintf("%s = %s", c.name, lit(c, g.pick(c.values)))
		}
		return "k = " + g.pick(k.values)
	}
	switch n := g.rng.IntN(20); {
	case n < 8:
		var rows []string
		names := []string{}
		for _, c := range tb.cols {
			names = append(names, c.name)
		}
		names = append(names, "ts", "lk")
		for range 1 + g.rng.IntN(3) {
			var vs []string
			for i := range tb.cols {
				vs = append(vs, g.value(&tb.cols[i]))
			}
			vs = append(vs, g.tsValue(), g.lkValue())
			rows = append(rows, "("+strings.Join(vs, ", ")+")")
		}
		return fmt.Sprintf("INSERT INTO %s (%s) VALUES %s ON CONFLICT DO NOTHING", tb.name, strings.Join(names, ", "), strings.Join(rows, ", "))
	case n < 13:
		var sets []string
		seen := map[string]bool{}
		for range 1 + g.rng.IntN(2) {
			c := &tb.cols[len(tb.pk)+g.rng.IntN(len(tb.cols)-len(tb.pk))]
			if !seen[c.name] {
				seen[c.name] = true
				sets = append(sets, c.name+" = "+g.value(c))
			}
		}
		if g.crng.IntN(3) == 0 {
			sets = append(sets, "ts = "+g.tsValue())
		}
		if g.lrng.IntN(2) == 0 {
			sets = append(sets, "lk = "+g.lkValue()) // a row in or out of likeix results
		}
		return fmt.Sprintf("UPDATE %s SET %s WHERE %s", tb.name, strings.Join(sets, ", "), keyPred())
	case n < 15:
		// A primary key change, only where the new key is free.
		from, to := g.pick(k.values), g.pick(k.values)
		if tb.col("k2") != nil {
			return fmt.Sprintf("UPDATE %[1]s t SET k = %[3]s WHERE k = %[2]s AND NOT EXISTS (SELECT 1 FROM %[1]s u WHERE u.k = %[3]s AND u.k2 = t.k2)", tb.name, from, to)
		}
		return fmt.Sprintf("UPDATE %[1]s SET k = %[3]s, r = %[4]s WHERE k = %[2]s AND NOT EXISTS (SELECT 1 FROM %[1]s u WHERE u.k = %[3]s)", tb.name, from, to, g.value(tb.col("r")))
	case n < 19:
		return fmt.Sprintf("DELETE FROM %s WHERE %s", tb.name, keyPred())
	}
	if g.rng.IntN(4) == 0 {
		return "TRUNCATE " + tb.name
	}
	if g.rng.IntN(3) == 0 {
		// Hundreds of changes to a few rows: a transaction the reader
		// splits into fragments (newRig sets 64 changes a fragment),
		// whose net effect is one delta.
		return fmt.Sprintf("DO $$ BEGIN FOR i IN 1..300 LOOP UPDATE %s SET r = i %% 13 WHERE k IN (%s, %s); END LOOP; END $$",
			tb.name, g.pick(k.values), g.pick(k.values))
	}
	return fmt.Sprintf("UPDATE %s SET r = r WHERE %s", tb.name, keyPred())
}

// tsValue is a value for a ts column: the database's clock at write
// time give or take 1.5 seconds (NULL sometimes), so that the clock passes
// rows while the run goes on.
func (g *dgen) tsValue() string {
	if g.crng.IntN(8) == 0 {
		return "NULL"
	}
	return fmt.Sprintf("now() + interval '%d milliseconds'", g.crng.IntN(3001)-1500)
}

// lkValues are the values of the lk columns: every likeix pattern
// matches some of them and misses the others, in either case, with
// multibyte text and the characters LIKE escapes.
var lkValues = []string{"abc", "xabcx", "ABC", "zAbCd", "a_c", "xa_cx", "a%b", "ba%bc", "zz top", "ZZ TOP!",
	"é abc", "É ABC", "ab", "", "bca", "abx"}

// lkValue is a value for an lk column (NULL sometimes).
func (g *dgen) lkValue() string {
	if g.lrng.IntN(6) == 0 {
		return "NULL"
	}
	return "'" + lkValues[g.lrng.IntN(len(lkValues))] + "'"
}

// likeQuery draws a likeix query: a filter, count or join whose only
// constraint on s0 is a LIKE, ILIKE, ~~ or ~~* of s0.lk with a literal
// run of 3 bytes or more (sometimes a bind; maybe ANDed with a second
// one, or with a range of s0.r, which the LIKE outranks), so that the
// engine routes s0's changes to its view by the LIKE index alone: a
// change the index does not find is a row missing from the result or
// left in it, or a touch missing.
func (g *dgen) likeQuery() dquery {
	rng := g.lrng
	pick := func(vs []string) string { return vs[rng.IntN(len(vs))] }
	q := &qbuilder{g: g}
	pats := []string{"%abc%", "abc%", "%abc", "_abc_", "%bca", "%ABC%", "ABC", "%b_%abc%", `a\_c%`, `%a\_c%`, `%a\%b%`,
		`ba\%b%`, "zz top", "%z top%", "ZZ T%", "%é abc", "%É ABC%", "é a%"}
	like := func() string {
		op, pat := pick([]string{"LIKE", "ILIKE", "~~", "~~*", "ILIKE"}), pick(pats)
		if rng.IntN(4) == 0 {
			q.binds = append(q.binds, query.Bind{OID: 25, Format: query.FormatText, Data: []byte(pat)})
			return fmt.Sprintf("s0.lk %s $%d", op, len(q.binds))
		}
		return "s0.lk " + op + " '" + pat + "'"
	}
	where := " WHERE " + like()
	switch rng.IntN(6) {
	case 0:
		where += " AND " + like()
	case 1:
		where += fmt.Sprintf(" AND s0.r %s %d", pick([]string{">", "<=", "<>"}), 1+rng.IntN(12))
	}
	tb := g.tables[rng.IntN(len(g.tables))]
	from, shape := tb.name+" s0", "likeix"
	targets := pick([]string{"s0.k, s0.lk", "*", "count(*)", "s0.lk, s0.r"})
	tables := []string{tb.name}
	if len(g.tables) > 1 && rng.IntN(4) == 0 {
		other := g.tables[rng.IntN(len(g.tables))]
		from += " JOIN " + other.name + " s1 ON s1.k = s0.r"
		targets = pick([]string{"s0.k, s0.lk, s1.k", "count(*)"})
		shape += "+join"
		if other != tb {
			tables = append(tables, other.name)
		}
	}
	if targets == "count(*)" {
		shape += "+count"
	}
	sel := "SELECT " + targets + " FROM " + from + where
	return dquery{sql: sel, ref: sel, binds: q.binds, shape: shape, tables: tables}
}

// deltas is how many Deltas rec holds.
func deltas(rec *recorder) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	n := 0
	for _, o := range rec.outs {
		if o.Kind == OutputDelta {
			n++
		}
	}
	return n
}

// clockCond is a condition of s0.ts on the database's clock in one of
// the forms the engine serves (query/clock.go): rows leave the result as
// the clock passes them (ts > now() - N) or, when enter, also enter it
// (ts < now() + N, BETWEEN) — a window refuses those (time_condition).
func (q *qbuilder) clockCond(enter bool) string {
	g := q.g
	fn := g.pick([]string{"now()", "CURRENT_TIMESTAMP", "transaction_timestamp()"})
	ms := func() string {
		return fmt.Sprintf("interval '%d milliseconds'", g.rng.IntN(1501))
	}
	if enter {
		switch g.rng.IntN(3) {
		case 0:
			return fmt.Sprintf("s0.ts %s %s + %s", g.pick([]string{"<", "<="}), fn, ms())
		case 1:
			return fmt.Sprintf("s0.ts BETWEEN %s - %s AND %s + %s", fn, ms(), fn, ms())
		}
	}
	return fmt.Sprintf("s0.ts %s %s - %s", g.pick([]string{">", ">="}), fn, ms())
}

// andClock ANDs a clock condition (clockCond) to where when the query
// being drawn is clocked.
func (q *qbuilder) andClock(where string, enter bool) string {
	if !q.g.clock {
		return where
	}
	if where == "" {
		return " WHERE " + q.clockCond(enter)
	}
	return " WHERE " + q.clockCond(enter) + " AND (" + where[len(" WHERE "):] + ")"
}

// txn returns one transaction: statements and whether it commits.
func (g *dgen) txn() ([]string, bool) {
	n := 1
	if g.rng.IntN(3) == 0 {
		n = 2 + g.rng.IntN(5)
	}
	var stmts []string
	for range n {
		stmts = append(stmts, g.write())
	}
	return stmts, g.rng.IntN(8) > 0
}

// --- the run

type dsub struct {
	q   dquery
	id  SubID
	rec *recorder
}

func runDifferential(t *testing.T, seed uint64, total *diffTotals) {
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d (rerun: go test ./engine/ -count=1 -run 'TestDifferential$' -args -diff.seed=%d -diff.v): %s", seed, seed, fmt.Sprintf(format, args...))
	}
	g := newDgen(seed)
	pw := &passWatch{}
	cl := &clockLog{}
	tap := &ackTap{onAck: func(lsn change.LSN) { pw.ack(lsn); cl.ack(lsn) }, onEvent: cl.event}
	r := newDiffRig(t, g.ddl(), Config{Source: tap, ReadConcurrency: 2, WindowMargin: 1 + g.rng.IntN(4), CatalogCheckInterval: 200 * time.Millisecond})
	pw.mu.Lock()
	pw.types = r.types
	pw.mu.Unlock()
	ctx := context.Background()
	// The tables a schema change touched: only their subscriptions may be
	// refused or ended (table_dropped, schema_changed).
	altered := map[string]bool{}
	// unexpected reports an ending no input of the run explains.
	pw.schemaChanged = func(tables []string) bool {
		for _, tb := range tables {
			if altered[tb] {
				return true
			}
		}
		return false
	}
	// A read_failed is explained only when a schema change touched the
	// query's tables and PostgreSQL now refuses the same query with the
	// same binds with the SQLSTATE the reason quotes (a column retyped to
	// text, where a binary int8 bind is invalid UTF-8: the engine compiled
	// the subscription again for the new shape, as PostgreSQL would plan it).
	unexpected := func(dq dquery, code query.Code, reason string) bool {
		if code != CodeTableDropped && code != CodeSchemaChanged && code != CodeReadFailed {
			return true
		}
		touched := false
		for _, tb := range dq.tables {
			touched = touched || altered[tb]
		}
		if !touched || code != CodeReadFailed {
			return !touched
		}
		_, err := r.reference(dq.ref, dq.binds)
		var pe *pgconn.PgError
		return !errors.As(err, &pe) || !strings.Contains(reason, "(SQLSTATE "+pe.Code+")")
	}
	if *diffVerbose {
		t.Logf("schema:\n%s", g.ddl())
	}
	total.seeds++
	// Rows to start from, written before anything subscribes.
	var initial [][]string
	for range 30 {
		var stmts []string
		for range 3 {
			if s := g.write(); strings.HasPrefix(s, "INSERT") {
				stmts = append(stmts, s)
			}
		}
		if len(stmts) > 0 {
			initial = append(initial, stmts)
		}
	}
	if _, _, err := runTxns(ctx, r.conn.PgConn(), initial, nil, nil, nil); err != nil {
		fail("initial rows: %v", err)
	}

	var subs []*dsub
	// The likeix subscriptions (drawn from g.lrng), apart from subs so
	// that g.rng's draws of subs stay as they were; compared with them.
	var lsubs []*dsub
	// Clocked subscriptions ("+clock", one drawn a round from g.crng):
	// apart from subs, so that the other draws stay as they were.
	var csubs []*dsub
	const rounds = 3
	for round := range rounds {
		// Writes run on their own connection while this goroutine
		// subscribes and unsubscribes.
		var plan [][]string
		var commit []bool
		ddlAt := -1
		if g.rng.IntN(2) == 0 {
			ddlAt = g.rng.IntN(25)
		}
		for i := range 25 {
			if i == ddlAt {
				sql, kind := g.schemaChange()
				total.ddl[kind]++
				for _, m := range ddlTable.FindAllStringSubmatch(sql, -1) {
					altered[m[1]] = true
				}
				plan, commit = append(plan, []string{sql}), append(commit, true)
			}
			s, c := g.txn()
			plan, commit = append(plan, s), append(commit, c)
		}
		// Touch-mode subscriptions, watched by the writer.
		tw := &touchWatch{}
		for range 1 {
			dq := g.query()
			rec := newRecorder()
			id, refusal, err := r.e.Subscribe(ctx, dq.sql, dq.binds, ModeTouch, rec)
			if err != nil {
				fail("subscribe %q: %v", dq.sql, err)
			}
			if refusal != nil {
				continue
			}
			if *diffVerbose {
				t.Logf("subscribe %d (touch, %s): %s binds %s", id, dq.shape, dq.sql, fmtBinds(dq.binds))
			}
			tw.subs = append(tw.subs, &touchSub{dsub: dsub{q: dq, id: id, rec: rec}, broken: -1})
		}
		// A likeix query in touch mode (drawn from g.lrng): every
		// transaction that moves a row in or out of it must be touched.
		{
			dq := g.likeQuery()
			rec := newRecorder()
			id, refusal, err := r.e.Subscribe(ctx, dq.sql, dq.binds, ModeTouch, rec)
			switch {
			case err != nil:
				fail("subscribe %q: %v", dq.sql, err)
			case refusal != nil && unexpected(dq, refusal.Code, refusal.Message):
				fail("likeix query refused (%v): %s binds %s", refusal, dq.sql, fmtBinds(dq.binds))
			case refusal == nil:
				if *diffVerbose {
					t.Logf("subscribe %d (touch, %s): %s binds %s", id, dq.shape, dq.sql, fmtBinds(dq.binds))
				}
				tw.subs = append(tw.subs, &touchSub{dsub: dsub{q: dq, id: id, rec: rec}, broken: -1})
			}
		}
		if err := tw.observe(ctx, r.conn.PgConn(), nil, 0, 0); err != nil {
			fail("touch reference: %v", err)
		}
		pw.newRound()
		if err := pw.observe(ctx, r.conn.PgConn(), nil, 0, 0); err != nil {
			fail("reference: %v", err)
		}
		// A clocked touch-mode subscription, its table copied before
		// the writes and after each commit (clockTouch).
		var ct *clockTouch
		{
			var dq dquery
			if len(csubs) > 0 && g.tcrng.IntN(4) == 0 {
				dq = csubs[g.tcrng.IntN(len(csubs))].q // a rows-mode one's query: a shared view
			} else {
				cg := &dgen{rng: g.tcrng, crng: g.tcrng, tables: g.tables, types: g.types, clock: true}
				dq = cg.query()
				dq.clock, dq.shape = true, dq.shape+"+clock"
			}
			rec := newRecorder()
			id, refusal, err := r.e.Subscribe(ctx, dq.sql, dq.binds, ModeTouch, rec)
			switch {
			case err != nil:
				fail("subscribe %q: %v", dq.sql, err)
			case refusal != nil:
				total.refused[string(refusal.Code)+" (clocked, touch)"]++
				if *diffVerbose {
					t.Logf("refused %q: %v", dq.sql, refusal)
				}
			default:
				if *diffVerbose {
					t.Logf("subscribe %d (touch, %s): %s binds %s", id, dq.shape, dq.sql, fmtBinds(dq.binds))
				}
				ct = &clockTouch{dsub: dsub{q: dq, id: id, rec: rec}, table: dq.tables[0], round: round}
				if _, err := ct.snapshot(ctx, r.conn.PgConn(), false); err != nil {
					fail("%v", err)
				}
			}
		}
		observe := func(ctx context.Context, conn *pgconn.PgConn, stmts []string, before, after change.LSN) error {
			err := errors.Join(tw.observe(ctx, conn, stmts, before, after), pw.observe(ctx, conn, stmts, before, after))
			if ct != nil {
				err = errors.Join(err, ct.observe(ctx, conn, stmts, before, after))
			}
			return err
		}
		var wg sync.WaitGroup
		var werr error
		var commits, rollbacks int
		wg.Add(1)
		go func() {
			defer wg.Done()
			var logf func(string, ...any)
			if *diffVerbose {
				logf = t.Logf
			}
			commits, rollbacks, werr = runTxns(ctx, r.conn.PgConn(), plan, commit, logf, observe)
		}()
		{
			// A clocked subscription, while the writes go on. The
			// writer's answers are at PostgreSQL's clock, not at the
			// one its client state is exact at: passWatch does not
			// follow it (checkClocked does).
			cg := &dgen{rng: g.crng, crng: g.crng, tables: g.tables, types: g.types, clock: true}
			dq := cg.query()
			dq.clock, dq.shape = true, dq.shape+"+clock"
			rec := newRecorder()
			id, refusal, err := r.e.Subscribe(ctx, dq.sql, dq.binds, ModeRows, rec)
			switch {
			case err != nil:
				fail("subscribe %q: %v", dq.sql, err)
			case refusal != nil:
				total.refused[string(refusal.Code)+" (clocked)"]++
				if *diffVerbose {
					t.Logf("refused %q: %v", dq.sql, refusal)
				}
			default:
				total.subs++
				if *diffVerbose {
					t.Logf("subscribe %d (%s): %s binds %s", id, dq.shape, dq.sql, fmtBinds(dq.binds))
				}
				csubs = append(csubs, &dsub{q: dq, id: id, rec: rec})
			}
		}
		// follow counts a rows-mode subscription and has passWatch follow it.
		follow := func(dq dquery, id SubID, rec *recorder) *dsub {
			total.subs++
			if *diffVerbose {
				t.Logf("subscribe %d (%s): %s binds %s", id, dq.shape, dq.sql, fmtBinds(dq.binds))
			}
			ds := &dsub{q: dq, id: id, rec: rec}
			pw.follow(ds)
			return ds
		}
		for range 2 {
			// likeix queries (drawn from g.lrng), subscribed while the
			// writes go on: routed by the LIKE index alone.
			dq := g.likeQuery()
			rec := newRecorder()
			id, refusal, err := r.e.Subscribe(ctx, dq.sql, dq.binds, ModeRows, rec)
			switch {
			case err != nil:
				fail("subscribe %q: %v", dq.sql, err)
			case refusal != nil && unexpected(dq, refusal.Code, refusal.Message):
				fail("likeix query refused (%v): %s binds %s", refusal, dq.sql, fmtBinds(dq.binds))
			case refusal != nil:
				continue
			}
			lsubs = append(lsubs, follow(dq, id, rec))
		}
		for range 6 {
			if len(subs) > 0 && g.rng.IntN(4) == 0 {
				i := g.rng.IntN(len(subs))
				// Unfollowed first: from the unsubscribe on its client
				// state stands still, and a copy taken at a later
				// acknowledgement would be compared as if it were live.
				pw.unfollow(subs[i])
				if err := r.e.Unsubscribe(ctx, subs[i].id); err != nil {
					fail("unsubscribe: %v", err)
				}
				subs = slices.Delete(subs, i, i+1)
			}
			var dq dquery
			if len(subs) > 0 && g.rng.IntN(6) == 0 {
				dq = subs[g.rng.IntN(len(subs))].q // the same query again: a shared view
			} else {
				dq = g.query()
			}
			rec := newRecorder()
			id, refusal, err := r.e.Subscribe(ctx, dq.sql, dq.binds, ModeRows, rec)
			if err != nil {
				fail("subscribe %q: %v", dq.sql, err)
			}
			if refusal != nil {
				total.refused[string(refusal.Code)]++
				if *diffVerbose {
					t.Logf("refused %q: %v", dq.sql, refusal)
				}
				continue
			}
			subs = append(subs, follow(dq, id, rec))
			time.Sleep(time.Duration(g.rng.IntN(20)) * time.Millisecond)
		}
		wg.Wait()
		if werr != nil {
			fail("write: %v", werr)
		}
		// Every commit of the round is before quietFrom: a clocked
		// client state at or past it is of the data as they are now.
		var quietText string
		if err := r.conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&quietText); err != nil {
			fail("WAL position: %v", err)
		}
		quietFrom, err := change.ParseLSN(quietText)
		if err != nil {
			fail("WAL position: %v", err)
		}
		total.commits += commits
		total.rollbacks += rollbacks
		r.quiesce(60 * time.Second)
		// A dropped table is seen by a catalog check: run one now rather
		// than wait for the next, then let its outputs through.
		if err := r.e.CheckCatalog(ctx); err != nil {
			fail("check catalog: %v", err)
		}
		// The core goroutine hands out a command's outputs before it
		// takes the next one.
		if _, err := r.e.Stats(ctx); err != nil {
			fail("stats: %v", err)
		}
		// Each clocked query subscribed again (a shared view's state at
		// the clock of its Accepted), while the checks below run and
		// heartbeats carry the clock on.
		type resub struct {
			id      SubID
			rec     *recorder
			refusal *query.Refusal
		}
		quietAt := time.Now()
		resubs := make([]resub, len(csubs))
		for i, s := range csubs {
			resubs[i].rec = newRecorder()
			var err error
			resubs[i].id, resubs[i].refusal, err = r.e.Subscribe(ctx, s.q.sql, s.q.binds, ModeRows, resubs[i].rec)
			if err != nil {
				fail("subscribe %q: %v", s.q.sql, err)
			}
		}
		if err := tw.check(total); err != nil {
			fail("round %d: %v", round, err)
		}
		for _, ts := range tw.subs {
			if st, code, reason := ts.rec.ending(); (st == OutputRefused || st == OutputEnded) && unexpected(ts.q, code, reason) {
				fail("round %d: touch subscription %d %s %s (%s), which nothing in the run explains: %s binds %s", round, ts.id, st, code, reason, ts.q.sql, fmtBinds(ts.q.binds))
			}
			if err := r.e.Unsubscribe(ctx, ts.id); err != nil {
				fail("unsubscribe: %v", err)
			}
		}
		before := pw.compared
		if err := pw.check(); err != nil {
			fail("round %d: %v", round, err)
		}
		total.passed += pw.compared - before

		subs = append(subs, lsubs...)
		live := subs[:0]
		for _, s := range subs {
			st, code, reason := s.rec.ending()
			switch st {
			case OutputAccepted:
			case OutputRefused, OutputEnded:
				if unexpected(s.q, code, reason) {
					fail("round %d: subscription %d %s %s (%s), which nothing in the run explains: %s binds %s", round, s.id, st, code, reason, s.q.sql, fmtBinds(s.q.binds))
				}
				key := st.String() + ": " + reasonClass(reason)
				total.ended[key]++
				if *diffVerbose {
					t.Logf("round %d: subscription %d %s: %s (%s)", round, s.id, st, reason, s.q.sql)
				}
				pw.unfollow(s)
				continue
			default:
				fail("round %d: subscription %d has no answer after the engine quiesced: %s", round, s.id, s.q.sql)
			}
			want, err := r.reference(s.q.ref, s.q.binds)
			if _, undefined := undefinedObject(err); undefined {
				fail("round %d: subscription %d is live but its query no longer runs on PostgreSQL (%v): %s", round, s.id, err, s.q.sql)
			}
			if err != nil {
				fail("reference query %q: %v", s.q.ref, err)
			}
			got, err := s.rec.result(s.q.ordered, r.types)
			if err != nil {
				fail("round %d: subscription %d (%s) %s binds %s: client state: %v", round, s.id, s.q.shape, s.q.sql, fmtBinds(s.q.binds), err)
			}
			if err := sameRows(got, want, s.q.ordered); err != nil {
				fail("round %d: subscription %d (%s) %s binds %s:\n%v", round, s.id, s.q.shape, s.q.sql, fmtBinds(s.q.binds), err)
			}
			total.compared++
			total.shapes[s.q.shape]++
			if s.q.ordered {
				total.ordered++
			}
			if s.q.binary() {
				total.binary++
			}
			if strings.Contains(s.q.shape, "count") {
				total.counts++
			}
			if strings.HasPrefix(s.q.shape, "likeix") && deltas(s.rec) > 0 {
				total.likeDeltas++
			}
			live = append(live, s)
		}
		subs, lsubs = nil, nil
		for _, s := range live {
			if strings.HasPrefix(s.q.shape, "likeix") {
				lsubs = append(lsubs, s)
			} else {
				subs = append(subs, s)
			}
		}

		// The clocked subscriptions: with the data still, the clock
		// passes rows while the checks run and the new subscribers' reads
		// wait for a heartbeat; every Accepted and Delta
		// at or past quietFrom must be PostgreSQL's answer at the clock
		// it carries, and so must a new subscriber's Accepted (the
		// shared view's state at its clock).
		if round == rounds-1 && (len(csubs) > 0 || ct != nil) {
			// The last round gives the clock a few heartbeats more to
			// move rows (deltas and touches with no write), at little
			// cost.
			time.Sleep(time.Until(quietAt.Add(150 * time.Millisecond)))
		}
		if ct != nil {
			// Every step the engine has handled since its Accepted that
			// changed the result at the clock of the step must have
			// been touched.
			beats, acked := cl.handled()
			if err := ct.check(ctx, r.conn.PgConn(), beats, acked, total); err != nil {
				fail("round %d: clocked touch subscription %d (%s) %s binds %s: %v", round, ct.id, ct.q.shape, ct.q.sql, fmtBinds(ct.q.binds), err)
			}
			if st, code, reason := ct.rec.ending(); (st == OutputRefused || st == OutputEnded) && unexpected(ct.q, code, reason) {
				fail("round %d: clocked touch subscription %d %s %s (%s), which nothing in the run explains: %s binds %s", round, ct.id, st, code, reason, ct.q.sql, fmtBinds(ct.q.binds))
			}
			if err := r.e.Unsubscribe(ctx, ct.id); err != nil {
				fail("unsubscribe: %v", err)
			}
			if err := ct.drop(ctx, r.conn.PgConn()); err != nil {
				fail("drop the copies: %v", err)
			}
		}
		if len(csubs) == 0 {
			continue
		}
		clive := csubs[:0]
		for i, s := range csubs {
			id, again, refusal := resubs[i].id, resubs[i].rec, resubs[i].refusal
			if refusal == nil {
				waitFor(t, 30*time.Second, 5*time.Millisecond, func() error {
					if st, _, _ := again.ending(); st == 0 {
						return fmt.Errorf("not answered yet")
					}
					return nil
				})
				if err := r.e.Unsubscribe(ctx, id); err != nil {
					fail("unsubscribe: %v", err)
				}
			}
			ended := false
			for _, rec := range []*recorder{s.rec, again} {
				st, code, reason := rec.ending()
				if rec == again && refusal != nil {
					// Refused for the schema as it is now (a column
					// dropped: unknown_column) only if it changed.
					st, code, reason = OutputRefused, CodeSchemaChanged, refusal.Message
				}
				switch st {
				case OutputAccepted:
				case OutputRefused, OutputEnded:
					if unexpected(s.q, code, reason) {
						fail("round %d: clocked subscription %d %s %s (%s), which nothing in the run explains: %s binds %s", round, s.id, st, code, reason, s.q.sql, fmtBinds(s.q.binds))
					}
					ended = true
					continue
				default:
					fail("round %d: clocked subscription %d has no answer after the engine quiesced: %s", round, s.id, s.q.sql)
				}
				n, deltas, err := r.checkClocked(s.q, rec, quietFrom)
				if err != nil {
					fail("round %d: clocked subscription %d (%s) %s binds %s: %v", round, s.id, s.q.shape, s.q.sql, fmtBinds(s.q.binds), err)
				}
				total.clocked += n
				total.clockDeltas += deltas
				if n > 0 {
					total.compared++
					total.shapes[s.q.shape]++
				}
			}
			if ended {
				total.ended["clocked"]++
				_ = r.e.Unsubscribe(ctx, s.id)
				continue
			}
			clive = append(clive, s)
		}
		csubs = clive
	}
}

// checkClocked replays a clocked subscription's outputs and matches the
// client state after each Accepted and Delta at or past from (the data
// have not changed since) with PostgreSQL's answer to the query with its
// time functions replaced by the clock the output carries (atClock): what
// a client knows of the clock its rows are exact at. It returns how many
// states it matched.
func (r *rig) checkClocked(dq dquery, rec *recorder, from change.LSN) (n, deltas int, err error) {
	rec.mu.Lock()
	outs := slices.Clone(rec.outs)
	rec.mu.Unlock()
	replay := newRecorder()
	var last change.Timestamp
	for _, o := range outs {
		replay.Send(o)
		if o.Kind != OutputAccepted && o.Kind != OutputDelta {
			continue
		}
		if o.Clock.Micros == 0 {
			return n, deltas, fmt.Errorf("%s at %s carries no clock", o.Kind, o.LSN)
		}
		if o.Kind == OutputDelta && o.Clock.Cmp(last) < 0 {
			return n, deltas, fmt.Errorf("the clock went back: %s at %s carries %s after %s", o.Kind, o.LSN, fmtClock(o.Clock), fmtClock(last))
		}
		last = o.Clock
		if o.LSN < from {
			continue
		}
		ref := atClock(dq.ref, o.Clock)
		want, err := r.reference(ref, dq.binds)
		if err != nil {
			return n, deltas, fmt.Errorf("reference %q: %w", ref, err)
		}
		got, err := replay.result(dq.ordered, r.types)
		if err != nil {
			return n, deltas, fmt.Errorf("client state: %w", err)
		}
		if err := sameRows(got, want, dq.ordered); err != nil {
			return n, deltas, fmt.Errorf("%s at %s (clock %s), PostgreSQL's answer to %s:\n%w", o.Kind, o.LSN, fmtClock(o.Clock), ref, err)
		}
		n++
		if o.Kind == OutputDelta {
			deltas++
		}
	}
	return n, deltas, nil
}

// runTxns runs each list of statements as one transaction, committing it
// when commit[i] (nil: always) and rolling it back otherwise or when a
// statement fails (a unique violation, say). After each commit it calls
// committed (when not nil) with the WAL insert positions read just before
// and just after COMMIT: the commit's LSN lies in [before, after).
func runTxns(ctx context.Context, conn *pgconn.PgConn, txns [][]string, commit []bool, logf func(string, ...any),
	committed func(ctx context.Context, conn *pgconn.PgConn, stmts []string, before, after change.LSN) error) (commits, rollbacks int, err error) {
	const lsnSQL = "SELECT pg_current_wal_insert_lsn()::text"
	for i, stmts := range txns {
		ok := commit == nil || commit[i]
		sql := "BEGIN;\n" + strings.Join(stmts, ";\n") + ";\n"
		if ok {
			sql += lsnSQL + ";\nCOMMIT;\n" + lsnSQL
		} else {
			sql += "ROLLBACK"
		}
		res, err := conn.Exec(ctx, sql).ReadAll()
		var pgErr *pgconn.PgError
		switch {
		case err == nil && ok:
			commits++
			if committed != nil {
				before, e1 := change.ParseLSN(string(res[len(res)-3].Rows[0][0]))
				after, e2 := change.ParseLSN(string(res[len(res)-1].Rows[0][0]))
				if err := errors.Join(e1, e2); err != nil {
					return commits, rollbacks, err
				}
				if err := committed(ctx, conn, stmts, before, after); err != nil {
					return commits, rollbacks, err
				}
			}
		case err == nil:
			rollbacks++
		case errors.As(err, &pgErr):
			if _, err := conn.Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
				return commits, rollbacks, err
			}
			rollbacks++
		default:
			return commits, rollbacks, err
		}
		if logf != nil {
			logf("write (commit %v, err %v): %s", ok, err, strings.Join(stmts, "; "))
		}
	}
	return commits, rollbacks, nil
}

func fmtBinds(bs []query.Bind) string {
	var parts []string
	for i, b := range bs {
		parts = append(parts, fmt.Sprintf("$%d=%q::%d", i+1, b.Data, b.OID))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// reasonClass shortens a reason to its kind, for the totals.
func reasonClass(reason string) string {
	if i := strings.IndexAny(reason, ":("); i > 0 {
		reason = reason[:i]
	}
	return strings.TrimSpace(reason)
}

// touchWatch follows touch-mode subscriptions: after every committed
// transaction, whether it changed each one's result on PostgreSQL.
type touchWatch struct {
	subs  []*touchSub
	txns  []touchTxn
	first bool // the baseline has been read
}

type touchSub struct {
	dsub
	last   string // the result after the last transaction observed
	broken int    // index in txns from which the query no longer runs (-1: runs)
}

// touchTxn is one committed transaction: the commit LSN lies in
// [before, after); changed[i] says it changed subs[i]'s result.
type touchTxn struct {
	before, after change.LSN
	changed       []bool
	results       []string // each subscription's result after it, for failure messages
	stmts         []string
}

// observe reads every subscription's result after a commit (or, the first
// time, before any) and records which changed.
func (w *touchWatch) observe(ctx context.Context, conn *pgconn.PgConn, stmts []string, before, after change.LSN) error {
	tx := touchTxn{stmts: stmts, before: before, after: after, changed: make([]bool, len(w.subs)), results: make([]string, len(w.subs))}
	for i, s := range w.subs {
		if s.broken >= 0 {
			continue
		}
		res := conn.ExecParams(ctx, s.q.ref, bindValues(s.q.binds), bindOIDs(s.q.binds), bindFormats(s.q.binds), nil).Read()
		if res.Err != nil {
			if _, undefined := undefinedObject(res.Err); !undefined {
				return fmt.Errorf("touch reference %q: %w", s.q.ref, res.Err)
			}
			// A schema change broke the query: its subscription must
			// end; it is not checked from here on.
			s.broken = len(w.txns)
			continue
		}
		now := canonical(res.Rows, s.q.ordered)
		if w.first {
			tx.changed[i] = now != s.last
		}
		s.last, tx.results[i] = now, now
	}
	if w.first {
		w.txns = append(w.txns, tx)
	}
	w.first = true
	return nil
}

// check verifies that every committed transaction after a subscription's
// Accepted that changed its result was touched at its commit, and counts
// the touches for transactions that changed nothing.
func (w *touchWatch) check(total *diffTotals) error {
	for i, s := range w.subs {
		s.rec.mu.Lock()
		outs := slices.Clone(s.rec.outs)
		s.rec.mu.Unlock()
		var accepted change.LSN
		var touches []change.LSN
		live := false
		for _, o := range outs {
			switch o.Kind {
			case OutputAccepted:
				accepted, live = o.LSN, true
			case OutputTouched:
				touches = append(touches, o.LSN)
			case OutputRefused, OutputEnded:
				live = false
			}
		}
		if !live {
			continue // ended by a schema change, or refused
		}
		total.touchSubs++
		total.touchShapes[s.q.shape]++
		explained := make([]bool, len(touches))
		for j, tx := range w.txns {
			if s.broken >= 0 && j >= s.broken {
				break
			}
			if tx.before <= accepted {
				continue // in the hydrated result (or too close to tell)
			}
			found := false
			for k, l := range touches {
				if l >= tx.before && l < tx.after {
					found = true
					if tx.changed[i] {
						explained[k] = true
					}
				}
			}
			if tx.changed[i] {
				total.touchChanged++
				if strings.Contains(s.q.shape, "+in") || strings.Contains(s.q.shape, "+notin") {
					total.touchInChanged++
				}
				if strings.HasPrefix(s.q.shape, "likeix") {
					total.touchLikeChanged++
				}
				if !found {
					prev := ""
					if j > 0 {
						prev = w.txns[j-1].results[i]
					}
					return fmt.Errorf("touch subscription %d (%s) %s binds %s: the transaction committed in [%s, %s) changed its result, and no touched came at its commit (touched at %v, accepted at %s); the transaction: %s; result before:\n%s\nafter:\n%s",
						s.id, s.q.shape, s.q.sql, fmtBinds(s.q.binds), tx.before, tx.after, touches, accepted, strings.Join(tx.stmts, "; "),
						strings.ReplaceAll(prev, "\x00", " "), strings.ReplaceAll(tx.results[i], "\x00", " "))
				}
			}
		}
		total.touches += len(touches)
		for _, e := range explained {
			if !e {
				total.falseTouches++
			}
		}
	}
	return nil
}

// canonical prints a result so that two results PostgreSQL may order
// differently print the same: unordered rows sorted; ordered rows (whose
// last column is their tie group) sorted within each tie group.
func canonical(rows [][][]byte, ordered bool) string {
	text := func(r [][]byte) string {
		var b strings.Builder
		for _, v := range r {
			if v == nil {
				b.WriteString("\x00N")
			} else {
				b.WriteString("\x00")
				b.Write(v)
			}
		}
		return b.String()
	}
	if !ordered {
		all := make([]string, len(rows))
		for i, r := range rows {
			all[i] = text(r)
		}
		slices.Sort(all)
		return strings.Join(all, "\n")
	}
	var out []string
	for i := 0; i < len(rows); {
		j := i
		var group []string
		for ; j < len(rows) && string(rows[j][len(rows[j])-1]) == string(rows[i][len(rows[i])-1]); j++ {
			group = append(group, text(rows[j][:len(rows[j])-1]))
		}
		slices.Sort(group)
		out = append(out, strings.Join(group, "\n"))
		i = j
	}
	return strings.Join(out, "\n--\n")
}

// passWatch checks the promise lag frames make (docs/s2s-protocol.md,
// "lag"): at every position the engine acknowledges, every rows-mode
// subscription's client state is PostgreSQL's answer there. The writer
// reads every followed subscription's answer after each commit (observe);
// the engine's acknowledgements (ack, on the engine's goroutine, every
// output before the position handed out) take a copy of every client
// state; check matches each copy with the answer of the transactions
// committed before its position.
type passWatch struct {
	// schemaChanged reports whether the seed changes the schema of one of
	// the tables: a reference query that no longer runs is then no answer.
	schemaChanged func(tables []string) bool
	mu            sync.Mutex
	types         change.TypeResolver
	subs          []*dsub
	states        []passState
	snaps         []passSnap
	// compared counts client states matched with an answer.
	compared int
}

// passState is PostgreSQL's answers after one committed transaction
// (the first of a round: before any): the commit lies in [before, after).
type passState struct {
	before, after change.LSN
	answers       map[*dsub][][]*string
	ddl           []string // tables the transaction altered, dropped or made
	stmts         []string
	followed      int // subscriptions followed when it was observed
}

// passSnap is the client states at a position the engine acknowledged.
type passSnap struct {
	lsn  change.LSN
	subs []passGot
}

type passGot struct {
	sub  *dsub
	lsn  change.LSN // the client's own position: its last accepted or delta
	got  [][]*string
	err  error
	outs string // its last outputs, for a failure message
}

var ddlTable = regexp.MustCompile(`(?:ALTER|DROP) TABLE (\w+)`)

func (w *passWatch) follow(s *dsub) {
	w.mu.Lock()
	w.subs = append(w.subs, s)
	w.mu.Unlock()
}

func (w *passWatch) unfollow(s *dsub) {
	w.mu.Lock()
	w.subs = slices.DeleteFunc(w.subs, func(x *dsub) bool { return x == s })
	w.mu.Unlock()
}

// newRound forgets the last round's answers and client states.
func (w *passWatch) newRound() {
	w.mu.Lock()
	w.states, w.snaps = nil, nil
	w.mu.Unlock()
}

// ack copies every followed subscription's client state at lsn.
func (w *passWatch) ack(lsn change.LSN) {
	w.mu.Lock()
	defer w.mu.Unlock()
	snap := passSnap{lsn: lsn}
	for _, s := range w.subs {
		s.rec.mu.Lock()
		st, at := s.rec.status, s.rec.lsn
		var outs []string
		for _, o := range s.rec.outs[max(len(s.rec.outs)-4, 0):] {
			outs = append(outs, fmt.Sprintf("%s@%s", o.Kind, o.LSN))
		}
		s.rec.mu.Unlock()
		if st != OutputAccepted {
			continue
		}
		got, err := s.rec.result(s.q.ordered, w.types)
		snap.subs = append(snap.subs, passGot{sub: s, lsn: at, got: got, err: err, outs: strings.Join(outs, " ")})
	}
	w.snaps = append(w.snaps, snap)
}

// observe reads every followed subscription's answer after a commit (or,
// with no statements, before the round's first).
func (w *passWatch) observe(ctx context.Context, conn *pgconn.PgConn, stmts []string, before, after change.LSN) error {
	w.mu.Lock()
	subs := slices.Clone(w.subs)
	w.mu.Unlock()
	st := passState{before: before, after: after, answers: map[*dsub][][]*string{}, stmts: stmts, followed: len(subs)}
	for _, stmt := range stmts {
		for _, m := range ddlTable.FindAllStringSubmatch(stmt, -1) {
			st.ddl = append(st.ddl, m[1])
		}
	}
	for _, s := range subs {
		res := conn.ExecParams(ctx, s.q.ref, bindValues(s.q.binds), bindOIDs(s.q.binds), bindFormats(s.q.binds), nil).Read()
		if res.Err != nil {
			if !w.altered(s, st.ddl) && (w.schemaChanged == nil || !w.schemaChanged(s.q.tables)) {
				return fmt.Errorf("reference %q: %w", s.q.ref, res.Err)
			}
			continue // a schema change broke it: no answer
		}
		st.answers[s] = textRows(res.Rows)
	}
	w.mu.Lock()
	w.states = append(w.states, st)
	w.mu.Unlock()
	return nil
}

// altered reports whether a schema change of the round (or one of
// tables) touched a table s reads.
func (w *passWatch) altered(s *dsub, tables []string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, st := range w.states {
		tables = append(tables, st.ddl...)
	}
	for _, tb := range tables {
		if slices.Contains(s.q.tables, tb) {
			return true
		}
	}
	return false
}

func textRows(rows [][][]byte) [][]*string {
	out := make([][]*string, len(rows))
	for i, row := range rows {
		out[i] = make([]*string, len(row))
		for j, v := range row {
			if v != nil {
				s := string(v)
				out[i][j] = &s
			}
		}
	}
	return out
}

// check matches every client state taken with PostgreSQL's answer at its
// position: the answer after the last transaction whose commit is known
// to be at or before it, or after the next one when that one's commit may
// be too (its LSN is known only to lie in [before, after)). A client
// whose own position is past the acknowledged one (a delta of a later
// commit, the acknowledgement held back for another view) is matched at
// its own. Subscriptions of a table a schema change touched are not
// matched from that change on: the engine learns of it only from the
// stream, a read or the catalog check (the round's end checks them).
func (w *passWatch) check() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.states) == 0 {
		return nil
	}
	// at returns the index of the state exact at lsn and whether the next
	// one may be.
	at := func(lsn change.LSN) (int, bool) {
		i := 0
		for i+1 < len(w.states) && w.states[i+1].after <= lsn {
			i++
		}
		return i, i+1 < len(w.states) && w.states[i+1].before <= lsn
	}
	altered := func(s *dsub, upTo int) bool {
		for j := 0; j <= upTo && j < len(w.states); j++ {
			for _, tb := range w.states[j].ddl {
				if slices.Contains(s.q.tables, tb) {
					return true
				}
			}
		}
		return false
	}
	var first error
	var firstSub *dsub
	right, wrong := 0, 0 // the failing subscription's later states
	for _, snap := range w.snaps {
		for _, g := range snap.subs {
			if first != nil && g.sub != firstSub {
				continue
			}
			pos := max(snap.lsn, g.lsn)
			i, maybeNext := at(pos)
			last := i
			if maybeNext {
				last = i + 1
			}
			if altered(g.sub, last) {
				continue
			}
			if g.err != nil {
				return fmt.Errorf("subscription %d (%s) %s binds %s: client state at acknowledged position %s: %v", g.sub.id, g.sub.q.shape, g.sub.q.sql, fmtBinds(g.sub.q.binds), snap.lsn, g.err)
			}
			var errs []error
			answered, unknown := false, false
			for j := i; j <= last; j++ {
				want, ok := w.states[j].answers[g.sub]
				if !ok {
					// Not followed when that state was read (subscribed
					// or unsubscribed meanwhile): the client may hold it.
					unknown = true
					continue
				}
				answered = true
				err := sameRows(g.got, want, g.sub.q.ordered)
				if err == nil {
					errs = nil
					break
				}
				errs = append(errs, fmt.Errorf("after %q (committed in [%s, %s)): %w", strings.Join(w.states[j].stmts, "; "), w.states[j].before, w.states[j].after, err))
			}
			if !answered || unknown && len(errs) > 0 {
				continue
			}
			if first != nil {
				if len(errs) > 0 {
					wrong++
				} else {
					right++
				}
				continue
			}
			if len(errs) > 0 {
				next := "none"
				if i+1 < len(w.states) {
					_, ok := w.states[i+1].answers[g.sub]
					next = fmt.Sprintf("committed in [%s, %s), answered %v (of %d followed): %q", w.states[i+1].before, w.states[i+1].after, ok, w.states[i+1].followed, strings.Join(w.states[i+1].stmts, "; "))
				}
				first = fmt.Errorf("subscription %d (%s) %s binds %s: at the position %s the engine acknowledged (what a lag frame vouches for; the client's own is %s), its result is not PostgreSQL's:\n%v\n(the next transaction: %s; the client's last outputs: %s)",
					g.sub.id, g.sub.q.shape, g.sub.q.sql, fmtBinds(g.sub.q.binds), snap.lsn, g.lsn, errors.Join(errs...), next, g.outs)
				firstSub = g.sub
				continue
			}
			w.compared++
		}
	}
	if first != nil {
		return fmt.Errorf("%w\n(of its %d later acknowledged states, %d were PostgreSQL's answer, %d were not)", first, right+wrong, right, wrong)
	}
	return nil
}
