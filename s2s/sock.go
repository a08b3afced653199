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
	"syscall"
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
// writes the close frames through Write. The connection's write loop
// writes its text messages (and the pongs conn.pong queues) itself: a
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

	rc      syscall.RawConn // for writes that do not wait; nil: none
	pending []byte          // the part of a tried write the socket did not take

	watch *frameWatch // follows the client's frame headers; nil: none
}

// Read implements net.Conn for the library, which reads the client's
// frames through it: the frame watch sees every byte first.
func (c *sockConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.watch.feed(p[:n])
	return n, err
}

// newSockConn wraps nc, a *net.TCPConn for writes that do not wait.
func newSockConn(nc net.Conn, timeout time.Duration) *sockConn {
	c := &sockConn{Conn: nc, timeout: timeout}
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			c.rc = rc
		}
	}
	return c
}

// canTry reports whether tryMessages may be used: the connection can
// write without waiting and holds nothing a tried write left. It never
// waits: a socket held by a write that may wait (the library's control
// frames) cannot be tried now.
func (c *sockConn) canTry() bool {
	if !c.mu.TryLock() {
		return false
	}
	defer c.mu.Unlock()
	return c.rc != nil && len(c.pending) == 0 && c.err == nil
}

// tryAcquire takes the socket for tryFramesLocked without waiting; it
// fails while a write that may wait holds it. A shared writer must never
// wait on one socket (a close frame the library writes to a client that
// does not read waits on the socket with the socket held).
func (c *sockConn) tryAcquire() bool { return c.mu.TryLock() }

// release gives back the socket tryAcquire took.
func (c *sockConn) release() { c.mu.Unlock() }

// pendingLocked is how many bytes tried writes left for a write that
// may wait.
func (c *sockConn) pendingLocked() int { return len(c.pending) }

// flushPendingLocked writes what a tried write left, waiting on the
// socket (within the write timeout): it goes before anything else.
func (c *sockConn) flushPendingLocked() error {
	if c.err != nil || len(c.pending) == 0 {
		return c.err
	}
	c.armLocked()
	_, c.err = c.Conn.Write(c.pending)
	c.pending = c.pending[:0]
	if cap(c.pending) > sockBufMax {
		c.pending = nil
	}
	return c.err
}

// tryMessages writes msgs as text messages in one write that does not
// wait: it reports whether the socket took all of it. What it did not
// take stays pending, for writeMessages, Write or flushPending, which
// may wait. The messages must fit sockBufMax (with their headers).
func (c *sockConn) tryMessages(msgs [][]byte) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tryFramesLocked(msgs, nil)
}

// tryFramesLocked is tryMessages, with the socket held (tryAcquire),
// for frames whose opcodes are in ops (nil: all text).
func (c *sockConn) tryFramesLocked(msgs [][]byte, ops []byte) (bool, error) {
	if c.err != nil {
		return false, c.err
	}
	if c.stopped.Load() {
		return true, nil // a close frame is coming: nothing more is sent
	}
	// The write does not wait, but Go refuses any write on a socket whose
	// deadline has passed: keep it ahead as for the writes that wait.
	c.armLocked()
	buf := c.buf[:0]
	for i, m := range msgs {
		buf = append(appendFrameHeader(buf, opOf(ops, i), len(m)), m...)
	}
	c.buf = buf[:0]
	if len(c.pending) > 0 || c.rc == nil {
		c.pending = append(c.pending, buf...)
		return false, nil
	}
	var n int
	var werr error
	err := c.rc.Write(func(fd uintptr) bool {
		for n < len(buf) {
			k, err := syscall.Write(int(fd), buf[n:])
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				if err != syscall.EAGAIN {
					werr = err
				}
				break
			}
			n += k
		}
		return true // never wait here
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		c.err = err
		return false, err
	}
	if n < len(buf) {
		c.pending = append(c.pending, buf[n:]...)
		return false, nil
	}
	return true, nil
}

// flushPending writes what a tried write left (the write loop's part).
func (c *sockConn) flushPending() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushPendingLocked()
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
	if err := c.flushPendingLocked(); err != nil {
		return 0, err
	}
	c.armLocked()
	n, err := c.Conn.Write(p)
	c.err = err
	return n, err
}

// Opcodes of the frames the connection writes itself (RFC 6455, section
// 5.2): its text messages and the pongs answering the client's pings.
const (
	opText = 0x1
	opPong = 0xA
)

// opOf is the opcode of the i-th of a drain's frames.
func opOf(ops []byte, i int) byte {
	if ops == nil {
		return opText
	}
	return ops[i]
}

// appendHeader appends the header of a final, unmasked text frame of n
// bytes (RFC 6455, section 5.2).
func appendHeader(dst []byte, n int) []byte { return appendFrameHeader(dst, opText, n) }

// appendFrameHeader appends the header of a final, unmasked frame with
// opcode op and n bytes of payload.
func appendFrameHeader(dst []byte, op byte, n int) []byte {
	b0 := 0x80 | op
	switch {
	case n < 126:
		return append(dst, b0, byte(n))
	case n <= 0xFFFF:
		return binary.BigEndian.AppendUint16(append(dst, b0, 126), uint16(n))
	default:
		return binary.BigEndian.AppendUint64(append(dst, b0, 127), uint64(n))
	}
}

// writeMessages writes each of msgs as one text message, in as few writes
// as sockBufMax allows, all within the write timeout.
func (c *sockConn) writeMessages(msgs [][]byte) error { return c.writeFrames(msgs, nil) }

// writeFrames is writeMessages for frames whose opcodes are in ops (nil:
// all text).
func (c *sockConn) writeFrames(msgs [][]byte, ops []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.flushPendingLocked(); err != nil {
		return err
	}
	if c.stopped.Load() {
		return errStopped
	}
	c.armLocked()
	buf := c.buf[:0]
	for i, m := range msgs {
		if len(m) > sockBufMax {
			// Written from where it lies, after what is buffered.
			bufs := net.Buffers{appendFrameHeader(buf, opOf(ops, i), len(m)), m}
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
		buf = append(appendFrameHeader(buf, opOf(ops, i), len(m)), m...)
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
	timeout  time.Duration
	maxFrame int // the frame limit the frame watch checks; 0: none
	sc       *sockConn
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
	w.sc = newSockConn(nc, w.timeout)
	if w.maxFrame > 0 {
		// The library reads what the HTTP server already buffered before
		// reading the socket: the watch sees it first too.
		w.sc.watch = newFrameWatch(w.maxFrame)
		b, _ := brw.Reader.Peek(brw.Reader.Buffered())
		w.sc.watch.feed(b)
	}
	brw.Writer.Reset(w.sc)
	return w.sc, brw, nil
}
