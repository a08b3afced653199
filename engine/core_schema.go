package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

// Schema changes. A view is compiled against one shape of each table it
// reads (query.Source: the table's OID, the columns it names with their
// declared types, the columns that identify a row, and for `*` every
// column). Three things tell the engine a shape changed:
//
//   - the change stream: pgoutput sends a table's Relation before the first
//     change after its shape changed (Core.Apply checks it);
//   - every read: it locks its tables before taking its snapshot (lockSQL)
//     and compares its SELECT's result description with the plan
//     (checkFields); a read of a query with * also compares the catalog
//     in its snapshot (checkReadShapes);
//   - a periodic catalog check by the runtime (Config.CatalogCheckInterval,
//     Engine.CheckCatalog), which is the only way to see a DROP TABLE
//     (pgoutput sends nothing for it) and a change not followed by writes.
//
// A view whose shape no longer holds ends its subscriptions with a Code
// and a reason; they are retryable: subscribing again compiles the query
// against the new shape.

// shapeProblem says how rel, a table's shape now (nil: the table is gone),
// breaks src, a source compiled against an older one: a Code and a reason,
// or "" when it does not.
// column names the column at fault, when one is.
func shapeProblem(src *query.Source, rel *change.Relation) (code query.Code, reason, column string) {
	t := src.Table
	if rel == nil {
		return CodeTableDropped, fmt.Sprintf("table %s.%s was dropped", t.Schema, t.Name), ""
	}
	if rel.Schema != t.Schema || rel.Table != t.Name {
		return CodeSchemaChanged, fmt.Sprintf("table %s.%s was renamed to %s.%s", t.Schema, t.Name, rel.Schema, rel.Table), ""
	}
	for _, c := range src.Columns {
		i := rel.ColumnIndex(c.Name)
		if i < 0 {
			return CodeSchemaChanged, fmt.Sprintf("column %q of table %s.%s was dropped or renamed", c.Name, t.Schema, t.Name), c.Name
		}
		rc := rel.Columns[i]
		if rc.TypeOID != c.DeclaredOID || rc.TypeMod != c.TypeMod {
			return CodeSchemaChanged, fmt.Sprintf("column %q of table %s.%s changed type", c.Name, t.Schema, t.Name), c.Name
		}
		if rc.AttNum != 0 && c.AttNum != 0 && rc.AttNum != c.AttNum {
			return CodeSchemaChanged, fmt.Sprintf("column %q of table %s.%s was dropped and added again", c.Name, t.Schema, t.Name), c.Name
		}
	}
	if src.Star {
		for _, c := range rel.Columns {
			if col, _ := t.Column(c.Name); col == nil {
				return CodeSchemaChanged, fmt.Sprintf("column %q was added to table %s.%s, which the query selects with *", c.Name, t.Schema, t.Name), ""
			}
		}
	}
	switch rel.ReplicaIdentity {
	case 'd', 'i':
		// Updates and deletes identify the old row by the identity's
		// columns: they must be the ones the view keys rows by.
		var stream []string
		for _, c := range rel.Columns {
			if c.Key {
				stream = append(stream, c.Name)
			}
		}
		want := slices.Clone(t.RowKey())
		slices.Sort(stream)
		slices.Sort(want)
		if !slices.Equal(stream, want) {
			return CodeSchemaChanged, fmt.Sprintf("the replica identity of table %s.%s changed: updates and deletes now identify rows by (%s), the subscription by (%s)",
				t.Schema, t.Name, strings.Join(stream, ", "), strings.Join(want, ", ")), ""
		}
	}
	return "", "", ""
}

// TableRef names a table views read.
type TableRef struct {
	OID          uint32
	Schema, Name string
}

// tableRefs lists the tables the views read, by OID.
func (s *state) tableRefs() []TableRef {
	out := make([]TableRef, 0, len(s.tables))
	for oid, tb := range s.tables {
		out = append(out, TableRef{OID: oid, Schema: tb.schema, Name: tb.name})
	}
	slices.SortFunc(out, func(a, b TableRef) int { return cmpU64(uint64(a.OID), uint64(b.OID)) })
	return out
}

// checkCatalog ends the views the catalog's current shapes break: checked
// are the tables asked about, shapes those of them that exist. It returns
// the tables that broke a view.
func (s *state) checkCatalog(checked []uint32, shapes map[uint32]*change.Relation) []TableRef {
	var broke []TableRef
	for _, oid := range checked {
		if tb := s.tables[oid]; tb != nil {
			if s.endBroken(tb, shapes[oid]) {
				broke = append(broke, TableRef{OID: oid, Schema: tb.schema, Name: tb.name})
			}
		}
	}
	return broke
}

