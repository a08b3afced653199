package pgwal

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/jackc/pgx/v5"
)

// typeCache resolves type OIDs from pg_type on an ordinary connection,
// once per OID. It is the Reader's change.TypeResolver.
type typeCache struct {
	dsn string
	log *slog.Logger

	mu     sync.Mutex
	conn   *pgx.Conn
	types  map[uint32]change.Type
	absent map[uint32]bool
	closed bool
}

var _ change.TypeResolver = (*typeCache)(nil)

func newTypeCache(dsn string, log *slog.Logger) *typeCache {
	return &typeCache{dsn: dsn, log: log, types: map[uint32]change.Type{}, absent: map[uint32]bool{}}
}

// typeQuery reads what decoding needs about one type. Arrays are told
// apart by category 'A' with an element type (true on every version).
const typeQuery = `
SELECT n.nspname, t.typname, t.typtype::text, t.typbasetype, t.typelem, t.typdelim::text,
       t.typcategory = 'A' AND t.typelem <> 0
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE t.oid = $1`

// Type returns the type with the given OID. Lookups that fail for want of
// a connection are not remembered, so a later call tries again.
func (c *typeCache) Type(oid uint32) (change.Type, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.types[oid]; ok {
		return t, true
	}
	if c.absent[oid] || c.closed {
		return change.Type{}, false
	}
	t, found, err := c.lookupLocked(oid)
	if err != nil {
		c.log.Warn("could not resolve a column type from pg_type; its values stay text", "type_oid", oid, "err", err)
		return change.Type{}, false
	}
	if !found {
		c.absent[oid] = true
		return change.Type{}, false
	}
	c.types[oid] = t
	return t, true
}

func (c *typeCache) lookupLocked(oid uint32) (change.Type, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c.conn == nil || c.conn.IsClosed() {
		conn, err := connectNormal(ctx, c.dsn, map[string]string{"statement_timeout": "5000"})
		if err != nil {
			return change.Type{}, false, err
		}
		c.conn = conn
	}
	var (
		t              = change.Type{OID: oid}
		typtype, delim string
		base, elem     uint32
		isArray        bool
	)
	err := c.conn.QueryRow(ctx, typeQuery, oid).Scan(&t.Schema, &t.Name, &typtype, &base, &elem, &delim, &isArray)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, false, nil
	}
	if err != nil {
		c.conn.Close(context.Background())
		c.conn = nil
		return t, false, err
	}
	t.Kind = typeKind(typtype, isArray)
	switch t.Kind {
	case change.KindDomain:
		t.Base = base
	case change.KindArray:
		t.Elem = elem
		t.Delim = ','
		if len(delim) == 1 {
			t.Delim = delim[0]
		}
	}
	return t, true, nil
}

// typeKind maps pg_type.typtype to a TypeKind.
func typeKind(typtype string, isArray bool) change.TypeKind {
	switch {
	case isArray:
		return change.KindArray
	case typtype == "b":
		return change.KindBase
	case typtype == "e":
		return change.KindEnum
	case typtype == "d":
		return change.KindDomain
	case typtype == "c":
		return change.KindComposite
	case typtype == "r" || typtype == "m":
		return change.KindRange
	}
	return change.KindOther
}

func (c *typeCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.conn != nil {
		c.conn.Close(context.Background())
		c.conn = nil
	}
}

// TypeResolver is a change.TypeResolver reading pg_type on a connection
// of its own, opened on first use: what a consumer that does not hold a
// Reader (a bus-fed engine) gives the engine and the s2s server.
type TypeResolver struct{ c *typeCache }

var _ change.TypeResolver = (*TypeResolver)(nil)

// NewTypeResolver returns a resolver for the database at dsn (an ordinary
// connection string). Close it when done.
func NewTypeResolver(dsn string, log *slog.Logger) *TypeResolver {
	if log == nil {
		log = slog.Default()
	}
	return &TypeResolver{c: newTypeCache(dsn, log)}
}

// Type implements change.TypeResolver.
func (r *TypeResolver) Type(oid uint32) (change.Type, bool) { return r.c.Type(oid) }

// Close closes the resolver's connection; later look-ups find nothing.
func (r *TypeResolver) Close() { r.c.close() }
