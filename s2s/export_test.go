package s2s

import "github.com/freshetdb/freshet/engine"

// SetSendHook has every sink's Send call f first (a test's fault
// injection: a panic in f is a panic while encoding an output).
func SetSendHook(s *Server, f func(engine.Output)) { s.sendHook.Store(&f) }
