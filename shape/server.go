package shape

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freshetdb/freshet/engine"
)

// Server is the shape API: the HTTP handlers (ServeHTTP), the registry of
// shapes by handle and definition, and their logs on disk.
type Server struct {
	cfg    Config
	log    *slog.Logger
	render renderer

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool

	createMu sync.Mutex // serializes shape creation
	mu       sync.Mutex
	reg      *registry
	layouts  map[string]*layout // never shrinks: one per table and column list served

	dirtyMu  sync.Mutex
	dirtySet map[*Shape]struct{}
	dirtyCh  chan struct{}

	reqLive, reqSSE, reqOther atomic.Uint64          // Requests
	bodiesBuilt               atomic.Uint64          // message bodies built (messagesBody), for tests
	bodyHook                  atomic.Pointer[func()] // tests: run once a message body is had, before it is written
	subsetHook                atomic.Pointer[func()] // tests: run between a subset's snapshot and its query
	flushHook                 atomic.Pointer[func()] // tests: run by the writer before it flushes what is pending
}

// Open starts a shape server: it creates the data directory, loads every
// shape stored there (each is hydrated again, and what changed while the
// server was down is appended to its log), and starts the writer.
func Open(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("shape data directory %s (--shape-data-dir): %w", cfg.DataDir, err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	sctx, cancel := context.WithCancel(context.Background())
	srv := &Server{cfg: cfg, log: log, render: renderer{types: cfg.Types}, ctx: sctx, cancel: cancel,
		reg: newRegistry(), layouts: map[string]*layout{}, dirtySet: map[*Shape]struct{}{}, dirtyCh: make(chan struct{}, 1)}
	srv.wg.Add(2)
	go srv.writer()
	go srv.reaper()
	if err := srv.loadAll(ctx); err != nil {
		srv.Close()
		return nil, err
	}
	return srv, nil
}

// Close stops the writer and the reaper and unsubscribes every shape;
// their logs stay on disk for the next Open.
func (srv *Server) Close() error {
	if !srv.closed.CompareAndSwap(false, true) {
		return nil
	}
	srv.mu.Lock()
	shapes := srv.reg.all()
	srv.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range shapes {
		s.mu.Lock()
		id := s.sub
		s.mu.Unlock()
		if id != 0 {
			_ = srv.cfg.Engine.Unsubscribe(ctx, id)
		}
	}
	srv.cancel()
	srv.wg.Wait()
	// What the engine sent before it was unsubscribed is made durable.
	for _, s := range shapes {
		if err := s.flush(); err != nil {
			srv.log.Warn("shape: flush at close", "err", err)
		}
	}
	return nil
}

func (srv *Server) closing() bool { return srv.closed.Load() }

// Shapes returns how many shapes are registered.
func (srv *Server) Shapes() int {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.reg.len()
}

// dirty schedules s for the writer. It may be called with s.mu held.
func (srv *Server) dirty(s *Shape) {
	srv.dirtyMu.Lock()
	srv.dirtySet[s] = struct{}{}
	srv.dirtyMu.Unlock()
	select {
	case srv.dirtyCh <- struct{}{}:
	default:
	}
}

// flushConcurrency is how many shapes the writer flushes at once.
const flushConcurrency = 8

// writer makes pending changes durable, shape by shape, and publishes
// them.
func (srv *Server) writer() {
	defer srv.wg.Done()
	for {
		select {
		case <-srv.ctx.Done():
			return
		case <-srv.dirtyCh:
		}
		if hook := srv.flushHook.Load(); hook != nil {
			(*hook)()
		}
		srv.dirtyMu.Lock()
		set := srv.dirtySet
		srv.dirtySet = map[*Shape]struct{}{}
		srv.dirtyMu.Unlock()
		// Shapes are flushed a few at a time: each flush ends with an
		// fsync, and a transaction that touches many shapes should not
		// wait for their fsyncs one after another (the filesystem's
		// journal commits concurrent ones together).
		var wg sync.WaitGroup
		sem := make(chan struct{}, flushConcurrency)
		for s := range set {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if err := s.flush(); err != nil {
					srv.log.Error("shape: cannot write its log; the shape is dropped (its clients will refetch)", "dir", s.dir(), "err", err)
					s.mu.Lock()
					s.goneLocked("its log could not be written: " + err.Error())
					s.mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
}

// reaper drops old generations and idle shapes.
func (srv *Server) reaper() {
	defer srv.wg.Done()
	t := time.NewTicker(min(10*time.Second, max(srv.cfg.Retention/4, 100*time.Millisecond)))
	defer t.Stop()
	for {
		select {
		case <-srv.ctx.Done():
			return
		case now := <-t.C:
			srv.mu.Lock()
			shapes := srv.reg.all()
			srv.mu.Unlock()
			for _, s := range shapes {
				if err := s.collect(now); err != nil {
					srv.log.Warn("shape: collect old generations", "dir", s.dir(), "err", err)
				}
				s.mu.Lock()
				if srv.cfg.IdleExpiry > 0 && now.Sub(time.Unix(0, s.used)) > srv.cfg.IdleExpiry {
					srv.log.Info("shape: expired (idle)", "handle", s.handleLocked(), "idle", now.Sub(time.Unix(0, s.used)).Round(time.Second))
					s.goneLocked("expired")
				}
				s.mu.Unlock()
			}
		}
	}
}

// forget removes a shape from the registry, then (off the caller's
// goroutine, which may be the engine's) unsubscribes it and removes its
// files. Called with s.mu held.
func (srv *Server) forget(s *Shape) {
	srv.mu.Lock()
	srv.reg.del(s, s.rotatedLocked())
	srv.mu.Unlock()
	id := s.sub
	srv.wg.Add(1)
	go func() {
		defer srv.wg.Done()
		if id != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = srv.cfg.Engine.Unsubscribe(ctx, id)
			cancel()
		}
		if err := os.RemoveAll(s.dir()); err != nil {
			srv.log.Warn("shape: remove files", "dir", s.dir(), "err", err)
		}
	}()
}

// resubscribe subscribes s again after a retryable end, after a pause.
// Called with s.mu held.
func (srv *Server) resubscribe(s *Shape) {
	srv.wg.Add(1)
	go func() {
		defer srv.wg.Done()
		select {
		case <-srv.ctx.Done():
			return
		case <-time.After(time.Second):
		}
		// The table may have changed under the shape (the engine ends a
		// subscription whose table changed shape): the same columns with
		// the same types, or the shape is out of scope.
		ti, fe, err := srv.describe(srv.ctx, s.definition())
		if err == nil && fe == nil && schemaHeader(ti.cols) != s.lay.schema {
			err = errors.New("its table's columns changed")
		} else if err == nil && fe != nil {
			err = errors.New(string(fe.body()))
		}
		if err == nil {
			err = srv.subscribe(srv.ctx, s)
		}
		if err != nil && srv.ctx.Err() == nil {
			s.mu.Lock()
			s.goneLocked(err.Error())
			s.mu.Unlock()
		}
	}()
}

// subscribe registers s's query with the engine.
func (srv *Server) subscribe(ctx context.Context, s *Shape) error {
	id, ref, err := srv.cfg.Engine.Subscribe(ctx, shapeSQL(s.definition(), s.lay.cols), textBinds(s.params()), engine.ModeRowsUnordered, s)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if ref != nil {
		return refusalError{ref.Message}
	}
	s.mu.Lock()
	s.sub = id
	s.mu.Unlock()
	return nil
}

// refusalError is the engine's refusal of a shape's query.
type refusalError struct{ msg string }

func (e refusalError) Error() string { return e.msg }

// errShapeLimit is the shape cap being reached.
var errShapeLimit = errors.New("shape limit reached")

// getOrCreate returns the shape for def, creating it (and subscribing)
// when there is none. A definition the catalog or the engine refuses is
// a fieldErrors.
func (srv *Server) getOrCreate(ctx context.Context, def definition) (*Shape, *fieldErrors, error) {
	srv.mu.Lock()
	s := srv.reg.get(&def)
	srv.mu.Unlock()
	if s != nil {
		return s, nil, nil
	}
	srv.createMu.Lock()
	defer srv.createMu.Unlock()
	srv.mu.Lock()
	s, n := srv.reg.get(&def), srv.reg.len()
	srv.mu.Unlock()
	if s != nil {
		return s, nil, nil
	}
	if n >= srv.cfg.MaxShapes {
		return nil, nil, errShapeLimit
	}
	if def.Where != "" {
		refs, err := checkWhere(def.Where)
		if err != nil {
			fe := &fieldErrors{}
			fe.add("where", err.Error())
			return nil, fe, nil
		}
		for _, r := range refs {
			if r.n > len(def.Params) {
				fe := &fieldErrors{}
				fe.add("params", fmt.Sprintf("the where clause uses $%d but params[%d] is not given", r.n, r.n))
				return nil, fe, nil
			}
		}
	}
	ti, fe, err := srv.describe(ctx, def)
	if fe != nil || err != nil {
		return nil, fe, err
	}
	s = srv.newShape(def, ti.cols, newHandle())
	if err := os.MkdirAll(s.dir(), 0o755); err != nil {
		return nil, nil, fmt.Errorf("create shape directory: %w", err)
	}
	s.mu.Lock()
	err = s.saveMetaLocked()
	s.mu.Unlock()
	if err != nil {
		os.RemoveAll(s.dir())
		return nil, nil, fmt.Errorf("write shape meta: %w", err)
	}
	if err := srv.subscribe(ctx, s); err != nil {
		os.RemoveAll(s.dir())
		var re refusalError
		if errors.As(err, &re) {
			fe := &fieldErrors{}
			fe.add("where", re.msg)
			return nil, fe, nil
		}
		return nil, nil, err
	}
	srv.register(s)
	return s, nil, nil
}

func (srv *Server) newShape(def definition, cols []column, name handle) *Shape {
	lay := srv.layoutOf(def, cols)
	// The table's names are the layout's, one copy for all its shapes
	// rather than the strings each request's URL was parsed into.
	s := &Shape{srv: srv, lay: lay, name: name, where: def.Where, replica: def.Replica, logMode: def.Log, used: time.Now().UnixNano()}
	if def.Params != nil || def.Columns != nil {
		s.defx = &defExtra{params: def.Params, columns: def.Columns}
	}
	return s
}

// layoutOf returns the layout for a table's columns, shared with every
// shape that selects the same ones with the same types.
func (srv *Server) layoutOf(def definition, cols []column) *layout {
	schema := schemaHeader(cols)
	key := def.Schema + "\x00" + def.Table + "\x00" + schema
	for _, c := range cols {
		key += "\x00" + c.name
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if l := srv.layouts[key]; l != nil {
		return l
	}
	l := &layout{cols: cols, schema: schema, tableSchema: def.Schema, table: def.Table}
	for i, c := range cols {
		if c.pkIndex >= 0 {
			l.pk = append(l.pk, i)
		}
		l.names = append(l.names, append(appendJSONString(nil, c.name), ':'))
	}
	// Key order is the primary key's column order.
	for i := 1; i < len(l.pk); i++ {
		for j := i; j > 0 && cols[l.pk[j]].pkIndex < cols[l.pk[j-1]].pkIndex; j-- {
			l.pk[j], l.pk[j-1] = l.pk[j-1], l.pk[j]
		}
	}
	l.rel = appendJSONString([]byte{'['}, def.Schema)
	l.rel = append(l.rel, ',')
	l.rel = append(appendJSONString(l.rel, def.Table), ']')
	l.keyPfx = appendKeyPart(nil, def.Schema)
	l.keyPfx = append(l.keyPfx, '.')
	l.keyPfx = appendKeyPart(l.keyPfx, def.Table)
	srv.layouts[key] = l
	return l
}

func (srv *Server) register(s *Shape) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st == gone {
		return // refused or ended before it was registered
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.reg.put(s, s.rotatedLocked())
}

// lookup finds a live shape by handle.
func (srv *Server) lookup(h string) *Shape {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.reg.lookup(h)
}

// loadAll loads every shape stored in the data directory.
func (srv *Server) loadAll(ctx context.Context) error {
	ents, err := os.ReadDir(srv.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("read shape data directory %s: %w", srv.cfg.DataDir, err)
	}
	for _, de := range ents {
		if !de.IsDir() {
			continue
		}
		dir := filepath.Join(srv.cfg.DataDir, de.Name())
		var io ioError
		if err := srv.load(ctx, dir); errors.As(err, &io) {
			// The database could not be asked: keep the shape's files
			// and let the server's start fail (a supervisor retries).
			return fmt.Errorf("load shape %s: %w", dir, err)
		} else if err != nil {
			srv.log.Warn("shape: a stored shape cannot be served again; removing it (its clients will refetch)", "dir", dir, "err", err)
			os.RemoveAll(dir)
		}
	}
	return nil
}

func (srv *Server) load(ctx context.Context, dir string) error {
	var m meta
	if err := readJSON(filepath.Join(dir, "meta.json"), &m); err != nil {
		return fmt.Errorf("read meta.json: %w", err)
	}
	if len(m.Handles) == 0 {
		return errors.New("meta.json names no handle")
	}
	ti, fe, err := srv.describe(ctx, m.Def)
	if err != nil {
		return ioError{err}
	}
	if fe != nil {
		return fmt.Errorf("its table cannot be served now: %s", fe.body())
	}
	var hs []handle
	for _, t := range m.Handles {
		h, ok := parseHandle(t)
		if !ok {
			return fmt.Errorf("meta.json: %q is not a handle", t)
		}
		hs = append(hs, h)
	}
	s := srv.newShape(m.Def, ti.cols, hs[0])
	if filepath.Base(dir) != m.Handles[0] {
		return fmt.Errorf("its directory is not named after its first handle %s", m.Handles[0])
	}
	if len(hs) > 1 {
		s.rareLocked().rotated = hs[1:]
	}
	if s.lay.schema != m.Schema {
		return fmt.Errorf("its table's columns changed (was %s, now %s)", m.Schema, s.lay.schema)
	}
	if err := s.reload(); err != nil {
		return err
	}
	if err := srv.subscribe(ctx, s); err != nil {
		var re refusalError
		if !errors.As(err, &re) {
			return ioError{err}
		}
		return err
	}
	srv.register(s)
	return nil
}

// ioError is a failure to ask the database or the engine, as opposed to
// an answer that the shape cannot be served.
type ioError struct{ err error }

func (e ioError) Error() string { return e.err.Error() }
func (e ioError) Unwrap() error { return e.err }
