package s2s

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// countConn records each write that reaches the socket.
type countConn struct {
	net.Conn
	writes [][]byte
	err    error
}

func (c *countConn) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	c.writes = append(c.writes, append([]byte(nil), p...))
	return len(p), nil
}

func (c *countConn) SetWriteDeadline(time.Time) error { return nil }

// frameOf is a final unmasked text frame holding s, built by hand.
func frameOf(s string) string {
	n := len(s)
	switch {
	case n < 126:
		return "\x81" + string([]byte{byte(n)}) + s
	case n <= 0xFFFF:
		return "\x81\x7e" + string([]byte{byte(n >> 8), byte(n)}) + s
	}
	return "\x81\x7f" + string([]byte{0, 0, 0, 0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}) + s
}

func TestSockMessages(t *testing.T) {
	big := strings.Repeat("x", sockBufMax+1)
	tests := []struct {
		name string
		msgs []string
		want []string // the writes that reach the socket
	}{
		{"one drain is one write", []string{"a", "bb", "ccc"}, []string{frameOf("a") + frameOf("bb") + frameOf("ccc")}},
		{"empty message", []string{""}, []string{frameOf("")}},
		{"header sizes", []string{strings.Repeat("a", 125), strings.Repeat("b", 126), strings.Repeat("c", 65535)},
			[]string{frameOf(strings.Repeat("a", 125)) + frameOf(strings.Repeat("b", 126)), frameOf(strings.Repeat("c", 65535))}},
		{"a big message is written where it lies", []string{"a", big, "b"}, []string{frameOf("a") + frameOf(big)[:10], big, frameOf("b")}},
		{"a full buffer is written first", []string{strings.Repeat("y", sockBufMax-20), "zzzzzzzzzzzzzzzzzzzzzzzzzz"},
			[]string{frameOf(strings.Repeat("y", sockBufMax-20)), frameOf("zzzzzzzzzzzzzzzzzzzzzzzzzz")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			under := &countConn{}
			c := &sockConn{Conn: under, timeout: time.Second}
			msgs := make([][]byte, len(tt.msgs))
			for i, m := range tt.msgs {
				msgs[i] = []byte(m)
			}
			if err := c.writeMessages(msgs); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range under.writes {
				got = append(got, string(w))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
				t.Fatalf("writes to the socket: got %d %.60q, want %d %.60q", len(got), got, len(tt.want), tt.want)
			}
		})
	}
}

// TestSockError: a failed write cuts the stream; every later write fails
// with the same error.
func TestSockError(t *testing.T) {
	broken := errors.New("broken pipe")
	under := &countConn{err: broken}
	c := &sockConn{Conn: under}
	if err := c.writeMessages([][]byte{[]byte("a")}); !errors.Is(err, broken) {
		t.Fatalf("writeMessages: got %v, want %v", err, broken)
	}
	under.err = nil
	if _, err := c.Write([]byte("b")); !errors.Is(err, broken) {
		t.Fatalf("write after a failure: got %v, want %v", err, broken)
	}
	if err := c.writeMessages([][]byte{[]byte("c")}); !errors.Is(err, broken) {
		t.Fatalf("writeMessages after a failure: got %v, want %v", err, broken)
	}
	if len(under.writes) != 0 {
		t.Fatalf("writes after a failure reached the socket: %q", under.writes)
	}
}

// TestSockStop: once stopped (a close frame is coming), messages are
// refused and the library's own writes still go through.
func TestSockStop(t *testing.T) {
	under := &countConn{}
	c := &sockConn{Conn: under}
	c.stop()
	if err := c.writeMessages([][]byte{[]byte("a")}); !errors.Is(err, errStopped) {
		t.Fatalf("writeMessages after stop: got %v, want %v", err, errStopped)
	}
	if _, err := c.Write([]byte("close")); err != nil || len(under.writes) != 1 || string(under.writes[0]) != "close" {
		t.Fatalf("library write after stop: %v, writes %q; want one write of \"close\"", err, under.writes)
	}
}

