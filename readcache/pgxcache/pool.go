package pgxcache

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"reflect"
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

	// states hold a type map and a key buffer for one read at a time.
	// Nil until the types registered on the pool's connections are
	// known (typeMaps); reads go to PostgreSQL until then.
	states atomic.Pointer[sync.Pool]
	typing sync.Mutex
}

// state is what one read owns while it runs: a type map made from the
// pool's (a *pgtype.Map is not safe for concurrent use) and a key buffer.
type state struct {
	m   *pgtype.Map
	key []byte
	// own are the OIDs whose types were given this map's own codecs (see
	// ownTypes).
	own map[uint32]bool
}

// New wraps pool with a cache configured by cfg. Close closes both.
func New(pool *pgxpool.Pool, cfg readcache.Config) (*Pool, error) {
	c, err := readcache.Open(cfg)
	if err != nil {
		return nil, err
	}
	p := &Pool{pool: pool, cache: c, ryw: cfg.ReadYourWrites}
	p.route.Store(int32(cfg.Route))
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

func (p *Pool) wrote() { p.lastWrite.Store(p.cache.Now()) }

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
	if res, st := p.read(ctx, sql, args); res != nil {
		return newRows(res, st, p.states.Load()), nil
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

// read returns the cached result and the state that keyed it (the rows
// return it), or nil when the read goes to PostgreSQL.
func (p *Pool) read(ctx context.Context, sql string, args []any) (*readcache.Result, *state) {
	c := p.cache
	reason := readcache.ReasonNone
	switch {
	case !c.Enabled():
		reason = readcache.ReasonDisabled
	case !readcache.IsSelect(sql):
		reason = readcache.ReasonNotSelect
	case readcache.Resolve(readcache.RouteOf(ctx), readcache.Route(p.route.Load())) == readcache.RoutePostgres:
		reason = readcache.ReasonRoute
	case p.ryw > 0 && time.Duration(c.Now()-p.lastWrite.Load()) < p.ryw:
		reason = readcache.ReasonAfterWrite
	case len(args) > 0 && isOption(args[0]):
		reason = readcache.ReasonUnsupported
	}
	if reason != readcache.ReasonNone {
		c.Bypass(reason)
		return nil, nil
	}
	states := p.states.Load()
	if ident := c.NeedsIdentity(); states == nil || ident {
		if states = p.learn(ctx, ident); states == nil {
			c.Bypass(readcache.ReasonDisconnected)
			return nil, nil
		}
	}
	st := states.Get().(*state)
	key := readcache.AppendKey(st.key[:0], sql)
	ok := true
	for _, a := range args {
		if key, ok = readcache.AppendArg(key, st.m, a); !ok {
			break
		}
	}
	st.key = key
	if !ok {
		states.Put(st)
		c.Bypass(readcache.ReasonUnsupported)
		return nil, nil
	}
	res, reason := c.ReadKey(ctx, key)
	if reason != readcache.ReasonNone {
		states.Put(st)
		return nil, nil
	}
	return res, st
}

// learn checks, on one of the pool's connections, the identity of the
// database (when the cache asks) and the types registered on it (once: a
// pool's AfterConnect registers the same types on every connection), so
// cached rows decode with the codecs a live read would use. It returns
// the read states, nil while the types are not known yet. ident says the
// cache asked for the identity check (NeedsIdentity): Verify is then owed.
func (p *Pool) learn(ctx context.Context, ident bool) *sync.Pool {
	p.typing.Lock()
	defer p.typing.Unlock()
	c := p.cache
	if states := p.states.Load(); states != nil && !ident {
		return states
	}
	err := p.pool.AcquireFunc(ctx, func(conn *pgxpool.Conn) error {
		if p.states.Load() == nil {
			tmpl := conn.Conn().TypeMap().Copy()
			p.states.Store(&sync.Pool{New: func() any {
				return &state{m: tmpl.Copy(), own: map[uint32]bool{}}
			}})
		}
		if ident {
			var id readcache.Identity
			err := conn.QueryRow(ctx, readcache.IdentityQuery).Scan(&id.SystemIdentifier, &id.Database)
			c.Verify(id, err)
			ident = false
		}
		return nil
	})
	if ident {
		c.Verify(readcache.Identity{}, err)
	}
	return p.states.Load()
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
	dec    *decoded
	st     *state
	states *sync.Pool
	i      int
	closed bool
	err    error
}

var _ pgx.Rows = (*rows)(nil)

// decoded is what the wrapper derives once from a Result: the field
// descriptions, and each value of a built-in type in the Go type pgx
// scans it into most often (int16/32/64, float32/64, bool, string,
// time.Time, pgtype.Numeric), decoded by pgx itself. Scan hands a target of exactly that
// type the kept value, and decodes the text for any other target.
type decoded struct {
	fields []pgconn.FieldDescription
	vals   [][]any // nil where not kept
}

// firstNormalOID is PostgreSQL's FirstNormalObjectId: types below it are
// built in, decoded alike by every connection's type map.
const firstNormalOID = 16384

// decode decodes res; the rows of prev (the previous result's, when kept)
// that the delta left alone are taken as they are (from).
func decode(res *readcache.Result, prev *decoded, from []int32, m *pgtype.Map) *decoded {
	d := &decoded{fields: make([]pgconn.FieldDescription, len(res.Columns)), vals: make([][]any, len(res.Rows))}
	kept := make([]func() any, len(res.Columns))
	for i, c := range res.Columns {
		mod := int32(-1)
		if c.TypeMod != nil {
			mod = *c.TypeMod
		}
		d.fields[i] = pgconn.FieldDescription{Name: c.Name, DataTypeOID: c.TypeOID, TypeModifier: mod, DataTypeSize: -1,
			Format: pgtype.TextFormatCode}
		if c.TypeOID < firstNormalOID {
			kept[i] = natural(c.TypeOID)
		}
	}
	n := len(res.Columns)
	flat := make([]any, n*readcache.ChangedRows(from, len(res.Rows)))
	for j, row := range res.Rows {
		if from != nil && from[j] >= 0 {
			d.vals[j] = prev.vals[from[j]]
			continue
		}
		d.vals[j], flat = flat[:n:n], flat[n:]
		for i, v := range row {
			if v == nil || kept[i] == nil {
				continue
			}
			dst := kept[i]()
			if err := m.Scan(res.Columns[i].TypeOID, pgtype.TextFormatCode, v, dst); err == nil {
				d.vals[j][i] = reflect.ValueOf(dst).Elem().Interface()
			}
		}
	}
	return d
}

// natural returns a new target of the Go type values of oid are kept as,
// or nil when they are not kept (a target that could be changed through,
// such as a slice, a map or a *big.Int, is decoded per read).
func natural(oid uint32) func() any {
	switch oid {
	case pgtype.Int2OID:
		return func() any { return new(int16) }
	case pgtype.Int4OID:
		return func() any { return new(int32) }
	case pgtype.Int8OID:
		return func() any { return new(int64) }
	case pgtype.Float4OID:
		return func() any { return new(float32) }
	case pgtype.Float8OID:
		return func() any { return new(float64) }
	case pgtype.BoolOID:
		return func() any { return new(bool) }
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID, pgtype.UUIDOID:
		return func() any { return new(string) }
	case pgtype.NumericOID:
		return func() any { return new(pgtype.Numeric) } // handed out with its own big.Int
	case pgtype.TimestamptzOID, pgtype.TimestampOID, pgtype.DateOID:
		return func() any { return new(time.Time) }
	}
	return nil
}

// assign stores a kept value v into dst when dst points at v's type.
func assign(dst, v any) bool {
	switch d := dst.(type) {
	case *string:
		x, ok := v.(string)
		if ok {
			*d = x
		}
		return ok
	case *int32:
		x, ok := v.(int32)
		if ok {
			*d = x
		}
		return ok
	case *int64:
		x, ok := v.(int64)
		if ok {
			*d = x
		}
		return ok
	case *time.Time:
		x, ok := v.(time.Time)
		if ok {
			*d = x
		}
		return ok
	case *int16:
		x, ok := v.(int16)
		if ok {
			*d = x
		}
		return ok
	case *float64:
		x, ok := v.(float64)
		if ok {
			*d = x
		}
		return ok
	case *float32:
		x, ok := v.(float32)
		if ok {
			*d = x
		}
		return ok
	case *bool:
		x, ok := v.(bool)
		if ok {
			*d = x
		}
		return ok
	case *pgtype.Numeric:
		x, ok := v.(pgtype.Numeric)
		if ok {
			*d = x
			if x.Int != nil {
				d.Int = new(big.Int).Set(x.Int)
			}
		}
		return ok
	}
	return false
}

func newRows(res *readcache.Result, st *state, states *sync.Pool) *rows {
	r := &rows{res: res, st: st, states: states, i: -1}
	r.dec = res.Memo(readcache.MemoPgx, func(res *readcache.Result, prev any, from []int32) any {
		p, _ := prev.(*decoded)
		return decode(res, p, from, st.m)
	}).(*decoded)
	for _, f := range r.dec.fields {
		if f.DataTypeOID >= firstNormalOID {
			st.ownTypes(f.DataTypeOID)
		}
	}
	return r
}

func (r *rows) Close() {
	if !r.closed {
		r.closed = true
		r.states.Put(r.st)
	}
}

func (r *rows) Err() error { return r.err }

func (r *rows) CommandTag() pgconn.CommandTag {
	return pgconn.NewCommandTag("SELECT " + strconv.Itoa(len(r.res.Rows)))
}

// FieldDescriptions returns the result's columns (shared by every read of
// the result: do not change them).
func (r *rows) FieldDescriptions() []pgconn.FieldDescription { return r.dec.fields }

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
	fields := r.dec.fields
	if len(dest) != len(fields) {
		return fmt.Errorf("number of field descriptions must equal number of destinations, got %d and %d", len(fields), len(dest))
	}
	row, kept := r.res.Rows[r.i], r.dec.vals[r.i]
	for i, d := range dest {
		if d == nil {
			continue
		}
		if v := kept[i]; v != nil && assign(d, v) {
			continue
		}
		if err := r.st.m.Scan(fields[i].DataTypeOID, pgtype.TextFormatCode, row[i], d); err != nil {
			r.err = pgx.ScanArgError{ColumnIndex: i, FieldName: fields[i].Name, Err: err}
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
		oid := r.dec.fields[i].DataTypeOID
		t, ok := r.st.m.TypeForOID(oid)
		if !ok {
			out[i] = string(v)
			continue
		}
		val, err := t.Codec.DecodeValue(r.st.m, oid, pgtype.TextFormatCode, v)
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

func (r *rows) TypeMap() *pgtype.Map { return r.st.m }

// ownTypes gives this state's map its own codec for type oid where the
// pool's codec keeps state as it decodes (pgx's EnumCodec caches member
// names in a map without a lock): the maps of concurrent reads are copies
// of one pool's map and would otherwise share it. Arrays and composites
// of such types get their own copies too.
func (st *state) ownTypes(oid uint32) {
	if st.own[oid] {
		return
	}
	st.own[oid] = true
	if t, ok := st.m.TypeForOID(oid); ok {
		if nt := ownType(t); nt != t {
			st.m.RegisterType(nt)
		}
	}
}

// ownType returns t, or a copy of it with fresh enum codecs where it holds
// one.
func ownType(t *pgtype.Type) *pgtype.Type {
	switch c := t.Codec.(type) {
	case *pgtype.EnumCodec:
		return &pgtype.Type{Name: t.Name, OID: t.OID, Codec: &pgtype.EnumCodec{}}
	case *pgtype.ArrayCodec:
		if el := ownType(c.ElementType); el != c.ElementType {
			return &pgtype.Type{Name: t.Name, OID: t.OID, Codec: &pgtype.ArrayCodec{ElementType: el, Delimiter: c.Delimiter}}
		}
	case *pgtype.CompositeCodec:
		fields := make([]pgtype.CompositeCodecField, len(c.Fields))
		changed := false
		for i, f := range c.Fields {
			fields[i] = pgtype.CompositeCodecField{Name: f.Name, Type: ownType(f.Type)}
			changed = changed || fields[i].Type != f.Type
		}
		if changed {
			return &pgtype.Type{Name: t.Name, OID: t.OID, Codec: &pgtype.CompositeCodec{Fields: fields}}
		}
	}
	return t
}

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
