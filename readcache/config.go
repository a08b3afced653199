package readcache

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Defaults of Config.
const (
	DefaultSockets          = 2
	DefaultVerdictTimeout   = 0 // a miss reads PostgreSQL at once
	DefaultMaxLag           = 2 * time.Second
	DefaultReadYourWrites   = time.Second
	DefaultMaxBytes         = 64 << 20
	DefaultIdleTimeout      = 10 * time.Minute
	DefaultTTL              = time.Hour
	DefaultRefusedFor       = 10 * time.Minute
	DefaultRetryRefusedFor  = 5 * time.Second
	DefaultMaxSubscriptions = 10_000
	DefaultMinBackoff       = 100 * time.Millisecond
	DefaultMaxBackoff       = 5 * time.Second
	DefaultDeadAfter        = 3 * time.Second
)

// Config configures a Cache. Start from DefaultConfig (or ConfigFromEnv):
// zero durations and sizes are not "use the default".
type Config struct {
	// URL is the s2s endpoint of `freshet serve`, ws://host:port/s2s/v1 (a
	// URL with no path gets /s2s/v1). Empty: no cache, every read goes to
	// PostgreSQL. Several engines following one database (replicas fed by
	// one `freshet relay`, docs/scale-out.md) are listed separated by
	// commas: each key goes to one of them by rendezvous hashing, the same
	// in every process, so identical queries share one view.
	URL string
	// Token is sent as "Authorization: Bearer <token>" when set.
	Token string
	// Sockets is how many WebSockets carry the subscriptions; keys are
	// spread across them by hash.
	Sockets int
	// VerdictTimeout bounds how long a read of a key the engine has not
	// answered yet (the first read of a key, and reads of it until the
	// engine's first answer) waits for that answer (accepted or refused)
	// before it reads PostgreSQL instead. 0, the default, does not wait:
	// such a read goes to PostgreSQL at once (ReasonHydrating) while the
	// subscription hydrates, so a miss costs what the PostgreSQL read
	// costs, and the reads after the answer are served from memory.
	// Positive makes a miss wait, so the read after it is a hit (what a
	// test of the cache wants); it then costs the engine's first answer:
	// its read of PostgreSQL and the time for the stream to pass it.
	VerdictTimeout time.Duration
	// MaxLag: while the engine's reported lag plus the time since its last
	// lag frame is over MaxLag, reads go to PostgreSQL.
	MaxLag time.Duration
	// ReadYourWrites: after a write through a pool, that pool's reads go to
	// PostgreSQL for this long. 0 turns it off.
	ReadYourWrites time.Duration
	// MaxBytes bounds the memory of the cached results (approximate).
	MaxBytes int64
	// IdleTimeout evicts an entry not read for this long; TTL evicts an
	// entry this long after it was filled, read or not.
	IdleTimeout time.Duration
	TTL         time.Duration
	// RefusedFor is how long a query the engine will never serve is
	// remembered (and read from PostgreSQL without asking again);
	// RetryRefusedFor is the same for a refusal marked retryable.
	RefusedFor      time.Duration
	RetryRefusedFor time.Duration
	// MaxSubscriptions caps the subscriptions this process holds.
	MaxSubscriptions int
	// MinBackoff and MaxBackoff bound the wait between reconnects.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// DeadAfter: with several engines, one that has sent no hello or lag
	// frame for this long is dead and its keys move to their next engine
	// (only its keys). A lagging engine still sending lag frames keeps
	// its keys; its reads go to PostgreSQL while it lags (MaxLag).
	DeadAfter time.Duration
	// Route is the default route of the pools opened with this Config
	// (RouteDefault: the process default, see SetDefaultRoute).
	Route Route
	// Logger; nil is slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns a Config with every setting at its default and no
// URL.
func DefaultConfig() Config {
	return Config{
		Sockets:          DefaultSockets,
		VerdictTimeout:   DefaultVerdictTimeout,
		MaxLag:           DefaultMaxLag,
		ReadYourWrites:   DefaultReadYourWrites,
		MaxBytes:         DefaultMaxBytes,
		IdleTimeout:      DefaultIdleTimeout,
		TTL:              DefaultTTL,
		RefusedFor:       DefaultRefusedFor,
		RetryRefusedFor:  DefaultRetryRefusedFor,
		MaxSubscriptions: DefaultMaxSubscriptions,
		MinBackoff:       DefaultMinBackoff,
		MaxBackoff:       DefaultMaxBackoff,
		DeadAfter:        DefaultDeadAfter,
	}
}

// ConfigFromEnv returns DefaultConfig with the FRESHET_* environment
// variables applied: FRESHET_URL, FRESHET_TOKEN, FRESHET_SOCKETS,
// FRESHET_VERDICT_TIMEOUT_MS, FRESHET_MAX_LAG_MS,
// FRESHET_READ_YOUR_WRITES_MS, FRESHET_CACHE_BYTES, FRESHET_DEAD_AFTER_MS.
// A malformed number is an
// error naming the variable.
func ConfigFromEnv() (Config, error) {
	c := DefaultConfig()
	c.URL = os.Getenv("FRESHET_URL")
	c.Token = os.Getenv("FRESHET_TOKEN")
	num := func(name string) (int64, bool, error) {
		s := strings.TrimSpace(os.Getenv(name))
		if s == "" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, false, fmt.Errorf("read cache config: %s=%q: want a whole number >= 0", name, s)
		}
		return n, true, nil
	}
	ms := func(name string, dst *time.Duration) error {
		n, ok, err := num(name)
		if ok {
			*dst = time.Duration(n) * time.Millisecond
		}
		return err
	}
	if n, ok, err := num("FRESHET_SOCKETS"); err != nil {
		return c, err
	} else if ok {
		c.Sockets = int(n)
	}
	if n, ok, err := num("FRESHET_CACHE_BYTES"); err != nil {
		return c, err
	} else if ok {
		c.MaxBytes = n
	}
	for _, v := range []struct {
		name string
		dst  *time.Duration
	}{
		{"FRESHET_VERDICT_TIMEOUT_MS", &c.VerdictTimeout},
		{"FRESHET_MAX_LAG_MS", &c.MaxLag},
		{"FRESHET_READ_YOUR_WRITES_MS", &c.ReadYourWrites},
		{"FRESHET_DEAD_AFTER_MS", &c.DeadAfter},
	} {
		if err := ms(v.name, v.dst); err != nil {
			return c, err
		}
	}
	return c, c.Validate()
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Sockets < 1:
		return fmt.Errorf("read cache config: Sockets %d: want at least 1", c.Sockets)
	case c.VerdictTimeout < 0:
		return errors.New("read cache config: VerdictTimeout must be 0 (a miss reads PostgreSQL at once) or positive")
	case c.MaxLag <= 0, c.IdleTimeout <= 0, c.TTL <= 0, c.RefusedFor <= 0, c.RetryRefusedFor <= 0,
		c.MinBackoff <= 0, c.MaxBackoff < c.MinBackoff, c.DeadAfter <= 0:
		return errors.New("read cache config: durations must be positive (start from readcache.DefaultConfig)")
	case c.ReadYourWrites < 0:
		return errors.New("read cache config: ReadYourWrites must be 0 (off) or positive")
	case c.MaxBytes <= 0:
		return fmt.Errorf("read cache config: MaxBytes %d: want a positive size", c.MaxBytes)
	case c.MaxSubscriptions < 1:
		return fmt.Errorf("read cache config: MaxSubscriptions %d: want at least 1", c.MaxSubscriptions)
	}
	if c.URL != "" {
		if _, err := endpoints(c.URL); err != nil {
			return err
		}
	}
	return nil
}

// endpoints turns the configured URL list into the engines' endpoints.
func endpoints(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, one := range strings.Split(s, ",") {
		if one = strings.TrimSpace(one); one == "" {
			continue
		}
		u, err := endpoint(one)
		if err != nil {
			return nil, err
		}
		if seen[u] {
			return nil, fmt.Errorf("read cache config: FRESHET_URL lists %s twice", u)
		}
		seen[u] = true
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("read cache config: FRESHET_URL %q names no engine", s)
	}
	return out, nil
}

// endpoint turns the configured URL into the s2s endpoint's URL.
func endpoint(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("read cache config: FRESHET_URL %q: %w", s, err)
	}
	switch u.Scheme {
	case "ws", "wss":
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("read cache config: FRESHET_URL %q: want a ws:// or wss:// URL like ws://localhost:7070/s2s/v1", s)
	}
	if u.Host == "" {
		return "", fmt.Errorf("read cache config: FRESHET_URL %q: no host", s)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/s2s/v1"
	}
	return u.String(), nil
}
