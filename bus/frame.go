package bus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/freshetdb/freshet/change"
)

// A bus message carries one or more events of the change stream in commit
// order: whole small transactions and heartbeats batched together, or
// fragments of a large transaction. It is self-describing: every relation
// a change uses travels with it, so a replica can start at any message.
// Values are kept exactly (text or binary form, Unchanged TOAST values,
// absent key-only columns).
//
// The encoding is binary, little work to write and read, and versioned by
// its first bytes ("FB", version 1). Integers are varints; strings and
// byte strings are a length and the bytes. docs/scale-out.md describes the
// layout.
const (
	frameMagic0   = 'F'
	frameMagic1   = 'B'
	frameVersion  = 2 // 2: a heartbeat carries the database clock (change.Heartbeat.Now)
	eventTxn      = 1
	eventBeat     = 2
	maxFrameItems = 1 << 24 // bounds every count read, so a hostile frame cannot ask for huge slices
)

// Pos is a position in the bus's order: a commit LSN (or a heartbeat's
// LSN) and the fragment within the transaction. Positions of successive
// events strictly increase.
type Pos struct {
	LSN  change.LSN
	Frag int
}

// Less reports whether p comes before q.
func (p Pos) Less(q Pos) bool { return p.LSN < q.LSN || p.LSN == q.LSN && p.Frag < q.Frag }

// IsZero reports whether p is the zero position (nothing before).
func (p Pos) IsZero() bool { return p.LSN == 0 && p.Frag == 0 }

// String returns "LSN/frag".
func (p Pos) String() string { return fmt.Sprintf("%s#%d", p.LSN, p.Frag) }

// Event is one event of a message, as the relay publishes it.
type Event struct {
	Txn  *change.Txn       // a transaction fragment, or
	Beat *change.Heartbeat // a heartbeat
	// Offset is, for a fragment, how many changes other than relations
	// came in the transaction's earlier fragments: what lets a restarted
	// relay continue a transaction cut off on the bus exactly where it
	// stopped, whatever the new run's fragment boundaries.
	Offset int
}

// Pos returns the event's position.
func (e *Event) Pos() Pos {
	if e.Txn != nil {
		return Pos{LSN: e.Txn.CommitLSN, Frag: e.Txn.Fragment}
	}
	return Pos{LSN: e.Beat.LSN}
}

// boundary reports whether the event starts at a transaction boundary: a
// heartbeat or a transaction's first fragment.
func (e *Event) boundary() bool { return e.Txn == nil || e.Txn.Fragment == 0 }

// Message is one bus message: its epoch, the position of the message
// before it in the epoch (the chain every consumer checks), and its
// events.
type Message struct {
	Epoch  uint64
	Prev   Pos
	Events []Event
}

// Pos returns the position of the message's last event.
func (m *Message) Pos() Pos { return m.Events[len(m.Events)-1].Pos() }

// MsgID is the Nats-Msg-Id of the message: its epoch and last position.
// JetStream drops a message whose id it has seen within its duplicates
// window.
func (m *Message) MsgID() string { return msgID(m.Epoch, m.Pos()) }

func msgID(epoch uint64, p Pos) string {
	return fmt.Sprintf("%d:%s:%d", epoch, p.LSN, p.Frag)
}

// AckPos returns the position a relay may acknowledge to the slot once the
// message is stored: the last event after which no transaction is open,
// or 0 when every event is inside one transaction that goes on.
func (m *Message) AckPos() change.LSN {
	var ack change.LSN
	for i := range m.Events {
		e := &m.Events[i]
		switch {
		case e.Beat != nil:
			ack = e.Beat.LSN
		case e.Txn.Last:
			ack = e.Txn.CommitLSN
		}
	}
	return ack
}

// AppendMessage appends m's encoding to dst.
func AppendMessage(dst []byte, m *Message) []byte {
	dst = appendHeader(dst, m.Epoch, m.Prev, len(m.Events))
	for i := range m.Events {
		dst = appendEvent(dst, &m.Events[i])
	}
	return dst
}

