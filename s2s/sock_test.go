package s2s

import (
	"bytes"
	"errors"
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
