package s2s_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// benchFloorEnv is set, to the address to listen on, when TestBenchS2S
// (FRESHET_S2S_BENCH_FLOOR=1) runs this test binary again as the floor
// writer instead of `freshet serve`; FRESHET_S2S_FLOOR_WRITERS sets how
// many goroutines write (GOMAXPROCS unless set), FRESHET_S2S_FLOOR_NODELAY=0
// turns Nagle's algorithm back on (Go sets TCP_NODELAY, as for freshet's
// sockets) and FRESHET_S2S_FLOOR_SNDBUF=bytes sets SO_SNDBUF.
const benchFloorEnv = "FRESHET_S2S_FLOOR_LISTEN"

// benchFloorMain is the floor of TestBenchS2S: a server that does nothing
// but what the bench client needs to count a frame (the WebSocket upgrade,
// an accepted frame) and then, for every transaction, one write(2) of one
// pre-encoded delta frame, of the shape and size freshet writes, to each
// socket the transaction touches. Its triggers come on stdin, one line
// per transaction from the bench's own paced loop ("t <µs timestamp>
// <row>"); "r" asks for a report on stdout of the times from a trigger's
// timestamp to its last write (waiting for the transactions before it
// included, as freshet's commit-to-write includes its queue) since the
// last report. So what the bench measures against it is
// the fan-out alone, on the same client, sockets and frames: what no
// server can do better than with one write per socket per transaction.
func benchFloorMain(addr string) int {
	writersN := runtime.GOMAXPROCS(0)
	if v := os.Getenv("FRESHET_S2S_FLOOR_WRITERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "FRESHET_S2S_FLOOR_WRITERS=%q: want a number of writer goroutines, 1 or more\n", v)
			return 2
		}
		writersN = n
	}
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "floor: %v\n", err)
		return 1
	}
	f := &benchFloor{byRow: map[int][]*floorSock{}, nagle: os.Getenv("FRESHET_S2S_FLOOR_NODELAY") == "0"}
	if v := os.Getenv("FRESHET_S2S_FLOOR_SNDBUF"); v != "" {
		if f.sndbuf, err = strconv.Atoi(v); err != nil || f.sndbuf < 1 {
			fmt.Fprintf(os.Stderr, "FRESHET_S2S_FLOOR_SNDBUF=%q: want a send buffer size in bytes\n", v)
			return 2
		}
	}
	go f.accept(ln)
	f.start(writersN)
	f.triggers(bufio.NewReader(os.Stdin), os.Stdout)
	return 0
}

// benchFloor is the floor writer's sockets, by the row they subscribe to.
type benchFloor struct {
	mu     sync.Mutex
	byRow  map[int][]*floorSock
	nagle  bool            // TCP_NODELAY off
	sndbuf int             // SO_SNDBUF; 0: the kernel's
	jobs   []chan floorJob // one per writer
	wg     sync.WaitGroup  // the writers' share of the transaction being written

	took          []int64 // µs from each trigger's timestamp to its last write, since the last report
	writes, short int64   // writes made; writes the socket did not take whole
}

type floorSock struct {
	nc   net.Conn // held so that fd stays open
	fd   int
	dead bool
}

// floorJob is one transaction's frame for the sockets in socks.
type floorJob struct {
	frame []byte
	socks []*floorSock
}

var floorRowID = regexp.MustCompile(`WHERE id = (\d+)`)

func (f *benchFloor) accept(ln net.Listener) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			if err := f.handshake(nc); err != nil {
				fmt.Fprintf(os.Stderr, "floor: %v\n", err)
				nc.Close()
			}
		}()
	}
}

