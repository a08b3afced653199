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
	"strings"
	"sync"
	"time"

	"github.com/freshetdb/freshet/bus"
	"github.com/freshetdb/freshet/pgwal"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const relayUsage = `Usage: freshet relay --dsn DSN --bus nats://HOST:4222 [flags]

Holds the database's replication slot and publishes every committed
transaction (and heartbeat) to a NATS JetStream stream, from which any
number of 'freshet serve --source nats://...' replicas follow the
database. The slot is acknowledged only once the bus has stored what came
before, so a relay killed at any point and started again publishes every
transaction exactly once (docs/scale-out.md).

Flags:
`

// relayConfig is what `freshet relay` was asked to do.
type relayConfig struct {
	Relay    bus.RelayConfig
	LogLevel slog.Level
	Every    time.Duration // stats log line cadence; 0 = none
	Listen   string        // address of /healthz, /metrics and /stats; "" = none

	// Logger, when set, is used instead of a text logger at LogLevel.
	Logger *slog.Logger
}

// busFlags are the stream settings, shared by the relay's flags and their
// documentation.
func busSettingsFlags(fs *flag.FlagSet) func() (bus.StreamSettings, error) {
	def := bus.DefaultStreamSettings()
	maxAge := fs.Duration("bus-max-age", def.MaxAge, "oldest message the stream keeps (replicas further behind hydrate again)")
	maxBytes := fs.Int64("bus-max-bytes", def.MaxBytes, "most bytes the stream keeps, oldest dropped first")
	dups := fs.Duration("bus-duplicates", def.Duplicates, "window in which a republished message (same Nats-Msg-Id) is dropped")
	replicas := fs.Int("bus-replicas", def.Replicas, "stream replicas on a JetStream cluster (3 in production, in separate fault domains)")
	storage := fs.String("bus-storage", "file", "stream storage: file or memory")
	persist := fs.String("bus-persist", "default", "stream persist mode: default (flushed before the acknowledgement) or async (faster; a crashed server may lose acknowledged messages, which replicas then see as a new epoch)")
	maxMsg := fs.Int("bus-max-msg-size", def.MaxMsgSize, "largest message published; large transactions are cut into fragments below it (at most the server's max_payload)")
	return func() (bus.StreamSettings, error) {
		s := bus.StreamSettings{MaxAge: *maxAge, MaxBytes: *maxBytes, Duplicates: *dups, Replicas: *replicas, MaxMsgSize: *maxMsg}
		switch *storage {
		case "file":
		case "memory":
			s.Memory = true
		default:
			return s, fmt.Errorf("--bus-storage %q: want file or memory", *storage)
		}
		switch *persist {
		case "default":
		case "async":
			s.AsyncPersist = true
		default:
			return s, fmt.Errorf("--bus-persist %q: want default or async", *persist)
		}
		return s, s.Validate()
	}
}

