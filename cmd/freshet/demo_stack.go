package main

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/stdlib"
	"github.com/freshetdb/freshet/ticketdesk"
	"github.com/freshetdb/freshet/wire"
	"github.com/jackc/pgx/v5"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// demoStack is everything the demo runs on: PostgreSQL, the engine, the
// ticket desk's two pools (through the read cache, and straight to
// PostgreSQL) and the world the writer and readers draw from.
type demoStack struct {
	m       *Main
	cfg     *demoConfig
	log     *slog.Logger
	cluster *pgtest.Cluster // nil with --dsn
	dsn     string
	engine  *demoEngine // nil with --freshet-url
	url     string      // the s2s endpoint
	http    string      // the engine's HTTP base (for /stats), "" when unknown

	cachedSQL *sql.DB
	cached    *gorm.DB // reads through the read cache
	cache     *readcache.Cache
	verifySQL *sql.DB
	verifyDB  *gorm.DB // the verifier's own pool through its own read cache
	// refusals and verifyRefusals keep the engine's refusal codes seen
	// by the readers' and the verifier's caches.
	refusals, verifyRefusals *ticketdesk.RefusalLog
	direct                   *gorm.DB // reads and writes straight to PostgreSQL
	directSQL                *sql.DB  // the same pool
	world                    *ticketdesk.World
	extra                    []ticketdesk.Lookup // lookups a migration adds to the desk's
	extraOn                  bool                // whether they are in use from the start
}

// openStack starts (or connects to) PostgreSQL, makes sure the schema and
// seed are there, starts the engine in process unless --freshet-url names
// one, and opens both pools. Close undoes it all.
func (m *Main) openStack(ctx context.Context, cfg *demoConfig) (st *demoStack, err error) {
	st = &demoStack{m: m, cfg: cfg, dsn: cfg.DSN}
	st.log = slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	defer func() {
		if err != nil {
			st.Close()
			st = nil
		}
	}()
	if st.dsn == "" {
		m.say("starting a throwaway PostgreSQL...")
		c, err := pgtest.Start(pgtest.Options{})
		if err != nil {
			return st, fmt.Errorf("start a throwaway PostgreSQL: %w", err)
		}
		st.cluster = c
		st.dsn = c.DSN("postgres")
		m.say("PostgreSQL %d is at %s (log: %s)", c.Version, st.dsn, c.LogPath())
	}
	if st.direct, st.directSQL, err = openDirect(st.dsn); err != nil {
		return st, err
	}
	seeded, err := ensureSeeded(ctx, st.directSQL, cfg.Scale)
	if err != nil {
		return st, err
	}
	if seeded {
		m.say("created the ticket desk and seeded it (scale %d)", cfg.Scale)
	}
	if err := createProbe(ctx, st.direct); err != nil {
		return st, err
	}
	if st.world, err = ticketdesk.LoadWorld(ctx, st.directSQL); err != nil {
		return st, fmt.Errorf("load the ticket desk's ids: %w", err)
	}
	st.url, st.http = cfg.FreshetURL, ""
	if st.url == "" {
		// The engine listens on loopback only; a token of its own keeps
		// other local users out all the same.
		tok := make([]byte, 16)
		crand.Read(tok)
		cfg.Token = hex.EncodeToString(tok)
		st.engine = &demoEngine{m: m, dsn: st.dsn, slot: cfg.Slot, token: cfg.Token, log: st.log}
		if err := st.engine.Start(ctx); err != nil {
			return st, err
		}
		st.url = "ws://" + st.engine.addr + wire.Path
		st.http = "http://" + st.engine.addr
		if err := st.engine.WaitReady(ctx, time.Minute); err != nil {
			return st, err
		}
	} else {
		// With several engines (demo cluster), /stats is the first's.
		first, _, _ := strings.Cut(st.url, ",")
		if u, ok := strings.CutSuffix(first, wire.Path); ok {
			st.http = "http" + strings.TrimPrefix(u, "ws")
		}
	}
	// Each pool's cache logs through a RefusalLog, which keeps the
	// engine's refusal code of every query it refused.
	st.refusals, st.verifyRefusals = ticketdesk.NewRefusalLog(st.log.Handler()), ticketdesk.NewRefusalLog(st.log.Handler())
	if st.cachedSQL, err = stdlib.Open(st.dsn, st.cacheConfig(st.refusals)); err != nil {
		return st, fmt.Errorf("open the read cache: %w", err)
	}
	st.cache = stdlib.CacheOf(st.cachedSQL)
	if st.cached, err = gorm.Open(postgres.New(postgres.Config{Conn: st.cachedSQL}), &gorm.Config{Logger: logger.Discard}); err != nil {
		return st, fmt.Errorf("open GORM over the read cache: %w", err)
	}
	// The verifier has a pool and a cache of its own, so that how its
	// reads are routed is observed exactly (ticketdesk.VerifyConfig.Stats).
	// Its first read of a key waits for the engine's answer (the readers'
	// reads PostgreSQL meanwhile, the library's default): what it compares
	// with PostgreSQL is then the cache's answer, not PostgreSQL's own.
	vcfg := st.cacheConfig(st.verifyRefusals)
	vcfg.VerdictTimeout = verifierVerdictTimeout
	if st.verifySQL, err = stdlib.Open(st.dsn, vcfg); err != nil {
		return st, fmt.Errorf("open the verifier's read cache: %w", err)
	}
	if st.verifyDB, err = gorm.Open(postgres.New(postgres.Config{Conn: st.verifySQL}), &gorm.Config{Logger: logger.Discard}); err != nil {
		return st, fmt.Errorf("open GORM over the verifier's read cache: %w", err)
	}
	// database/sql keeps 2 idle connections by default: with 16 readers
	// many reads sent to PostgreSQL would open a connection of their own.
	for _, db := range []*sql.DB{st.cachedSQL, st.verifySQL, st.directSQL} {
		db.SetMaxIdleConns(64)
	}
	return st, nil
}

