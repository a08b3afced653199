package stdlib

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/freshetdb/freshet/readcache"
	"github.com/jackc/pgx/v5"
	pgxstdlib "github.com/jackc/pgx/v5/stdlib"
)

// DriverName is the name the driver is registered under:
// sql.Open("freshet", dsn) reads FRESHET_URL and FRESHET_TOKEN (and the
// other variables of readcache.ConfigFromEnv).
const DriverName = "freshet"

func init() { sql.Register(DriverName, &Driver{}) }

// Driver is the database/sql driver registered as "freshet". Each
// sql.Open makes one Connector, with its own cache.
type Driver struct{}

// Open opens one connection; database/sql uses OpenConnector instead.
func (d *Driver) Open(dsn string) (driver.Conn, error) {
	c, err := d.OpenConnector(dsn)
	if err != nil {
		return nil, err
	}
	return c.Connect(context.Background())
}

// OpenConnector returns a Connector for the PostgreSQL dsn, configured
// from the environment (readcache.ConfigFromEnv).
func (d *Driver) OpenConnector(dsn string) (driver.Connector, error) {
	cfg, err := readcache.ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return NewConnector(dsn, cfg)
}

// Connector opens connections to PostgreSQL through pgx's stdlib driver
// and serves their reads from one Cache. It is a pool's worth of state:
// the cache, the pool's route and its read-your-writes clock.
type Connector struct {
	inner     driver.Connector
	cache     *readcache.Cache
	ryw       time.Duration
	route     atomic.Int32
	lastWrite atomic.Int64
}

var _ driver.Connector = (*Connector)(nil)

// NewConnector returns a Connector for the PostgreSQL dsn (any form pgx
// accepts) reading through a cache configured by cfg.
func NewConnector(dsn string, cfg readcache.Config) (*Connector, error) {
	pcfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse PostgreSQL DSN: %w", err)
	}
	return NewConnectorConfig(pcfg, cfg)
}

// NewConnectorConfig is NewConnector with a parsed pgx configuration (to
// set a tracer, TLS or other pgx options).
func NewConnectorConfig(pcfg *pgx.ConnConfig, cfg readcache.Config) (*Connector, error) {
	cache, err := readcache.Open(cfg)
	if err != nil {
		return nil, err
	}
	c := &Connector{inner: pgxstdlib.GetConnector(*pcfg), cache: cache, ryw: cfg.ReadYourWrites}
	c.route.Store(int32(cfg.Route))
	return c, nil
}

// Open returns a *sql.DB for the PostgreSQL dsn whose reads go through a
// cache configured by cfg.
func Open(dsn string, cfg readcache.Config) (*sql.DB, error) {
	c, err := NewConnector(dsn, cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// OpenFromEnv is Open with the configuration of readcache.ConfigFromEnv
// (FRESHET_URL, FRESHET_TOKEN, ...). Without FRESHET_URL every read goes
// to PostgreSQL.
func OpenFromEnv(dsn string) (*sql.DB, error) {
	cfg, err := readcache.ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return Open(dsn, cfg)
}

// CacheOf returns the cache of a *sql.DB opened by this package, or nil.
func CacheOf(db *sql.DB) *readcache.Cache {
	if c, ok := db.Driver().(*connDriver); ok {
		return c.c.cache
	}
	return nil
}

// Cache returns the connector's cache (stats, errors, the Prometheus
// collector).
func (c *Connector) Cache() *readcache.Cache { return c.cache }

// SetRoute sets the pool's route (RouteDefault: the process default).
func (c *Connector) SetRoute(r readcache.Route) { c.route.Store(int32(r)) }

// Connect opens a connection.
func (c *Connector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	pc, ok := dc.(*pgxstdlib.Conn)
	if !ok {
		dc.Close()
		return nil, errors.New("freshet driver: pgx's connector returned an unexpected connection type")
	}
	return &Conn{inner: pc, c: c}, nil
}

// Driver returns the driver; CacheOf uses it to find the cache.
func (c *Connector) Driver() driver.Driver { return &connDriver{c: c} }

// Close closes the cache; sql.DB.Close calls it.
func (c *Connector) Close() error { return c.cache.Close() }

type connDriver struct{ c *Connector }

func (d *connDriver) Open(string) (driver.Conn, error) { return d.c.Connect(context.Background()) }

func (c *Connector) wrote() { c.lastWrite.Store(c.cache.Now()) }

// SetConnRoute sets the route of one connection taken from the pool
// (db.Conn), overriding the pool's and the process default.
func SetConnRoute(conn *sql.Conn, r readcache.Route) error {
	return conn.Raw(func(dc any) error {
		c, ok := dc.(*Conn)
		if !ok {
			return errors.New("freshet driver: not a connection of this driver")
		}
		c.route.Store(int32(r))
		return nil
	})
}
