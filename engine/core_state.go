package engine

import (
	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

// state is the Core's state.
type state struct {
	opts CoreOptions
	pos  change.LSN
	out  Ready
}

func newState(opts CoreOptions) *state { return &state{opts: opts} }

func (s *state) subscribe(sub SubID, plan *query.Plan, mode Mode) {}
func (s *state) unsubscribe(sub SubID)                            {}
func (s *state) apply(t *change.Txn)                              {}
func (s *state) advance(lsn change.LSN)                           {}
func (s *state) readDone(id ReadID, snap Snapshot, rows []query.Row, complete bool, err error) {
}
func (s *state) ready() Ready {
	r := s.out
	s.out = Ready{}
	return r
}
func (s *state) stats() Stats { return Stats{} }
