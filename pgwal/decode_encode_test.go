package pgwal

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/freshetdb/freshet/change"
)

// jsonLines writes events as freshet tail does: transactions through a
// TxnJSONWriter, heartbeats as a line of their own. It also counts the
// fragments that carried Encoded bytes and those that carried Changes.
func jsonLines(t *testing.T, evs []change.Event) (out string, encoded, decoded int) {
	t.Helper()
	var b bytes.Buffer
	jw := change.NewTxnJSONWriter(&b)
	for _, ev := range evs {
		switch ev := ev.(type) {
		case *change.Txn:
			if len(ev.Encoded) > 0 && len(ev.Changes) > 0 {
				t.Fatalf("fragment %d of %v carries both Encoded and Changes", ev.Fragment, ev.CommitLSN)
			}
			if len(ev.Encoded) > 0 {
				encoded++
			}
			for _, c := range ev.Changes {
				if c.Op != change.OpRelation {
					decoded++
					break
				}
			}
			if err := jw.Write(ev); err != nil {
				t.Fatal(err)
			}
		case *change.Heartbeat:
			fmt.Fprintf(&b, "heartbeat %v %d\n", ev.LSN, ev.Seq)
		}
	}
	return b.String(), encoded, decoded
}

// With a StreamEncoder, a streamed transaction is encoded as it arrives
// and read back as bytes; what tail prints must be byte for byte what it
// prints from the same stream decoded at the commit, through
// subtransaction aborts, spills, restarts and heartbeats.
func TestDecodeStreamedEncoded(t *testing.T) {
	type streamCase struct {
		name   string
		opts   DecoderOptions
		msgs   [][]byte
		stream bool // holds a committed streamed transaction with changes
	}
	var cases []streamCase
	for _, c := range streamedCases() {
		cases = append(cases, streamCase{c.name, c.opts, c.msgs, c.name != "streamed heartbeats and a non-transactional message"})
	}
	rec, err := readRecording(filepath.Join("testdata", "pgoutput-v2.rec"))
	if err != nil {
		t.Fatal(err)
	}
	var recMsgs [][]byte
	for _, m := range rec {
		recMsgs = append(recMsgs, m.Data)
	}
	cases = append(cases,
		streamCase{"recording pgoutput-v2.rec", recordingOpts(2, ""), recMsgs, true},
		streamCase{"recording pgoutput-v2.rec, unspilled", DecoderOptions{HeartbeatPrefix: "freshet_hb"}, recMsgs, true})
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			decode := func(e StreamEncoder) []change.Event {
				opts := tt.opts
				opts.ProtoVersion = 2
				opts.SpillDir = t.TempDir()
				opts.StreamEncoder = e
				d := NewDecoder(opts)
				defer d.Close()
				evs := feed(t, d, tt.msgs...)
				if left := spillFiles(t, opts.SpillDir); len(left) != 0 {
					t.Errorf("spill files left after commit: %v", left)
				}
				return evs
			}
			want, wantEnc, _ := jsonLines(t, decode(nil))
			got, gotEnc, _ := jsonLines(t, decode(change.JSONEncoder{}))
			if wantEnc != 0 {
				t.Fatalf("without an encoder %d fragments carried Encoded bytes", wantEnc)
			}
			if tt.stream && gotEnc == 0 {
				t.Fatalf("with an encoder no fragment carried Encoded bytes")
			}
			if got != want {
				t.Errorf("printed from encoded records:\n%s\nwant (decoded at the commit):\n%s\n%s", got, want, firstDiff(got, want))
			}
		})
	}
}

// A StreamEncoder that keeps nothing (tail --format none) still decodes
// every change as it arrives: a malformed one fails there, not at the
// commit.
func TestDecodeStreamedEncodedErrors(t *testing.T) {
	s7 := enc{stream: true, xid: 700}
	d := NewDecoder(DecoderOptions{ProtoVersion: 2, SpillDir: t.TempDir(), StreamEncoder: nothing{}})
	defer d.Close()
	_, err := feedErr(d, encStreamStart(700, true), s7.relation(relT),
		s7.insert(16384, cols(txt("1"), null())))
	if err == nil {
		t.Fatal("a 2-column row of a 3-column relation was accepted")
	}
	if want := "tuple has 2 columns"; !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Errorf("error %q, want it to say %q", err, want)
	}
}

type nothing struct{}

func (nothing) AppendChange(dst []byte, _ *change.Change) []byte { return dst }
