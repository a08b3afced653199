package readcache

import (
	"context"
	"sync/atomic"
)

// Route says where reads go.
type Route int32

// The routes. RouteDefault defers to the next less specific level: the
// query's context, then the connection, then the pool, then the process.
const (
	RouteDefault  Route = iota // no preference at this level
	RouteCache                 // read through the cache (the process default)
	RoutePostgres              // read PostgreSQL
)

func (r Route) String() string {
	switch r {
	case RouteCache:
		return "cache"
	case RoutePostgres:
		return "postgres"
	}
	return "default"
}

type routeKey struct{}

// ViaPostgres returns a context whose reads go to PostgreSQL, whatever the
// connection, pool or process default says.
func ViaPostgres(ctx context.Context) context.Context {
	return context.WithValue(ctx, routeKey{}, RoutePostgres)
}

// ViaCache returns a context whose reads go through the cache even when the
// connection, pool or process default sends reads to PostgreSQL.
// Transactions and read-your-writes still send them to PostgreSQL.
func ViaCache(ctx context.Context) context.Context {
	return context.WithValue(ctx, routeKey{}, RouteCache)
}

// RouteOf returns the route set on ctx by ViaPostgres or ViaCache, or
// RouteDefault.
func RouteOf(ctx context.Context) Route {
	if ctx == nil {
		return RouteDefault
	}
	r, _ := ctx.Value(routeKey{}).(Route)
	return r
}

var processRoute atomic.Int32

// SetDefaultRoute sets the process default route (RouteCache when never
// set). RouteDefault restores that.
func SetDefaultRoute(r Route) { processRoute.Store(int32(r)) }

// DefaultRoute returns the process default route.
func DefaultRoute() Route {
	if r := Route(processRoute.Load()); r != RouteDefault {
		return r
	}
	return RouteCache
}

// Resolve picks the most specific route that is set, most specific first
// (query, connection, pool), falling back to the process default.
func Resolve(levels ...Route) Route {
	for _, r := range levels {
		if r != RouteDefault {
			return r
		}
	}
	return DefaultRoute()
}
