package query

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/freshetdb/freshet/change"
	"github.com/jackc/pgx/v5"
)

// ErrNoTable is returned (wrapped) by a Catalog for a table that does not
// exist.
var ErrNoTable = errors.New("no such table")

// Catalog describes tables. Compile asks it for every table a query names;
// the engine passes one in (PGCatalog, or its own).
type Catalog interface {
	// Table returns the named table, or an error wrapping ErrNoTable when
	// there is none. Other errors end the compilation with that error.
	Table(ctx context.Context, schema, name string) (*Table, error)
}

// Table is a table as compiling a query needs it.
type Table struct {
	OID     uint32
	Schema  string
	Name    string
	Columns []Column // live columns in attnum order (dropped ones left out)
	// PrimaryKey holds the names of the primary key's columns in key
	// order; empty when the table has none.
	PrimaryKey []string
	// ReplicaIdentity is the table's relreplident: 'd' default (the
	// primary key), 'i' a chosen unique index, 'f' the full row, 'n'
	// nothing; 0 when the catalog does not say.
	ReplicaIdentity byte
	// IdentityKey holds, under REPLICA IDENTITY USING INDEX ('i'), the
	// names of that index's columns in index order; empty otherwise.
	IdentityKey []string
	// DefaultCollation is the database's default collation (what text
	// constants take); zero when the catalog does not say.
	DefaultCollation Collation
}

// RowKey returns the columns that identify a row of the table in the
// change stream: the replica identity index's under REPLICA IDENTITY USING
// INDEX (the old keys of updates and deletes carry those columns, not the
// primary key's), otherwise the primary key's. Empty when neither exists.
func (t *Table) RowKey() []string {
	if t.ReplicaIdentity == 'i' && len(t.IdentityKey) > 0 {
		return t.IdentityKey
	}
	return t.PrimaryKey
}

// Column returns the named column and its index, or -1.
func (t *Table) Column(name string) (*Column, int) {
	for i := range t.Columns {
		if t.Columns[i].Name == name {
			return &t.Columns[i], i
		}
	}
	return nil, -1
}

// Column is a column of a Table.
type Column struct {
	Name string
	// TypeOID is the column's type with domains resolved to their base
	// type (what its values decode as); DeclaredOID the type as declared.
	TypeOID     uint32
	DeclaredOID uint32
	TypeMod     int32 // atttypmod, -1 when none
	// AttNum is the column's attnum: a column dropped and added again
	// under its name has a new one.
	AttNum  int16
	NotNull bool
	// Type describes TypeOID: its kind (base, enum, array...) and, for an
	// array, its element type.
	Type change.Type
	// Collation is the column's collation, resolved (the database default
	// is looked up); zero for types that are not collatable.
	Collation Collation
}

// Collation is a collation as comparing text needs it.
type Collation struct {
	OID      uint32
	Name     string // pg_collation.collname, e.g. "default", "C", "en_US"
	Provider byte   // 'c' libc, 'i' icu ('d' is resolved to the database's)
	// Collate is the locale its order comes from (LC_COLLATE for libc, the
	// ICU locale otherwise), e.g. "C.UTF-8".
	Collate       string
	Deterministic bool
}

// Bytewise reports whether the collation orders text by its bytes, which
// for UTF-8 is code point order: "C", "POSIX" and libc's "C.UTF-8" (glibc's
// C.UTF-8 collates by code point).
func (c Collation) Bytewise() bool {
	if c.Provider != 'c' {
		return false
	}
	switch c.Collate {
	case "C", "POSIX", "C.UTF-8", "C.utf8":
		return true
	}
	return false
}

// Querier runs a query; *pgx.Conn, *pgxpool.Pool and pgx.Tx are Queriers.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// PGCatalog is a Catalog that reads pg_catalog and keeps what it read until
// told to forget it (Invalidate, Reset): the engine calls those when the
// change stream reports a relation's new shape.
type PGCatalog struct {
	db Querier

	mu     sync.Mutex
	tables map[[2]string]*Table
	dbColl *Collation // the database's default collation, once read
}

var _ Catalog = (*PGCatalog)(nil)

// NewPGCatalog returns a catalog reading through db. Table may be called
// from many goroutines: give it a *pgxpool.Pool then (a *pgx.Conn serves
// one caller at a time). Views, foreign tables and other relations that are
// not tables read as missing (ErrNoTable).
func NewPGCatalog(db Querier) *PGCatalog {
	return &PGCatalog{db: db, tables: make(map[[2]string]*Table)}
}

// Invalidate forgets what was read about schema.name.
func (c *PGCatalog) Invalidate(schema, name string) {
	c.mu.Lock()
	delete(c.tables, [2]string{schema, name})
	c.mu.Unlock()
}

// Reset forgets everything read.
func (c *PGCatalog) Reset() {
	c.mu.Lock()
	c.tables = make(map[[2]string]*Table)
	c.dbColl = nil
	c.mu.Unlock()
}

// Table implements Catalog.
func (c *PGCatalog) Table(ctx context.Context, schema, name string) (*Table, error) {
	key := [2]string{schema, name}
	c.mu.Lock()
	t, ok := c.tables[key]
	dbColl := c.dbColl
	c.mu.Unlock()
	if ok {
		return t, nil
	}
	if dbColl == nil {
		var err error
		if dbColl, err = c.readDefaultCollation(ctx); err != nil {
			return nil, err
		}
	}
	t, err := c.readTable(ctx, schema, name, *dbColl)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.tables[key] = t
	c.dbColl = dbColl
	c.mu.Unlock()
	return t, nil
}