// appendHeader appends what comes before a message's events.
func appendHeader(dst []byte, epoch uint64, prev Pos, n int) []byte {
	dst = append(dst, frameMagic0, frameMagic1, frameVersion)
	dst = binary.AppendUvarint(dst, epoch)
	dst = appendPos(dst, prev)
	return binary.AppendUvarint(dst, uint64(n))
}

func appendPos(dst []byte, p Pos) []byte {
	dst = binary.AppendUvarint(dst, uint64(p.LSN))
	return binary.AppendUvarint(dst, uint64(p.Frag))
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendTime(dst []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	return binary.AppendVarint(dst, t.UnixNano())
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func appendEvent(dst []byte, e *Event) []byte {
	if e.Beat != nil {
		hb := e.Beat
		dst = append(dst, eventBeat)
		dst = binary.AppendUvarint(dst, uint64(hb.LSN))
		dst = binary.AppendUvarint(dst, hb.Seq)
		dst = appendTime(dst, hb.Written)
		dst = appendTime(dst, hb.Arrived)
		return appendTime(dst, hb.Now)
	}
	t := e.Txn
	dst = append(dst, eventTxn)
	dst = binary.AppendUvarint(dst, uint64(t.XID))
	dst = binary.AppendUvarint(dst, uint64(t.CommitLSN))
	dst = binary.AppendUvarint(dst, uint64(t.EndLSN))
	dst = appendTime(dst, t.CommitTime)
	dst = appendString(dst, t.Origin)
	dst = binary.AppendUvarint(dst, uint64(t.OriginLSN))
	dst = binary.AppendUvarint(dst, uint64(t.Fragment))
	dst = appendBool(dst, t.Last)
	dst = binary.AppendUvarint(dst, uint64(e.Offset))

	// The relations the fragment uses, each once, then the changes naming
	// them by index (0 = none).
	var rels []*change.Relation
	idx := func(r *change.Relation) uint64 {
		if r == nil {
			return 0
		}
		for i, q := range rels {
			if q == r {
				return uint64(i + 1)
			}
		}
		rels = append(rels, r)
		return uint64(len(rels))
	}
	var body []byte
	body = binary.AppendUvarint(body, uint64(len(t.Changes)))
	for i := range t.Changes {
		c := &t.Changes[i]
		body = append(body, byte(c.Op))
		body = binary.AppendUvarint(body, idx(c.Rel))
		body = appendRow(body, c.Old)
		body = appendBool(body, c.OldIsRow)
		body = appendRow(body, c.New)
		if c.Changed == nil {
			body = append(body, 0)
		} else {
			body = binary.AppendUvarint(body, uint64(len(c.Changed))+1)
			for _, b := range c.Changed {
				body = appendBool(body, b)
			}
		}
		if tr := c.Truncate; tr != nil {
			body = append(body, 1)
			body = binary.AppendUvarint(body, uint64(len(tr.Rels)))
			for _, r := range tr.Rels {
				body = binary.AppendUvarint(body, idx(r))
			}
			body = appendBool(body, tr.Cascade)
			body = appendBool(body, tr.RestartIdentity)
		} else {
			body = append(body, 0)
		}
		if msg := c.Message; msg != nil {
			body = append(body, 1)
			body = binary.AppendUvarint(body, uint64(msg.LSN))
			body = appendBool(body, msg.Transactional)
			body = appendString(body, msg.Prefix)
			body = appendBytes(body, msg.Content)
		} else {
			body = append(body, 0)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(rels)))
	for _, r := range rels {
		dst = appendRelation(dst, r)
	}
	return append(dst, body...)
}

func appendRelation(dst []byte, r *change.Relation) []byte {
	dst = binary.AppendUvarint(dst, uint64(r.OID))
	dst = appendString(dst, r.Schema)
	dst = appendString(dst, r.Table)
	dst = append(dst, r.ReplicaIdentity)
	dst = binary.AppendUvarint(dst, uint64(len(r.Columns)))
	for i := range r.Columns {
		c := &r.Columns[i]
		dst = appendString(dst, c.Name)
		dst = binary.AppendUvarint(dst, uint64(c.TypeOID))
		dst = binary.AppendVarint(dst, int64(c.TypeMod))
		dst = appendBool(dst, c.Key)
		dst = binary.AppendVarint(dst, int64(c.AttNum))
	}
	return dst
}

func appendRow(dst []byte, row change.Row) []byte {
	if row == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(row))+1)
	for i := range row {
		v := &row[i]
		dst = append(dst, byte(v.Kind))
		if v.Kind == change.Text || v.Kind == change.Binary {
			dst = appendBytes(dst, v.Data)
		}
	}
	return dst
}

