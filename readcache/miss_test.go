package readcache

import (
	"context"
	"testing"
)

// TestMissReadsPostgres: by default (VerdictTimeout 0) a miss does not
// wait for the engine: the read goes to PostgreSQL at once (hydrating),
// and so does every read of the key until the engine answers, with one
// subscription for the key; once it has answered, reads are hits.
func TestMissReadsPostgres(t *testing.T) {
	for _, silent := range []bool{true, false} {
		f := newFakeEngine(t)
		f.silent = silent
		c := openFake(t, f)
		c.Verify(Identity{SystemIdentifier: "1", Database: "db"}, nil)
		ctx := context.Background()
		// Until the socket is up and has a lag frame, reads go to
		// PostgreSQL for that reason instead.
		eventually(t, func() string {
			if _, r := c.Read(ctx, "SELECT 1", nil); r != ReasonHydrating {
				return "first read: " + r.String()
			}
			return ""
		})
		if silent {
			for i := range 3 {
				if _, r := c.Read(ctx, "SELECT 1", nil); r != ReasonHydrating {
					t.Fatalf("read %d of a key the engine has not answered: %v, want hydrating", i, r)
				}
			}
			if got := c.Stats().Postgres["hydrating"]; got < 4 {
				t.Fatalf("hydrating = %d, want at least 4", got)
			}
		} else {
			eventually(t, func() string {
				if _, r := c.Read(ctx, "SELECT 1", nil); r != ReasonNone {
					return "read after the answer: " + r.String()
				}
				return ""
			})
		}
		if got := c.Stats().Subscriptions; got != 1 {
			t.Fatalf("subscriptions = %d, want 1 (one subscribe for the key)", got)
		}
		if got := c.Stats().Misses; got != 0 {
			t.Fatalf("misses = %d, want 0 (no read waited for the first answer)", got)
		}
	}
}
