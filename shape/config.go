package shape

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/query"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Engine is what the shape API needs of the engine runtime;
// *engine.Engine is one.
type Engine interface {
	// Subscribe registers a subscription whose outputs go to sink.
	Subscribe(ctx context.Context, sql string, binds []query.Bind, mode engine.Mode, sink engine.Sink) (engine.SubID, *query.Refusal, error)
	// Unsubscribe ends one.
	Unsubscribe(ctx context.Context, id engine.SubID) error
	// Position is the position applied, every output up to it handed to
	// the sinks.
	Position() change.LSN
}

var _ Engine = (*engine.Engine)(nil)

// Defaults of Config.
const (
	DefaultChunkBytes     = 10 << 20
	DefaultMaxAge         = 60
	DefaultStaleAge       = 300
	DefaultLongPoll       = 20 * time.Second
	DefaultSSETimeout     = 60 * time.Second
	DefaultMaxShapes      = 10_000
	DefaultIdleExpiry     = 24 * time.Hour
	DefaultRetention      = 10 * time.Minute
	DefaultMaxGenerations = 3
	DefaultCompactMin     = 1_000
	DefaultMaxBodyBytes   = 1 << 20
	DefaultDataDir        = "freshet-data/shapes"
)

// Config configures a Server. Start from DefaultConfig.
type Config struct {
	// Origin, when set, names the replica that serves a shape when
	// several replicas of one database serve the shape API
	// (docs/scale-out.md): given the shape's key (its normalized
	// definition, the same on every replica), it returns the base URL of
	// the origin replica, or "" when this server is the origin. A request
	// for a shape whose origin is elsewhere is redirected there (307), so
	// every client and every CDN point of presence reads one replica's log
	// of the shape; when the origin dies the next one takes over, and old
	// handles, which it does not know, are answered 409 with its own.
	Origin func(key string) string
	// Engine serves the shapes' subscriptions (required).
	Engine Engine
	// Pool reads the catalog (columns, keys, publication) and runs
	// subset snapshots (required).
	Pool *pgxpool.Pool
	// Types resolves non-built-in type OIDs (pgwal.Reader.Types()).
	Types change.TypeResolver
	// Publication is the publication the stream follows: a table outside
	// it is refused. Empty skips the check.
	Publication string
	// DataDir holds the shape logs; it is created if missing.
	DataDir string
	// ChunkBytes: a response ends once its messages reach this many bytes.
	ChunkBytes int
	// MaxAge and StaleAge are the cache-control max-age and
	// stale-while-revalidate (seconds) of non-live responses past -1.
	MaxAge, StaleAge int
	// LongPoll is how long a live request is held; SSETimeout how long an
	// SSE stream lasts; SSEKeepAlive the idle time before a keep-alive
	// comment.
	LongPoll, SSETimeout, SSEKeepAlive time.Duration
	// MaxShapes caps the shapes; creating one more answers 503.
	MaxShapes int
	// IdleExpiry removes a shape no request has used for this long
	// (negative: never).
	IdleExpiry time.Duration
	// Retention is how long a superseded generation (and the log before
	// the next one) stays readable; MaxGenerations caps how many are kept.
	Retention      time.Duration
	MaxGenerations int
	// CompactMin is the fewest changes since the newest generation that
	// start a new one (it also takes more changes than the result's rows).
	CompactMin int
	// Secret is required of every /v1/shape request (?secret= or
	// Authorization: Bearer) unless Insecure.
	Secret   string
	Insecure bool
	// Tables, when not nil, is the allow-list: "schema.table" to the
	// columns that may be selected (nil: all of them).
	Tables map[string][]string
	// AllowDeletion enables DELETE /v1/shape.
	AllowDeletion bool
	// MaxBodyBytes bounds a POST body.
	MaxBodyBytes int64
	// ServerVersion goes in electric-server.
	ServerVersion string
	// Ready reports whether the stream has reached a consistent point
	// (/v1/health answers 202 until then). Nil: always.
	Ready func() bool
	// Logger; nil is slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		DataDir: DefaultDataDir, ChunkBytes: DefaultChunkBytes, MaxAge: DefaultMaxAge, StaleAge: DefaultStaleAge,
		LongPoll: DefaultLongPoll, SSETimeout: DefaultSSETimeout, SSEKeepAlive: 21 * time.Second,
		MaxShapes: DefaultMaxShapes, IdleExpiry: DefaultIdleExpiry, Retention: DefaultRetention,
		MaxGenerations: DefaultMaxGenerations, CompactMin: DefaultCompactMin, MaxBodyBytes: DefaultMaxBodyBytes,
	}
}

