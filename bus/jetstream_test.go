package bus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runBus starts an embedded JetStream server on a free loopback port with
// its store in dir, fsyncing every write (sync_interval: always).
func runBus(t testing.TB, dir string, port int) *server.Server {
	t.Helper()
	return startBus(t, dir, port, true)
}

// runBusOpts is runBus on a free port, fsyncing every write or not.
func runBusOpts(t testing.TB, dir string, sync bool) *server.Server {
	t.Helper()
	return startBus(t, dir, 0, sync)
}

func startBus(t testing.TB, dir string, port int, sync bool) *server.Server {
	t.Helper()
	if port == 0 {
		port = -1
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir,
		SyncAlways: sync, NoSigs: true, NoLog: true, MaxPayload: 8 << 20})
	if err != nil {
		t.Fatalf("start the bus: %v", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatalf("the bus did not start")
	}
	t.Cleanup(s.Shutdown)
	return s
}

func busConn(t testing.TB, s *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to the bus: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func testStream(t testing.TB, js jetstream.JetStream) jetstream.Stream {
	t.Helper()
	st, err := EnsureStream(context.Background(), js, DefaultStreamSettings(), "7000", "app", "freshet", "pub")
	if err != nil {
		t.Fatalf("EnsureStream: %v", err)
	}
	return st
}

// publishMsg publishes m as the relay does.
func publishMsg(ctx context.Context, js jetstream.JetStream, m *Message, expect string) (*jetstream.PubAck, error) {
	msg := nats.NewMsg(Subject("7000", "freshet"))
	msg.Data = AppendMessage(nil, m)
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(m.MsgID())}
	if expect != "" {
		opts = append(opts, jetstream.WithExpectLastMsgID(expect))
	} else {
		opts = append(opts, jetstream.WithExpectLastSequence(0))
	}
	return js.PublishMsg(ctx, msg, opts...)
}

