package engine

import (
	"encoding/binary"
	"slices"
	"strings"

	"github.com/freshetdb/freshet/query"
)

// An aggregating view (query.Plan.Agg: GROUP BY, HAVING, aggregates
// beside each other) holds the rows its WHERE clause keeps, as a COUNT(*)
// view does (a delete carries only the row's key, so what the row added
// to its group is known only from the row), and, per group, one
// query.AggState per aggregate: counts and exact sums for COUNT, SUM and
// AVG, a balanced tree of the distinct values with a count each for MIN
// and MAX, a count per distinct value for COUNT(DISTINCT). A row entering
// or leaving costs O(log n) in its group's size. At settle, each group a
// transaction changed computes its group row (keys, then aggregates),
// HAVING decides whether it shows, and the groups that show form the
// result: sorted by the plan's ORDER BY (ties broken by the group keys)
// and cut by LIMIT/OFFSET, or unordered, keyed by the group key's
// encoding. A view without GROUP BY has one group, which shows even with
// no row (COUNT 0, SUM NULL); a group of a GROUP BY that loses its last
// row is gone. A landed read (hydration, re-hydration) rebuilds every
// group from the rows and diffs the result against what subscribers hold.
// SELECT DISTINCT is such a view with no aggregate; SELECT DISTINCT ON's
// groups also keep their rows ordered by the query's ORDER BY
// (query.FirstState), and a group row continues with the first one's
// outputs and ORDER BY values.

// aggView is an aggregating view's groups and result.
type aggView struct {
	g      *query.Grouping
	groups map[string]*group
	// out holds the groups that show (HAVING), as entries whose entered
	// row is the group row, ordered when the plan orders or cuts groups.
	out   shownResult
	dirty []*group
	// scratch for Eval
	keys, args []any
	kb, one    []byte
}

// group is one group of an aggregating view.
type group struct {
	key  string
	keys []any
	rows int64
	st   []query.AggState
	// first is a DISTINCT ON group's rows in the query's order.
	first query.FirstState
	dirty bool
	// shown is the projection subscribers of an unordered result hold
	// (nil: not shown).
	shown []any
}

// newAggView returns the empty groups of plan (which has Agg).
func newAggView(plan *query.Plan) *aggView {
	g := plan.Agg
	a := &aggView{g: g, groups: make(map[string]*group),
		keys: make([]any, len(g.KeyOIDs)), args: make([]any, len(g.Aggs))}
	post := g.Post
	a.out.resultSet = resultSet{plan: post, complete: true}
	a.out.ordered = len(post.Order) > 0 || post.Limit >= 0 || post.Offset > 0
	if !g.Grouped() {
		a.group("", nil) // the one group, present with no row
	}
	return a
}

// group returns the group of key, made with keys when it is new.
func (a *aggView) group(key string, keys []any) *group {
	gr := a.groups[key]
	if gr == nil {
		gr = &group{key: key, keys: slices.Clone(keys), st: make([]query.AggState, len(a.g.Aggs))}
		a.groups[key] = gr
		a.markDirty(gr)
	}
	return gr
}

func (a *aggView) markDirty(gr *group) {
	if !gr.dirty {
		gr.dirty = true
		a.dirty = append(a.dirty, gr)
	}
}

// aggRow adds (sign 1) or removes (sign -1) one row of the view's
// result, of key key, to its group. A row whose keys or arguments raise
// marks the view to end (it is then not counted).
func (v *view) aggRow(key string, q query.Row, sign int) {
	a := v.x().agg
	err := a.g.Eval(q, a.keys, a.args)
	var first []any
	if f := a.g.First; f != nil && err == nil {
		// A DISTINCT ON group keeps the row's values (new ones: the
		// tree holds them).
		first = make([]any, len(f.OIDs))
		err = f.EvalFirst(q, first)
	}
	if err != nil {
		if v.x().evalErr == nil {
			v.mut().evalErr = err
		}
		return
	}
	a.kb, a.one = appendGroupKey(a.kb[:0], a.one, a.g, a.keys)
	gr := a.group(string(a.kb), a.keys)
	gr.rows += int64(sign)
	for i := range a.g.Aggs {
		a.g.Aggs[i].Add(&gr.st[i], a.args[i], sign)
	}
	if f := a.g.First; f != nil {
		f.Add(&gr.first, key, first, sign)
	}
	a.markDirty(gr)
}

