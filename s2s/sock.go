package s2s

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// sockBufMax is the most a sockConn buffers before writing: a bigger
// message is written from where it lies.
const sockBufMax = 64 << 10

// errStopped is writeMessages' error once the connection is closing.
var errStopped = errors.New("connection closing: no more messages")

// sockConn is the TCP connection under a WebSocket.
//
// The WebSocket library does the upgrade, reads the client's frames and
// writes the control frames (pong, close) through Write. The connection's
// write loop writes its text messages itself with writeMessages: a
// server's frames are not masked, so a message is a header of 2 to 10
// bytes and the payload as it is, and every message one drain takes from
// the queue reaches the socket in one write. Writing through the library
// cost a lock, a context check and a flush per message: a sixth of the
// server's CPU with 1,000 sockets, where each transaction wakes every
// socket for one or two small messages.
type sockConn struct {
	net.Conn

	mu      sync.Mutex
	buf     []byte        // messages of the drain being written
	err     error         // a failed write: the stream is cut, every later write fails
	timeout time.Duration // the socket's write deadline is kept between 0.9 and 1 times this ahead
	armed   time.Time     // when the deadline was last set

	stopped atomic.Bool // a close frame is coming: no more messages
}

// armLocked keeps the socket's write deadline at least 0.9 times the
// timeout ahead, setting it at most once per tenth of the timeout rather
// than around every write (setting a deadline costs as much as a small
// write).
func (c *sockConn) armLocked() {
	if c.timeout <= 0 {
		return
	}
	now := time.Now()
	if now.Sub(c.armed) < c.timeout/10 {
		return
	}
	c.armed = now
	_ = c.Conn.SetWriteDeadline(now.Add(c.timeout))
}

// Write implements net.Conn for the library: its frames are written whole
// (a control frame fits its buffer), never inside a drain's messages.
func (c *sockConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	c.armLocked()
	n, err := c.Conn.Write(p)
	c.err = err
	return n, err
}

// appendHeader appends the header of a final, unmasked text frame of n
// bytes (RFC 6455, section 5.2).
func appendHeader(dst []byte, n int) []byte {
	const finText = 0x81
	switch {
	case n < 126:
		return append(dst, finText, byte(n))
	case n <= 0xFFFF:
		return binary.BigEndian.AppendUint16(append(dst, finText, 126), uint16(n))
	default:
		return binary.BigEndian.AppendUint64(append(dst, finText, 127), uint64(n))
	}
}

// writeMessages writes each of msgs as one text message, in as few writes
// as sockBufMax allows, all within the write timeout.
func (c *sockConn) writeMessages(msgs [][]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if c.stopped.Load() {
		return errStopped
	}
	c.armLocked()
	buf := c.buf[:0]
	for _, m := range msgs {
		if len(m) > sockBufMax {
			// Written from where it lies, after what is buffered.
			bufs := net.Buffers{appendHeader(buf, len(m)), m}
			if _, c.err = bufs.WriteTo(c.Conn); c.err != nil {
				return c.err
			}
			buf = buf[:0]
			continue
		}
		if len(buf)+len(m)+10 > sockBufMax && len(buf) > 0 {
			if _, c.err = c.Conn.Write(buf); c.err != nil {
				return c.err
			}
			buf = buf[:0]
		}
		buf = append(appendHeader(buf, len(m)), m...)
	}
	if len(buf) > 0 {
		_, c.err = c.Conn.Write(buf)
	}
	c.buf = buf[:0]
	return c.err
}

// stop makes later writeMessages calls fail: the close frame the library
// writes next is the last frame (a drain being written finishes first).
func (c *sockConn) stop() { c.stopped.Store(true) }

// sockWriter is the http.ResponseWriter handed to websocket.Accept: its
// Hijack returns the connection wrapped in a sockConn.
type sockWriter struct {
	http.ResponseWriter
	timeout time.Duration
	sc      *sockConn
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *sockWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack implements http.Hijacker.
//
// Every write to the socket then finishes within the sockWriter's timeout
// (0 is none).
func (w *sockWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if brw.Writer.Buffered() > 0 {
		if err := brw.Writer.Flush(); err != nil {
			nc.Close()
			return nil, nil, fmt.Errorf("flush the upgrade response: %w", err)
		}
	}
	if w.sc != nil {
		nc.Close()
		return nil, nil, errors.New("connection hijacked twice")
	}
	w.sc = &sockConn{Conn: nc, timeout: w.timeout}
	brw.Writer.Reset(w.sc)
	return w.sc, brw, nil
}
