package rctest

import (
	"context"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/servetest"
)

// Binary builds cmd/freshet once per test process and returns its path.
func Binary() (string, error) { return servetest.Binary() }

// Server is a running `freshet serve` (see internal/servetest).
type Server = servetest.Server

// Start runs freshet serve following dsn (database name) with fast
// heartbeats and lag frames; env adds environment variables.
func Start(t testing.TB, dsn, dbName string, env ...string) *Server {
	t.Helper()
	return servetest.Start(t, servetest.Options{DSN: dsn, Slot: servetest.SlotFor("rc_", dbName), Env: env})
}

// Eventually polls cond every 20 ms until it returns "" or wait passes,
// then fails with its last message.
func Eventually(t testing.TB, wait time.Duration, cond func() string) {
	t.Helper()
	servetest.Eventually(t, wait, cond)
}

// Ctx returns a context for a test step.
func Ctx(t testing.TB) context.Context { return servetest.Ctx(t) }