// endBroken ends every view of tb that rel (tb's shape now; nil: dropped)
// breaks, in view order, and reports whether it ended any. The layout
// slots of the columns at fault get fresh ones (retireStale).
func (s *state) endBroken(tb *table, rel *change.Relation) bool {
	type why struct {
		code   query.Code
		reason string
	}
	var broken []*view
	var cols []string
	whys := map[*view]why{}
	for vs := range tb.srcs.all() {
		if vs.v.status == viewDead {
			continue
		}
		if code, reason, col := shapeProblem(vs.src, rel); code != "" {
			if col != "" {
				cols = append(cols, col)
			}
			if _, ok := whys[vs.v]; !ok {
				broken = append(broken, vs.v)
				whys[vs.v] = why{code, reason}
			}
		}
	}
	slices.SortFunc(broken, func(a, b *view) int { return cmpU64(a.id, b.id) })
	for _, v := range broken {
		w := whys[v]
		s.endView(v, w.code, w.reason, true)
	}
	if rel != nil {
		tb.retireStale(rel, cols)
	}
	return len(broken) > 0
}

// identityLost ends every view of tb: a change's old row did not carry
// the columns the views key rows by (the table's replica identity changed
// since they were compiled, and its Relation came before any view of the
// table, so relation did not see it), and deletes and updates of rows
// cannot be matched to the rows held.
func (s *state) identityLost(tb *table) {
	views := tb.liveViews()
	var key []string
	for _, slot := range tb.key {
		key = append(key, tb.cols[slot].name)
	}
	reason := fmt.Sprintf("the old rows of updates and deletes on table %s.%s do not carry its row key (%s): its replica identity changed",
		tb.schema, tb.name, strings.Join(key, ", "))
	for _, v := range views {
		s.endView(v, CodeSchemaChanged, reason, true)
	}
}

// liveViews returns the views reading tb that have not ended, in view
// order.
func (tb *table) liveViews() []*view {
	var views []*view
	for vs := range tb.srcs.all() {
		if vs.v.status != viewDead && !slices.Contains(views, vs.v) {
			views = append(views, vs.v)
		}
	}
	slices.SortFunc(views, func(a, b *view) int { return cmpU64(a.id, b.id) })
	return views
}

// unpublished ends every view of the tables oids, which the publication
// no longer carries.
func (s *state) unpublished(oids []uint32, publication string) {
	for _, oid := range oids {
		tb := s.tables[oid]
		if tb == nil {
			continue
		}
		reason := fmt.Sprintf("table %s.%s was removed from publication %q: its changes no longer reach Freshet", tb.schema, tb.name, publication)
		for _, v := range tb.liveViews() {
			if v.status != viewDead { // a view of two such tables ends once
				s.endView(v, query.CodeNotPublished, reason, true)
			}
		}
	}
}

// retireStale gives every column of tb's layout that rel (tb's shape now)
// dropped or retyped, and the columns named in also (a column dropped and
// added again under its name, which only its attnum tells), a fresh slot. Held rows keep values in a slot while
// no view needs the column (only changes to needed columns are decoded),
// and DDL changes no row in the stream: after ALTER COLUMN TYPE, or DROP
// COLUMN then ADD COLUMN of the same name, a held row's old value would
// otherwise be taken for the new column's when a view naming it hydrates.
// The old slot keeps serving the views still reading it until they end.
// Key columns keep their slots: a view keys rows by them, so every view of
// the table ends when one is retyped.
func (tb *table) retireStale(rel *change.Relation, also []string) {
	retired := false
	for slot := range tb.cols {
		lc := tb.cols[slot]
		if !lc.typed || tb.isKey(slot) || tb.byName[lc.name] != slot {
			continue
		}
		if i := rel.ColumnIndex(lc.name); i >= 0 && rel.Columns[i].TypeOID == lc.declOID && !slices.Contains(also, lc.name) {
			continue
		}
		tb.cols = append(tb.cols, layoutCol{name: lc.name})
		tb.byName[lc.name] = len(tb.cols) - 1
		retired = true
	}
	if retired {
		// Relations seen map names to the old slots.
		clear(tb.relMaps)
	}
}