// handshake answers the bench client's upgrade, reads its subscribe frame
// for the row and answers it with an accepted frame.
func (f *benchFloor) handshake(nc net.Conn) error {
	r := bufio.NewReader(nc)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("read the upgrade: %w", err)
		}
		if line == "\r\n" {
			break
		}
	}
	if _, err := nc.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")); err != nil {
		return err
	}
	// The client's frame: masked (with a zero key), up to 64 KiB.
	hdr := make([]byte, 2)
	if _, err := ioReadFull(r, hdr); err != nil {
		return fmt.Errorf("read the subscribe frame: %w", err)
	}
	n := int(hdr[1] & 0x7f)
	if n == 126 {
		ext := make([]byte, 2)
		if _, err := ioReadFull(r, ext); err != nil {
			return err
		}
		n = int(ext[0])<<8 | int(ext[1])
	}
	body := make([]byte, 4+n)
	if _, err := ioReadFull(r, body); err != nil {
		return err
	}
	m := floorRowID.FindSubmatch(body[4:])
	if m == nil {
		return fmt.Errorf("a subscribe frame the floor cannot read: %.80q", body[4:])
	}
	row, _ := strconv.Atoi(string(m[1]))
	acc := fmt.Sprintf(`{"type":"accepted","id":"h","lsn":"0/1A2B4F8","columns":[{"name":"id","type":"int4"},{"name":"ts","type":"int8"}],"rows":[{"key":"%s","values":["%d","0"]}]}`, floorKey(row), row)
	if _, err := nc.Write(append([]byte{0x81, 126, byte(len(acc) >> 8), byte(len(acc))}, acc...)); err != nil {
		return err
	}
	tc := nc.(*net.TCPConn)
	if f.nagle {
		tc.SetNoDelay(false)
	}
	if f.sndbuf > 0 {
		tc.SetWriteBuffer(f.sndbuf)
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	s := &floorSock{nc: nc}
	rc.Control(func(fd uintptr) { s.fd = int(fd) })
	f.mu.Lock()
	f.byRow[row] = append(f.byRow[row], s)
	f.mu.Unlock()
	return nil
}

func ioReadFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := r.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// floorKey is a row's key as freshet writes it for an int4 primary key
// (the same length).
func floorKey(row int) string { return fmt.Sprintf("AAAA%02X", row%256) }

// start runs the writers: writer w takes every n-th socket of a
// transaction's, from the w-th.
func (f *benchFloor) start(n int) {
	for w := range n {
		jobs := make(chan floorJob, 1)
		f.jobs = append(f.jobs, jobs)
		go func() {
			var writes, short int64
			for j := range jobs {
				for i := w; i < len(j.socks); i += n {
					s := j.socks[i]
					if s.dead {
						continue
					}
					k, err := syscall.Write(s.fd, j.frame)
					writes++
					switch {
					case err == nil && k == len(j.frame):
					case err == nil, errors.Is(err, syscall.EAGAIN):
						short++ // a bench client that does not keep up loses it
					default:
						s.dead = true // the client closed: a socket of an earlier phase
						s.nc.Close()
					}
				}
				f.mu.Lock()
				f.writes += writes
				f.short += short
				f.mu.Unlock()
				writes, short = 0, 0
				f.wg.Done()
			}
		}()
	}
}

// triggers writes a transaction per "t" line of in and reports on out
// for each "r" line.
func (f *benchFloor) triggers(in *bufio.Reader, out *os.File) {
	lsn := uint64(0x1A2B4F8)
	var frame []byte
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return
		}
		fields := strings.Fields(line)
		switch {
		case len(fields) == 3 && fields[0] == "t":
			ts, _ := strconv.ParseInt(fields[1], 10, 64)
			row, _ := strconv.Atoi(fields[2])
			lsn += 0x68
			payload := fmt.Sprintf(`{"type":"delta","id":"h","lsn":"0/%X","upsert":[{"key":"%s","values":["%d","%d"]}]}`, lsn, floorKey(row), row, ts)
			frame = append(frame[:0], 0x81, byte(len(payload)))
			if len(payload) >= 126 {
				frame = append(frame[:1], 126, byte(len(payload)>>8), byte(len(payload)))
			}
			frame = append(frame, payload...)
			f.mu.Lock()
			socks := f.byRow[row]
			f.mu.Unlock()
			f.wg.Add(len(f.jobs))
			for _, jobs := range f.jobs {
				jobs <- floorJob{frame: frame, socks: socks}
			}
			f.wg.Wait()
			f.mu.Lock()
			f.took = append(f.took, time.Now().UnixMicro()-ts)
			f.mu.Unlock()
		case len(fields) == 1 && fields[0] == "r":
			f.mu.Lock()
			took := slices.Clone(f.took)
			writes, short := f.writes, f.short
			f.took, f.writes, f.short = f.took[:0], 0, 0
			f.mu.Unlock()
			slices.Sort(took)
			q := func(p float64) float64 {
				if len(took) == 0 {
					return 0
				}
				return float64(took[int(float64(len(took)-1)*p)]) / 1000
			}
			var b bytes.Buffer
			fmt.Fprintf(&b, "%.2f %.2f %d %d\n", q(0.5), q(0.99), writes, short)
			out.Write(b.Bytes())
		}
	}
}
