package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

// panicSink panics on its first Delta, as a bug on the core goroutine
// would while outputs are handed out.
type panicSink struct {
	*recorder
	armed atomic.Bool
}

func (p *panicSink) Send(out Output) {
	if out.Kind == OutputDelta && p.armed.CompareAndSwap(true, false) {
		panic("sink bug")
	}
	p.recorder.Send(out)
}

// waitGone waits until rec's subscription ended with code, retryable as
// said.
func waitGone(t *testing.T, rec *recorder, code query.Code, retryable bool) {
	t.Helper()
	waitFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if rec.status != OutputEnded && rec.status != OutputRefused {
			return fmt.Errorf("still %v", rec.status)
		}
		last := rec.outs[len(rec.outs)-1]
		if last.Code != code || last.Retryable != retryable {
			t.Fatalf("%v with code %q retryable %v (%s), want code %q retryable %v", last.Kind, last.Code, last.Retryable, last.Reason, code, retryable)
		}
		return nil
	})
}

// A panic on the core goroutine (in a core call, or while its outputs are
// handed out) leaves the core's state half-updated: the engine ends every
// subscription with code internal (retryable), starts an empty core, and
// keeps following the stream; subscriptions made afterwards are exact.
// The query whose core work panicked is refused from then on, not
// retryable.
func TestEnginePanicRecovers(t *testing.T) {
	r := newRig(t, itemsDDL, Config{})
	ctx := context.Background()
	const (
		winSQL  = "SELECT id, qty FROM items WHERE qty <> 3 ORDER BY qty DESC, id LIMIT 4 OFFSET 1"
		filtSQL = "SELECT id, name FROM items WHERE qty > 5"
		badSQL  = "SELECT id FROM items WHERE qty = 7"
	)
	check := func(win, filt *recorder) {
		t.Helper()
		r.check(win, "SELECT id, qty, dense_rank() OVER (ORDER BY qty DESC, id) FROM items WHERE qty <> 3 ORDER BY qty DESC, id LIMIT 4 OFFSET 1", true)
		r.check(filt, filtSQL, false)
	}
	_, win := r.subscribe(winSQL)
	_, filt := r.subscribe(filtSQL)
	waitAccepted(t, win, filt)

	// A core call that panics half way: a view made and its read asked
	// for, then the failure.
	bad, refusal, err := query.Compile(ctx, badSQL, nil, r.e.cfg.Query)
	if err != nil || refusal != nil {
		t.Fatal(err, refusal)
	}
	if err := r.e.doFor(ctx, bad.Key, func() {
		r.e.core.Subscribe(1<<40, bad, ModeRows)
		r.e.core.Apply(&change.Txn{XID: 1, CommitLSN: 1, Fragment: 0})
		panic("injected core failure")
	}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, win, CodeInternal, true)
	waitGone(t, filt, CodeInternal, true)
	if st, err := r.e.Stats(ctx); err != nil || st.CoreResets != 1 || st.Views != 0 {
		t.Fatalf("after the panic: stats %+v, %v; want 1 reset and no views", st, err)
	}
	// The query whose Subscribe panicked is quarantined.
	_, again := r.subscribe(badSQL)
	waitGone(t, again, CodeInternal, false)

	// The engine still follows the stream: new subscriptions are exact.
	r.exec("UPDATE items SET qty = 9 WHERE id IN (3, 4)")
	_, win = r.subscribe(winSQL)
	_, filt = r.subscribe(filtSQL)
	waitAccepted(t, win, filt)
	r.exec("INSERT INTO items VALUES (100, 'new', 9), (101, 'other', 1)")
	r.exec("DELETE FROM items WHERE id IN (5, 6)")
	r.quiesce(30 * time.Second)
	check(win, filt)

	// A panic while outputs are handed out (a sink's bug) resets the core
	// too: the outputs of that transaction cannot all have arrived.
	ps := &panicSink{recorder: newRecorder()}
	ps.armed.Store(true)
	if _, ref, err := r.e.Subscribe(ctx, "SELECT id FROM items WHERE qty = 9", nil, ModeRows, ps); err != nil || ref != nil {
		t.Fatal(err, ref)
	}
	waitAccepted(t, ps.recorder)
	r.exec("UPDATE items SET qty = 9 WHERE id = 1")
	waitGone(t, win, CodeInternal, true)
	waitGone(t, filt, CodeInternal, true)
	waitGone(t, ps.recorder, CodeInternal, true)
	_, win = r.subscribe(winSQL)
	_, filt = r.subscribe(filtSQL)
	waitAccepted(t, win, filt)
	r.exec("UPDATE items SET qty = 0 WHERE id > 15")
	r.quiesce(30 * time.Second)
	check(win, filt)
	if st, err := r.e.Stats(ctx); err != nil || st.CoreResets != 2 {
		t.Fatalf("stats %+v, %v; want 2 resets", st, err)
	}
}