// ErrFrame is wrapped by every error decoding a message that is not a
// well-formed bus frame.
var ErrFrame = errors.New("malformed bus frame")

// decoder reads a frame. Values and strings point into the frame's bytes,
// which must not change afterwards.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrFrame, what)
	}
	d.b = nil
}

func (d *decoder) uvarint(what string) uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint(what string) int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) count(what string) int {
	v := d.uvarint(what)
	if v > maxFrameItems || v > uint64(len(d.b))+1 {
		d.fail(what + " count out of range")
		return 0
	}
	return int(v)
}

func (d *decoder) byte1(what string) byte {
	if len(d.b) == 0 {
		d.fail(what)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) bool1(what string) bool {
	switch d.byte1(what) {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail(what + " is not a boolean")
	return false
}

func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what)
	if n > uint64(len(d.b)) {
		d.fail(what + " runs past the end")
		return nil
	}
	b := d.b[:n:n]
	d.b = d.b[n:]
	return b
}

func (d *decoder) str(what string) string { return string(d.bytes(what)) }

func (d *decoder) time(what string) time.Time {
	if !d.bool1(what) {
		return time.Time{}
	}
	return time.Unix(0, d.varint(what)).UTC()
}

func (d *decoder) u32(what string) uint32 {
	v := d.uvarint(what)
	if v > 1<<32-1 {
		d.fail(what + " out of range")
	}
	return uint32(v)
}

// Relations interns the relations decoded frames carry: identical shapes
// come back as one pointer, so a consumer that caches per relation (the
// engine does) sees one entry per shape, not one per message.
type Relations struct {
	byKey map[string]*change.Relation
}

// maxRelations bounds the interned shapes; past it the table starts over.
const maxRelations = 4096

func (rs *Relations) intern(key []byte, r *change.Relation) *change.Relation {
	if rs == nil {
		return r
	}
	if q, ok := rs.byKey[string(key)]; ok {
		return q
	}
	if rs.byKey == nil || len(rs.byKey) >= maxRelations {
		rs.byKey = make(map[string]*change.Relation)
	}
	rs.byKey[string(key)] = r
	return r
}

// DecodeMessage decodes a message encoded by AppendMessage. Values point
// into b. rels, when not nil, interns the relations.
func DecodeMessage(b []byte, rels *Relations) (*Message, error) {
	if len(b) < 3 || b[0] != frameMagic0 || b[1] != frameMagic1 {
		return nil, fmt.Errorf("%w: no FB header (not published by freshet relay?)", ErrFrame)
	}
	if b[2] != frameVersion {
		return nil, fmt.Errorf("%w: version %d, this freshet reads version %d: run the same version as the relay", ErrFrame, b[2], frameVersion)
	}
	d := &decoder{b: b[3:]}
	m := &Message{Epoch: d.uvarint("epoch")}
	m.Prev = Pos{LSN: change.LSN(d.uvarint("prev lsn")), Frag: int(d.uvarint("prev fragment"))}
	n := d.count("events")
	if d.err == nil && n == 0 {
		d.fail("no events")
	}
	m.Events = make([]Event, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		var e Event
		switch d.byte1("event kind") {
		case eventBeat:
			e.Beat = &change.Heartbeat{LSN: change.LSN(d.uvarint("heartbeat lsn")), Seq: d.uvarint("heartbeat seq")}
			e.Beat.Written = d.time("heartbeat written")
			e.Beat.Arrived = d.time("heartbeat arrived")
			e.Beat.Now = d.time("heartbeat database clock")
		case eventTxn:
			e.Txn, e.Offset = d.txn(rels)
		default:
			d.fail("unknown event kind")
		}
		m.Events = append(m.Events, e)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("bytes after the last event")
	}
	if d.err != nil {
		return nil, d.err
	}
	for i := 1; i < len(m.Events); i++ {
		if !m.Events[i-1].Pos().Less(m.Events[i].Pos()) {
			return nil, fmt.Errorf("%w: events out of order (%v then %v)", ErrFrame, m.Events[i-1].Pos(), m.Events[i].Pos())
		}
	}
	return m, nil
}

