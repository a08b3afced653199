package shape

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// serveSSE streams the log from the request's offset as server-sent
// events: one `data:` event per message, an up-to-date after each batch
// that reaches the shape's end, a keep-alive comment after SSEKeepAlive
// without one, until SSETimeout.
func (srv *Server) serveSSE(w http.ResponseWriter, r *http.Request, s *Shape, req *request, handle string) {
	fl, ok := w.(http.Flusher)
	if !ok {
		srv.serveLog(w, r, s, req, handle)
		return
	}
	h := w.Header()
	h.Set("electric-handle", handle)
	h.Set("electric-offset", req.offset.String())
	h.Set("electric-cursor", srv.nextCursor(req.cursor))
	h.Set("content-type", "text/event-stream")
	h.Set("cache-control", "public, max-age="+strconv.Itoa(max(int(srv.cfg.SSETimeout/time.Second)-1, 0)))
	h.Set("connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	ctx := r.Context()
	end := time.NewTimer(srv.cfg.SSETimeout)
	defer end.Stop()
	off := req.offset
	var buf []byte
	event := func(m []byte) {
		buf = append(buf, "data: "...)
		buf = append(buf, m...)
		buf = append(buf, "\n\n"...)
	}
	for {
		pos := uint64(srv.cfg.Engine.Position())
		s.mu.Lock()
		res, loc := s.readLocked(off, srv.cfg.ChunkBytes)
		seen := s.resumeLocked(pos)
		st := s.st
		var ch <-chan struct{}
		if !(loc != nil || (len(res.msgs) > 0 && !res.upToDate)) {
			ch = s.waitLocked() // this pass ends waiting: made under the read's lock
		}
		s.mu.Unlock()
		if res.stale || st == gone {
			// Errors are not events: end the stream; the client's next
			// request gets the 409.
			return
		}
		buf = buf[:0]
		if loc != nil {
			b, err := readChunk(loc.file, loc.r)
			if err != nil {
				return
			}
			var msgs []json.RawMessage
			if json.Unmarshal(append(append([]byte{'['}, b...), ']'), &msgs) != nil {
				return
			}
			for _, m := range msgs {
				event(bytes.TrimSpace(m))
			}
		}
		for _, m := range res.msgs {
			event(m)
		}
		if !res.wait && (loc != nil || len(res.msgs) > 0) {
			off = res.end
		}
		if res.upToDate && (loc != nil || len(res.msgs) > 0) {
			event(upToDateMsg(seen))
		}
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil {
				return
			}
			fl.Flush()
			if loc != nil || (len(res.msgs) > 0 && !res.upToDate) {
				continue // more to send at once
			}
		}
		ka := time.NewTimer(srv.cfg.SSEKeepAlive)
		select {
		case <-ch:
		case <-ka.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
			fl.Flush()
		case <-end.C:
			ka.Stop()
			return
		case <-ctx.Done():
			ka.Stop()
			return
		case <-srv.ctx.Done():
			ka.Stop()
			return
		}
		ka.Stop()
	}
}
