package hostile

import (
	"testing"

	"github.com/freshetdb/freshet/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
