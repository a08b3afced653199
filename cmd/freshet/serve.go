package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freshetdb/freshet/bus"
	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/pgwal"
	"github.com/freshetdb/freshet/query"
	"github.com/freshetdb/freshet/s2s"
	"github.com/freshetdb/freshet/shape"
	"github.com/freshetdb/freshet/wire"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const serveUsage = `Usage: freshet serve [flags]

Follows a PostgreSQL database and serves fresh query results to backends
over the s2s WebSocket protocol at {base}/s2s/v1 (docs/s2s-protocol.md).
Also serves {base}/healthz, {base}/readyz, {base}/metrics and {base}/stats.
Every flag can be set by the FRESHET_* environment variable named in
docs/configuration.md; a flag given on the command line wins.

Flags:
`

// serveConfig is what `freshet serve` was asked to do.
type serveConfig struct {
	Stream          pgwal.Config
	Source          string        // "" follows the slot; nats://... follows the bus (serve_bus.go)
	BusReplay       time.Duration // how far back a bus-fed engine starts
	ReadDSN         string
	Listen          string
	BasePath        string
	S2S             s2s.Config
	Shape           shape.Config
	shapePeers      *peers        // --shape-peers: each shape's origin replica (serve_peers.go)
	shapePool       *pgxpool.Pool // the shape API's catalog and subset reads, shared by generations
	Engine          engine.Config
	ShutdownTimeout time.Duration
	Insecure        bool // serve without a token (--insecure)
	LogLevel        slog.Level
	LogFormat       string
	CPUProfile      string

	// Logger, when set, is used instead of one built from LogLevel and
	// LogFormat. Listening, when set, is called with the bound address.
	Logger    *slog.Logger
	Listening func(addr string)
}