// verifierVerdictTimeout is how long the verifier's first read of a key
// waits for the engine's answer.
const verifierVerdictTimeout = 5 * time.Second

// cacheConfig is the read cache's configuration: defaults, on the engine,
// logging through h (nil: the demo's logger).
func (st *demoStack) cacheConfig(h slog.Handler) readcache.Config {
	rcfg := readcache.DefaultConfig()
	rcfg.URL, rcfg.Token, rcfg.Logger = st.url, st.cfg.Token, st.log
	if h != nil {
		rcfg.Logger = slog.New(h)
	}
	return rcfg
}

// verifyConfig is the verifier's configuration: refusals are checked
// against the codes the verifier's cache saw.
func (st *demoStack) verifyConfig(settle time.Duration) ticketdesk.VerifyConfig {
	return ticketdesk.VerifyConfig{Settle: settle, RefusalCode: st.verifyRefusals.Code}
}

// openDirect opens GORM straight on PostgreSQL, and returns its pool.
func openDirect(dsn string) (*gorm.DB, *sql.DB, error) {
	db, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return nil, nil, fmt.Errorf("connect to PostgreSQL (--dsn): %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, nil, fmt.Errorf("connect to PostgreSQL (--dsn): %w", err)
	}
	return db, sqlDB, nil
}

// ensureSeeded creates and seeds the ticket desk unless its tickets table
// is already there; it says whether it did.
func ensureSeeded(ctx context.Context, db *sql.DB, scale int) (bool, error) {
	var there bool
	if err := db.QueryRowContext(ctx, "SELECT to_regclass('tickets') IS NOT NULL").Scan(&there); err != nil {
		return false, fmt.Errorf("look for the ticket desk's tables: %w", err)
	}
	if there {
		return false, nil
	}
	if err := ticketdesk.CreateSchema(ctx, db); err != nil {
		return false, fmt.Errorf("create the ticket desk's schema: %w", err)
	}
	if err := ticketdesk.Seed(ctx, db, scale); err != nil {
		return false, fmt.Errorf("seed the ticket desk: %w", err)
	}
	return true, nil
}

