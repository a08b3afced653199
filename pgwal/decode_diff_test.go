package pgwal

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
	"github.com/jackc/pglogrepl"
)

// The differential tests decode real pgoutput streams with our Decoder and
// with github.com/jackc/pglogrepl and compare the results field by field.
// Streams recorded from PostgreSQL are kept under testdata/ as
// pgoutput-v*.rec (one message a line: WAL position and hex bytes) with
// our decoding in pgoutput-v*.golden, so TestDecodeRecordings runs without
// a server; TestDecodeDifferential records fresh ones (and rewrites the
// files with -rewrite-decode).

var rewriteDecode = flag.Bool("rewrite-decode", false, "rewrite the decoder's recordings and golden files under testdata/")

// recMsg is one recorded pgoutput message.
type recMsg struct {
	LSN  change.LSN
	Data []byte
}

func writeRecording(path string, msgs []recMsg) error {
	var b bytes.Buffer
	for _, m := range msgs {
		fmt.Fprintf(&b, "%v %s\n", m.LSN, hex.EncodeToString(m.Data))
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func readRecording(path string) ([]recMsg, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var msgs []recMsg
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		lsn, h, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want \"LSN hex\"", path, n)
		}
		l, err := change.ParseLSN(lsn)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		data, err := hex.DecodeString(h)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		msgs = append(msgs, recMsg{LSN: l, Data: data})
	}
	return msgs, sc.Err()
}

// decodeAll runs our Decoder over a recording.
func decodeAll(opts DecoderOptions, msgs []recMsg) ([]change.Event, error) {
	d := NewDecoder(opts)
	defer d.Close()
	var evs []change.Event
	for i, m := range msgs {
		if err := d.Decode(m.Data, m.LSN); err != nil {
			return evs, fmt.Errorf("message %d: %w", i, err)
		}
		for {
			ev, err := d.Next()
			if err != nil {
				return evs, fmt.Errorf("message %d: %w", i, err)
			}
			if ev == nil {
				break
			}
			evs = append(evs, ev)
		}
	}
	return evs, nil
}

// wholeTxns joins fragments into whole transactions and drops OpRelation
// changes, checking on the way that fragments are well formed and that
// every change's relation was emitted (as OpRelation) before it.
func wholeTxns(t *testing.T, evs []change.Event) []change.Event {
	t.Helper()
	var out []change.Event
	var cur *change.Txn
	emitted := map[uint32]*change.Relation{}
	checkRel := func(r *change.Relation) {
		if e := emitted[r.OID]; e == nil || !sameRelation(e, r) {
			t.Errorf("change on %s (OID %d) before an OpRelation with its shape", r.QualifiedName(), r.OID)
		}
	}
	var last change.LSN
	for _, ev := range evs {
		if ev.Position() < last {
			t.Errorf("position %v after %v: positions went backwards", ev.Position(), last)
		}
		switch ev := ev.(type) {
		case *change.Heartbeat:
			if cur != nil {
				t.Errorf("heartbeat inside transaction %d", cur.XID)
			}
			last = ev.Position()
			out = append(out, ev)
		case *change.Txn:
			if cur == nil {
				if ev.Fragment != 0 {
					t.Errorf("transaction %d starts with fragment %d", ev.XID, ev.Fragment)
				}
				c := *ev
				c.Changes = nil
				cur = &c
			} else {
				if ev.Fragment != cur.Fragment+1 || ev.XID != cur.XID || ev.CommitLSN != cur.CommitLSN || !ev.CommitTime.Equal(cur.CommitTime) {
					t.Errorf("fragment %d of xid %d at %v follows fragment %d of xid %d at %v", ev.Fragment, ev.XID, ev.CommitLSN, cur.Fragment, cur.XID, cur.CommitLSN)
				}
				cur.Fragment = ev.Fragment
			}
			for _, c := range ev.Changes {
				switch c.Op {
				case change.OpRelation:
					emitted[c.Rel.OID] = c.Rel
					continue
				case change.OpInsert, change.OpUpdate, change.OpDelete:
					checkRel(c.Rel)
				case change.OpTruncate:
					for _, r := range c.Truncate.Rels {
						checkRel(r)
					}
				}
				cur.Changes = append(cur.Changes, c)
			}
			if ev.Last {
				cur.EndLSN, cur.Last, cur.Fragment = ev.EndLSN, true, 0
				last = cur.Position()
				out = append(out, cur)
				cur = nil
			}
		}
	}
	if cur != nil {
		t.Errorf("transaction %d has no Last fragment", cur.XID)
	}
	return out
}

