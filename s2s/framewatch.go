package s2s

import (
	"encoding/binary"
	"math"
	"sync"
)

// frameWatch follows the frame headers of the bytes a client sends, as
// the WebSocket library reads them from the socket, so that a message
// whose header already says it is over the frame limit is answered when
// the header arrives rather than after the whole payload (a header may
// claim 2^63-1 bytes that never come). It only reads: the library still
// parses every frame, and the read loop still discards the payload.
//
// Client frames (RFC 6455, section 5.2): a byte of FIN, RSV and opcode; a
// byte of MASK and a 7-bit length, 126 and 127 meaning a 16- or 64-bit
// length follows; a 4-byte masking key when MASK is set; the payload. A
// message is a text or binary frame and the continuation frames that
// follow it; control frames (opcode 8 and above) may come between them.
type frameWatch struct {
	max int64 // the frame limit; 0: none, nothing is watched

	mu    sync.Mutex
	hdr   [14]byte
	hn    int   // header bytes held
	skip  int64 // payload bytes of the current frame still to come
	size  int64 // bytes the current data message announced so far
	msgN  uint64
	lost  bool          // a header the library will refuse: stop watching
	over  []overMessage // messages found over the limit, not yet asked about
	first int           // over[:first] were handed to notify
	// notify is told of each message found over the limit, on the
	// goroutine that reads the socket; nil until the connection is set.
	notify func(overMessage)
}

// overMessage is a message whose headers passed the limit: the n-th data
// message of the connection (from 1), of at least size bytes.
type overMessage struct {
	n    uint64
	size int64
}

func newFrameWatch(max int) *frameWatch { return &frameWatch{max: int64(max)} }

// setNotify sets the function told of messages over the limit and tells
// it of those found before (in bytes read with the upgrade request).
func (w *frameWatch) setNotify(f func(overMessage)) {
	w.mu.Lock()
	w.notify = f
	early := append([]overMessage(nil), w.over[w.first:]...)
	w.first = len(w.over)
	w.mu.Unlock()
	for _, m := range early {
		f(m)
	}
}

// feed follows p, the next bytes of the stream.
func (w *frameWatch) feed(p []byte) {
	if w == nil || w.max <= 0 {
		return
	}
	var found []overMessage
	w.mu.Lock()
	for len(p) > 0 && !w.lost {
		if w.skip > 0 {
			k := int64(len(p))
			if k > w.skip {
				k = w.skip
			}
			w.skip -= k
			p = p[k:]
			continue
		}
		need := 2
		if w.hn >= 2 {
			need = headerLen(w.hdr[1])
		}
		k := copy(w.hdr[w.hn:need], p)
		w.hn += k
		p = p[k:]
		if w.hn < need {
			continue
		}
		if need == 2 && headerLen(w.hdr[1]) > 2 {
			continue // the extended length and the masking key come next
		}
		if m, ok := w.headerLocked(); ok {
			found = append(found, m)
		}
	}
	notify := w.notify
	if notify != nil {
		w.first = len(w.over)
	}
	w.mu.Unlock()
	if notify != nil {
		for _, m := range found {
			notify(m)
		}
	}
}

// headerLen is the length of a client frame's header whose second byte
// is b1.
func headerLen(b1 byte) int {
	n := 2
	switch b1 & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if b1&0x80 != 0 {
		n += 4
	}
	return n
}

// headerLocked takes the whole header held in w.hdr: it sets up the
// payload to skip and reports a data message that passed the limit.
func (w *frameWatch) headerLocked() (overMessage, bool) {
	b0, b1 := w.hdr[0], w.hdr[1]
	w.hn = 0
	var n int64
	switch b1 & 0x7f {
	case 126:
		n = int64(binary.BigEndian.Uint16(w.hdr[2:4]))
	case 127:
		u := binary.BigEndian.Uint64(w.hdr[2:10])
		if u > math.MaxInt64 {
			w.lost = true // the library closes the connection
			return overMessage{}, false
		}
		n = int64(u)
	default:
		n = int64(b1 & 0x7f)
	}
	w.skip = n
	switch op := b0 & 0x0f; {
	case op >= 8: // control frames are not messages
		return overMessage{}, false
	case op == 0: // continuation
		if w.size > math.MaxInt64-n {
			w.size = math.MaxInt64
		} else {
			w.size += n
		}
	default:
		w.msgN++
		w.size = n
	}
	if w.size <= w.max || (len(w.over) > 0 && w.over[len(w.over)-1].n == w.msgN) {
		return overMessage{}, false
	}
	m := overMessage{n: w.msgN, size: w.size}
	w.over = append(w.over, m)
	return m, true
}

// answered reports whether the n-th data message was found over the
// limit (and its answer sent); the read loop asks about each message it
// finds over the limit, in order.
func (w *frameWatch) answered(n uint64) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	i := 0
	for i < len(w.over) && w.over[i].n < n {
		i++
	}
	ok := i < len(w.over) && w.over[i].n == n && i < w.first
	if i > 0 {
		w.over = append(w.over[:0], w.over[i:]...)
		w.first = max(0, w.first-i)
	}
	return ok
}
