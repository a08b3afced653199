package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
	"github.com/jackc/pgx/v5/pgconn"
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

// ShapeError is a read's error when a table it reads no longer has the
// shape its plan was compiled against. Code is CodeTableDropped or
// CodeSchemaChanged.
type ShapeError struct {
	Code   query.Code
	Reason string
	// Schema and Table name the table, so the runtime can make its
	// catalog read it again.
	Schema, Table string
}

// Error returns the reason.
func (e *ShapeError) Error() string { return e.Reason }

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

// shapeQuery reads tables' shapes by OID as a Relation would describe
// them: live columns with their declared types, and which columns make up
// the replica identity (the primary key's under DEFAULT, the chosen
// index's under USING INDEX, all under FULL, none under NOTHING). It is
// kept to plain joins: it runs with every read, and a subplan per column
// cost more to plan than the rest of it. $1 is a comma-separated list of OIDs. A table that
// no longer exists has no row.
const shapeQuery = `SELECT c.oid, n.nspname, c.relname, c.relreplident::text,
       a.attname, coalesce(a.atttypid, 0), coalesce(a.atttypmod, -1), coalesce(a.attnum, 0),
       coalesce(a.attnum = ANY(i.indkey), c.relreplident = 'f')
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_index i ON i.indrelid = c.oid
     AND (c.relreplident = 'd' AND i.indisprimary OR c.relreplident = 'i' AND i.indisreplident)
WHERE c.oid = ANY(string_to_array($1, ',')::oid[])
ORDER BY c.oid, a.attnum`

// oidList renders OIDs for shapeQuery's parameter.
func oidList(oids []uint32) string {
	var b []byte
	for i, o := range oids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(o), 10)
	}
	return string(b)
}

// readShapes reads the shapes of the tables oids (those that exist) on pc,
// in whatever transaction it is in.
func readShapes(ctx context.Context, pc *pgconn.PgConn, oids []uint32) (map[uint32]*change.Relation, error) {
	res := pc.ExecParams(ctx, shapeQuery, [][]byte{[]byte(oidList(oids))}, []uint32{25}, []int16{0}, nil).Read()
	if res.Err != nil {
		return nil, fmt.Errorf("read table shapes: %w", res.Err)
	}
	return parseShapes(res.Rows)
}

// parseShapes turns shapeQuery's rows (text form) into Relations.
func parseShapes(rows [][][]byte) (map[uint32]*change.Relation, error) {
	out := make(map[uint32]*change.Relation)
	for _, row := range rows {
		if len(row) != 9 {
			return nil, fmt.Errorf("read table shapes: got %d columns, want 9", len(row))
		}
		oid, err := strconv.ParseUint(string(row[0]), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("read table shapes: oid %q: %w", row[0], err)
		}
		rel := out[uint32(oid)]
		if rel == nil {
			rel = &change.Relation{OID: uint32(oid), Schema: string(row[1]), Table: string(row[2])}
			if len(row[3]) > 0 {
				rel.ReplicaIdentity = row[3][0]
			}
			out[uint32(oid)] = rel
		}
		if row[4] == nil {
			continue // a table with no live column
		}
		typ, err := strconv.ParseUint(string(row[5]), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("read table shapes: type %q: %w", row[5], err)
		}
		mod, err := strconv.ParseInt(string(row[6]), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("read table shapes: typmod %q: %w", row[6], err)
		}
		num, err := strconv.ParseInt(string(row[7]), 10, 16)
		if err != nil {
			return nil, fmt.Errorf("read table shapes: attnum %q: %w", row[7], err)
		}
		rel.Columns = append(rel.Columns, change.Column{Name: string(row[4]), TypeOID: uint32(typ), TypeMod: int32(mod), AttNum: int16(num), Key: string(row[8]) == "t"})
	}
	return out, nil
}

