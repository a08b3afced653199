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

func TestCorkConn(t *testing.T) {
	big := strings.Repeat("x", corkMax+1)
	tests := []struct {
		name   string
		corked []string // written between cork and uncork
		want   []string // the writes that reach the socket
	}{
		{"one drain is one write", []string{"a", "bb", "ccc"}, []string{"abbccc"}},
		{"nothing to write", nil, nil},
		{"past the buffer it writes through", []string{"a", big, "b"}, []string{"a", big, "b"}},
		{"filling the buffer flushes it first", []string{strings.Repeat("y", corkMax-1), "zz"}, []string{strings.Repeat("y", corkMax-1), "zz"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			under := &countConn{}
			c := &corkConn{Conn: under, timeout: time.Second}
			c.cork()
			for _, s := range tt.corked {
				if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(s))
				}
			}
			if err := c.uncork(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range under.writes {
				got = append(got, string(w))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
				t.Fatalf("writes to the socket: got %d %.40q, want %d %.40q", len(got), got, len(tt.want), tt.want)
			}
			// Uncorked, a write goes straight through.
			under.writes = nil
			c.Write([]byte("d"))
			if len(under.writes) != 1 || string(under.writes[0]) != "d" {
				t.Fatalf("uncorked write: got %q, want one write of \"d\"", under.writes)
			}
		})
	}
}

// TestCorkConnError: a failed write cuts the stream; every later write
// fails with the same error.
func TestCorkConnError(t *testing.T) {
	broken := errors.New("broken pipe")
	under := &countConn{}
	c := &corkConn{Conn: under}
	c.cork()
	c.Write([]byte("a"))
	under.err = broken
	if err := c.uncork(); !errors.Is(err, broken) {
		t.Fatalf("uncork: got %v, want %v", err, broken)
	}
	under.err = nil
	if _, err := c.Write([]byte("b")); !errors.Is(err, broken) {
		t.Fatalf("write after a failure: got %v, want %v", err, broken)
	}
	if len(under.writes) != 0 {
		t.Fatalf("writes after a failure reached the socket: %q", under.writes)
	}
}

// TestCorkConnDeadline: a drain to a peer that does not read ends at the
// write timeout.
func TestCorkConnDeadline(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	c := &corkConn{Conn: a, timeout: 50 * time.Millisecond}
	c.cork()
	c.Write(bytes.Repeat([]byte("x"), 10))
	done := make(chan error, 1)
	go func() { done <- c.uncork() }()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("uncork to a peer that does not read: got %v, want a deadline error", err)
		}
	case <-time.After(10 * time.Second):
		go io.Copy(io.Discard, b)
		t.Fatal("uncork to a peer that does not read did not end at the write timeout")
	}
}
