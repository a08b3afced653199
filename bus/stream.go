package bus

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of StreamSettings.
const (
	DefaultMaxAge     = time.Hour
	DefaultMaxBytes   = 1 << 30
	DefaultDuplicates = 2 * time.Minute
	DefaultMaxMsgSize = 1 << 20 // nats-server's default max_payload
)

// StreamSettings are the JetStream stream's settings, applied by the relay
// when it creates or updates the stream. Replicas read the stream and set
// nothing.
type StreamSettings struct {
	// MaxAge and MaxBytes bound what the stream keeps (oldest discarded
	// first). They only need to cover a replica's short disconnects: a
	// replica that falls behind them starts again from a fresh snapshot.
	MaxAge   time.Duration
	MaxBytes int64
	// Duplicates is the window in which a republished message (same
	// Nats-Msg-Id) is dropped by the bus.
	Duplicates time.Duration
	// Replicas is the stream's replication factor (1 on one server; 3 on
	// a cluster in separate fault domains).
	Replicas int
	// Memory keeps the stream in memory instead of files (tests).
	Memory bool
	// AsyncPersist lets the server acknowledge a write before flushing it
	// (JetStream's persist_mode async): faster, and a crashed server may
	// then lose acknowledged messages. Off by default. The relay turns
	// such a loss into a new epoch (replicas hydrate again), never a wrong
	// answer, but the fsync-before-ack the design assumes is the server's
	// own setting, sync_interval: always (docs/scale-out.md).
	AsyncPersist bool
	// MaxMsgSize is the largest message the relay publishes; large
	// transactions are cut into fragments below it. It must not exceed
	// the server's max_payload.
	MaxMsgSize int
}

// DefaultStreamSettings returns the safe defaults: file storage, one hour
// or 1 GiB, a two-minute duplicates window, one replica, immediate
// persistence, 1 MiB messages.
func DefaultStreamSettings() StreamSettings {
	return StreamSettings{MaxAge: DefaultMaxAge, MaxBytes: DefaultMaxBytes, Duplicates: DefaultDuplicates, Replicas: 1, MaxMsgSize: DefaultMaxMsgSize}
}

// Validate reports the first setting that cannot work.
func (s StreamSettings) Validate() error {
	switch {
	case s.MaxAge <= 0:
		return errors.New("stream max age must be positive, like 1h")
	case s.MaxBytes <= 0:
		return errors.New("stream max bytes must be positive, like 1073741824")
	case s.Duplicates <= 0 || s.Duplicates > s.MaxAge:
		return fmt.Errorf("stream duplicates window %v must be positive and at most the max age %v", s.Duplicates, s.MaxAge)
	case s.Replicas < 1 || s.Replicas > 5:
		return fmt.Errorf("stream replicas %d: want 1 to 5 (JetStream's limit)", s.Replicas)
	case s.MaxMsgSize < 64<<10:
		return fmt.Errorf("max message size %d: want at least 65536 bytes", s.MaxMsgSize)
	}
	return nil
}

// StreamName is the JetStream stream of one database's slot:
// FRESHET_<system identifier>_<slot>. Every replica following that slot
// reads it.
func StreamName(systemID, slot string) string { return "FRESHET_" + systemID + "_" + slot }

// Subject is the one subject the stream holds.
func Subject(systemID, slot string) string { return "freshet." + systemID + "." + slot }

// BeatSubject is the plain NATS subject (not stored: the stream holds only
// Subject) on which a replica asks the relay for a heartbeat now
// (Source.Beat): the relay writes one at once (pgwal.Reader.Beat), so a
// replica's hydration read on a quiet database is passed by the stream
// without waiting for the relay's next interval.
func BeatSubject(systemID, slot string) string { return "freshet_beat." + systemID + "." + slot }

// Stream metadata keys the relay sets, which replicas check against the
// database they read.
const (
	metaSystemID = "freshet_system_identifier"
	metaDatabase = "freshet_database"
	metaSlot     = "freshet_slot"
	metaPub      = "freshet_publication"
)