// Close stops the engine, drops its slot and publication (from a database
// the user gave), closes the pools and removes a throwaway server.
func (st *demoStack) Close() {
	for _, db := range []*sql.DB{st.cachedSQL, st.verifySQL} {
		if db != nil {
			db.Close()
		}
	}
	if st.engine != nil {
		if err := st.engine.Stop(); err != nil {
			st.log.Warn("stop the engine", "err", err)
		}
		if st.cluster == nil {
			dropSlot(st.m.Stderr, st.dsn, st.cfg.Slot, st.log)
		}
	}
	if st.directSQL != nil {
		st.directSQL.Close()
	}
	if st.cluster != nil {
		st.m.say("stopping PostgreSQL and removing %s", st.cluster.Dir)
		st.cluster.Stop()
	}
}

// engineLag returns the engine's lag in milliseconds as its /stats reports
// it (the age of the newest heartbeat it has delivered), or -1.
func (st *demoStack) engineLag(ctx context.Context) int64 {
	if st.http == "" {
		return -1
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", st.http+"/stats", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var s struct {
		S2S struct {
			LagMS *int64 `json:"lag_ms"`
		} `json:"s2s"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&s) != nil || s.S2S.LagMS == nil {
		return -1
	}
	return *s.S2S.LagMS
}

// demoEngine is `freshet serve` run in process, on a loopback port that
// stays the same across a Stop and a Start so the read cache reconnects.
type demoEngine struct {
	m     *Main
	dsn   string
	slot  string
	token string
	log   *slog.Logger

	mu     sync.Mutex
	addr   string // host:port once started
	cancel context.CancelFunc
	done   chan error
}

// Start runs serve's code path until Stop.
func (e *demoEngine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancel != nil {
		return fmt.Errorf("start the engine: already running")
	}
	listen := e.addr
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	cfg, err := e.m.parseServeFlags([]string{"--dsn", e.dsn, "--token", e.token, "--listen", listen, "--slot", e.slot,
		"--publication", e.slot, "--heartbeat", "100ms", "--lag-interval", "200ms",
		"--row-limit", strconv.Itoa(ticketdesk.RowLimit)})
	if err != nil {
		return fmt.Errorf("configure the engine: %w", err)
	}
	cfg.Logger = e.log
	addr := make(chan string, 1)
	cfg.Listening = func(a string) { addr <- a }
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- e.m.serve(sctx, cfg) }()
	select {
	case a := <-addr:
		e.addr, e.cancel, e.done = a, cancel, done
		return nil
	case err := <-done:
		cancel()
		return fmt.Errorf("start the engine: %w", err)
	case <-ctx.Done():
		cancel()
		<-done
		return ctx.Err()
	}
}

// WaitReady waits until the engine's stream has passed its first
// consistent point.
func (e *demoEngine) WaitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+e.addr+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the engine was not ready within %v (see its log above)", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop shuts the engine down as SIGTERM would and waits for it.
func (e *demoEngine) Stop() error {
	e.mu.Lock()
	cancel, done := e.cancel, e.done
	e.cancel, e.done = nil, nil
	e.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	return <-done
}

// dropSlot drops a slot and publication from a database the user gave, so
// the slot does not pin WAL after the demo.
func dropSlot(out io.Writer, dsn, slot string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		log.Warn("drop the demo's slot: connect", "err", err, "slot", slot)
		return
	}
	defer conn.Close(ctx)
	for range 50 {
		var left int
		_, _ = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, slot)
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&left); err != nil || left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{slot}.Sanitize()); err != nil {
		log.Warn("drop the demo's publication", "err", err)
	}
	fmt.Fprintf(out, "freshet demo: dropped slot and publication %q (the ticket desk's tables stay)\n", slot)
}
