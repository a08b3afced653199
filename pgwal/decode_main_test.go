package pgwal

import (
	"flag"
	"os"
	"testing"

	"github.com/freshetdb/freshet/internal/pgtest"
)

// TestMain runs the package's tests against one throwaway PostgreSQL
// cluster (or FRESHET_TEST_DSN). Fuzzing needs no server, and its worker
// processes must not each start one.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run())
	}
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		os.Exit(m.Run())
	}
	pgtest.Main(m)
}
