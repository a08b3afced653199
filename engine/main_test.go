package engine

import (
	"testing"

	"github.com/freshetdb/freshet/internal/pgtest"
)

// TestMain starts one throwaway PostgreSQL cluster (or uses
// FRESHET_TEST_DSN) when the first integration test (engine_*_test.go)
// asks for a database: the core's tests (core_*_test.go, go test -run
// Core) need none and pass on a machine without PostgreSQL.
func TestMain(m *testing.M) { pgtest.LazyMain(m) }
