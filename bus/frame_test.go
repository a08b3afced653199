package bus

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
)

func testRel() *change.Relation {
	return &change.Relation{OID: 16384, Schema: "public", Table: "tickets", ReplicaIdentity: 'd', Columns: []change.Column{
		{Name: "id", TypeOID: 20, TypeMod: -1, Key: true},
		{Name: "title", TypeOID: 25, TypeMod: -1},
		{Name: "price", TypeOID: 1700, TypeMod: 786436},
	}}
}

// txn builds a one-fragment transaction at lsn with n inserts.
func txn(lsn change.LSN, xid uint32, n int) *change.Txn {
	rel := testRel()
	t := &change.Txn{XID: xid, CommitLSN: lsn, EndLSN: lsn + 40, CommitTime: time.Unix(1700000000, 123000).UTC(), Last: true}
	t.Changes = append(t.Changes, change.Change{Op: change.OpRelation, Rel: rel})
	for i := range n {
		t.Changes = append(t.Changes, change.Change{Op: change.OpInsert, Rel: rel,
			New: change.Row{change.TextValue(string(rune('0' + i%10))), change.TextValue("t"), {Kind: change.Null}}})
	}
	return t
}

func TestFrameRoundTrip(t *testing.T) {
	rel := testRel()
	other := &change.Relation{OID: 16390, Schema: "s p", Table: `we"ird`, ReplicaIdentity: 'f', Columns: []change.Column{{Name: "k", TypeOID: 17, TypeMod: -1, Key: true, AttNum: 3}}}
	full := &change.Txn{XID: 4000000000, CommitLSN: 0x1_0000_0010, EndLSN: 0x1_0000_0040, CommitTime: time.Unix(1700000000, 999000).UTC(),
		Origin: "o1", OriginLSN: 77, Fragment: 2, Last: false, Changes: []change.Change{
			{Op: change.OpRelation, Rel: rel},
			{Op: change.OpInsert, Rel: rel, New: change.Row{change.TextValue("1"), change.TextValue("héllo\x00"), {Kind: change.Null}}},
			{Op: change.OpUpdate, Rel: rel, Old: change.Row{change.TextValue("1"), {Kind: change.Absent}, {Kind: change.Absent}},
				New: change.Row{change.TextValue("2"), {Kind: change.Unchanged}, change.TextValue("1.50")}, Changed: []bool{true, false, true}},
			{Op: change.OpDelete, Rel: other, Old: change.Row{{Kind: change.Binary, Data: []byte{0, 1, 2, 255}}}, OldIsRow: true},
			{Op: change.OpTruncate, Truncate: &change.Truncate{Rels: []*change.Relation{rel, other}, Cascade: true, RestartIdentity: true}},
			{Op: change.OpMessage, Message: &change.Message{LSN: 0x1_0000_0020, Transactional: true, Prefix: "app", Content: []byte("payload")}},
			{Op: change.OpInsert, Rel: rel, New: change.Row{change.TextValue(""), change.TextValue("x"), change.TextValue("0")}},
		}}
	m := &Message{Epoch: 42, Prev: Pos{LSN: 0x1_0000_0000, Frag: 1}, Events: []Event{
		{Txn: full, Offset: 9000},
	}}
	hbm := &Message{Epoch: 42, Prev: m.Pos(), Events: []Event{
		{Txn: txn(0x2_0000_0000, 5, 3)},
		{Beat: &change.Heartbeat{LSN: 0x2_0000_0100, Seq: 7, Written: time.Unix(1700000001, 5).UTC(), Arrived: time.Unix(1700000001, 9).UTC(),
			Now: time.Unix(1700000001, 3000).UTC()}},
	}}
	var rels Relations
	for _, in := range []*Message{m, hbm} {
		b := AppendMessage(nil, in)
		out, err := DecodeMessage(b, &rels)
		if err != nil {
			t.Fatalf("DecodeMessage: %v", err)
		}
		if !reflect.DeepEqual(normalize(in), normalize(out)) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", normalize(out), normalize(in))
		}
	}
	// Relations are interned: the same shape decodes to one pointer.
	a, _ := DecodeMessage(AppendMessage(nil, hbm), &rels)
	b, _ := DecodeMessage(AppendMessage(nil, hbm), &rels)
	if a.Events[0].Txn.Changes[1].Rel != b.Events[0].Txn.Changes[1].Rel {
		t.Fatalf("the same relation decoded from two messages is two pointers: the engine would cache each")
	}
	if m.MsgID() != "42:1/10:2" {
		t.Fatalf("MsgID = %q", m.MsgID())
	}
	if m.AckPos() != 0 || hbm.AckPos() != 0x2_0000_0100 {
		t.Fatalf("AckPos = %v, %v; want 0 (inside a transaction) and the heartbeat's", m.AckPos(), hbm.AckPos())
	}
}

// normalize makes empty and nil byte slices alike for comparison.
func normalize(m *Message) *Message {
	out := *m
	out.Events = nil
	for _, e := range m.Events {
		if e.Txn != nil {
			t := *e.Txn
			t.Changes = nil
			for _, c := range e.Txn.Changes {
				c.Old, c.New = normRow(c.Old), normRow(c.New)
				if c.Rel != nil {
					r := *c.Rel
					c.Rel = &r
				}
				t.Changes = append(t.Changes, c)
			}
			e.Txn = &t
		}
		out.Events = append(out.Events, e)
	}
	return &out
}

func normRow(r change.Row) change.Row {
	if r == nil {
		return nil
	}
	out := make(change.Row, len(r))
	for i, v := range r {
		if len(v.Data) == 0 {
			v.Data = nil
		}
		out[i] = v
	}
	return out
}

func TestFrameHostile(t *testing.T) {
	good := AppendMessage(nil, &Message{Epoch: 1, Events: []Event{{Txn: txn(100, 1, 2)}}})
	for i := range len(good) {
		if _, err := DecodeMessage(good[:i], nil); err == nil {
			t.Fatalf("DecodeMessage of the first %d of %d bytes succeeded", i, len(good))
		}
	}
	bad := [][]byte{nil, []byte("{}"), []byte("FB\x02"), append(append([]byte{}, good...), 0)}
	for _, b := range bad {
		if _, err := DecodeMessage(b, nil); !errors.Is(err, ErrFrame) {
			t.Fatalf("DecodeMessage(%q) = %v, want ErrFrame", b, err)
		}
	}
	// A huge count is refused without allocating it.
	huge := []byte{'F', 'B', 1, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}
	if _, err := DecodeMessage(huge, nil); !errors.Is(err, ErrFrame) {
		t.Fatalf("DecodeMessage(huge count) = %v, want ErrFrame", err)
	}
	// Events out of order are refused.
	ooo := AppendMessage(nil, &Message{Epoch: 1, Events: []Event{{Txn: txn(200, 1, 1)}, {Txn: txn(100, 2, 1)}}})
	if _, err := DecodeMessage(ooo, nil); !errors.Is(err, ErrFrame) {
		t.Fatalf("DecodeMessage(out of order) = %v, want ErrFrame", err)
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add(AppendMessage(nil, &Message{Epoch: 1, Events: []Event{{Txn: txn(100, 1, 2)}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b, nil)
		if err != nil {
			return
		}
		again, err := DecodeMessage(AppendMessage(nil, m), nil)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		if !reflect.DeepEqual(normalize(m), normalize(again)) {
			t.Fatalf("re-encoding changed the message")
		}
	})
}