func TestBusDedupe(t *testing.T) {
	s := runBus(t, t.TempDir(), 0)
	_, js := busConn(t, s)
	st := testStream(t, js)
	ctx := context.Background()
	m1 := msg(1, Pos{}, frag(10, 0, true))
	if _, err := publishMsg(ctx, js, m1, ""); err != nil {
		t.Fatal(err)
	}
	// The first message again with its expected last sequence 0: JetStream
	// checks the expected sequence before the Msg-Id, so this retry is
	// refused, not acknowledged as a duplicate (a relay then starts its
	// session again and finds its message as the stream's last).
	if _, err := publishMsg(ctx, js, m1, ""); err == nil || Fenced(err) {
		t.Fatalf("republish of the first message: %v, want wrong last sequence", err)
	}
	// Without an expectation it is a duplicate, not stored.
	raw := nats.NewMsg(Subject("7000", "freshet"))
	raw.Data = AppendMessage(nil, m1)
	ack, err := js.PublishMsg(ctx, raw, jetstream.WithMsgID(m1.MsgID()))
	if err != nil || !ack.Duplicate {
		t.Fatalf("republish: %+v %v, want a duplicate", ack, err)
	}
	m2 := msg(1, m1.Pos(), frag(20, 0, true))
	if _, err := publishMsg(ctx, js, m2, m1.MsgID()); err != nil {
		t.Fatal(err)
	}
	// A retry of m2 whose expected last message is m1, though m2 is now
	// the last: JetStream checks the Msg-Id before the expected last one,
	// so the retry is a duplicate, not a fencing error.
	ack, err = publishMsg(ctx, js, m2, m1.MsgID())
	if err != nil || !ack.Duplicate {
		t.Fatalf("retry of the last message: ack %+v, err %v; want a duplicate", ack, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Fatalf("stream holds %d messages, want 2", info.State.Msgs)
	}
}

func TestBusFencesSecondPublisher(t *testing.T) {
	s := runBus(t, t.TempDir(), 0)
	_, js := busConn(t, s)
	_, js2 := busConn(t, s)
	testStream(t, js)
	ctx := context.Background()
	m1 := msg(1, Pos{}, frag(10, 0, true))
	if _, err := publishMsg(ctx, js, m1, ""); err != nil {
		t.Fatal(err)
	}
	m2 := msg(1, m1.Pos(), frag(20, 0, true))
	if _, err := publishMsg(ctx, js, m2, m1.MsgID()); err != nil {
		t.Fatal(err)
	}
	// A second relay that read the stream when m1 was its end publishes
	// its own next message: refused.
	z := msg(1, m1.Pos(), frag(15, 0, true))
	_, err := publishMsg(ctx, js2, z, m1.MsgID())
	if !Fenced(err) {
		t.Fatalf("second publisher's message: err %v, want wrong last msg id", err)
	}
	// And on an empty stream's first message two relays cannot both win.
	if _, err := publishMsg(ctx, js2, msg(1, Pos{}, frag(5, 0, true)), ""); err == nil {
		t.Fatalf("a first message was stored on a stream that is not empty")
	}
}

func TestBusRestartKeepsAcknowledged(t *testing.T) {
	dir := t.TempDir()
	s := runBus(t, dir, 0)
	_, js := busConn(t, s)
	testStream(t, js)
	ctx := context.Background()
	var prev Pos
	expect := ""
	var sent []*Message
	for i := range 50 {
		m := msg(1, prev, frag(change.LSN(10*(i+1)), 0, true))
		if _, err := publishMsg(ctx, js, m, expect); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, m)
		prev, expect = m.Pos(), m.MsgID()
	}
	s.Shutdown()
	s.WaitForShutdown()

	s2 := runBus(t, dir, 0)
	_, js2 := busConn(t, s2)
	st, err := js2.Stream(ctx, StreamName("7000", "freshet"))
	if err != nil {
		t.Fatalf("stream after restart: %v", err)
	}
	info, _ := st.Info(ctx)
	if info.State.Msgs != 50 {
		t.Fatalf("after a restart the stream holds %d messages, want the 50 acknowledged", info.State.Msgs)
	}
	// Dedupe survives the restart (the window is rebuilt from the store).
	ack, err := publishMsg(ctx, js2, sent[49], sent[48].MsgID())
	if err != nil || !ack.Duplicate {
		t.Fatalf("republish after restart: %+v %v, want a duplicate", ack, err)
	}
	// An ordered consumer from a sequence sees exactly the tail, in order.
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 41})
	if err != nil {
		t.Fatal(err)
	}
	var c chain
	for i := 40; i < 50; i++ {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		dm, err := DecodeMessage(m.Data(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.accept(dm); err != nil {
			t.Fatal(err)
		}
		if dm.Pos() != sent[i].Pos() {
			t.Fatalf("message %d at %v, want %v", i, dm.Pos(), sent[i].Pos())
		}
	}
}

func TestSourceOnBus(t *testing.T) {
	s := runBus(t, t.TempDir(), 0)
	nc, js := busConn(t, s)
	testStream(t, js)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m1 := msg(1, Pos{}, frag(10, 0, true), beat(12))
	m2 := msg(1, m1.Pos(), frag(20, 0, false))
	m3 := msg(1, m2.Pos(), frag(20, 1, true))
	m4 := msg(1, Pos{LSN: 99}, frag(30, 0, true)) // a gap
	expect := ""
	for _, m := range []*Message{m1, m2, m3} {
		if _, err := publishMsg(ctx, js, m, expect); err != nil {
			t.Fatal(err)
		}
		expect = m.MsgID()
	}
	src, err := OpenSource(ctx, SourceConfig{Conn: nc, SystemID: "7000", Database: "app", Slot: "freshet", Replay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if src.Publication() != "pub" {
		t.Fatalf("Publication = %q, want the relay's, pub", src.Publication())
	}
	var got []string
	for range 4 {
		ev, err := src.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(ev.Position()))
	}
	if fmt.Sprint(got) != "[0/A 0/C 0/14 0/14]" {
		t.Fatalf("events %v", got)
	}
	if _, err := publishMsg(ctx, js, m4, expect); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Next(ctx); !errors.Is(err, ErrGap) {
		t.Fatalf("after a gap: %v, want ErrGap", err)
	}
	// A source for another database is refused.
	if _, err := OpenSource(ctx, SourceConfig{Conn: nc, SystemID: "7000", Database: "other", Slot: "freshet"}); err == nil {
		t.Fatalf("a source for another database opened the stream")
	}
	if _, err := OpenSource(ctx, SourceConfig{Conn: nc, SystemID: "7001", Database: "app", Slot: "freshet"}); err == nil {
		t.Fatalf("a source opened a stream that does not exist")
	}
}

// Connect waits for a bus that is not up yet (a relay started beside its
// bus, or a bus restarting while the machine is busy) instead of giving
// up at once: the clean-clone CI saw a relay exit "no servers available"
// on a loaded machine and the cluster it fed stop moving. A malformed
// address is refused at once, and an ended context ends the wait.
func TestConnectWaitsForTheBus(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	done := make(chan error, 1)
	go func() {
		nc, err := Connect(context.Background(), url, "test")
		if err == nil {
			nc.Close()
		}
		done <- err
	}()
	time.Sleep(time.Second) // nothing listens yet
	select {
	case err := <-done:
		t.Fatalf("Connect returned before the bus started: %v", err)
	default:
	}
	runBus(t, t.TempDir(), port)
	if err := <-done; err != nil {
		t.Fatalf("Connect: %v, want a connection once the bus is up", err)
	}

	if _, err := Connect(context.Background(), "http://127.0.0.1:1", "test"); err == nil {
		t.Fatalf("Connect accepted an http:// bus address")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := "nats://" + ln.Addr().String()
	ln.Close()
	if _, err := Connect(ctx, nobody, "test"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Connect with an ended context = %v, want the context's error", err)
	}
}
