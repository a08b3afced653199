package shape

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// serveSSE streams the log from the request's offset as server-sent
// events: one `data:` event per message, an up-to-date after each batch
// that reaches the shape's end, a keep-alive comment after SSEKeepAlive
// without one, until SSETimeout. A shape that goes away ends the stream
// between events; a pass that fails once its bytes may be on the wire
// aborts the response (see writeEvents).
func (srv *Server) serveSSE(w http.ResponseWriter, r *http.Request, s *Shape, req *request, handle string) {
	fl, ok := w.(http.Flusher)
	if !ok {
		srv.serveLog(w, r, s, req, handle)
		return
	}
	h := w.Header()
	h.Set("electric-handle", handle)
	// At an offset past the shape's latest, Electric's stream names the
	// latest (determine_log_chunk_offset), and ends after half the
	// long-poll timeout if the offset has not appeared by then.
	pos := uint64(srv.cfg.Engine.Position())
	s.mu.Lock()
	latest := s.latest.off()
	past := s.st == ready && pastLatest(req.offset, latest, s.resumeLocked(pos))
	s.mu.Unlock()
	if past {
		h.Set("electric-offset", latest.String())
	} else {
		h.Set("electric-offset", req.offset.String())
	}
	h.Set("electric-cursor", srv.nextCursor(req.cursor))
	h.Set("content-type", "text/event-stream")
	h.Set("cache-control", "public, max-age="+strconv.Itoa(max(int(srv.cfg.SSETimeout/time.Second)-1, 0)))
	h.Set("connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	ctx := r.Context()
	end := time.NewTimer(srv.cfg.SSETimeout)
	defer end.Stop()
	oob := time.NewTimer(srv.cfg.LongPoll / 2)
	defer oob.Stop()
	off := req.offset
	for {
		pos := uint64(srv.cfg.Engine.Position())
		s.mu.Lock()
		res, loc := s.readLocked(off, srv.cfg.ChunkBytes)
		seen := s.resumeLocked(pos)
		st := s.st
		if past && !(st == ready && pastLatest(off, s.latest.off(), seen)) {
			past = false // the offset appeared
		}
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
		wrote, err := writeEvents(w, loc, res, seen)
		if err != nil {
			var re sseReadError
			if errors.As(err, &re) {
				srv.log.Error("shape: an SSE response could not read what it was sending; it ends unfinished", "handle", handle, "err", err)
			}
			// Part of an event may have gone out: the response ends
			// without its closing chunk, so that neither the client
			// nor a cache on the way takes it for a whole response
			// (Electric's client drops the events after its last
			// up-to-date and asks again from there).
			panic(http.ErrAbortHandler)
		}
		if !res.wait && (loc != nil || len(res.msgs) > 0) {
			off = res.end
		}
		if wrote {
			fl.Flush()
			if loc != nil || (len(res.msgs) > 0 && !res.upToDate) {
				continue // more to send at once
			}
		}
		var oobC <-chan time.Time
		if past {
			oobC = oob.C
		}
		ka := time.NewTimer(srv.cfg.SSEKeepAlive)
		select {
		case <-ch:
		case <-oobC:
			ka.Stop()
			return
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

// sseBufSize is the size of each of an SSE response's two buffers, the
// snapshot file's reads and the events written: what a response holds
// while it sends, whatever the chunk threshold or the shape's size.
const sseBufSize = 32 << 10

// sseBufs are one pass's buffers, taken from ssePool for the pass and
// given back before the stream waits, so an idle stream holds none.
type sseBufs struct {
	rd  []byte
	out *bufio.Writer
}

var ssePool = sync.Pool{New: func() any {
	return &sseBufs{rd: make([]byte, sseBufSize), out: bufio.NewWriterSize(io.Discard, sseBufSize)}
}}

// writeEvents writes one pass of an SSE stream to w: the snapshot chunk
// at loc, read from its file through a fixed buffer and framed as it is
// read, or res's log messages; then an up-to-date if res reaches the
// shape's end. wrote says whether any event was written.
func writeEvents(w io.Writer, loc *chunkLoc, res chunkResult, seen uint64) (wrote bool, err error) {
	b := ssePool.Get().(*sseBufs)
	defer func() {
		b.out.Reset(io.Discard) // drop w
		ssePool.Put(b)
	}()
	out := b.out
	out.Reset(w)
	if loc != nil {
		f, err := os.Open(loc.file)
		if err != nil {
			return false, sseReadError{err} // the generation was collected meanwhile
		}
		defer f.Close()
		fr := sseFramer{out: out}
		n, err := io.CopyBuffer(&fr, io.NewSectionReader(f, loc.r[0], loc.r[1]), b.rd)
		if err != nil {
			return false, sseReadError{err} // the framer never fails: out's errors come with its Flush
		}
		if n != loc.r[1] {
			return false, sseReadError{fmt.Errorf("%d of the %d bytes its generation says the chunk at %d holds: %s", n, loc.r[1], loc.r[0], loc.file)}
		}
		fr.finish()
		wrote = fr.events > 0
	}
	for _, m := range res.msgs {
		out.WriteString("data: ")
		out.Write(m)
		out.WriteString("\n\n")
		wrote = true
	}
	if res.upToDate && (loc != nil || len(res.msgs) > 0) {
		out.WriteString("data: ")
		out.Write(upToDateMsg(seen))
		out.WriteString("\n\n")
		wrote = true
	}
	return wrote, out.Flush()
}

// sseReadError is a failure to read what an SSE response was sending (a
// snapshot chunk), as opposed to a failure to write it to the client.
type sseReadError struct{ err error }

func (e sseReadError) Error() string { return "read snapshot chunk: " + e.err.Error() }
func (e sseReadError) Unwrap() error { return e.err }

// sseFramer turns a snapshot chunk (JSON messages joined by commas) into
// events as its bytes go by: "data: " before each message, a blank line
// after it, the commas and any whitespace between messages dropped. It
// follows strings and nesting to tell the commas between messages from
// those inside one, so no message is ever held whole; the events are the
// bytes of the messages exactly as stored.
type sseFramer struct {
	out    *bufio.Writer
	depth  int  // nesting inside the current message
	inStr  bool // inside a string
	esc    bool // after a backslash inside a string
	open   bool // inside a message: its "data: " is written
	events int  // messages begun
}

// Write frames p; it never fails (out's error comes with its Flush).
func (f *sseFramer) Write(p []byte) (int, error) {
	run := 0 // p[run:i] are message bytes not yet written
	for i, c := range p {
		if f.inStr {
			switch {
			case f.esc:
				f.esc = false
			case c == '\\':
				f.esc = true
			case c == '"':
				f.inStr = false
			}
			continue
		}
		if f.depth == 0 {
			switch c {
			case ',', ' ', '\t', '\n', '\r':
				f.out.Write(p[run:i])
				run = i + 1
				if c == ',' && f.open {
					f.out.WriteString("\n\n")
					f.open = false
				}
				continue
			}
			if !f.open {
				f.out.WriteString("data: ")
				f.open = true
				f.events++
			}
		}
		switch c {
		case '"':
			f.inStr = true
		case '{', '[':
			f.depth++
		case '}', ']':
			f.depth--
		}
	}
	f.out.Write(p[run:])
	return len(p), nil
}

// finish ends the last message's event.
func (f *sseFramer) finish() {
	if f.open {
		f.out.WriteString("\n\n")
		f.open = false
	}
}
