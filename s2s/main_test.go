package s2s_test

import (
	"os"
	"testing"

	"github.com/freshetdb/freshet/internal/pgtest"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(benchFloorEnv); addr != "" {
		os.Exit(benchFloorMain(addr)) // TestBenchS2S's floor writer, no tests
	}
	pgtest.Main(m)
}
