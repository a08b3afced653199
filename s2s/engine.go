package s2s

import (
	"context"

	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/query"
)

// Engine is what the server needs of the engine runtime (engine.Engine,
// through a one-line adapter for its Sink type).
type Engine interface {
	// Subscribe compiles sql with binds and registers a subscription in
	// mode whose outputs go to sink: an Accepted (or a Refused) first, then
	// Deltas or Toucheds, until an Ended. A query that is not supported
	// is answered with a refusal.
	Subscribe(ctx context.Context, sql string, binds []query.Bind, mode engine.Mode, sink Sink) (engine.SubID, *query.Refusal, error)
	// Unsubscribe ends a subscription; once it returns, its sink receives
	// nothing more.
	Unsubscribe(ctx context.Context, id engine.SubID) error
}

// Sink receives one subscription's outputs. The engine calls it from one
// goroutine, in commit order; it never blocks.
type Sink interface {
	Send(out engine.Output)
}