func (c *PGCatalog) readDefaultCollation(ctx context.Context) (*Collation, error) {
	rows, err := c.db.Query(ctx, `SELECT datcollate, datlocprovider::text, coalesce(daticulocale, '')
		FROM pg_database WHERE datname = current_database()`)
	if err != nil {
		return nil, fmt.Errorf("read database collation: %w", err)
	}
	coll := Collation{OID: 100, Name: "default", Deterministic: true}
	var provider, icu string
	found := false
	for rows.Next() {
		if err := rows.Scan(&coll.Collate, &provider, &icu); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read database collation: %w", err)
		}
		found = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read database collation: %w", err)
	}
	if !found {
		return nil, errors.New("read database collation: current database not in pg_database")
	}
	coll.Provider = 'c'
	if provider == "i" {
		coll.Provider = 'i'
		coll.Collate = icu
	}
	return &coll, nil
}

const tableQuery = `
SELECT c.oid, a.attname, a.atttypid, a.atttypmod, a.attnum, a.attnotnull,
       coalesce(bt.oid, t.oid) AS base_oid,
       bt_or_t.typtype::text, bt_or_t.typelem, bt_or_t.typcategory::text, bt_or_t.typdelim::text,
       bt_or_t.typname, tn.nspname,
       coalesce(a.attcollation, 0), coalesce(co.collname, ''), coalesce(co.collprovider::text, ''),
       coalesce(co.collcollate, ''), coalesce(co.colliculocale, ''), coalesce(co.collisdeterministic, true),
       coalesce(array_position(pk.conkey, a.attnum), 0),
       c.relreplident::text,
       -- indkey is an int2vector, whose subscripts start at 0
       coalesce(array_position(ri.indkey::int2[], a.attnum) - array_lower(ri.indkey::int2[], 1) + 1, 0)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_type bt ON t.typtype = 'd' AND bt.oid = t.typbasetype
JOIN pg_type bt_or_t ON bt_or_t.oid = coalesce(bt.oid, t.oid)
JOIN pg_namespace tn ON tn.oid = bt_or_t.typnamespace
LEFT JOIN pg_collation co ON co.oid = a.attcollation
LEFT JOIN pg_constraint pk ON pk.conrelid = c.oid AND pk.contype = 'p'
LEFT JOIN pg_index ri ON ri.indrelid = c.oid AND ri.indisreplident
WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')
ORDER BY a.attnum`

func (c *PGCatalog) readTable(ctx context.Context, schema, name string, dbColl Collation) (*Table, error) {
	rows, err := c.db.Query(ctx, tableQuery, schema, name)
	if err != nil {
		return nil, fmt.Errorf("read table %s.%s: %w", schema, name, err)
	}
	defer rows.Close()
	t := &Table{Schema: schema, Name: name, DefaultCollation: dbColl}
	type keyCol struct {
		pos  int32
		name string
	}
	var pk, ik []keyCol
	for rows.Next() {
		var (
			col                             Column
			typtype, typcat, typdelim       string
			typelem                         uint32
			collOID                         uint32
			collName, collProv, collCollate string
			collICU                         string
			collDet                         bool
			pkPos, ikPos                    int32
			replident                       string
		)
		if err := rows.Scan(&t.OID, &col.Name, &col.DeclaredOID, &col.TypeMod, &col.AttNum, &col.NotNull,
			&col.TypeOID, &typtype, &typelem, &typcat, &typdelim, &col.Type.Name, &col.Type.Schema,
			&collOID, &collName, &collProv, &collCollate, &collICU, &collDet, &pkPos, &replident, &ikPos); err != nil {
			return nil, fmt.Errorf("read table %s.%s: %w", schema, name, err)
		}
		col.Type.OID = col.TypeOID
		switch {
		case typcat == "A" && typelem != 0:
			col.Type.Kind = change.KindArray
			col.Type.Elem = typelem
			if typdelim != "" {
				col.Type.Delim = typdelim[0]
			}
		case typtype == "e":
			col.Type.Kind = change.KindEnum
		case typtype == "c":
			col.Type.Kind = change.KindComposite
		case typtype == "r":
			col.Type.Kind = change.KindRange
		case typtype == "b":
			col.Type.Kind = change.KindBase
		default:
			col.Type.Kind = change.KindOther
		}
		if collOID != 0 {
			if collOID == 100 || collProv == "d" {
				col.Collation = dbColl
			} else {
				col.Collation = Collation{OID: collOID, Name: collName, Provider: collProv[0], Collate: collCollate, Deterministic: collDet}
				if collProv == "i" {
					col.Collation.Collate = collICU
				}
			}
		}
		if pkPos > 0 {
			pk = append(pk, keyCol{pkPos, col.Name})
		}
		if ikPos > 0 {
			ik = append(ik, keyCol{ikPos, col.Name})
		}
		if replident != "" {
			t.ReplicaIdentity = replident[0]
		}
		t.Columns = append(t.Columns, col)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read table %s.%s: %w", schema, name, err)
	}
	if len(t.Columns) == 0 {
		return nil, fmt.Errorf("read table %s.%s: %w", schema, name, ErrNoTable)
	}
	t.PrimaryKey = make([]string, len(pk))
	for _, k := range pk {
		t.PrimaryKey[k.pos-1] = k.name
	}
	if t.ReplicaIdentity == 'i' && len(ik) > 0 {
		t.IdentityKey = make([]string, len(ik))
		for _, k := range ik {
			t.IdentityKey[k.pos-1] = k.name
		}
	}
	return t, nil
}