func (s StreamSettings) config(systemID, database, slot, publication string) jetstream.StreamConfig {
	storage := jetstream.FileStorage
	if s.Memory {
		storage = jetstream.MemoryStorage
	}
	persist := jetstream.DefaultPersistMode
	if s.AsyncPersist {
		persist = jetstream.AsyncPersistMode
	}
	return jetstream.StreamConfig{
		Name:        StreamName(systemID, slot),
		Description: description(database, slot),
		Subjects:    []string{Subject(systemID, slot)},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      s.MaxAge,
		MaxBytes:    s.MaxBytes,
		MaxMsgSize:  int32(s.MaxMsgSize),
		Discard:     jetstream.DiscardOld,
		Storage:     storage,
		Replicas:    s.Replicas,
		Duplicates:  s.Duplicates,
		DenyDelete:  true,
		DenyPurge:   true,
		PersistMode: persist,
		Metadata:    map[string]string{metaSystemID: systemID, metaDatabase: database, metaSlot: slot, metaPub: publication},
	}
}

func description(database, slot string) string {
	return "freshet relay: the change stream of database " + database + ", slot " + slot
}

// ConnectWait is how long Connect keeps trying a bus that does not answer
// yet (started at the same time, restarting, or starved of CPU) before it
// gives up: a daemon started beside its bus should not exit because the
// bus came up a second later, and a wrong address is still reported
// within half a minute.
const ConnectWait = 30 * time.Second

// Connect opens a NATS connection to the servers in rawURL (nats://host:port,
// several separated by commas) that reconnects for ever once connected.
// A bus that cannot be reached is tried again every 250 ms for
// ConnectWait (or until ctx ends). name names the client in the server's
// monitoring.
func Connect(ctx context.Context, rawURL, name string) (*nats.Conn, error) {
	if err := ValidateURL(rawURL); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(ConnectWait)
	for {
		nc, err := nats.Connect(rawURL, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
			nats.RetryOnFailedConnect(false), nats.Timeout(5*time.Second))
		if err == nil {
			return nc, nil
		}
		if !errors.Is(err, nats.ErrNoServers) || time.Now().After(deadline) {
			return nil, fmt.Errorf("connect to the bus at %s: %w (is nats-server running with JetStream on, -js?)", redactURL(rawURL), err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to the bus at %s: %w", redactURL(rawURL), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ValidateURL checks a bus address: nats:// (or tls://) URLs, comma
// separated.
func ValidateURL(rawURL string) error {
	if rawURL == "" {
		return errors.New("bus URL is empty: give nats://host:4222")
	}
	for _, one := range strings.Split(rawURL, ",") {
		u, err := url.Parse(strings.TrimSpace(one))
		if err != nil {
			return fmt.Errorf("bus URL %q: %v", redactURL(one), err)
		}
		if u.Scheme != "nats" && u.Scheme != "tls" {
			return fmt.Errorf("bus URL %q: want the nats:// (or tls://) scheme, like nats://127.0.0.1:4222", redactURL(one))
		}
		if u.Host == "" {
			return fmt.Errorf("bus URL %q: no host: want nats://host:port", redactURL(one))
		}
	}
	return nil
}

// redactURL hides a password in a URL for messages.
func redactURL(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// EnsureStream creates the stream of (systemID, slot) with s, or updates
// an existing one to s; its metadata names the database, the slot and the
// publication (which replicas take theirs from). It refuses a stream whose
// metadata names another database or slot.
func EnsureStream(ctx context.Context, js jetstream.JetStream, s StreamSettings, systemID, database, slot, publication string) (jetstream.Stream, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	cfg := s.config(systemID, database, slot, publication)
	st, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = js.CreateStream(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("create stream %s: %w", cfg.Name, err)
		}
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up stream %s: %w (is JetStream enabled on the server? nats-server -js)", cfg.Name, err)
	}
	if err := checkMeta(st.CachedInfo().Config, systemID, database, slot); err != nil {
		return nil, err
	}
	st, err = js.UpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("update stream %s to the relay's settings: %w", cfg.Name, err)
	}
	return st, nil
}

func checkMeta(cfg jetstream.StreamConfig, systemID, database, slot string) error {
	md := cfg.Metadata
	if len(md) == 0 {
		// A server before 2.10 keeps no metadata: the name carries the
		// system identifier and slot, the description the database.
		if cfg.Description != description(database, slot) {
			return fmt.Errorf("stream %s is described as %q, not as the stream of database %q slot %q: it was not made by this database's relay", cfg.Name, cfg.Description, database, slot)
		}
		return nil
	}
	if md[metaSystemID] != systemID || md[metaDatabase] != database || md[metaSlot] != slot {
		return fmt.Errorf("stream %s belongs to database %q (system %q) slot %q, not %q (system %q) slot %q: it was not made by this database's relay",
			cfg.Name, md[metaDatabase], md[metaSystemID], md[metaSlot], database, systemID, slot)
	}
	return nil
}
