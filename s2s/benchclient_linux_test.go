package s2s_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// benchClient is TestBenchS2S's client: raw non-blocking sockets after a
// WebSocket upgrade, read by one epoll loop per processor. A goroutine per
// socket (coder/websocket's reader over Go's netpoller) costs two reads per
// frame (the frame, then the EAGAIN that parks the goroutine) and a
// goroutine wake-up, about as much CPU per frame as the server's write, on
// the same two cores; with level-triggered epoll a frame costs one read and
// a share of an epoll_wait, so the figure measures the server more than
// the client.
type benchClient struct {
	loops    []*benchLoop
	accepted *sync.WaitGroup // Done once per socket at its first accepted frame
	closing  atomic.Bool     // the client is closing its sockets
	lost     atomic.Int64    // sockets the server closed before that
	stop     atomic.Bool
	wg       sync.WaitGroup
	errMu    sync.Mutex
	err      error // the first refused or ended subscription, or a frame the scan cannot read
}

// benchLoop is one epoll loop and the sockets it reads; mu guards the
// sockets' latencies while the loop handles a batch of ready sockets.
type benchLoop struct {
	epfd  int
	mu    sync.Mutex
	socks []*benchSock
}

// benchSock is one socket of the bench client.
type benchSock struct {
	fd   int
	pend []byte  // the start of a frame not yet whole
	acc  bool    // accepted seen
	dead bool    // closed or failed; no longer read
	lat  []int64 // µs from the row's timestamp to the frame's read, under the loop's mu
	rows atomic.Int64
}

// newBenchClient opens n sockets to addr, each subscribing with the
// subscribe frame sub(i), and starts the loops that read them.
func newBenchClient(addr string, n int, sub func(i int) string) (*benchClient, error) {
	ap, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return nil, err
	}
	c := &benchClient{accepted: new(sync.WaitGroup)}
	for range runtime.GOMAXPROCS(0) {
		epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("epoll_create1: %w", err)
		}
		c.loops = append(c.loops, &benchLoop{epfd: epfd})
	}
	c.accepted.Add(n)
	for i := range n {
		fd, pend, err := benchDial(ap, sub(i))
		if err != nil {
			c.close()
			return nil, fmt.Errorf("socket %d: %w", i, err)
		}
		l := c.loops[i%len(c.loops)]
		s := &benchSock{fd: fd}
		l.socks = append(l.socks, s)
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(len(l.socks) - 1)}
		if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			c.close()
			return nil, fmt.Errorf("epoll_ctl: %w", err)
		}
		if len(pend) > 0 {
			l.mu.Lock()
			s.pend = c.frames(s, pend, time.Now().UnixMicro())
			l.mu.Unlock()
		}
	}
	for _, l := range c.loops {
		c.wg.Add(1)
		go c.run(l)
	}
	return c, nil
}

// benchDial connects, upgrades to a WebSocket (blocking), sends the
// subscribe frame and leaves the socket non-blocking; pend is what the
// server sent after its 101 response.
func benchDial(ap *net.TCPAddr, sub string) (fd int, pend []byte, err error) {
	sa := &syscall.SockaddrInet4{Port: ap.Port}
	copy(sa.Addr[:], ap.IP.To4())
	for try := 0; ; try++ {
		fd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return -1, nil, err
		}
		if err = syscall.Connect(fd, sa); err == nil {
			break
		}
		syscall.Close(fd)
		if try > 200 { // the server is not up after 10 s
			return -1, nil, fmt.Errorf("connect %s: %w", ap, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fail := func(err error) (int, []byte, error) { syscall.Close(fd); return -1, nil, err }
	req := "GET /s2s/v1 HTTP/1.1\r\nHost: " + ap.String() + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if err := benchWriteAll(fd, []byte(req)); err != nil {
		return fail(err)
	}
	var resp []byte
	buf := make([]byte, 4096)
	for {
		n, err := syscall.Read(fd, buf)
		if n <= 0 {
			return fail(fmt.Errorf("upgrade: the server closed or failed before answering: %v", err))
		}
		resp = append(resp, buf[:n]...)
		if i := bytes.Index(resp, []byte("\r\n\r\n")); i >= 0 {
			if !bytes.HasPrefix(resp, []byte("HTTP/1.1 101 ")) {
				return fail(fmt.Errorf("upgrade refused: %q", resp[:i]))
			}
			pend = resp[i+4:]
			break
		}
	}
	// A client's frame is masked; a zero key leaves the payload as it is.
	if err := benchWriteAll(fd, benchFrame(0x1, []byte(sub))); err != nil {
		return fail(err)
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		return fail(err)
	}
	return fd, pend, nil
}

// benchFrame is a masked client frame (FIN set) with a zero masking key.
func benchFrame(op byte, payload []byte) []byte {
	f := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		f = append(f, 0x80|byte(n))
	case n < 1<<16:
		f = append(f, 0x80|126, byte(n>>8), byte(n))
	default:
		f = append(f, 0x80|127)
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	return append(append(f, 0, 0, 0, 0), payload...)
}

func benchWriteAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if err != nil {
			if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
				continue
			}
			return err
		}
		b = b[n:]
	}
	return nil
}

