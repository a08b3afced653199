package pgxcache

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freshetdb/freshet/readcache"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool is a *pgxpool.Pool whose reads go through a read cache.
type Pool struct {
	pool      *pgxpool.Pool
	cache     *readcache.Cache
	ryw       time.Duration
	route     atomic.Int32
	lastWrite atomic.Int64
	maps      sync.Pool
}

// New wraps pool with a cache configured by cfg. Close closes both.
func New(pool *pgxpool.Pool, cfg readcache.Config) (*Pool, error) {
	c, err := readcache.Open(cfg)
	if err != nil {
		return nil, err
	}
	p := &Pool{pool: pool, cache: c, ryw: cfg.ReadYourWrites}
	p.route.Store(int32(cfg.Route))
	p.maps.New = func() any { return pgtype.NewMap() }
	return p, nil
}

// Pool returns the wrapped pool.
func (p *Pool) Pool() *pgxpool.Pool { return p.pool }

// Cache returns the cache (stats, errors, the Prometheus collector).
func (p *Pool) Cache() *readcache.Cache { return p.cache }

// SetRoute sets the pool's route (RouteDefault: the process default).
func (p *Pool) SetRoute(r readcache.Route) { p.route.Store(int32(r)) }

// Close closes the cache and the pool.
func (p *Pool) Close() {
	p.cache.Close()
	p.pool.Close()
}

// Ping pings PostgreSQL.
func (p *Pool) Ping(ctx context.Context) error { return p.pool.Ping(ctx) }

func (p *Pool) wrote() { p.lastWrite.Store(time.Now().UnixNano()) }

// Exec runs sql on PostgreSQL and starts the read-your-writes window.
func (p *Pool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := p.pool.Exec(ctx, sql, args...)
	p.wrote()
	return tag, err
}

// Begin starts a transaction on PostgreSQL; its reads go there, and its
// commit starts the read-your-writes window.
func (p *Pool) Begin(ctx context.Context) (pgx.Tx, error) {
	return p.BeginTx(ctx, pgx.TxOptions{})
}

// BeginTx is Begin with options.
func (p *Pool) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	tx, err := p.pool.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &txn{Tx: tx, p: p}, nil
}

type txn struct {
	pgx.Tx
	p *Pool
}

func (t *txn) Commit(ctx context.Context) error {
	err := t.Tx.Commit(ctx)
	t.p.wrote()
	return err
}

// SendBatch sends a batch to PostgreSQL (not cached).
func (p *Pool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	r := p.pool.SendBatch(ctx, b)
	p.wrote()
	return r
}

// CopyFrom copies rows into PostgreSQL.
func (p *Pool) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	n, err := p.pool.CopyFrom(ctx, table, cols, src)
	p.wrote()
	return n, err
}

// Query serves a read from the cache when it may, and from PostgreSQL
// otherwise.
func (p *Pool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if res := p.read(ctx, sql, args); res != nil {
		m := p.maps.Get().(*pgtype.Map)
		return newRows(res, m, func() { p.maps.Put(m) }), nil
	}
	rows, err := p.pool.Query(ctx, sql, args...)
	if !readcache.IsSelect(sql) {
		p.wrote()
	}
	return rows, err
}

// QueryRow is Query for one row.
func (p *Pool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := p.Query(ctx, sql, args...)
	return &row{rows: rows, err: err}
}

// read returns the cached result, or nil when the read goes to PostgreSQL.
func (p *Pool) read(ctx context.Context, sql string, args []any) *readcache.Result {
	c := p.cache
	reason := readcache.ReasonNone
	switch {
	case !c.Enabled():
		reason = readcache.ReasonDisabled
	case !readcache.IsSelect(sql):
		reason = readcache.ReasonNotSelect
	case readcache.Resolve(readcache.RouteOf(ctx), readcache.Route(p.route.Load())) == readcache.RoutePostgres:
		reason = readcache.ReasonRoute
	case p.ryw > 0 && time.Duration(time.Now().UnixNano()-p.lastWrite.Load()) < p.ryw:
		reason = readcache.ReasonAfterWrite
	case len(args) > 0 && isOption(args[0]):
		reason = readcache.ReasonUnsupported
	}
	if reason != readcache.ReasonNone {
		c.Bypass(reason)
		return nil
	}
	if c.NeedsIdentity() {
		var id readcache.Identity
		err := p.pool.QueryRow(ctx, readcache.IdentityQuery).Scan(&id.SystemIdentifier, &id.Database)
		c.Verify(id, err)
	}
	m := p.maps.Get().(*pgtype.Map)
	params, ok := readcache.Params(m, args)
	p.maps.Put(m)
	if !ok {
		c.Bypass(readcache.ReasonUnsupported)
		return nil
	}
	res, reason := c.Read(ctx, sql, params)
	if reason != readcache.ReasonNone {
		return nil
	}
	return res
}

