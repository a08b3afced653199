package shape

import "time"

// BodiesBuilt is how many message bodies the server has built
// (messagesBody): one for the requests sharing an offset's body.
func (srv *Server) BodiesBuilt() uint64 { return srv.bodiesBuilt.Load() }

// BodyHolders is how many requests hold a shared body, and how many
// bodies are held, over every shape.
func (srv *Server) BodyHolders() (holders, bodies int) {
	srv.mu.Lock()
	shapes := srv.reg.all()
	srv.mu.Unlock()
	for _, s := range shapes {
		s.mu.Lock()
		if s.x != nil {
			for _, b := range s.x.bodies {
				holders += b.refs
				bodies++
			}
		}
		s.mu.Unlock()
	}
	return holders, bodies
}

// SetBodyHook makes every request that has a message body run f before
// writing it (nil: none), so that a test holds requests at once.
func (srv *Server) SetBodyHook(f func()) {
	if f == nil {
		srv.bodyHook.Store(nil)
		return
	}
	srv.bodyHook.Store(&f)
}

// SetSubsetHook makes every subset run f between reading its snapshot's
// metadata and running its query (nil: none).
func (srv *Server) SetSubsetHook(f func()) {
	if f == nil {
		srv.subsetHook.Store(nil)
		return
	}
	srv.subsetHook.Store(&f)
}

// SetFlushHook makes the writer run f before each flush of what the
// engine sent (nil: none): a test holds changes pending (not durable).
func (srv *Server) SetFlushHook(f func()) {
	if f == nil {
		srv.flushHook.Store(nil)
		return
	}
	srv.flushHook.Store(&f)
}

// Collect runs the reaper's collection of old generations on every shape
// as if the time were now.
func (srv *Server) Collect(now time.Time) error {
	srv.mu.Lock()
	shapes := srv.reg.all()
	srv.mu.Unlock()
	for _, s := range shapes {
		if err := s.collect(now); err != nil {
			return err
		}
	}
	return nil
}
