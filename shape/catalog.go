package shape

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

// tableInfo is what the catalog says of a shape's table.
type tableInfo struct {
	cols []column // every live column, in attnum order
}

const columnsSQL = `
SELECT a.attname, a.atttypid, a.atttypmod, a.attndims, a.attnotnull,
       t.typname, et.typname, array_position(i.indkey, a.attnum),
       c.relkind, t.typtype::text, COALESCE(et.typtype::text, '')
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  JOIN pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
  LEFT JOIN pg_type et ON et.oid = t.typelem
 WHERE n.nspname = $1 AND c.relname = $2
 ORDER BY a.attnum`

func relName(schema, table string) string { return pgIdent(schema) + "." + pgIdent(table) }

// describe reads the table's columns and checks that it may be served.
// A refusal is a fieldErrors value.
func (srv *Server) describe(ctx context.Context, def definition) (*tableInfo, *fieldErrors, error) {
	errs := &fieldErrors{}
	if def.Schema == "pg_catalog" || def.Schema == "information_schema" || strings.HasPrefix(def.Schema, "pg_toast") {
		errs.add("table", fmt.Sprintf("Table %s is a system catalog: shapes serve only the tables of the publication", relName(def.Schema, def.Table)))
		return nil, errs, nil
	}
	var allowCols []string
	if srv.cfg.Tables != nil {
		cols, ok := srv.cfg.Tables[def.Schema+"."+def.Table]
		if !ok {
			errs.add("table", fmt.Sprintf("Table %s is not in this server's allow-list (--shape-tables)", relName(def.Schema, def.Table)))
			return nil, errs, nil
		}
		allowCols = cols
	}
	rows, err := srv.cfg.Pool.Query(ctx, columnsSQL, def.Schema, def.Table)
	if err != nil {
		return nil, nil, fmt.Errorf("read columns of %s: %w", relName(def.Schema, def.Table), err)
	}
	ti := &tableInfo{}
	var kind string
	for rows.Next() {
		var (
			name, typname string
			elem          *string
			oid           uint32
			typmod        int32
			dims          int16
			notNull       bool
			pkPos         *int32
		)
		var typtype, elemtype string
		if err := rows.Scan(&name, &oid, &typmod, &dims, &notNull, &typname, &elem, &pkPos, &kind, &typtype, &elemtype); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("read columns of %s: %w", relName(def.Schema, def.Table), err)
		}
		c := column{name: name, typeOID: oid, pkIndex: -1}
		if pkPos != nil {
			c.pkIndex = int(*pkPos)
		}
		t, ok := change.BuiltinType(oid)
		if !ok && srv.cfg.Types != nil {
			t, ok = srv.cfg.Types.Type(oid)
		}
		if !ok {
			t = change.Type{OID: oid, Name: typname, Kind: change.KindOther}
		}
		c.typ = t
		c.schema = schemaOf(typname, elem, dims, notNull, c.pkIndex, typmod)
		// A composite (or a domain, which may be over one) may hold
		// intervals, re-rendered in ISO 8601 (record.go).
		c.mayHoldRecord = typtype == "c" || typtype == "d" || elemtype == "c" || elemtype == "d"
		ti.cols = append(ti.cols, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read columns of %s: %w", relName(def.Schema, def.Table), err)
	}
	for i := range ti.cols {
		if ti.cols[i].mayHoldRecord {
			p, err := srv.recordPlan(ctx, ti.cols[i].typeOID)
			if err != nil {
				return nil, nil, fmt.Errorf("read the type of %s.%s: %w", relName(def.Schema, def.Table), pgIdent(ti.cols[i].name), err)
			}
			ti.cols[i].rec = p
		}
	}
	if len(ti.cols) == 0 || (kind != "r" && kind != "p") {
		errs.add("table", fmt.Sprintf("Table %s does not exist. If the table name contains capitals or special characters you must quote it.", relName(def.Schema, def.Table)))
		return nil, errs, nil
	}
	if srv.cfg.Publication != "" {
		var in bool
		err := srv.cfg.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3)`,
			srv.cfg.Publication, def.Schema, def.Table).Scan(&in)
		if err != nil {
			return nil, nil, fmt.Errorf("check publication %s: %w", srv.cfg.Publication, err)
		}
		if !in {
			errs.add("table", fmt.Sprintf("Table %s is not in the publication %q that this server follows: add it (ALTER PUBLICATION %s ADD TABLE %s)",
				relName(def.Schema, def.Table), srv.cfg.Publication, pgIdent(srv.cfg.Publication), relName(def.Schema, def.Table)))
			return nil, errs, nil
		}
	}
	// Columns: the requested ones (all when none), in the table's order,
	// the primary key included.
	var pkNames []string
	names := map[string]bool{}
	for _, c := range ti.cols {
		names[c.name] = true
		if c.pkIndex >= 0 {
			pkNames = append(pkNames, c.name)
		}
	}
	if len(pkNames) == 0 {
		errs.add("table", fmt.Sprintf("Table %s has no primary key: shapes key rows by it", relName(def.Schema, def.Table)))
		return nil, errs, nil
	}
	want := def.Columns
	if want != nil {
		var missing, unknown []string
		for _, p := range pkNames {
			if !slices.Contains(want, p) {
				missing = append(missing, p)
			}
		}
		for _, w := range want {
			if !names[w] {
				unknown = append(unknown, w)
			}
		}
		if len(missing) > 0 {
			errs.add("columns", "The list of columns must include all primary key columns, missing: "+strings.Join(missing, ", "))
		} else if len(unknown) > 0 {
			errs.add("columns", "The following columns are not found on the table: "+strings.Join(unknown, ", "))
		}
	}
	if allowCols != nil {
		check := want
		if check == nil {
			check = make([]string, 0, len(ti.cols))
			for _, c := range ti.cols {
				check = append(check, c.name)
			}
		}
		var denied []string
		for _, w := range check {
			if names[w] && !slices.Contains(allowCols, w) {
				denied = append(denied, w)
			}
		}
		if len(denied) > 0 {
			errs.add("columns", "These columns are not in this server's allow-list (--shape-tables): "+strings.Join(denied, ", ")+"; select only allowed ones with columns=")
		}
	}
	if allowCols != nil && def.Where != "" {
		if err := checkColumns(wherePrefix, def.Where, func(c string) bool { return slices.Contains(allowCols, c) }); err != nil {
			errs.add("where", "with this server's allow-list (--shape-tables) the where clause "+err.Error())
		}
	}
	if !errs.empty() {
		return nil, errs, nil
	}
	if want != nil {
		kept := ti.cols[:0]
		for _, c := range ti.cols {
			if slices.Contains(want, c.name) {
				kept = append(kept, c)
			}
		}
		ti.cols = kept
	}
	return ti, nil, nil
}

// schemaOf is a column's electric-schema entry, with Electric's keys and
// modifiers; keys sorted as Electric's JSON encoder writes them.
func schemaOf(typname string, elem *string, dims int16, notNull bool, pkIndex int, typmod int32) []byte {
	m := map[string]any{"type": typname}
	if dims > 0 && elem != nil {
		m["type"] = *elem
		m["dims"] = dims
	}
	if pkIndex >= 0 {
		m["pk_index"] = pkIndex
	}
	if notNull {
		m["not_null"] = true
	}
	t := m["type"].(string)
	switch {
	case typmod > 0 && (t == "varchar" || t == "text"):
		m["max_length"] = typmod - 4
	case typmod > 0 && t == "bpchar":
		m["length"] = typmod - 4
	case t == "bit" || t == "varbit":
		m["length"] = typmod
	case t == "interval" && typmod > -1:
		rng, prec := int16(uint32(typmod)>>16), int16(uint32(typmod)&0xffff)
		if f := intervalFields(rng); f != "" {
			m["fields"] = f
		}
		if prec != -1 {
			m["precision"] = prec
		}
	case typmod > 0 && (t == "time" || t == "timetz" || t == "timestamp" || t == "timestamptz"):
		m["precision"] = typmod
	case t == "numeric" && typmod > -1:
		v := uint32(typmod - 4)
		m["precision"], m["scale"] = int16(v>>16), int16(v&0xffff)
	case typmod > -1:
		m["type_mod"] = typmod
	}
	b, _ := json.Marshal(m) // maps marshal with sorted keys
	return b
}

func intervalFields(rng int16) string {
	if rng == 0x7fff {
		return ""
	}
	units := []struct {
		name string
		mask int16
	}{{"YEAR", 1 << 2}, {"MONTH", 1 << 1}, {"DAY", 1 << 3}, {"HOUR", 1 << 10}, {"MINUTE", 1 << 11}, {"SECOND", 1 << 12}}
	var got []string
	for _, u := range units {
		if rng&u.mask != 0 {
			got = append(got, u.name)
		}
	}
	switch len(got) {
	case 0:
		return ""
	case 1:
		return got[0]
	}
	return got[0] + " TO " + got[len(got)-1]
}

// schemaHeader is the electric-schema value: columns by name, sorted.
func schemaHeader(cols []column) string {
	sorted := slices.Clone(cols)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	b := []byte{'{'}
	for i, c := range sorted {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, c.name)
		b = append(b, ':')
		b = append(b, c.schema...)
	}
	return string(append(b, '}'))
}

// shapeSQL is the subscription's query.
func shapeSQL(def definition, cols []column) string {
	var b strings.Builder
	b.WriteString("SELECT ")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgIdent(c.name))
	}
	b.WriteString(" FROM ")
	b.WriteString(relName(def.Schema, def.Table))
	if def.Where != "" {
		b.WriteString(" WHERE (")
		b.WriteString(def.Where)
		b.WriteString(")")
	}
	return b.String()
}

// textBinds are params as text binds whose types PostgreSQL's rules infer.
func textBinds(params []string) []query.Bind {
	out := make([]query.Bind, len(params))
	for i, p := range params {
		out[i] = query.Bind{Format: query.FormatText, Data: []byte(p)}
	}
	return out
}
