package pgwal

import (
	"testing"

	"github.com/freshetdb/freshet/internal/pgtest"
)

// TestMain runs the package's tests against one throwaway PostgreSQL
// cluster (or FRESHET_TEST_DSN); a fuzz run starts none (pgtest.Main).
func TestMain(m *testing.M) { pgtest.Main(m) }