func (d *decoder) txn(rels *Relations) (*change.Txn, int) {
	t := &change.Txn{XID: d.u32("xid"), CommitLSN: change.LSN(d.uvarint("commit lsn")), EndLSN: change.LSN(d.uvarint("end lsn"))}
	t.CommitTime = d.time("commit time")
	t.Origin = d.str("origin")
	t.OriginLSN = change.LSN(d.uvarint("origin lsn"))
	t.Fragment = int(d.uvarint("fragment"))
	t.Last = d.bool1("last")
	offset := int(d.uvarint("offset"))
	nr := d.count("relations")
	table := make([]*change.Relation, 0, nr)
	for i := 0; i < nr && d.err == nil; i++ {
		start := d.b
		r := &change.Relation{OID: d.u32("relation oid"), Schema: d.str("schema"), Table: d.str("table")}
		r.ReplicaIdentity = d.byte1("replica identity")
		nc := d.count("columns")
		r.Columns = make([]change.Column, nc)
		for j := 0; j < nc && d.err == nil; j++ {
			c := &r.Columns[j]
			c.Name = d.str("column name")
			c.TypeOID = d.u32("type oid")
			c.TypeMod = int32(d.varint("typmod"))
			c.Key = d.bool1("key")
			c.AttNum = int16(d.varint("attnum"))
		}
		if d.err == nil {
			r = rels.intern(start[:len(start)-len(d.b)], r)
		}
		table = append(table, r)
	}
	rel := func(what string) *change.Relation {
		i := d.uvarint(what)
		if i == 0 {
			return nil
		}
		if i > uint64(len(table)) {
			d.fail(what + " names no relation of the frame")
			return nil
		}
		return table[i-1]
	}
	nch := d.count("changes")
	t.Changes = make([]change.Change, nch)
	for i := 0; i < nch && d.err == nil; i++ {
		c := &t.Changes[i]
		c.Op = change.Op(d.byte1("op"))
		if c.Op < change.OpInsert || c.Op > change.OpRelation {
			d.fail("unknown op")
		}
		c.Rel = rel("relation")
		c.Old = d.row()
		c.OldIsRow = d.bool1("old is row")
		c.New = d.row()
		if n := d.uvarint("changed"); n > 0 {
			if n-1 > uint64(len(d.b)) {
				d.fail("changed runs past the end")
				break
			}
			c.Changed = make([]bool, n-1)
			for j := range c.Changed {
				c.Changed[j] = d.bool1("changed")
			}
		}
		if d.bool1("truncate") {
			n := d.count("truncated relations")
			tr := &change.Truncate{Rels: make([]*change.Relation, 0, n)}
			for j := 0; j < n && d.err == nil; j++ {
				tr.Rels = append(tr.Rels, rel("truncated relation"))
			}
			tr.Cascade = d.bool1("cascade")
			tr.RestartIdentity = d.bool1("restart identity")
			c.Truncate = tr
		}
		if d.bool1("message") {
			c.Message = &change.Message{LSN: change.LSN(d.uvarint("message lsn")), Transactional: d.bool1("transactional"),
				Prefix: d.str("prefix"), Content: d.bytes("content")}
		}
	}
	return t, offset
}

func (d *decoder) row() change.Row {
	n := d.uvarint("row")
	if n == 0 || d.err != nil {
		return nil
	}
	if n-1 > uint64(len(d.b)) {
		d.fail("row runs past the end")
		return nil
	}
	row := make(change.Row, n-1)
	for i := range row {
		v := &row[i]
		v.Kind = change.Kind(d.byte1("value kind"))
		switch v.Kind {
		case change.Text, change.Binary:
			v.Data = d.bytes("value")
		case change.Absent, change.Null, change.Unchanged:
		default:
			d.fail("unknown value kind")
		}
	}
	return row
}