// TestSockDeadline: a write to a peer that does not read ends at the
// write timeout.
func TestSockDeadline(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	c := &sockConn{Conn: a, timeout: 50 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- c.writeMessages([][]byte{bytes.Repeat([]byte("x"), 10)}) }()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("write to a peer that does not read: got %v, want a deadline error", err)
		}
	case <-time.After(10 * time.Second):
		go io.Copy(io.Discard, b)
		t.Fatal("write to a peer that does not read did not end at the write timeout")
	}
}

// readFrames parses n final, unmasked text frames from r.
func readFrames(r io.Reader, n int) ([]string, error) {
	var out []string
	hdr := make([]byte, 10)
	for range n {
		if _, err := io.ReadFull(r, hdr[:2]); err != nil {
			return out, err
		}
		size := int(hdr[1] & 0x7f)
		switch size {
		case 126:
			if _, err := io.ReadFull(r, hdr[2:4]); err != nil {
				return out, err
			}
			size = int(hdr[2])<<8 | int(hdr[3])
		case 127:
			if _, err := io.ReadFull(r, hdr[2:10]); err != nil {
				return out, err
			}
			size = 0
			for _, b := range hdr[2:10] {
				size = size<<8 | int(b)
			}
		}
		if hdr[0] != 0x81 {
			return out, errors.New("not a final text frame")
		}
		p := make([]byte, size)
		if _, err := io.ReadFull(r, p); err != nil {
			return out, err
		}
		out = append(out, string(p))
	}
	return out, nil
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (nc, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if peer, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	if nc, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	return nc, peer
}

// TestSockTry: writes that do not wait fill a socket whose peer does not
// read; the part it did not take is kept and written, in order, before
// anything else once the peer reads.
func TestSockTry(t *testing.T) {
	nc, peer := tcpPair(t)
	c := newSockConn(nc, 10*time.Second)
	defer c.Close()
	if !c.canTry() {
		t.Fatal("canTry on a fresh TCP connection = false, want true")
	}
	var want []string
	for i := 0; ; i++ {
		if i > 100000 {
			t.Fatal("the socket took 100,000 tried writes from a peer that does not read")
		}
		m := fmt.Sprintf("message %d %s", i, strings.Repeat("x", 1000))
		want = append(want, m)
		done, err := c.tryMessages([][]byte{[]byte(m)})
		if err != nil {
			t.Fatal(err)
		}
		if !done {
			break
		}
	}
	if c.canTry() {
		t.Fatal("canTry with a write left over = true, want false")
	}
	// A control frame written by the library goes after what was left.
	want = append(want, "after")
	got := make(chan []string, 1)
	go func() {
		f, err := readFrames(peer, len(want))
		if err != nil {
			t.Errorf("read frames: %v", err)
		}
		got <- f
	}()
	if _, err := c.Write(appendHeader(nil, len("after"))); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	f := <-got
	if len(f) != len(want) {
		t.Fatalf("peer read %d frames, want %d", len(f), len(want))
	}
	for i := range want {
		if f[i] != want[i] {
			t.Fatalf("frame %d = %.30q, want %.30q", i, f[i], want[i])
		}
	}
	if !c.canTry() {
		t.Fatal("canTry after the rest was written = false, want true")
	}
}

// TestSockTryAfterTimeout: a write that does not wait still succeeds long
// after the socket's last write (Go refuses writes past a deadline, so the
// deadline must be kept ahead for these too).
func TestSockTryAfterTimeout(t *testing.T) {
	nc, peer := tcpPair(t)
	c := newSockConn(nc, 20*time.Millisecond)
	defer c.Close()
	// A write that waits sets the deadline (hello does in the server).
	if err := c.writeMessages([][]byte{[]byte("hello")}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		time.Sleep(50 * time.Millisecond) // past the timeout since the last write
		if done, err := c.tryMessages([][]byte{[]byte("m")}); !done || err != nil {
			t.Fatalf("write %d: done %v, err %v; want done", i, done, err)
		}
	}
	f, err := readFrames(peer, 4)
	if err != nil || len(f) != 4 {
		t.Fatalf("peer read %q, %v; want four frames", f, err)
	}
}
