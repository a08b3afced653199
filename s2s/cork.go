package s2s

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// corkMax is the most a corked connection holds before writing through.
const corkMax = 64 << 10

// corkConn is the TCP connection under a WebSocket. The library flushes
// every message to the socket, a write syscall per frame; while the write
// loop drains its queue the connection is corked: the frames collect here
// and reach the socket in one write when it is uncorked. Each frame is
// still its own WebSocket message.
type corkConn struct {
	net.Conn

	mu      sync.Mutex
	corked  bool
	buf     []byte
	err     error         // a failed write: the stream is cut, every later write fails
	timeout time.Duration // the socket's write deadline is kept between 0.9 and 1 times this ahead
	armed   time.Time     // when the deadline was last set
}

// armLocked keeps the socket's write deadline at least 0.9 times the
// timeout ahead, setting it at most once per tenth of the timeout rather
// than around every drain (setting a deadline costs as much as a small
// write).
func (c *corkConn) armLocked() {
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

// Write implements net.Conn. Writes made while corked (by the write loop,
// or by another goroutine such as a pong or a close frame) are buffered in
// order.
func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	c.armLocked()
	if !c.corked {
		n, err := c.Conn.Write(p)
		c.err = err
		return n, err
	}
	if len(c.buf)+len(p) > corkMax {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
	}
	if len(p) > corkMax {
		n, err := c.Conn.Write(p)
		c.err = err
		return n, err
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

func (c *corkConn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	c.err = err
	return err
}

// cork starts buffering writes.
func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what was buffered and stops buffering.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	err := c.err
	if err == nil {
		c.armLocked()
		err = c.flushLocked()
	}
	if cap(c.buf) > corkMax {
		c.buf = nil // a burst's buffer is not kept for an idle connection
	}
	return err
}

// corkWriter is the http.ResponseWriter handed to websocket.Accept: its
// Hijack returns the connection wrapped in a corkConn.
type corkWriter struct {
	http.ResponseWriter
	timeout time.Duration
	cc      *corkConn
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *corkWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack implements http.Hijacker.
//
// Every write to the socket then finishes within the corkWriter's timeout
// (0 is none): the library's own timeouts close the connection on a
// context, and the cork's buffered writes are bounded by the socket's
// deadline.
func (w *corkWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
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
	if w.cc != nil {
		nc.Close()
		return nil, nil, errors.New("connection hijacked twice")
	}
	w.cc = &corkConn{Conn: nc, timeout: w.timeout}
	brw.Writer.Reset(w.cc)
	return w.cc, brw, nil
}
