package query

import (
	"context"
	"fmt"
	"sync"
	"time"
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

	mu       sync.RWMutex
	tables   map[uint32]bool
	loadedAt time.Time

	loadMu sync.Mutex // one Load at a time
}

// reloadEvery is the least time between two reads of the publication that
// a table missing from it causes: a table just created under FOR ALL
// TABLES, or just added, is served at once, and a stream of queries on
// unpublished tables costs at most a read this often.
const reloadEvery = 250 * time.Millisecond

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
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	return p.loadLocked(ctx)
}

func (p *PGPublication) loadLocked(ctx context.Context) (map[uint32]bool, error) {
	start := time.Now()
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
	p.tables, p.loadedAt = tables, start
	p.mu.Unlock()
	return tables, nil
}

// Publishes implements Publication. A table missing from the tables last
// read is looked up in a read of the publication that began after the
// caller asked, so a table just created under FOR ALL TABLES, or just
// added, is served at once. Reads begin at most every reloadEvery: a
// caller waits (at most that long, and never past ctx) for the next one,
// and callers that queue meanwhile share it.
func (p *PGPublication) Publishes(ctx context.Context, t *Table) (bool, error) {
	if ok, _ := p.has(t.OID); ok {
		return true, nil
	}
	asked := time.Now()
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	// A read that began after this caller asked answers it.
	if ok, at := p.has(t.OID); ok || at.After(asked) {
		return ok, nil
	} else if wait := reloadEvery - time.Since(at); wait > 0 {
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return false, ctx.Err()
		}
	}
	tables, err := p.loadLocked(ctx)
	if err != nil {
		return false, err
	}
	return tables[t.OID], nil
}

func (p *PGPublication) has(oid uint32) (bool, time.Time) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.tables[oid], p.loadedAt
}

// Name implements Publication.
func (p *PGPublication) Name() string { return p.name }
