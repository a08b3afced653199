package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/freshetdb/freshet/change"
)

// scriptedSource hands out a fixed list of events, then blocks; it records
// acknowledgements. It stands in for the reader to pin the tailer's
// write-sync-ack ordering, not for PostgreSQL.
type scriptedSource struct {
	events []change.Event
	mu     sync.Mutex
	acks   []change.LSN
	// durable is the highest position the output had synced when each ack came.
	durable func() change.LSN
	bad     []string
	txnLSNs []change.LSN
}

func (s *scriptedSource) Next(ctx context.Context) (change.Event, error) {
	s.mu.Lock()
	if len(s.events) > 0 {
		ev := s.events[0]
		s.events = s.events[1:]
		s.mu.Unlock()
		return ev, nil
	}
	s.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *scriptedSource) Ack(l change.LSN) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A heartbeat's position may be acked once every transaction before
	// it is durable.
	need := change.LSN(0)
	for _, tl := range s.txnLSNs {
		if tl <= l && tl > need {
			need = tl
		}
	}
	if d := s.durable(); need > d {
		s.bad = append(s.bad, fmt.Sprintf("ack %v before it was synced (durable %v)", l, d))
	}
	if n := len(s.acks); n > 0 && l < s.acks[n-1] {
		s.bad = append(s.bad, fmt.Sprintf("ack %v went back from %v", l, s.acks[n-1]))
	}
	s.acks = append(s.acks, l)
}

// lsnEncoder writes each finished transaction's LSN on a line.
type lsnEncoder struct {
	w       io.Writer
	written change.LSN // last written, not necessarily synced
}

func (e *lsnEncoder) Write(f *change.Txn) error {
	if f.Last {
		e.written = f.CommitLSN
		_, err := fmt.Fprintf(e.w, "%v\n", f.CommitLSN)
		return err
	}
	return nil
}

func TestTailerAcksOnlySyncedTransactions(t *testing.T) {
	var events []change.Event
	lsn := change.LSN(100)
	for i := 0; i < 3000; i++ {
		lsn += 10
		if i%500 == 7 {
			// a big transaction in three fragments
			for f := 0; f < 3; f++ {
				events = append(events, &change.Txn{XID: uint32(i), CommitLSN: lsn, EndLSN: lsn + 5, Fragment: f, Last: f == 2})
			}
			continue
		}
		if i%100 == 3 {
			events = append(events, &change.Heartbeat{LSN: lsn})
			continue
		}
		events = append(events, &change.Txn{XID: uint32(i), CommitLSN: lsn, EndLSN: lsn + 5, Last: true})
	}
	until := lsn - 40
	var (
		mu      sync.Mutex
		durable change.LSN
		syncs   int
	)
	var txnLSNs []change.LSN
	for _, ev := range events {
		if tx, ok := ev.(*change.Txn); ok && tx.Last && tx.CommitLSN > 130 {
			txnLSNs = append(txnLSNs, tx.CommitLSN)
		}
	}
	src := &scriptedSource{events: events, txnLSNs: txnLSNs, durable: func() change.LSN { mu.Lock(); defer mu.Unlock(); return durable }}
	var sink lineSink
	out := &countingWriter{w: &sink}
	w := bufio.NewWriterSize(out, 4096)
	enc := &lsnEncoder{w: w}
	tr := &tailer{
		format: "json", out: out, w: w, enc: enc, until: until, after: 130,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		sync: func() error {
			mu.Lock()
			defer mu.Unlock()
			syncs++
			durable = sink.last // what reached the "disk"
			return nil
		},
	}
	if err := tr.run(context.Background(), src); err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, b := range src.bad {
		t.Error(b)
	}
	if got := src.acks[len(src.acks)-1]; got != until {
		t.Errorf("last ack = %v, want %v (--until)", got, until)
	}
	if sink.first != 150 {
		t.Errorf("first written = %v, want 150 (at or before 130, the output file's last, dropped; 140 is a heartbeat)", sink.first)
	}
	if sink.last != until {
		t.Errorf("last written = %v, want %v: nothing past --until", sink.last, until)
	}
	t.Logf("%d syncs for %d events", syncs, len(events))
}

// lineSink remembers the first and last LSN lines written to it.
type lineSink struct {
	partial     []byte
	first, last change.LSN
}

func (s *lineSink) Write(p []byte) (int, error) {
	for _, c := range p {
		if c != '\n' {
			s.partial = append(s.partial, c)
			continue
		}
		l, err := change.ParseLSN(string(s.partial))
		if err != nil {
			return 0, err
		}
		if s.first == 0 {
			s.first = l
		}
		s.last = l
		s.partial = s.partial[:0]
	}
	return len(p), nil
}
