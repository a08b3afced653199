package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/freshetdb/freshet/bus"
	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/pgwal"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
)

// serveStream is where `freshet serve` takes its changes from: the slot
// (one run: the reader) or the bus (a new consumer for every generation).
type serveStream struct {
	cfg *serveConfig
	log *slog.Logger

	reader *pgwal.Reader // slot
	opened bool

	nc       *nats.Conn // bus
	pub      string     // the relay's publication, from the stream (bus)
	types    *pgwal.TypeResolver
	sysID    string
	database string
}

// streamSource is a generation's source.
type streamSource interface {
	engine.Source
	Close()
}

// openStream opens the slot, or connects to the bus and reads which
// database the read DSN is (the stream is named by it, and its metadata
// must match: hydration reads go there).
func openStream(ctx context.Context, cfg *serveConfig, log *slog.Logger) (*serveStream, error) {
	st := &serveStream{cfg: cfg, log: log}
	if cfg.Source == "" {
		r, err := pgwal.Open(ctx, cfg.Stream)
		if err != nil {
			return nil, err
		}
		st.reader, st.sysID, st.database = r, r.SystemID(), r.Database()
		return st, nil
	}
	conn, err := pgx.Connect(ctx, cfg.ReadDSN)
	if err != nil {
		return nil, fmt.Errorf("connect to the read database (--read-dsn, else --dsn): %w", err)
	}
	err = conn.QueryRow(ctx, "SELECT system_identifier::text, current_database() FROM pg_control_system()").Scan(&st.sysID, &st.database)
	conn.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the read database's system identifier: %w", err)
	}
	if st.nc, err = bus.Connect(ctx, cfg.Source, "freshet serve"); err != nil {
		return nil, err
	}
	st.types = pgwal.NewTypeResolver(cfg.ReadDSN, log)
	return st, nil
}

// Open returns the next generation's source.
func (st *serveStream) Open(ctx context.Context) (streamSource, error) {
	if st.reader != nil {
		if st.opened {
			return nil, errors.New("the slot's stream was already used")
		}
		st.opened = true
		return readerSource{st.reader}, nil
	}
	slot := st.cfg.Stream.Slot
	if slot == "" {
		slot = pgwal.DefaultConfig().Slot
	}
	src, err := bus.OpenSource(ctx, bus.SourceConfig{Conn: st.nc, SystemID: st.sysID, Database: st.database, Slot: slot,
		Replay: st.cfg.BusReplay, Logger: st.log})
	if err != nil {
		return nil, err
	}
	if p := src.Publication(); p != "" && p != st.pub {
		if p != st.cfg.Stream.Publication {
			st.log.Info("following the relay's publication, not --publication", "publication", p, "flag", st.cfg.Stream.Publication)
		}
		st.pub = p
	}
	return src, nil
}

// Publication is the publication the followed stream carries: the slot's,
// or the one the relay named in the stream's metadata (--publication when
// the bus keeps no metadata).
func (st *serveStream) Publication() string {
	if st.pub != "" {
		return st.pub
	}
	return st.cfg.Stream.Publication
}

// Restartable reports whether a generation that stopped with err may be
// followed by a new one: only on the bus, and there always (a broken chain
// at once; anything else after a pause).
func (st *serveStream) Restartable(err error) bool { return st.reader == nil && err != nil }

// Types resolves the database's non-built-in types.
func (st *serveStream) Types() change.TypeResolver {
	if st.reader != nil {
		return st.reader.Types()
	}
	return st.types
}

// SystemID and Database name the followed database.
func (st *serveStream) SystemID() string { return st.sysID }

// Database is the followed database's name.
func (st *serveStream) Database() string { return st.database }

// Name says what is followed, for logs and /stats.
func (st *serveStream) Name() string {
	if st.reader != nil {
		return "slot"
	}
	return "bus"
}

// Close releases the stream.
func (st *serveStream) Close() {
	if st.reader != nil {
		st.reader.Close()
		return
	}
	st.types.Close()
	st.nc.Close()
}

// readerSource is the slot's reader as a generation's source.
type readerSource struct{ *pgwal.Reader }

func (r readerSource) Close() { _ = r.Reader.Close() }
