package engine

import (
	"fmt"
	"runtime/debug"

	"github.com/freshetdb/freshet/query"
)

// A panic in the core (a bug: no input should cause one) leaves its state
// half-updated: a transaction applied to some views and not others, a row
// held without its routes, a window cut and not refilled. No part of that
// state can be trusted to give an exact answer again, and the core keeps
// nothing that cannot be read again from PostgreSQL. So the runtime
// recovers the panic, logs it with its stack, ends every subscription with
// CodeInternal (retryable), discards the core with the outputs it had not
// handed out yet and the reads it had asked for, and starts an empty core
// at the position the engine had reached. Subscribing again hydrates from
// PostgreSQL like after a restart, so every answer given afterwards is as
// exact as a fresh engine's. The one query whose Subscribe or read landing
// panicked is quarantined: subscribing to it again is refused with
// CodeInternal, not retryable, until the process restarts, so a query that
// crashes the core cannot make it drop everyone's subscriptions over and
// over. docs/architecture.md, "When the core panics", says the same.

// maxQuarantined bounds the plans remembered as having made the core
// panic (the oldest is forgotten first).
const maxQuarantined = 1024

// step runs one event's work on the core goroutine, then hands its outputs
// out. blame is the plan key the work concerns (a Subscribe, a read
// landing), the zero key when the work is not one query's (a transaction). A panic
// in either part resets the core.
func (e *Engine) step(what string, blame query.PlanKey, fn func()) {
	defer func() {
		if p := recover(); p != nil {
			e.corePanicked(what, blame, p, debug.Stack())
		}
	}()
	fn()
	blame = query.PlanKey{} // handing out outputs is no one query's work
	e.flush()
}

// corePanicked ends every subscription and replaces the core by an empty
// one at the engine's position (see above). It runs on the core goroutine.
func (e *Engine) corePanicked(what string, blame query.PlanKey, p any, stack []byte) {
	e.resets++
	e.log.Error("engine core panicked: every subscription ends (code internal, retryable) and the core starts again empty",
		"during", what, "panic", fmt.Sprint(p), "resets", e.resets, "stack", string(stack))
	if blame != (query.PlanKey{}) && !e.quarantined[blame] {
		e.quarantined[blame] = true
		e.quarantine = append(e.quarantine, blame)
		if len(e.quarantine) > maxQuarantined {
			delete(e.quarantined, e.quarantine[0])
			e.quarantine = e.quarantine[1:]
		}
	}
	pos := e.Position()
	reason := fmt.Sprintf("the engine hit an internal error (%v) and dropped every subscription to stay exact; subscribe again", p)
	// A sink that panics here too must not stop the others hearing.
	for id, sink := range e.sinks {
		delete(e.sinks, id)
		func() {
			defer func() { _ = recover() }()
			sink.Send(Output{Sub: id, Kind: OutputEnded, LSN: pos, Code: CodeInternal, Reason: reason, Retryable: true})
			if f, ok := sink.(Flusher); ok {
				f.Flush()
			}
		}()
	}
	clear(e.fresh)
	clear(e.flushing)
	e.flushing = e.flushing[:0]
	e.queue.clear()
	e.gen++
	e.core = NewCore(e.coreOpts)
	e.core.Advance(pos)
}

// refuseQuarantined refuses sub when its plan made the core panic before.
// It runs on the core goroutine.
func (e *Engine) refuseQuarantined(id SubID, plan *query.Plan, sink Sink) bool {
	if !e.quarantined[plan.Key] {
		return false
	}
	sink.Send(Output{Sub: id, Kind: OutputRefused, LSN: e.Position(), Code: CodeInternal,
		Reason: "this query made the engine's core fail earlier (an internal error, logged with its stack); it is read from PostgreSQL until the server restarts"})
	if f, ok := sink.(Flusher); ok {
		f.Flush()
	}
	return true
}
