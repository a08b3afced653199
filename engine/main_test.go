package engine

import (
	"testing"

	"github.com/freshetdb/freshet/internal/pgtest"
)

// TestMain starts one throwaway PostgreSQL cluster for the package's
// integration tests (or uses FRESHET_TEST_DSN).
func TestMain(m *testing.M) { pgtest.Main(m) }