// envDefault returns the environment variable's value, or def when it is
// unset or empty.
func envDefault(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// parseServeFlags turns serve's arguments and FRESHET_* variables into a
// serveConfig. Errors are usageErrors.
func (m *Main) parseServeFlags(args []string) (*serveConfig, error) {
	fs := m.newCommandFlags("serve", "freshet serve", serveUsage)
	def := pgwal.DefaultConfig()
	s2sDef := s2s.DefaultConfig()
	qDef := query.DefaultOptions()
	str := func(name, env, d, help string) *string {
		return fs.String(name, envDefault(env, d), help+" ($"+env+")")
	}
	num := func(name, env string, d int, help string) *string {
		return fs.String(name, envDefault(env, strconv.Itoa(d)), help+" ($"+env+")")
	}
	dur := func(name, env string, d time.Duration, help string) *string {
		return fs.String(name, envDefault(env, d.String()), help+" ($"+env+")")
	}
	var (
		dsn         = str("dsn", "FRESHET_DSN", "", "PostgreSQL connection string of the database to follow")
		readDSN     = str("read-dsn", "FRESHET_READ_DSN", "", "connection string for hydration reads and catalog look-ups (a replica or PgBouncer will do; default: --dsn)")
		listen      = str("listen", "FRESHET_LISTEN", ":7070", "address to listen on")
		base        = str("base-path", "FRESHET_BASE_PATH", "/", "path prefix of every endpoint")
		slot        = str("slot", "FRESHET_SLOT", def.Slot, "replication slot name")
		publication = str("publication", "FRESHET_PUBLICATION", def.Publication, "publication name")
		tables      = str("tables", "FRESHET_TABLES", "", "comma-separated tables for a publication it creates (default: all tables)")
		create      = str("create", "FRESHET_CREATE", "true", "create the slot and publication if they are missing")
		token       = fs.String("token", "", "bearer token clients must present (default $FRESHET_S2S_TOKEN; prefer the variable: flags show in ps)")
		insecure    = optBool(fs.FlagSet, "insecure", "serve without a token, where anyone who reaches the port can read every followed table (without a token the server refuses to start unless told this); a bool flag ($FRESHET_INSECURE)")
		maxConns    = num("max-connections", "FRESHET_MAX_CONNECTIONS", s2sDef.MaxConnections, "most open connections; 0 lifts the limit")
		maxSubs     = num("max-subscriptions", "FRESHET_MAX_SUBSCRIPTIONS", s2sDef.MaxSubscriptions, "most subscriptions per connection; 0 lifts the limit")
		maxFrame    = num("max-frame-bytes", "FRESHET_MAX_FRAME_BYTES", s2sDef.MaxFrameBytes, "largest frame read from a client; 0 lifts the limit")
		maxQueue    = num("max-queue-bytes", "FRESHET_MAX_QUEUE_BYTES", s2sDef.MaxQueueBytes, "outgoing bytes queued per connection before it is closed as a slow consumer; 0 lifts the limit")
		maxAlt      = num("max-alternatives", "FRESHET_MAX_ALTERNATIVES", qDef.MaxAlternatives, "most OR alternatives of a filter after normalization; 0 lifts the limit")
		maxIn       = num("max-in-values", "FRESHET_MAX_IN_VALUES", qDef.MaxInValues, "most IN / ANY values in one query; 0 lifts the limit")
		maxSQL      = num("max-sql-bytes", "FRESHET_MAX_SQL_BYTES", qDef.MaxSQLLength, "longest SQL text; 0 lifts the limit")
		maxDepth    = num("max-depth", "FRESHET_MAX_DEPTH", qDef.MaxDepth, "deepest expression nesting; 0 lifts the limit")
		rowLimit    = num("row-limit", "FRESHET_ROW_LIMIT", engine.DefaultReadRowLimit, "most rows a hydration read may return; 0 lifts the limit")
		readTimeout = dur("read-timeout", "FRESHET_READ_TIMEOUT", engine.DefaultReadTimeout, "longest a hydration read may take")
		readConc    = num("read-concurrency", "FRESHET_READ_CONCURRENCY", engine.DefaultReadConcurrency, "hydration reads run at once")
		catCheck    = fs.String("catalog-check-interval", envDefault("FRESHET_CATALOG_CHECK_INTERVAL", engine.DefaultCatalogCheckInterval.String()),
			"how often the catalog is asked whether subscribed tables still exist with their shape (a DROP TABLE is seen only so); 0 turns it off ($FRESHET_CATALOG_CHECK_INTERVAL)")
		heartbeat  = dur("heartbeat", "FRESHET_HEARTBEAT_INTERVAL", def.HeartbeatInterval, "WAL heartbeat cadence (lag probes)")
		lagEvery   = dur("lag-interval", "FRESHET_LAG_INTERVAL", s2sDef.LagInterval, "cadence of lag frames to clients")
		writeTO    = dur("write-timeout", "FRESHET_WRITE_TIMEOUT", s2sDef.WriteTimeout, "longest a write to a client's socket may take before the connection is dropped")
		compileTO  = dur("compile-timeout", "FRESHET_COMPILE_TIMEOUT", s2sDef.CompileTimeout, "longest compiling a subscription's query may take")
		shutdown   = dur("shutdown-timeout", "FRESHET_SHUTDOWN_TIMEOUT", 10*time.Second, "longest a graceful shutdown waits for connections")
		logLevel   = str("log-level", "FRESHET_LOG_LEVEL", "info", "log level: debug, info, warn or error")
		logFormat  = str("log-format", "FRESHET_LOG_FORMAT", "text", "log format: text or json")
		cpuProfile = str("cpuprofile", "FRESHET_CPUPROFILE", "", "write a CPU profile (go tool pprof) of the whole run to this file")
		source     = str("source", "FRESHET_SOURCE", "", "where changes come from: empty follows the slot; nats://host:4222 follows the stream a 'freshet relay' publishes (docs/scale-out.md)")
		busReplay  = dur("bus-replay", "FRESHET_BUS_REPLAY", bus.DefaultReplay, "with --source nats://: how far back in the stream the engine starts, so its first reads are checked against the transactions just before it")

		shDef       = shape.DefaultConfig()
		shDir       = str("shape-data-dir", "FRESHET_SHAPE_DATA_DIR", shDef.DataDir, "directory of the shape API's logs (docs/shape-api.md)")
		shChunk     = num("shape-chunk-bytes", "FRESHET_SHAPE_CHUNK_BYTES", shDef.ChunkBytes, "a shape response ends once its messages reach this many bytes")
		shMaxAge    = num("shape-max-age", "FRESHET_SHAPE_MAX_AGE", shDef.MaxAge, "cache-control max-age (seconds) of non-live shape responses")
		shStale     = num("shape-stale-age", "FRESHET_SHAPE_STALE_AGE", shDef.StaleAge, "cache-control stale-while-revalidate (seconds) of non-live shape responses")
		shLongPoll  = dur("shape-long-poll", "FRESHET_SHAPE_LONG_POLL", shDef.LongPoll, "how long a live shape request is held")
		shSSE       = dur("shape-sse-timeout", "FRESHET_SHAPE_SSE_TIMEOUT", shDef.SSETimeout, "how long a shape SSE stream lasts")
		shMaxShapes = num("shape-max-shapes", "FRESHET_SHAPE_MAX_SHAPES", shDef.MaxShapes, "most shapes; creating another answers 503")
		shIdle      = dur("shape-idle-expiry", "FRESHET_SHAPE_IDLE_EXPIRY", shDef.IdleExpiry, "a shape no request used for this long is removed")
		shRetention = dur("shape-retention", "FRESHET_SHAPE_RETENTION", shDef.Retention, "how long a superseded shape snapshot and its log stay readable")
		shSecret    = fs.String("shape-secret", "", "secret the shape API requires (?secret= or Authorization: Bearer; default $FRESHET_SHAPE_SECRET; prefer the variable)")
		shTables    = str("shape-tables", "FRESHET_SHAPE_TABLES", "", "allow-list of tables (and columns) the shape API serves, e.g. public.items,users(id,name); default every table of the publication")
		shAllowDel  = optBool(fs.FlagSet, "shape-allow-deletion", "allow DELETE /v1/shape; a bool flag ($FRESHET_SHAPE_ALLOW_DELETION)")
		shPeers     = str("shape-peers", "FRESHET_SHAPE_PEERS", "", "every replica serving the shape API, http://host:port comma-separated: each shape is served by one of them (its origin), others redirect to it (docs/scale-out.md)")
		shSelf      = str("shape-self", "FRESHET_SHAPE_SELF", "", "with --shape-peers: this replica's own address as listed there")
	)
	bad := fs.bad
	if err := fs.parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, bad("unexpected argument %q (flags only)", fs.Arg(0))
	}
	if *dsn == "" {
		return nil, bad("no database given: pass --dsn 'postgres://user@host/db' or set FRESHET_DSN")
	}
	cfg := &serveConfig{Stream: def, ReadDSN: *readDSN, Listen: *listen, LogFormat: *logFormat, S2S: s2sDef, CPUProfile: *cpuProfile}
	if cfg.ReadDSN == "" {
		cfg.ReadDSN = *dsn
	}
	cfg.Stream.DSN, cfg.Stream.Slot, cfg.Stream.Publication = *dsn, *slot, *publication
	for _, t := range strings.Split(*tables, ",") {
		if t = strings.TrimSpace(t); t != "" {
			cfg.Stream.Tables = append(cfg.Stream.Tables, t)
		}
	}
	var err error
	if cfg.Stream.Create, err = strconv.ParseBool(*create); err != nil {
		return nil, bad("--create %q: want true or false", *create)
	}
	cfg.BasePath = "/" + strings.Trim(*base, "/")
	if cfg.BasePath == "/" {
		cfg.BasePath = ""
	}
	ints := []struct {
		name string
		s    *string
		dst  *int
	}{
		{"max-connections", maxConns, &cfg.S2S.MaxConnections},
		{"max-subscriptions", maxSubs, &cfg.S2S.MaxSubscriptions},
		{"max-frame-bytes", maxFrame, &cfg.S2S.MaxFrameBytes},
		{"max-queue-bytes", maxQueue, &cfg.S2S.MaxQueueBytes},
		{"max-alternatives", maxAlt, &cfg.Engine.Query.MaxAlternatives},
		{"max-in-values", maxIn, &cfg.Engine.Query.MaxInValues},
		{"max-sql-bytes", maxSQL, &cfg.Engine.Query.MaxSQLLength},
		{"max-depth", maxDepth, &cfg.Engine.Query.MaxDepth},
		{"row-limit", rowLimit, &cfg.Engine.RowLimit},
		{"read-concurrency", readConc, &cfg.Engine.ReadConcurrency},
	}
	for _, n := range ints {
		v, err := strconv.Atoi(strings.TrimSpace(*n.s))
		if err != nil || v < 0 {
			return nil, bad("--%s %q: want a whole number >= 0", n.name, *n.s)
		}
		*n.dst = v
	}
	cfg.Shape = shDef
	cfg.Shape.DataDir = *shDir
	for _, n := range []struct {
		name string
		s    *string
		dst  *int
	}{
		{"shape-chunk-bytes", shChunk, &cfg.Shape.ChunkBytes},
		{"shape-max-age", shMaxAge, &cfg.Shape.MaxAge},
		{"shape-stale-age", shStale, &cfg.Shape.StaleAge},
		{"shape-max-shapes", shMaxShapes, &cfg.Shape.MaxShapes},
	} {
		v, err := strconv.Atoi(strings.TrimSpace(*n.s))
		if err != nil || v < 0 {
			return nil, bad("--%s %q: want a whole number >= 0", n.name, *n.s)
		}
		*n.dst = v
	}
	for _, d := range []struct {
		name string
		s    *string
		dst  *time.Duration
	}{
		{"shape-long-poll", shLongPoll, &cfg.Shape.LongPoll},
		{"shape-sse-timeout", shSSE, &cfg.Shape.SSETimeout},
		{"shape-idle-expiry", shIdle, &cfg.Shape.IdleExpiry},
		{"shape-retention", shRetention, &cfg.Shape.Retention},
	} {
		v, err := time.ParseDuration(strings.TrimSpace(*d.s))
		if err != nil || v <= 0 {
			return nil, bad("--%s %q: want a positive duration like 500ms or 10s", d.name, *d.s)
		}
		*d.dst = v
	}
	cfg.Shape.Secret = *shSecret
	if cfg.Shape.Secret == "" {
		cfg.Shape.Secret = os.Getenv("FRESHET_SHAPE_SECRET")
	}
	if cfg.Shape.AllowDeletion, err = boolFlag(fs.FlagSet, "shape-allow-deletion", *shAllowDel, "FRESHET_SHAPE_ALLOW_DELETION"); err != nil {
		return nil, bad("%v", err)
	}
	if cfg.Shape.Tables, err = shape.ParseTables(*shTables); err != nil {
		return nil, bad("--shape-tables: %v", err)
	}
	if *shPeers != "" {
		if cfg.shapePeers, err = parsePeers(*shPeers, *shSelf, cfg.BasePath); err != nil {
			return nil, bad("%v", err)
		}
		cfg.Shape.Origin = cfg.shapePeers.Origin
	} else if *shSelf != "" {
		return nil, bad("--shape-self without --shape-peers: list every replica in --shape-peers")
	}
	if cfg.Engine.RowLimit == 0 {
		cfg.Engine.RowLimit = -1 // the engine's "no limit"
	}
	durs := []struct {
		name string
		s    *string
		dst  *time.Duration
	}{
		{"read-timeout", readTimeout, &cfg.Engine.ReadTimeout},
		{"heartbeat", heartbeat, &cfg.Stream.HeartbeatInterval},
		{"lag-interval", lagEvery, &cfg.S2S.LagInterval},
		{"write-timeout", writeTO, &cfg.S2S.WriteTimeout},
		{"compile-timeout", compileTO, &cfg.S2S.CompileTimeout},
		{"shutdown-timeout", shutdown, &cfg.ShutdownTimeout},
	}
	for _, d := range durs {
		v, err := time.ParseDuration(strings.TrimSpace(*d.s))
		if err != nil || v <= 0 {
			return nil, bad("--%s %q: want a positive duration like 500ms or 10s", d.name, *d.s)
		}
		*d.dst = v
	}
	if v, err := time.ParseDuration(strings.TrimSpace(*catCheck)); err != nil || v < 0 {
		return nil, bad("--catalog-check-interval %q: want a duration like 5s, or 0 to turn the check off", *catCheck)
	} else if v == 0 {
		cfg.Engine.CatalogCheckInterval = -1 // the engine's "off"
	} else {
		cfg.Engine.CatalogCheckInterval = v
	}
	cfg.Engine.Query.SearchPath = qDef.SearchPath
	cfg.S2S.Token = *token
	if cfg.S2S.Token == "" {
		cfg.S2S.Token = os.Getenv("FRESHET_S2S_TOKEN")
	}
	if cfg.Insecure, err = boolFlag(fs.FlagSet, "insecure", *insecure, "FRESHET_INSECURE"); err != nil {
		return nil, bad("%v", err)
	}
	if cfg.Engine.ReadConcurrency == 0 {
		return nil, bad("--read-concurrency 0: want at least 1")
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return nil, bad("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		return nil, bad("--log-format %q: want text or json", cfg.LogFormat)
	}
	if v, err := time.ParseDuration(strings.TrimSpace(*busReplay)); err != nil || v < 0 {
		return nil, bad("--bus-replay %q: want a duration like 5s, or 0 to start at the stream's last message", *busReplay)
	} else {
		cfg.BusReplay = v
	}
	if cfg.Source = strings.TrimSpace(*source); cfg.Source != "" {
		if err := bus.ValidateURL(cfg.Source); err != nil {
			return nil, bad("--source: %v (or leave it empty to follow the slot)", err)
		}
	}
	if err := cfg.Stream.Validate(); err != nil {
		return nil, bad("%v", err)
	}
	// The shape API takes its own secret, else the s2s token, and is
	// open exactly when the server is started --insecure.
	if cfg.Shape.Secret == "" {
		cfg.Shape.Secret = cfg.S2S.Token
	}
	cfg.Shape.Insecure = cfg.Insecure
	if cfg.S2S.Token == "" && !cfg.Insecure {
		return nil, bad("no token set: set FRESHET_S2S_TOKEN (or --token) to the bearer token clients must present, " +
			"or pass --insecure (FRESHET_INSECURE=true) to serve without one, where anyone who reaches the port can read every followed table")
	}
	return cfg, nil
}

// optBool is a bool flag whose text is kept (parsed by boolFlag, so that
// an unset flag falls back to its environment variable).
type optBoolValue struct{ v string }

func (b *optBoolValue) String() string     { return b.v }
func (b *optBoolValue) Set(s string) error { b.v = s; return nil }
func (b *optBoolValue) IsBoolFlag() bool   { return true }

func optBool(fs *flag.FlagSet, name, help string) *string {
	v := &optBoolValue{}
	fs.Var(v, name, help)
	return &v.v
}

// boolFlag reads a flag that may be given alone (--name, true) or with a
// value (--name=false), else its environment variable, else false.
func boolFlag(fs *flag.FlagSet, name, given, env string) (bool, error) {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	v := given
	if !set {
		v = os.Getenv(env)
	}
	if v == "" {
		return set, nil
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, fmt.Errorf("--%s %q: want true or false", name, v)
	}
	return b, nil
}

// runServe implements `freshet serve`.
func (m *Main) runServe(ctx context.Context, args []string) error {
	cfg, err := m.parseServeFlags(args)
	if errors.Is(err, errHelp) {
		return nil
	} else if err != nil {
		return err
	}
	return m.serve(ctx, cfg)
}

// rates turns counters into per-second rates, sampled every second.
type rates struct {
	mu           sync.Mutex
	txns, chgs   float64
	lastT, lastC int64
}

func (r *rates) sample(t *s2s.Tap) {
	tn, cn := t.Counts()
	r.mu.Lock()
	r.txns, r.chgs = float64(tn-r.lastT), float64(cn-r.lastC)
	r.lastT, r.lastC = tn, cn
	r.mu.Unlock()
}

func (r *rates) get() (txns, rows float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.txns, r.chgs
}

// recoverHandler answers a request whose handler panicked with 500 and
// an "internal" body, and logs the panic with its stack: a bug that a
// request reached must not end the process (net/http's own recovery
// drops the connection without an answer). http.ErrAbortHandler is
// passed on, as net/http expects.
func recoverHandler(log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
			log.Error("http: a handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintln(w, `{"code":"internal","message":"the server failed to answer this request (a bug, logged with its stack)"}`)
		}()
		h.ServeHTTP(w, r)
	})
}

