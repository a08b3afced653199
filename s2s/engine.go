package s2s

import (
	"context"

	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/query"
)

// Engine is what the server needs of the engine runtime; *engine.Engine
// is one.
type Engine interface {
	// Subscribe compiles sql with binds and registers a subscription in
	// mode whose outputs go to sink: an Accepted (or a Refused) first, then
	// Deltas or Toucheds, until an Ended. A query that is not supported
	// is answered with a refusal.
	Subscribe(ctx context.Context, sql string, binds []query.Bind, mode engine.Mode, sink engine.Sink) (engine.SubID, *query.Refusal, error)
	// Unsubscribe ends a subscription; once it returns, its sink receives
	// nothing more.
	Unsubscribe(ctx context.Context, id engine.SubID) error
}

// Sink is what the server hands the engine for each subscription
// (engine.Sink): the engine calls Send from one goroutine, in commit order,
// and Send never blocks.
type Sink = engine.Sink

var _ Engine = (*engine.Engine)(nil)
