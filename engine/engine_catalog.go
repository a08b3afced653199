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

// shapeQuery reads tables' shapes by OID as a Relation would describe
// them: live columns with their declared types, and which columns make up
// the replica identity (the primary key's under DEFAULT, the chosen
// index's under USING INDEX, all under FULL, none under NOTHING). It is
// kept to plain joins: it runs with every read, and a subplan per column
// cost more to plan than the rest of it. $1 is a comma-separated list of OIDs. A table that
// no longer exists has no row.
const shapeQuery = shapeSelect + `
WHERE c.oid = ANY(string_to_array($1, ',')::oid[])
ORDER BY c.oid, a.attnum`

// shapeSelect is what shapeQuery and resolveQuery read of each table:
// parseShapes reads its rows.
const shapeSelect = `SELECT c.oid, n.nspname, c.relname, c.relreplident::text,
       a.attname, coalesce(a.atttypid, 0), coalesce(a.atttypmod, -1), coalesce(a.attnum, 0),
       coalesce(a.attnum = ANY(i.indkey), c.relreplident = 'f')
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_index i ON i.indrelid = c.oid
     AND (c.relreplident = 'd' AND i.indisprimary OR c.relreplident = 'i' AND i.indisreplident)`

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