// run reads the loop's sockets until the client stops: one read per
// ready socket per epoll_wait (level-triggered, so what a read leaves is
// reported again).
func (c *benchClient) run(l *benchLoop) {
	defer c.wg.Done()
	events := make([]syscall.EpollEvent, 256)
	buf := make([]byte, 256<<10)
	for !c.stop.Load() {
		n, err := syscall.EpollWait(l.epfd, events, 100)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			c.fail(fmt.Errorf("epoll_wait: %w", err))
			return
		}
		l.mu.Lock()
		for _, ev := range events[:n] {
			s := l.socks[ev.Fd]
			if s.dead {
				continue
			}
			m, err := syscall.Read(s.fd, buf)
			if m <= 0 {
				if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
					continue
				}
				c.drop(l, s) // EOF or an error: the server closed it
				continue
			}
			now := time.Now().UnixMicro()
			data := buf[:m]
			if len(s.pend) > 0 {
				s.pend = append(s.pend, data...)
				data = s.pend
			}
			rest := c.frames(s, data, now)
			s.pend = append(s.pend[:0], rest...)
			if s.dead {
				c.drop(l, s)
			}
		}
		l.mu.Unlock()
	}
}

// drop stops reading s; a socket the server closed before the client
// closes is counted lost (a slow consumer).
func (c *benchClient) drop(l *benchLoop, s *benchSock) {
	s.dead = true
	syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, s.fd, nil)
	if !c.closing.Load() {
		c.lost.Add(1)
	}
}

var (
	benchValuesAt = []byte(`"values":["`)
	benchDelta    = []byte(`{"type":"delta"`)
	benchAccepted = []byte(`{"type":"accepted"`)
	benchRefused  = []byte(`{"type":"refused"`)
	benchEnded    = []byte(`{"type":"ended"`)
)

// frames handles the whole frames at the start of b and returns what is
// left of it. A delta's timestamps are found by a byte scan of the frames
// this server writes (the row's values are ["<id>","<ts>"]) rather than a
// JSON decode.
func (c *benchClient) frames(s *benchSock, b []byte, now int64) []byte {
	for len(b) >= 2 {
		fin, op := b[0]&0x80 != 0, b[0]&0x0f
		n, h := int(b[1]&0x7f), 2
		switch n {
		case 126:
			if len(b) < 4 {
				return b
			}
			n, h = int(binary.BigEndian.Uint16(b[2:])), 4
		case 127:
			if len(b) < 10 {
				return b
			}
			n, h = int(binary.BigEndian.Uint64(b[2:])), 10
		}
		if b[1]&0x80 != 0 {
			h += 4 // masked: a server does not mask
		}
		if len(b) < h+n {
			return b
		}
		p := b[h : h+n]
		b = b[h+n:]
		switch {
		case op == 0x8: // close
			s.dead = true
			return nil
		case op == 0x0 || (op == 0x1 && !fin):
			c.fail(fmt.Errorf("a fragmented message, which the bench's scan does not read: %.80q", p))
		case op != 0x1:
			// ping, pong: not sent to this client
		case bytes.HasPrefix(p, benchDelta):
			for {
				i := bytes.Index(p, benchValuesAt)
				if i < 0 {
					break
				}
				p = p[i+len(benchValuesAt):]
				s.rows.Add(1)
				// Skip the id, then read the timestamp.
				if j := bytes.Index(p, []byte(`","`)); j >= 0 {
					p = p[j+3:]
					if k := bytes.IndexByte(p, '"'); k >= 0 {
						if ts, err := strconv.ParseInt(string(p[:k]), 10, 64); err == nil && ts > 0 {
							s.lat = append(s.lat, now-ts)
						}
					}
				}
			}
		case bytes.HasPrefix(p, benchAccepted):
			if !s.acc {
				s.acc = true
				c.accepted.Done()
			}
		case bytes.HasPrefix(p, benchRefused), bytes.HasPrefix(p, benchEnded):
			c.fail(fmt.Errorf("bench subscription: %s", p))
		}
	}
	return b
}

func (c *benchClient) fail(err error) {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.err == nil {
		c.err = err
	}
}

// Err returns the first refused or ended subscription or unreadable frame.
func (c *benchClient) Err() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// each calls f for every socket, under its loop's lock.
func (c *benchClient) each(f func(s *benchSock)) {
	for _, l := range c.loops {
		l.mu.Lock()
		for _, s := range l.socks {
			f(s)
		}
		l.mu.Unlock()
	}
}

// close sends every socket a close frame, stops the loops and closes the
// sockets.
func (c *benchClient) close() {
	c.closing.Store(true)
	bye := benchFrame(0x8, []byte{0x03, 0xe8}) // 1000, normal closure
	c.each(func(s *benchSock) {
		if !s.dead {
			benchWriteAll(s.fd, bye)
		}
	})
	c.stop.Store(true)
	c.wg.Wait()
	for _, l := range c.loops {
		for _, s := range l.socks {
			syscall.Close(s.fd)
		}
		syscall.Close(l.epfd)
	}
}