// refDecode decodes a recording with pglogrepl and builds, from its parsed
// messages, the whole transactions and heartbeats our Decoder must produce.
// It keeps whole streamed transactions in memory: a reference, not a
// design.
func refDecode(msgs []recMsg, hbPrefix string) ([]change.Event, error) {
	type item struct {
		m      pglogrepl.Message
		subxid uint32
		lsn    change.LSN
	}
	var (
		out      []change.Event
		rels     = map[uint32]*change.Relation{}
		streams  = map[uint32][]item{}
		aborted  = map[uint32]map[uint32]bool{}
		origins  = map[uint32]string{}
		inStream bool
		streamX  uint32
		txn      *change.Txn
		hbs      []*change.Heartbeat
	)
	row := func(td *pglogrepl.TupleData) change.Row {
		r := make(change.Row, len(td.Columns))
		for i, c := range td.Columns {
			switch c.DataType {
			case 'n':
				r[i].Kind = change.Null
			case 'u':
				r[i].Kind = change.Unchanged
			case 't':
				r[i] = change.Value{Kind: change.Text, Data: c.Data}
			case 'b':
				r[i] = change.Value{Kind: change.Binary, Data: c.Data}
			}
		}
		return r
	}
	// apply adds one change message to txn; local holds a streamed
	// transaction's own relations.
	var apply func(m pglogrepl.Message, local map[uint32]*change.Relation) error
	relOf := func(oid uint32, local map[uint32]*change.Relation) (*change.Relation, error) {
		if r := local[oid]; r != nil {
			return r, nil
		}
		if r := rels[oid]; r != nil {
			return r, nil
		}
		return nil, fmt.Errorf("pglogrepl: relation %d unknown", oid)
	}
	convRel := func(m *pglogrepl.RelationMessage) *change.Relation {
		r := &change.Relation{OID: m.RelationID, Schema: m.Namespace, Table: m.RelationName, ReplicaIdentity: m.ReplicaIdentity}
		for _, c := range m.Columns {
			r.Columns = append(r.Columns, change.Column{Name: c.Name, TypeOID: c.DataType, TypeMod: c.TypeModifier, Key: c.Flags&1 != 0})
		}
		return r
	}
	message := func(m *pglogrepl.LogicalDecodingMessage) {
		if hbPrefix != "" && m.Prefix == hbPrefix {
			hb, ok := parseHeartbeat(change.LSN(m.LSN), m.Content)
			if !ok {
				return
			}
			if m.Transactional {
				hbs = append(hbs, hb)
			} else {
				out = append(out, hb)
			}
			return
		}
		c := change.Change{Op: change.OpMessage, Message: &change.Message{LSN: change.LSN(m.LSN), Transactional: m.Transactional, Prefix: m.Prefix, Content: m.Content}}
		if m.Transactional {
			txn.Changes = append(txn.Changes, c)
			return
		}
		out = append(out, &change.Txn{CommitLSN: change.LSN(m.LSN), Last: true, Changes: []change.Change{c}})
	}
	apply = func(m pglogrepl.Message, local map[uint32]*change.Relation) error {
		switch m := m.(type) {
		case *pglogrepl.RelationMessageV2:
			r := convRel(&m.RelationMessage)
			if local != nil {
				local[r.OID] = r
			} else {
				rels[r.OID] = r
			}
		case *pglogrepl.InsertMessageV2:
			r, err := relOf(m.RelationID, local)
			if err != nil {
				return err
			}
			txn.Changes = append(txn.Changes, change.Change{Op: change.OpInsert, Rel: r, New: row(m.Tuple)})
		case *pglogrepl.UpdateMessageV2:
			r, err := relOf(m.RelationID, local)
			if err != nil {
				return err
			}
			c := change.Change{Op: change.OpUpdate, Rel: r, New: row(m.NewTuple)}
			if m.OldTuple != nil {
				c.Old = row(m.OldTuple)
				c.OldIsRow = m.OldTupleType == 'O'
			}
			if m.OldTupleType == 'K' {
				for i := range c.Old {
					if !r.Columns[i].Key && c.Old[i].Kind == change.Null {
						c.Old[i].Kind = change.Absent
					}
				}
			}
			if c.Old != nil {
				for i := range c.New {
					if c.New[i].Kind == change.Unchanged && c.Old[i].Kind != change.Absent && c.Old[i].Kind != change.Unchanged {
						c.New[i] = c.Old[i]
					}
				}
			}
			if c.OldIsRow {
				c.Changed = make([]bool, len(c.New))
				for i := range c.New {
					c.Changed[i] = c.New[i].Kind != change.Unchanged && (c.New[i].Kind != c.Old[i].Kind || !bytes.Equal(c.New[i].Data, c.Old[i].Data))
				}
			}
			txn.Changes = append(txn.Changes, c)
		case *pglogrepl.DeleteMessageV2:
			r, err := relOf(m.RelationID, local)
			if err != nil {
				return err
			}
			c := change.Change{Op: change.OpDelete, Rel: r, Old: row(m.OldTuple), OldIsRow: m.OldTupleType == 'O'}
			if m.OldTupleType == 'K' {
				for i := range c.Old {
					if !r.Columns[i].Key && c.Old[i].Kind == change.Null {
						c.Old[i].Kind = change.Absent
					}
				}
			}
			txn.Changes = append(txn.Changes, c)
		case *pglogrepl.TruncateMessageV2:
			tr := &change.Truncate{Cascade: m.Option&pglogrepl.TruncateOptionCascade != 0, RestartIdentity: m.Option&pglogrepl.TruncateOptionRestartIdentity != 0}
			for _, oid := range m.RelationIDs {
				r, err := relOf(oid, local)
				if err != nil {
					return err
				}
				tr.Rels = append(tr.Rels, r)
			}
			txn.Changes = append(txn.Changes, change.Change{Op: change.OpTruncate, Truncate: tr})
		case *pglogrepl.LogicalDecodingMessageV2:
			message(&m.LogicalDecodingMessage)
		case *pglogrepl.TypeMessageV2, *pglogrepl.OriginMessage:
		default:
			return fmt.Errorf("pglogrepl: unexpected %T in a transaction", m)
		}
		return nil
	}
	finish := func() {
		if len(txn.Changes) > 0 || len(hbs) == 0 {
			out = append(out, txn)
		}
		for _, hb := range hbs {
			hb.LSN = txn.CommitLSN
			out = append(out, hb)
		}
		txn, hbs = nil, nil
	}
	for i, rm := range msgs {
		m, err := pglogrepl.ParseV2(rm.Data, inStream)
		if err != nil {
			return out, fmt.Errorf("pglogrepl: message %d: %w", i, err)
		}
		switch m := m.(type) {
		case *pglogrepl.BeginMessage:
			txn = &change.Txn{XID: m.Xid, CommitLSN: change.LSN(m.FinalLSN), CommitTime: m.CommitTime.UTC(), Last: true}
		case *pglogrepl.OriginMessage:
			if inStream {
				origins[streamX] = m.Name
			} else {
				txn.Origin, txn.OriginLSN = m.Name, change.LSN(m.CommitLSN)
			}
		case *pglogrepl.CommitMessage:
			txn.CommitLSN, txn.EndLSN, txn.CommitTime = change.LSN(m.CommitLSN), change.LSN(m.TransactionEndLSN), m.CommitTime.UTC()
			finish()
		case *pglogrepl.StreamStartMessageV2:
			if m.FirstSegment == 1 {
				streams[m.Xid] = nil
				delete(aborted, m.Xid)
			}
			inStream, streamX = true, m.Xid
		case *pglogrepl.StreamStopMessageV2:
			inStream = false
		case *pglogrepl.StreamAbortMessageV2:
			if m.SubXid == m.Xid {
				delete(streams, m.Xid)
				continue
			}
			if aborted[m.Xid] == nil {
				aborted[m.Xid] = map[uint32]bool{}
			}
			aborted[m.Xid][m.SubXid] = true
		case *pglogrepl.StreamCommitMessageV2:
			txn = &change.Txn{XID: m.Xid, CommitLSN: change.LSN(m.CommitLSN), EndLSN: change.LSN(m.TransactionEndLSN), CommitTime: m.CommitTime.UTC(), Origin: origins[m.Xid], Last: true}
			local := map[uint32]*change.Relation{}
			for _, it := range streams[m.Xid] {
				if aborted[m.Xid][it.subxid] {
					continue
				}
				if err := apply(it.m, local); err != nil {
					return out, err
				}
			}
			for oid, r := range local {
				rels[oid] = r
			}
			delete(streams, m.Xid)
			finish()
		case *pglogrepl.LogicalDecodingMessageV2:
			if !m.Transactional {
				message(&m.LogicalDecodingMessage)
				continue
			}
			if inStream {
				streams[streamX] = append(streams[streamX], item{m: m, subxid: m.Xid, lsn: rm.LSN})
				continue
			}
			message(&m.LogicalDecodingMessage)
		default:
			if inStream {
				var sub uint32
				switch m := m.(type) {
				case *pglogrepl.RelationMessageV2:
					sub = m.Xid
				case *pglogrepl.TypeMessageV2:
					sub = m.Xid
				case *pglogrepl.InsertMessageV2:
					sub = m.Xid
				case *pglogrepl.UpdateMessageV2:
					sub = m.Xid
				case *pglogrepl.DeleteMessageV2:
					sub = m.Xid
				case *pglogrepl.TruncateMessageV2:
					sub = m.Xid
				}
				streams[streamX] = append(streams[streamX], item{m: m, subxid: sub, lsn: rm.LSN})
				continue
			}
			if txn == nil {
				if err := apply(m, nil); err != nil {
					return out, err
				}
				continue
			}
			if err := apply(m, nil); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// renderRels prints the full shape of every relation changes refer to, so
// comparisons cover relation fields too.
func renderRels(evs []change.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		tx, ok := ev.(*change.Txn)
		if !ok {
			continue
		}
		for _, c := range tx.Changes {
			var rs []*change.Relation
			if c.Rel != nil {
				rs = append(rs, c.Rel)
			}
			if c.Truncate != nil {
				rs = append(rs, c.Truncate.Rels...)
			}
			for _, r := range rs {
				b.WriteString(renderChange(&change.Change{Op: change.OpRelation, Rel: r}))
				b.WriteByte('\n')
			}
		}
	}
	return b.String()
}

// compareDecoders decodes msgs with both decoders and reports differences.
func compareDecoders(t *testing.T, msgs []recMsg, opts DecoderOptions) []change.Event {
	t.Helper()
	ours, err := decodeAll(opts, msgs)
	if err != nil {
		t.Fatalf("our decoder: %v", err)
	}
	ref, err := refDecode(msgs, opts.HeartbeatPrefix)
	if err != nil {
		t.Fatalf("reference: %v", err)
	}
	whole := wholeTxns(t, ours)
	if got, want := render(whole), render(ref); got != want {
		t.Errorf("our decoding differs from pglogrepl's:\n%s", firstDiff(got, want))
	}
	if got, want := renderRels(whole), renderRels(ref); got != want {
		t.Errorf("relations of changes differ from pglogrepl's:\n%s", firstDiff(got, want))
	}
	return ours
}

// firstDiff shows the first differing line of two renderings with context.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n got: %s\nwant: %s", i+1, gl, wl)
		}
	}
	return "(no difference)"
}

// recordingOpts are the options recordings are decoded with: small
// fragments and memory so that fragmenting and spilling are exercised.
func recordingOpts(proto int, dir string) DecoderOptions {
	return DecoderOptions{ProtoVersion: proto, HeartbeatPrefix: "freshet_hb", FragmentChanges: 100, MemoryLimit: 16 << 10, SpillDir: dir}
}

func TestDecodeRecordings(t *testing.T) {
	for _, proto := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", proto), func(t *testing.T) {
			path := filepath.Join("testdata", fmt.Sprintf("pgoutput-v%d.rec", proto))
			msgs, err := readRecording(path)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			evs := compareDecoders(t, msgs, recordingOpts(proto, dir))
			golden := strings.TrimSuffix(path, ".rec") + ".golden"
			got := render(evs)
			if *rewriteDecode {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("decoding of %s differs from %s (rewrite with -rewrite-decode if intended):\n%s", path, golden, firstDiff(got, string(want)))
			}
			if left := spillFiles(t, dir); len(left) != 0 {
				t.Errorf("spill files left: %v", left)
			}
		})
	}
}
