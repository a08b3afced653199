package s2s_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/s2s"
	dto "github.com/prometheus/client_model/go"
)

// freshet_s2s_commit_to_write_seconds observes, for every connection a
// transaction touched, the time from the commit reaching the engine to
// the write that put its frames on the socket: once per connection
// (whatever the number of its subscriptions the transaction touched), for
// touched frames too, and never for a connection it did not touch.
func TestCommitToWriteObserved(t *testing.T) {
	metrics := s2s.NewMetrics()
	e := newEnv(t, itemsSetup, func(s *s2s.Config, _ *engine.Config) { s.Metrics = metrics })
	count := func() (uint64, float64) {
		var m dto.Metric
		metrics.CommitToWrite.Write(&m)
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	}
	a, _ := e.connect()
	a.send(`{"type":"subscribe","id":"rows","sql":"SELECT id, name FROM items WHERE id = 1","mode":"rows"}`)
	a.expect("accepted")
	a.send(`{"type":"subscribe","id":"touch","sql":"SELECT id, name FROM items WHERE id = 1","mode":"touch"}`)
	a.expect("accepted")
	b, _ := e.connect()
	b.send(`{"type":"subscribe","id":"touch","sql":"SELECT name FROM items WHERE id = 1","mode":"touch"}`)
	b.expect("accepted")
	other, _ := e.connect()
	other.send(`{"type":"subscribe","id":"two","sql":"SELECT id, name FROM items WHERE id = 2","mode":"rows"}`)
	other.expect("accepted")
	// An accepted frame that a stream event landed is observed too: wait
	// until the count no longer moves before measuring one transaction.
	before, _ := count()
	for still := 0; still < 5; {
		time.Sleep(50 * time.Millisecond)
		if n, _ := count(); n == before {
			still++
		} else {
			before, still = n, 0
		}
	}
	_, sumBefore := count()
	e.exec("UPDATE items SET name = 'observed' WHERE id = 1")
	a.expect("delta")
	a.expect("touched")
	b.expect("touched")
	waitFor(t, 10*time.Second, func() error {
		if n, _ := count(); n != before+2 {
			return fmt.Errorf("%d observations after the transaction, want %d: one for each of the two connections it touched", n, before+2)
		}
		return nil
	})
	// Stamped with the time the commit reached the engine (a zero stamp
	// would observe some 2,000 years).
	if n, sum := count(); sum-sumBefore <= 0 || sum-sumBefore > 2*60 {
		t.Fatalf("the two observations sum to %v s (count %d), want the few milliseconds a commit takes to reach the sockets", sum-sumBefore, n)
	}
	e.exec("UPDATE items SET name = 'other' WHERE id = 2")
	other.expect("delta")
	waitFor(t, 10*time.Second, func() error {
		if n, _ := count(); n != before+3 {
			return fmt.Errorf("%d observations, want %d", n, before+3)
		}
		return nil
	})
}