// isOption reports a pgx query option in the first argument (exec mode,
// result formats, named arguments): such reads go to PostgreSQL.
func isOption(a any) bool {
	switch a.(type) {
	case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID, pgx.QueryRewriter:
		return true
	}
	return false
}

// rows are a cached result as pgx.Rows.
type rows struct {
	res    *readcache.Result
	m      *pgtype.Map
	done   func()
	i      int
	fields []pgconn.FieldDescription
	closed bool
	err    error
}

var _ pgx.Rows = (*rows)(nil)

func newRows(res *readcache.Result, m *pgtype.Map, done func()) *rows {
	r := &rows{res: res, m: m, done: done, i: -1, fields: make([]pgconn.FieldDescription, len(res.Columns))}
	for i, c := range res.Columns {
		r.fields[i] = pgconn.FieldDescription{Name: c.Name, DataTypeOID: c.TypeOID, TypeModifier: -1, DataTypeSize: -1,
			Format: pgtype.TextFormatCode}
	}
	return r
}

func (r *rows) Close() {
	if !r.closed {
		r.closed = true
		r.done()
	}
}

func (r *rows) Err() error { return r.err }

func (r *rows) CommandTag() pgconn.CommandTag {
	return pgconn.NewCommandTag("SELECT " + strconv.Itoa(len(r.res.Rows)))
}

func (r *rows) FieldDescriptions() []pgconn.FieldDescription { return r.fields }

func (r *rows) Next() bool {
	if r.closed {
		return false
	}
	r.i++
	if r.i >= len(r.res.Rows) {
		r.Close()
		return false
	}
	return true
}

func (r *rows) Scan(dest ...any) error {
	if r.closed && r.i < len(r.res.Rows) || r.i < 0 {
		return errors.New("pgxcache: Scan called without a row (call Next first)")
	}
	if len(dest) == 1 {
		if rs, ok := dest[0].(pgx.RowScanner); ok {
			return rs.ScanRow(r)
		}
	}
	if len(dest) != len(r.fields) {
		return fmt.Errorf("number of field descriptions must equal number of destinations, got %d and %d", len(r.fields), len(dest))
	}
	row := r.res.Rows[r.i]
	for i, d := range dest {
		if d == nil {
			continue
		}
		if err := r.m.Scan(r.fields[i].DataTypeOID, pgtype.TextFormatCode, row[i], d); err != nil {
			r.err = pgx.ScanArgError{ColumnIndex: i, FieldName: r.fields[i].Name, Err: err}
			r.Close()
			return r.err
		}
	}
	return nil
}

func (r *rows) Values() ([]any, error) {
	if r.i < 0 || r.i >= len(r.res.Rows) {
		return nil, errors.New("pgxcache: Values called without a row (call Next first)")
	}
	row := r.res.Rows[r.i]
	out := make([]any, len(row))
	for i, v := range row {
		if v == nil {
			continue
		}
		oid := r.fields[i].DataTypeOID
		t, ok := r.m.TypeForOID(oid)
		if !ok {
			out[i] = string(v)
			continue
		}
		val, err := t.Codec.DecodeValue(r.m, oid, pgtype.TextFormatCode, v)
		if err != nil {
			r.err = err
			r.Close()
			return nil, err
		}
		out[i] = val
	}
	return out, nil
}

// RawValues returns the current row's values in text form. They belong to
// the cache: copy them to keep them, never modify them.
func (r *rows) RawValues() [][]byte {
	if r.i < 0 || r.i >= len(r.res.Rows) {
		return nil
	}
	return r.res.Rows[r.i]
}

func (r *rows) Conn() *pgx.Conn { return nil }

func (r *rows) TypeMap() *pgtype.Map { return r.m }

type row struct {
	rows pgx.Rows
	err  error
}

func (r *row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
