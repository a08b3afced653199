// Package wsraw is a WebSocket client for tests that must send what a
// well-behaved client never would: frames built byte by byte (a header
// claiming more than will come, invalid UTF-8, pings with nothing read),
// over a plain TCP connection after an RFC 6455 upgrade it does itself.
// It also reads the server's frames, so a test can see exactly what
// came back (close codes included).
package wsraw

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Opcodes of RFC 6455, section 5.2.
const (
	OpContinuation = 0x0
	OpText         = 0x1
	OpBinary       = 0x2
	OpClose        = 0x8
	OpPing         = 0x9
	OpPong         = 0xA
)

// Conn is an upgraded connection.
type Conn struct {
	net.Conn
	br *bufio.Reader
}

// Dial connects to a ws:// URL and upgrades; hdr adds request headers
// (Authorization). dialer, when set, dials the TCP connection (a test may
// shrink its buffers).
func Dial(rawURL string, hdr http.Header, dialer *net.Dialer) (*Conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if dialer == nil {
		dialer = &net.Dialer{Timeout: 10 * time.Second}
	}
	nc, err := dialer.Dial("tcp", u.Host)
	if err != nil {
		return nil, err
	}
	var key [16]byte
	rand.Read(key[:])
	var req strings.Builder
	fmt.Fprintf(&req, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n", u.RequestURI(), u.Host)
	fmt.Fprintf(&req, "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n", base64.StdEncoding.EncodeToString(key[:]))
	for k, vs := range hdr {
		for _, v := range vs {
			fmt.Fprintf(&req, "%s: %s\r\n", k, v)
		}
	}
	req.WriteString("\r\n")
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, req.String()); err != nil {
		nc.Close()
		return nil, err
	}
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("read the upgrade response: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		nc.Close()
		return nil, fmt.Errorf("upgrade answered %s", resp.Status)
	}
	nc.SetDeadline(time.Time{})
	return &Conn{Conn: nc, br: br}, nil
}

// AppendFrame appends a masked client frame: fin, opcode, and a header
// claiming size payload bytes, followed by payload (which may be shorter
// than size: the rest is for the caller to send, or never).
func AppendFrame(dst []byte, fin bool, op byte, size uint64, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	switch {
	case size < 126:
		dst = append(dst, b0, 0x80|byte(size))
	case size <= 0xFFFF:
		dst = binary.BigEndian.AppendUint16(append(dst, b0, 0x80|126), uint16(size))
	default:
		dst = binary.BigEndian.AppendUint64(append(dst, b0, 0x80|127), size)
	}
	var mask [4]byte
	rand.Read(mask[:])
	dst = append(dst, mask[:]...)
	for i, c := range payload {
		dst = append(dst, c^mask[i%4])
	}
	return dst
}

// WriteFrame sends one whole frame.
func (c *Conn) WriteFrame(op byte, payload []byte) error {
	_, err := c.Write(AppendFrame(nil, true, op, uint64(len(payload)), payload))
	return err
}

// WriteText sends one text message.
func (c *Conn) WriteText(s string) error { return c.WriteFrame(OpText, []byte(s)) }

// Frame is a frame the server sent.
type Frame struct {
	Op      byte
	Payload []byte
}

// CloseCode is a close frame's status code (0 when it has none).
func (f Frame) CloseCode() int {
	if f.Op != OpClose || len(f.Payload) < 2 {
		return 0
	}
	return int(binary.BigEndian.Uint16(f.Payload))
}

// ErrTooBig is ReadFrame's error for a frame over its limit.
var ErrTooBig = errors.New("wsraw: frame over 64 MiB")

// ReadFrame reads the next frame the server sent (unmasked), waiting at
// most until deadline.
func (c *Conn) ReadFrame(deadline time.Time) (Frame, error) {
	c.SetReadDeadline(deadline)
	var h [2]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return Frame{}, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(c.br, b[:]); err != nil {
			return Frame{}, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(c.br, b[:]); err != nil {
			return Frame{}, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 64<<20 {
		return Frame{}, ErrTooBig
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(c.br, p); err != nil {
		return Frame{}, err
	}
	return Frame{Op: h[0] & 0x0f, Payload: p}, nil
}
