package query

import (
	"context"
	"fmt"
	"sync"
)

// PGPublication is a Publication read from PostgreSQL: the tables
// pg_publication_tables lists for one publication, by OID, as of the last
// Load. That view lists what the change stream carries under each
// relation's own name: every table for FOR ALL TABLES (never system
// catalogs, views, materialized views, foreign tables or temporary
// tables, which are never published), and for a partitioned table its
// leaf partitions, or the partitioned table itself under
// publish_via_partition_root.
type PGPublication struct {
	db   Querier
	name string

	mu     sync.RWMutex
	tables map[uint32]bool
}

var _ Publication = (*PGPublication)(nil)

// NewPGPublication returns the publication name read through db. It
// publishes nothing until Load has succeeded once.
func NewPGPublication(db Querier, name string) *PGPublication {
	return &PGPublication{db: db, name: name, tables: map[uint32]bool{}}
}

// publicationQuery lists a publication's tables by OID.
const publicationQuery = `SELECT c.oid
FROM pg_publication_tables pt
JOIN pg_namespace n ON n.nspname = pt.schemaname
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename
WHERE pt.pubname = $1`

// Load reads the publication's tables again and returns them. On error
// the tables read before are kept.
func (p *PGPublication) Load(ctx context.Context) (map[uint32]bool, error) {
	rows, err := p.db.Query(ctx, publicationQuery, p.name)
	if err != nil {
		return nil, fmt.Errorf("read publication %q: %w", p.name, err)
	}
	defer rows.Close()
	tables := map[uint32]bool{}
	for rows.Next() {
		var oid uint32
		if err := rows.Scan(&oid); err != nil {
			return nil, fmt.Errorf("read publication %q: %w", p.name, err)
		}
		tables[oid] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read publication %q: %w", p.name, err)
	}
	p.mu.Lock()
	p.tables = tables
	p.mu.Unlock()
	return tables, nil
}

// Publishes implements Publication.
func (p *PGPublication) Publishes(t *Table) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.tables[t.OID]
}

// Name implements Publication.
func (p *PGPublication) Name() string { return p.name }
