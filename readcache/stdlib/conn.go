package stdlib

import (
	"context"
	"database/sql/driver"
	"sync/atomic"
	"time"

	"github.com/freshetdb/freshet/readcache"
	"github.com/jackc/pgx/v5"
	pgxstdlib "github.com/jackc/pgx/v5/stdlib"
)

// Conn is one connection: pgx's stdlib connection, with reads outside a
// transaction served by the cache.
type Conn struct {
	inner *pgxstdlib.Conn
	c     *Connector
	route atomic.Int32
	// database/sql serializes a connection's use, so a read may use these
	// without a lock: the key under construction, the rows a hit returns
	// (reused once the previous ones are closed), and whether pgx's
	// ResetSession is owed before the next statement sent to PostgreSQL.
	key       []byte
	spare     rows
	spareBusy bool
	owesReset bool
}

var (
	_ driver.Conn               = (*Conn)(nil)
	_ driver.ConnBeginTx        = (*Conn)(nil)
	_ driver.ConnPrepareContext = (*Conn)(nil)
	_ driver.QueryerContext     = (*Conn)(nil)
	_ driver.ExecerContext      = (*Conn)(nil)
	_ driver.Pinger             = (*Conn)(nil)
	_ driver.SessionResetter    = (*Conn)(nil)
	_ driver.NamedValueChecker  = (*Conn)(nil)
)

// Conn returns the underlying pgx connection.
func (c *Conn) Conn() *pgx.Conn { return c.inner.Conn() }

// Prepare prepares a statement (see PrepareContext).
func (c *Conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// PrepareContext prepares query on PostgreSQL; the statement's reads still
// go through the cache.
func (c *Conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := c.ready(ctx); err != nil {
		return nil, err
	}
	st, err := c.inner.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &stmt{inner: st.(*pgxstdlib.Stmt), conn: c, query: query}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.inner.Close() }

// Begin starts a transaction.
func (c *Conn) Begin() (driver.Tx, error) { return c.BeginTx(context.Background(), driver.TxOptions{}) }

// BeginTx starts a transaction; its reads go to PostgreSQL, and its commit
// starts the read-your-writes window.
func (c *Conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := c.ready(ctx); err != nil {
		return nil, err
	}
	tx, err := c.inner.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &txn{inner: tx, c: c.c}, nil
}

type txn struct {
	inner driver.Tx
	c     *Connector
}

func (t *txn) Commit() error {
	err := t.inner.Commit()
	t.c.wrote()
	return err
}

func (t *txn) Rollback() error { return t.inner.Rollback() }

// ExecContext runs a statement on PostgreSQL and starts the read-your-writes
// window.
func (c *Conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.ready(ctx); err != nil {
		return nil, err
	}
	r, err := c.inner.ExecContext(ctx, query, args)
	c.c.wrote()
	return r, err
}

// QueryContext serves a read from the cache when it may, and from
// PostgreSQL otherwise.
func (c *Conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.query(ctx, query, args, func() (driver.Rows, error) { return c.inner.QueryContext(ctx, query, args) })
}

func (c *Conn) query(ctx context.Context, query string, args []driver.NamedValue, live func() (driver.Rows, error)) (driver.Rows, error) {
	cache := c.c.cache
	reason := readcache.ReasonNone
	switch {
	case !cache.Enabled():
		reason = readcache.ReasonDisabled
	case !readcache.IsSelect(query):
		reason = readcache.ReasonNotSelect
	case readcache.Resolve(readcache.RouteOf(ctx), readcache.Route(c.route.Load()), readcache.Route(c.c.route.Load())) == readcache.RoutePostgres:
		reason = readcache.ReasonRoute
	case c.inner.Conn().PgConn().TxStatus() != 'I':
		reason = readcache.ReasonTransaction
	case c.c.ryw > 0 && time.Duration(cache.Now()-c.c.lastWrite.Load()) < c.c.ryw:
		reason = readcache.ReasonAfterWrite
	}
	if reason != readcache.ReasonNone {
		cache.Bypass(reason)
		rows, err := c.live(ctx, live)
		if reason == readcache.ReasonNotSelect {
			c.c.wrote() // INSERT ... RETURNING and the like
		}
		return rows, err
	}
	pc := c.inner.Conn()
	if cache.NeedsIdentity() {
		var id readcache.Identity
		err := c.ready(ctx)
		if err == nil {
			err = pc.QueryRow(ctx, readcache.IdentityQuery).Scan(&id.SystemIdentifier, &id.Database)
		}
		cache.Verify(id, err)
	}
	m := pc.TypeMap()
	key := readcache.AppendKey(c.key[:0], query)
	ok := true
	for _, a := range args {
		if key, ok = readcache.AppendArg(key, m, a.Value); !ok {
			break
		}
	}
	c.key = key
	if !ok {
		cache.Bypass(readcache.ReasonUnsupported)
		return c.live(ctx, live)
	}
	res, reason := cache.ReadKey(ctx, key)
	if reason != readcache.ReasonNone {
		return c.live(ctx, live)
	}
	r := &c.spare
	if c.spareBusy {
		r = new(rows)
	} else {
		c.spareBusy = true
	}
	r.reset(c, res, m)
	return r, nil
}

// live runs a read on PostgreSQL, after the session reset it owes.
func (c *Conn) live(ctx context.Context, run func() (driver.Rows, error)) (driver.Rows, error) {
	if err := c.ready(ctx); err != nil {
		return nil, err
	}
	return run()
}

// ready runs pgx's ResetSession if database/sql asked for one since the
// connection last sent a statement: a cache hit sends none, so the reset
// (a clock read, and a ping after a second idle) waits until one is sent.
// Its driver.ErrBadConn then makes database/sql retry on another
// connection, as it would have at reset time.
func (c *Conn) ready(ctx context.Context) error {
	if !c.owesReset {
		return nil
	}
	c.owesReset = false
	return c.inner.ResetSession(ctx)
}

// Ping checks the PostgreSQL connection.
func (c *Conn) Ping(ctx context.Context) error {
	if err := c.ready(ctx); err != nil {
		return err
	}
	return c.inner.Ping(ctx)
}

// ResetSession is called before the connection is reused. pgx's reset is
// owed until the connection next sends a statement (see ready); a
// connection with a transaction left open is discarded at once.
func (c *Conn) ResetSession(ctx context.Context) error {
	if c.inner.Conn().IsClosed() || c.inner.Conn().PgConn().TxStatus() != 'I' {
		return driver.ErrBadConn
	}
	c.owesReset = true
	return nil
}

// CheckNamedValue accepts every value, as pgx's driver does.
func (c *Conn) CheckNamedValue(nv *driver.NamedValue) error { return c.inner.CheckNamedValue(nv) }

type stmt struct {
	inner *pgxstdlib.Stmt
	conn  *Conn
	query string
}

var (
	_ driver.StmtQueryContext = (*stmt)(nil)
	_ driver.StmtExecContext  = (*stmt)(nil)
)

func (s *stmt) Close() error  { return s.inner.Close() }
func (s *stmt) NumInput() int { return s.inner.NumInput() }
func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	if err := s.conn.ready(context.Background()); err != nil {
		return nil, err
	}
	r, err := s.inner.Exec(args)
	s.conn.c.wrote()
	return r, err
}
func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	return s.QueryContext(context.Background(), nv)
}
func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := s.conn.ready(ctx); err != nil {
		return nil, err
	}
	r, err := s.inner.ExecContext(ctx, args)
	s.conn.c.wrote()
	return r, err
}
func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.conn.query(ctx, s.query, args, func() (driver.Rows, error) { return s.inner.QueryContext(ctx, args) })
}