// checkFields compares a read's result columns as PostgreSQL describes
// them (RowDescription: the table OID and attnum each column comes from,
// and its type, a domain's base type) with the plan: a table dropped and
// made again under its name, a column retyped or dropped and added again
// since the plan was made. The SELECT's own lock keeps that description
// and its rows consistent; a column dropped or renamed fails the SELECT.
func checkFields(req ReadRequest, fds []pgconn.FieldDescription) error {
	i := 0
	for _, s := range req.Sources {
		src := req.Plan.Sources[s]
		t := src.Table
		for _, c := range src.Columns {
			if i >= len(fds) {
				return fmt.Errorf("read %q: got %d columns, want more", req.SQL, len(fds))
			}
			fd := fds[i]
			i++
			shape := func(code query.Code, format string) error {
				return &ShapeError{Code: code, Reason: fmt.Sprintf(format, c.Name, t.Schema, t.Name), Schema: t.Schema, Table: t.Name}
			}
			switch {
			case fd.TableOID != t.OID:
				return &ShapeError{Code: CodeTableDropped, Reason: fmt.Sprintf("table %s.%s was dropped (a table of that name now is another table)", t.Schema, t.Name), Schema: t.Schema, Table: t.Name}
			case c.AttNum != 0 && int16(fd.TableAttributeNumber) != c.AttNum:
				return shape(CodeSchemaChanged, "column %q of table %s.%s was dropped and added again")
			case fd.DataTypeOID != c.TypeOID || c.TypeOID == c.DeclaredOID && fd.TypeModifier != c.TypeMod:
				return shape(CodeSchemaChanged, "column %q of table %s.%s changed type")
			}
		}
	}
	return nil
}

// lockSQL locks the tables of a read's sources in ACCESS SHARE mode (what
// the SELECT itself takes), for the read to run before it takes its
// snapshot. LOCK takes no snapshot. Once it holds the locks no DDL on
// those tables can commit until the read ends: the catalog as the snapshot
// sees it is the shape the read's SELECT reads (and describes), and no
// rewrite (ALTER COLUMN TYPE, TRUNCATE) can make the table look empty to
// the snapshot. A table dropped, made again or altered between compiling
// and reading is then caught by the checks rather than read as if it were
// the old one.
func lockSQL(req ReadRequest) string {
	var names []string
	for _, s := range req.Sources {
		t := req.Plan.Sources[s].Table
		n := change.QuoteIdent(t.Schema) + "." + change.QuoteIdent(t.Name)
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "LOCK TABLE " + strings.Join(names, ", ") + " IN ACCESS SHARE MODE"
}

// starOIDs returns the OIDs of the tables of a read's sources that the
// query selects with *: the reads whose shape must be read from the
// catalog, since a column added to them shows nowhere else.
func starOIDs(req ReadRequest) []uint32 {
	var oids []uint32
	for _, s := range req.Sources {
		src := req.Plan.Sources[s]
		if o := src.Table.OID; src.Star && !slices.Contains(oids, o) {
			oids = append(oids, o)
		}
	}
	return oids
}

// checkReadShapes compares the shapes a read found (of its * sources) with
// its plan.
func checkReadShapes(req ReadRequest, shapes map[uint32]*change.Relation) error {
	for _, s := range req.Sources {
		src := req.Plan.Sources[s]
		if !src.Star {
			continue
		}
		if code, reason, _ := shapeProblem(src, shapes[src.Table.OID]); code != "" {
			return &ShapeError{Code: code, Reason: reason, Schema: src.Table.Schema, Table: src.Table.Name}
		}
	}
	return nil
}

// undefinedObject reports whether err is PostgreSQL's undefined_table
// (42P01) or undefined_column (42703): a read ran into a schema change.
func undefinedObject(err error) (code query.Code, ok bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return "", false
	}
	switch pgErr.Code {
	case "42P01":
		return CodeTableDropped, true
	case "42703":
		return CodeSchemaChanged, true
	}
	return "", false
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
	for vs := range tb.srcs {
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
	var views []*view
	for vs := range tb.srcs {
		if vs.v.status != viewDead && !slices.Contains(views, vs.v) {
			views = append(views, vs.v)
		}
	}
	slices.SortFunc(views, func(a, b *view) int { return cmpU64(a.id, b.id) })
	var key []string
	for _, p := range tb.key {
		key = append(key, tb.cols[p].name)
	}
	reason := fmt.Sprintf("the old rows of updates and deletes on table %s.%s do not carry its row key (%s): its replica identity changed",
		tb.schema, tb.name, strings.Join(key, ", "))
	for _, v := range views {
		s.endView(v, CodeSchemaChanged, reason, true)
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
	for p := range tb.cols {
		lc := tb.cols[p]
		if !lc.typed || tb.isKey(p) || tb.byName[lc.name] != p {
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