func (m *Main) parseRelayFlags(args []string) (*relayConfig, error) {
	fs := m.newCommandFlags("relay", "freshet relay", relayUsage)
	def := pgwal.DefaultConfig()
	var (
		dsn         = fs.String("dsn", os.Getenv("FRESHET_DSN"), "PostgreSQL connection string of the database to follow (default $FRESHET_DSN)")
		busURL      = fs.String("bus", os.Getenv("FRESHET_BUS"), "the NATS JetStream bus, nats://host:4222 (several comma-separated) (default $FRESHET_BUS)")
		slot        = fs.String("slot", def.Slot, "replication slot name (also names the stream: FRESHET_<system id>_<slot>)")
		publication = fs.String("publication", def.Publication, "publication name")
		tables      = fs.String("tables", "", "comma-separated tables for the publication (default: all tables)")
		create      = fs.Bool("create", true, "create the slot and publication if they are missing")
		proto       = fs.Int("proto", def.ProtoVersion, "pgoutput protocol version: 1 or 2")
		binary      = fs.Bool("binary", def.Binary, "ask pgoutput for binary values")
		heartbeat   = fs.Duration("heartbeat", def.HeartbeatInterval, "heartbeat interval (lag probes through the WAL and the bus); must be > 0")
		maxPending  = fs.Int("max-pending", bus.DefaultMaxPending, "most messages published and not yet acknowledged by the bus")
		pubTimeout  = fs.Duration("publish-timeout", bus.DefaultPublishTimeout, "longest wait for the bus to acknowledge a message before the session starts again")
		batchWait   = fs.Duration("batch-wait", bus.DefaultBatchWait, "shortest time between two messages that are not full: what arrives meanwhile goes into the next; the first transaction after a quiet stretch goes out at once; 0 sends a message as soon as the one before is acknowledged")
		every       = fs.Duration("stats-interval", 30*time.Second, "how often a line of counters is logged; 0 turns it off")
		listen      = fs.String("listen", "", "serve /healthz, /metrics (Prometheus) and /stats (JSON) on this address, e.g. 127.0.0.1:7071; empty: none")
		logLevel    = fs.String("log-level", "info", "log level: debug, info, warn or error")
	)
	settings := busSettingsFlags(fs.FlagSet)
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
	if err := bus.ValidateURL(*busURL); err != nil {
		return nil, bad("--bus: %v (or set FRESHET_BUS)", err)
	}
	cfg := &relayConfig{Every: *every, Listen: *listen}
	rc := &cfg.Relay
	rc.URL = *busURL
	rc.Stream = def
	rc.Stream.DSN, rc.Stream.Slot, rc.Stream.Publication, rc.Stream.Create = *dsn, *slot, *publication, *create
	for _, t := range strings.Split(*tables, ",") {
		if t = strings.TrimSpace(t); t != "" {
			rc.Stream.Tables = append(rc.Stream.Tables, t)
		}
	}
	if *proto != 1 && *proto != 2 {
		return nil, bad("--proto %d: want 1 or 2", *proto)
	}
	rc.Stream.ProtoVersion, rc.Stream.Binary = *proto, *binary
	if *heartbeat <= 0 {
		return nil, bad("--heartbeat %v: the relay needs heartbeats (lag through the bus, and an idle slot's acknowledgements): give a duration like 500ms", *heartbeat)
	}
	rc.Stream.HeartbeatInterval = *heartbeat
	if *maxPending < 1 {
		return nil, bad("--max-pending %d: want at least 1", *maxPending)
	}
	rc.MaxPending = *maxPending
	if *pubTimeout <= 0 {
		return nil, bad("--publish-timeout %v: want a positive duration like 10s", *pubTimeout)
	}
	rc.PublishTimeout = *pubTimeout
	switch {
	case *batchWait < 0 || *batchWait > time.Second:
		return nil, bad("--batch-wait %v: want a duration from 0 to 1s, like 2ms", *batchWait)
	case *batchWait == 0:
		rc.BatchWait = -1 // none
	default:
		rc.BatchWait = *batchWait
	}
	if *every < 0 {
		return nil, bad("--stats-interval %v: want a duration >= 0", *every)
	}
	var err error
	if rc.Settings, err = settings(); err != nil {
		return nil, bad("%v", err)
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return nil, bad("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	if err := rc.Stream.Validate(); err != nil {
		return nil, bad("%v", err)
	}
	return cfg, nil
}

// runRelay implements `freshet relay`.
func (m *Main) runRelay(ctx context.Context, args []string) error {
	cfg, err := m.parseRelayFlags(args)
	if errors.Is(err, errHelp) {
		return nil
	} else if err != nil {
		return err
	}
	return m.relay(ctx, cfg)
}

// relay runs until ctx ends or the relay meets an error a restart cannot
// cure.
func (m *Main) relay(ctx context.Context, cfg *relayConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	}
	cfg.Relay.Logger = log
	cfg.Relay.Stream.Logger = log
	r, err := bus.NewRelay(cfg.Relay)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(done)
	if cfg.Every > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(cfg.Every)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					s := r.Stats()
					log.Info("relay", "messages", s.Messages, "events", s.Events, "acked", s.Acked, "epoch", s.Epoch, "sessions", s.Sessions)
				case <-done:
					return
				}
			}
		}()
	}
	if cfg.Listen != "" {
		stop, err := serveRelayHTTP(cfg.Listen, r, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	return r.Run(ctx)
}

// serveRelayHTTP serves the relay's counters until stop.
func serveRelayHTTP(addr string, r *bus.Relay, log *slog.Logger) (stop func(), err error) {
	reg := prometheus.NewRegistry()
	counter := func(name, help string, f func(bus.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return f(r.Stats()) })
	}
	gauge := func(name, help string, f func(bus.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(r.Stats()) })
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		counter("freshet_relay_messages_total", "Messages the bus acknowledged.", func(s bus.Stats) float64 { return float64(s.Messages) }),
		counter("freshet_relay_events_total", "Transaction fragments and heartbeats in them.", func(s bus.Stats) float64 { return float64(s.Events) }),
		counter("freshet_relay_sessions_total", "Sessions started (the first and every restart).", func(s bus.Stats) float64 { return float64(s.Sessions) }),
		counter("freshet_relay_new_epochs_total", "Epochs this relay started (every replica then hydrates again).", func(s bus.Stats) float64 { return float64(s.NewEpochs) }),
		gauge("freshet_relay_acked_lsn", "The last position acknowledged to the slot.", func(s bus.Stats) float64 { return float64(s.Acked) }),
	)
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		s := r.Stats()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"messages": s.Messages, "events": s.Events, "acked": s.Acked.String(),
			"epoch": s.Epoch, "sessions": s.Sessions, "new_epochs": s.NewEpochs, "version": Version})
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (--listen): %w", addr, err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Warn("relay: serve http", "err", err)
		}
	}()
	log.Info("relay: serving /healthz, /metrics and /stats", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		<-done
	}, nil
}