// Validate checks the settings and says which to fix.
func (c *Config) Validate() error {
	switch {
	case c.Engine == nil:
		return errors.New("shape: no engine")
	case c.Pool == nil:
		return errors.New("shape: no database pool")
	case c.DataDir == "":
		return errors.New("shape: no data directory (--shape-data-dir)")
	case c.ChunkBytes < 1:
		return errors.New("shape: --shape-chunk-bytes must be at least 1")
	case c.MaxAge < 0 || c.StaleAge < 0:
		return errors.New("shape: --shape-max-age and --shape-stale-age must be >= 0")
	case c.LongPoll <= 0 || c.SSETimeout <= 0 || c.SSEKeepAlive <= 0:
		return errors.New("shape: --shape-long-poll and --shape-sse-timeout must be positive")
	case c.MaxShapes < 1:
		return errors.New("shape: --shape-max-shapes must be at least 1")
	case c.Retention <= 0 || c.MaxGenerations < 1:
		return errors.New("shape: --shape-retention must be positive")
	case c.Retention < c.CacheLife():
		return fmt.Errorf("shape: --shape-retention (%v) must be at least %v, the longest a cached response can point into a superseded generation "+
			"(--shape-max-age + --shape-stale-age, --shape-sse-timeout less 1 s, and 10 s for a live long-poll): raise it or lower those", c.Retention, c.CacheLife())
	case c.CompactMin < 1:
		return errors.New("shape: the compaction minimum must be at least 1")
	}
	return nil
}

// CacheLife is the longest a cache may serve a response that points into
// a generation (its offsets name the generation's chunks or the log after
// it), the -1 response aside: a non-live response's max-age plus its
// stale-while-revalidate, an SSE stream's max-age (SSETimeout less a
// second), a live long-poll's 5 s plus 5 s. A superseded generation is
// kept at least this long (Retention may not be shorter), so every such
// cached response can still be followed. The -1 response is cached for a
// week as Electric sends it; no bounded log keeps every generation that
// long, so a copy that old continues at an offset that answers 409 and the
// client refetches (docs/shape-api.md, "Bounded storage").
func (c *Config) CacheLife() time.Duration {
	return max(time.Duration(c.MaxAge+c.StaleAge)*time.Second, c.SSETimeout-time.Second, liveCacheLife)
}

// liveCacheLife is a live long-poll response's max-age plus its
// stale-while-revalidate (cacheLive).
const liveCacheLife = 10 * time.Second

// ParseTables reads an allow-list: comma-separated tables, each
// optionally with its columns in parentheses: "public.items,users(id,name)".
// Unqualified names are in public.
func ParseTables(s string) (map[string][]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string][]string{}
	for len(s) > 0 {
		s = strings.TrimLeft(s, " ,")
		if s == "" {
			break
		}
		end := strings.IndexAny(s, ",(")
		name := s
		var cols []string
		if end >= 0 {
			name = s[:end]
		}
		rest := ""
		if end >= 0 && s[end] == '(' {
			close := strings.IndexByte(s[end:], ')')
			if close < 0 {
				return nil, fmt.Errorf("shape tables %q: a ( without its )", s)
			}
			cs, err := splitIdents(s[end+1:end+close], ',')
			if err != nil {
				return nil, fmt.Errorf("shape tables: columns of %s: %v", name, err)
			}
			cols = cs
			rest = s[end+close+1:]
		} else if end >= 0 {
			rest = s[end:]
		}
		schema, table, err := parseTable(strings.TrimSpace(name))
		if err != nil {
			return nil, fmt.Errorf("shape tables: %q: %v", name, err)
		}
		out[schema+"."+table] = cols
		s = rest
	}
	return out, nil
}