// appendGroupKey appends a group's key, the encodings of its key values
// each behind its length (so the concatenation is unambiguous); one is
// scratch, returned for reuse.
func appendGroupKey(dst, one []byte, g *query.Grouping, keys []any) ([]byte, []byte) {
	for i, k := range keys {
		one = query.AppendKey(one[:0], g.KeyOIDs[i], k)
		dst = binary.AppendUvarint(dst, uint64(len(one)))
		dst = append(dst, one...)
	}
	return dst, one
}

// groupRow computes a group's row: its keys, then its aggregates.
func (v *view) groupRow(gr *group) query.Row {
	a := v.x().agg
	r := make([]any, 0, len(gr.keys)+len(a.g.Aggs))
	r = append(r, gr.keys...)
	for i := range a.g.Aggs {
		x, err := a.g.Aggs[i].Result(&gr.st[i], gr.rows)
		if err != nil && v.x().evalErr == nil {
			v.mut().evalErr = err
		}
		r = append(r, x)
	}
	if f := a.g.First; f != nil {
		r = append(r, f.First(&gr.first)...)
	}
	return query.Row{r}
}

// flushAgg brings the result up to date with the groups changed since the
// last flush and returns the delta for subscribers (what they hold is
// diffed: an unordered result's changed groups, an ordered one's visible
// window).
func (v *view) flushAgg() delta {
	a := v.x().agg
	slices.SortFunc(a.dirty, func(x, y *group) int { return strings.Compare(x.key, y.key) })
	post := a.g.Post
	var d delta
	for _, gr := range a.dirty {
		gr.dirty = false
		a.out.remove(gr.key)
		var now []any
		if gr.rows > 0 || !a.g.Grouped() {
			row := v.groupRow(gr)
			t, err := post.EvalRow(row)
			if err != nil && v.x().evalErr == nil {
				v.mut().evalErr = err
			}
			if t == query.True {
				e := &entry{key: gr.key}
				e.setEntered(row)
				a.out.insert(e)
				if !a.out.ordered {
					now = post.Project(row)
				}
			}
		}
		if gr.rows == 0 && a.g.Grouped() {
			delete(a.groups, gr.key)
		}
		if a.out.ordered {
			continue
		}
		switch {
		case now == nil && gr.shown != nil:
			d.removed = append(d.removed, Key(gr.key))
		case now != nil && (gr.shown == nil || !sameValues(gr.shown, now)):
			d.rows = append(d.rows, ResultRow{Key: Key(gr.key), Values: now})
		}
		gr.shown = now
	}
	clear(a.dirty)
	a.dirty = a.dirty[:0]
	if a.out.ordered {
		return a.out.diffShown()
	}
	d.changed = len(d.rows) > 0 || len(d.removed) > 0
	return d
}

// rebuildAgg groups the view's rows afresh (a landed read) and returns
// the delta from what subscribers held before (old, nil when they held
// nothing yet).
func (v *view) rebuildAgg() delta {
	old := v.x().agg
	a := newAggView(v.plan)
	v.mut().agg = a
	if old != nil {
		a.out.shown, a.out.shownTieAfter = old.out.shown, old.out.shownTieAfter
	}
	if v.byID() {
		rt := &v.srcs[0].t.rows
		for _, id := range v.sortedIDs(rt) {
			v.aggRow(rt.key(id), v.idRow(rt, id), 1)
		}
	} else {
		keys := v.result.keys()
		slices.Sort(keys)
		for _, k := range keys {
			v.aggRow(k, v.queryRow(v.result.get(k)), 1)
		}
	}
	if old != nil && !a.out.ordered {
		// What subscribers hold: the old groups' projections; a group
		// that is gone is removed, one that is new or changed is sent.
		for _, gr := range a.dirty {
			if og := old.groups[gr.key]; og != nil {
				gr.shown = og.shown
			}
		}
		var gone []Key
		for k, og := range old.groups {
			if og.shown != nil && a.groups[k] == nil {
				gone = append(gone, Key(k))
			}
		}
		slices.Sort(gone)
		d := v.flushAgg()
		d.removed = append(d.removed, gone...)
		d.changed = d.changed || len(gone) > 0
		return d
	}
	d := v.flushAgg()
	if old == nil {
		return delta{}
	}
	return d
}

// aggAccepted is an aggregating view's result for a new subscriber.
func (v *view) aggAccepted() []ResultRow {
	a := v.x().agg
	post := a.g.Post
	rows := []ResultRow{}
	for _, e := range a.out.entries() {
		rows = append(rows, ResultRow{Key: Key(e.key), Values: post.Project(e.enteredRow())})
	}
	return rows
}
