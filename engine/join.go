package engine

import "github.com/freshetdb/freshet/change"

func (s *state) askJoinReads(v *view)                                                     {}
func (s *state) touchJoin(vs *viewSource, keys ...string)                                 {}
func (s *state) markJoinHolders(tb *table, oldKey, newKey string, mark func(*viewSource)) {}
func (s *state) truncateJoin(vs *viewSource)                                              {}
func (s *state) settleJoin(v *view, lsn change.LSN)                                       {}
func (s *state) landJoin(r *read)                                                         {}