// serve runs the service until ctx ends (SIGTERM) or the stream fails.
func (m *Main) serve(ctx context.Context, cfg *serveConfig) error {
	log := cfg.Logger
	if log == nil {
		opts := &slog.HandlerOptions{Level: cfg.LogLevel}
		if cfg.LogFormat == "json" {
			log = slog.New(slog.NewJSONHandler(m.Stderr, opts))
		} else {
			log = slog.New(slog.NewTextHandler(m.Stderr, opts))
		}
	}
	cfg.Stream.Logger = log
	if cfg.CPUProfile != "" {
		stop, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	st, err := openStream(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	if cfg.shapePool, err = pgxpool.New(ctx, cfg.ReadDSN); err != nil {
		return fmt.Errorf("open the shape API's pool on --read-dsn: %w", err)
	}
	defer cfg.shapePool.Close()
	if cfg.shapePeers != nil {
		cfg.shapePeers.start()
		defer cfg.shapePeers.stop()
	}
	if !cfg.Shape.Insecure && cfg.Shape.Secret == "" {
		log.Warn("shape API: no secret (--shape-secret / FRESHET_SHAPE_SECRET) and not --insecure: every /v1/shape request answers 401")
	}

	// One generation is one engine and its s2s server on one run of the
	// stream. A slot-fed server has one: when its stream stops, it exits.
	// A bus-fed one starts the next generation when the bus breaks its
	// chain (a gap, a new epoch): every connection is closed with 4001
	// as when a slot is lost, clients resubscribe, and every subscription
	// hydrates again on the new engine.
	var cur atomic.Pointer[generation]
	mux := http.NewServeMux()
	b := cfg.BasePath
	mux.Handle(b+wire.Path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cur.Load().srv.ServeHTTP(w, r)
	}))
	// The shape API: each generation has its own shape server on its
	// engine, over the same data directory (a new generation reloads the
	// shapes and hydrates them again, as a restart does).
	mux.Handle(b+"/v1/", http.StripPrefix(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cur.Load().shapes.ServeHTTP(w, r)
	})))
	// GET {base}/ answers 200 with an empty body, as Electric's root
	// does (load balancers probe it), and any other unknown path 404
	// "Not found": the shape server answers both as Electric's router.
	mux.Handle(b+"/", http.StripPrefix(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cur.Load().shapes.ServeHTTP(w, r)
	})))
	mux.HandleFunc(b+"/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc(b+"/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !cur.Load().tap.Passed() {
			http.Error(w, "not ready: the stream has not passed its first consistent point", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle(b+"/metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		promhttp.HandlerFor(cur.Load().reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	}))
	mux.HandleFunc(b+"/stats", func(w http.ResponseWriter, r *http.Request) {
		g := cur.Load()
		es, _ := g.eng.Stats(r.Context())
		tx, rows := g.rt.get()
		txN, rowN := g.tap.Counts()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"s2s":                     g.srv.Stats(),
			"engine":                  es,
			"position":                g.eng.Position().String(),
			"ready":                   g.tap.Passed(),
			"transactions_total":      txN,
			"rows_total":              rowN,
			"transactions_per_second": tx,
			"rows_per_second":         rows,
			"system_identifier":       st.SystemID(),
			"database":                st.Database(),
			"source":                  st.Name(),
			"generation":              g.n,
			"version":                 Version,
		})
	})

	g, err := newGeneration(ctx, cfg, st, log, 1)
	for errors.Is(err, bus.ErrNoStream) {
		// A replica started before its relay waits for the stream.
		log.Warn("waiting for the relay's stream", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
		g, err = newGeneration(ctx, cfg, st, log, 1)
	}
	if err != nil {
		return err
	}
	cur.Store(g)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		g.close(context.Background(), log, nil)
		return fmt.Errorf("listen on %s (--listen): %w", cfg.Listen, err)
	}
	hs := &http.Server{Handler: recoverHandler(log, mux), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	addr := ln.Addr().String()
	log.Info("serving", "addr", addr, "endpoint", b+wire.Path, "source", st.Name(), "slot", cfg.Stream.Slot,
		"system_identifier", st.SystemID(), "database", st.Database())
	if cfg.Listening != nil {
		cfg.Listening(addr)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var runErr error
	var lost error // the engine's stream stopped
loop:
	for {
		select {
		case <-ctx.Done():
			log.Info("shutting down")
			break loop
		case <-tick.C:
			g.rt.sample(g.tap)
		case <-g.eng.Done():
			err := g.eng.Err()
			if !st.Restartable(err) {
				lost = err
				runErr = fmt.Errorf("stream stopped: %w", err)
				log.Error("stream stopped; closing every connection", "err", err)
				break loop
			}
			log.Warn("the bus broke its chain; closing every connection (4001) and hydrating every subscription again on a new engine", "err", err, "generation", g.n)
			old := g
			closeOld := func() {
				sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
				old.close(sctx, log, err)
				cancel()
			}
			// The new engine takes the endpoint before the old one closes
			// its connections, so clients reconnecting after the 4001
			// find it at once.
			next, nerr := newGeneration(ctx, cfg, st, log, old.n+1)
			if nerr == nil {
				g = next
				cur.Store(g)
				closeOld()
				break
			}
			closeOld()
			for {
				log.Warn("start a new engine on the bus", "err", nerr)
				select {
				case <-ctx.Done():
					sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
					_ = hs.Shutdown(sctx)
					cancel()
					return nil
				case <-time.After(time.Second):
				}
				if next, nerr = newGeneration(ctx, cfg, st, log, old.n+1); nerr == nil {
					g = next
					cur.Store(g)
					break
				}
			}
		case err := <-served:
			runErr = fmt.Errorf("serve http: %w", err)
			break loop
		}
	}
	// Stop accepting, then close every connection with a close frame,
	// then stop the engine and acknowledge the slot.
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	_ = hs.Shutdown(sctx)
	g.close(sctx, log, lost)
	return runErr
}

// generation is one engine and its s2s server on one run of the stream.
type generation struct {
	n   int
	src streamSource
	tap *s2s.Tap
	eng *engine.Engine
	srv *s2s.Server
	reg *prometheus.Registry
	rt  rates
	// shapes is the shape API on this generation's engine.
	shapes *shape.Server
}

// newGeneration opens the stream's source and starts an engine and an s2s
// server on it.
func newGeneration(ctx context.Context, cfg *serveConfig, st *serveStream, log *slog.Logger, n int) (*generation, error) {
	src, err := st.Open(ctx)
	if err != nil {
		return nil, err
	}
	g := &generation{n: n, src: src}
	ecfg := cfg.Engine
	g.tap = s2s.NewTap(src)
	ecfg.Source, ecfg.ReadDSN, ecfg.Types, ecfg.Logger = g.tap, cfg.ReadDSN, st.Types(), log
	ecfg.Publication = st.Publication() // subscriptions only on tables it carries
	if g.eng, err = engine.Open(ctx, ecfg); err != nil {
		src.Close()
		return nil, err
	}
	g.reg = prometheus.NewRegistry()
	g.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := s2s.NewMetrics()
	scfg := cfg.S2S
	scfg.Engine, scfg.Tap, scfg.Types, scfg.Logger, scfg.Metrics = g.eng, g.tap, st.Types(), log, metrics
	scfg.ServerVersion, scfg.SystemIdentifier, scfg.Database = Version, st.SystemID(), st.Database()
	if g.srv, err = s2s.New(scfg); err != nil {
		g.eng.Close()
		src.Close()
		return nil, err
	}
	if err := metrics.Register(g.reg, g.srv); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	shcfg := cfg.Shape
	shcfg.Engine, shcfg.Pool, shcfg.Types, shcfg.Publication, shcfg.Logger = g.eng, cfg.shapePool, st.Types(), st.Publication(), log
	shcfg.ServerVersion, shcfg.Ready = Version, g.tap.Passed
	if g.shapes, err = shape.Open(ctx, shcfg); err != nil {
		g.eng.Close()
		src.Close()
		return nil, err
	}
	t := g.tap
	g.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "freshet_transactions_total", Help: "Committed transactions read from the stream."},
			func() float64 { n, _ := t.Counts(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "freshet_rows_total", Help: "Row changes (insert, update, delete) read from the stream."},
			func() float64 { _, n := t.Counts(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "freshet_transactions_per_second", Help: "Transactions read in the last second."},
			func() float64 { tx, _ := g.rt.get(); return tx }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "freshet_rows_per_second", Help: "Row changes read in the last second."},
			func() float64 { _, r := g.rt.get(); return r }),
		shapeRequests(g.shapes, "live", func(c shape.RequestCounts) uint64 { return c.Live }),
		shapeRequests(g.shapes, "sse", func(c shape.RequestCounts) uint64 { return c.SSE }),
		shapeRequests(g.shapes, "other", func(c shape.RequestCounts) uint64 { return c.Other }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "freshet_stream_generation", Help: "Engines started on the stream by this process (a bus-fed server starts a new one when the bus breaks its chain)."},
			func() float64 { return float64(g.n) }),
	)
	return g, nil
}

// shapeRequests counts the shape API's requests of one kind (what reached
// the origin behind a CDN; docs/shape-api.md "Behind a CDN").
func shapeRequests(srv *shape.Server, kind string, f func(shape.RequestCounts) uint64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "freshet_shape_requests_total",
		Help: "Requests to {base}/v1/shape this engine generation answered, by kind: live (long-poll), sse, other.", ConstLabels: prometheus.Labels{"kind": kind}},
		func() float64 { return float64(f(srv.Requests())) })
}

// close closes every connection (4001 when the stream was lost), then the
// engine and the source.
func (g *generation) close(ctx context.Context, log *slog.Logger, lost error) {
	closeAll := g.srv.Shutdown
	if lost != nil {
		closeAll = func(ctx context.Context) error { return g.srv.StreamLost(ctx, "stream lost: "+lost.Error()) }
	}
	if err := closeAll(ctx); err != nil {
		log.Warn("shutdown", "err", err)
	}
	if err := g.shapes.Close(); err != nil {
		log.Warn("close shape API", "err", err)
	}
	if err := g.eng.Close(); err != nil {
		log.Warn("close engine", "err", err)
	}
	g.src.Close()
}
