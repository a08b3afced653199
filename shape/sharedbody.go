package shape

import (
	"sync"
)

// sharedBody is the bulk of the responses of messages from a shape's log
// (not a snapshot chunk) to the requests at one offset: "[" and the
// messages after the offset up to end, comma-joined. What follows them
// (the up-to-date message with each request's global_last_seen_lsn, and
// "]") and the headers that differ per request (electric-cursor, CORS)
// are written per request. The body does not depend on a request's live
// flag or handle, and the columns, where clause and replica mode are the
// shape's, so every request at the offset that reads to the same end
// writes these bytes: the 1,000 clients long-polling one shape get one
// body built once. A request holds its offset's sharedBody from when it
// starts waiting (or reads) until it has answered; the body is dropped
// with the last holder, so memory is bounded by the offsets being waited
// on at once.
type sharedBody struct {
	refs int // requests holding it, under Shape.mu

	once   sync.Once
	end    Offset // what body reaches: the first builder's read
	body   []byte
	handle string // the handle etag was made for
	etag   string // `"<handle>:<req offset>:<end>"`
	endTxt string // end.String(), the electric-offset header
}

// holdBodyLocked returns the shared body of requests at o, made if no
// request holds one, with one more holder.
func (s *Shape) holdBodyLocked(o Offset) *sharedBody {
	x := s.rareLocked()
	b := x.bodies[o]
	if b == nil {
		if x.bodies == nil {
			x.bodies = map[Offset]*sharedBody{}
		}
		b = &sharedBody{}
		x.bodies[o] = b
	}
	b.refs++
	return b
}

// releaseBodyLocked drops a holder of the shared body at o, and the body
// with its last holder.
func (s *Shape) releaseBodyLocked(o Offset, b *sharedBody) {
	b.refs--
	if x := s.x; b.refs == 0 && x != nil && x.bodies[o] == b {
		delete(x.bodies, o)
		if len(x.bodies) == 0 {
			x.bodies = nil
			s.trimLocked()
		}
	}
}

// messagesBody returns the body of res's messages for a request at
// reqOff with handle, and its etag and electric-offset: b's, built by
// the first of its holders to get here, when res reaches the same end
// (it does unless a change landed between two holders' reads); else
// built for this request alone.
func (srv *Server) messagesBody(b *sharedBody, res chunkResult, reqOff, handle string) (body []byte, etag, endTxt string) {
	build := func() ([]byte, string, string) {
		srv.bodiesBuilt.Add(1)
		n := 1
		for _, m := range res.msgs {
			n += len(m) + 1
		}
		body := make([]byte, 0, n)
		body = append(body, '[')
		for i, m := range res.msgs {
			if i > 0 {
				body = append(body, ',')
			}
			body = append(body, m...)
		}
		end := res.end.String()
		return body, `"` + handle + ":" + reqOff + ":" + end + `"`, end
	}
	if b == nil {
		return build()
	}
	b.once.Do(func() {
		b.end, b.handle = res.end, handle
		b.body, b.etag, b.endTxt = build()
	})
	if b.end != res.end {
		return build()
	}
	if b.handle != handle {
		// A rotated shape's older handle: the same body, its own etag.
		return b.body, `"` + handle + ":" + reqOff + ":" + b.endTxt + `"`, b.endTxt
	}
	return b.body, b.etag, b.endTxt
}
