package pgwal

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/freshetdb/freshet/change"
)

// pgoutput message types (PostgreSQL's "Logical Replication Message
// Formats", protocol versions 1 and 2).
const (
	msgBegin        = 'B'
	msgCommit       = 'C'
	msgOrigin       = 'O'
	msgRelation     = 'R'
	msgType         = 'Y'
	msgInsert       = 'I'
	msgUpdate       = 'U'
	msgDelete       = 'D'
	msgTruncate     = 'T'
	msgMessage      = 'M'
	msgStreamStart  = 'S'
	msgStreamStop   = 'E'
	msgStreamCommit = 'c'
	msgStreamAbort  = 'A'
)

// Tuple markers and column kinds inside TupleData.
const (
	tupleNew = 'N'
	tupleKey = 'K'
	tupleOld = 'O'

	colNull      = 'n'
	colUnchanged = 'u'
	colText      = 't'
	colBinary    = 'b'
)

// Flags carried by pgoutput messages.
const (
	truncateCascade         = 1
	truncateRestartIdentity = 2
	messageTransactional    = 1
	columnKey               = 1
)

// pgEpochMicros is 2000-01-01 00:00:00 UTC in Unix microseconds:
// PostgreSQL's timestamps count from there.
const pgEpochMicros = 946684800 * 1000000

func pgTime(us int64) time.Time { return time.UnixMicro(us + pgEpochMicros).UTC() }

// DecodeError reports a pgoutput message the Decoder could not decode. It
// names the message type, the WAL position of the message and the byte
// offset within it where decoding stopped.
type DecodeError struct {
	Type   byte       // the message's type byte ('I', 'U', ...); 0 for an empty message
	LSN    change.LSN // the XLogData WALStart of the message
	Offset int        // byte offset within the message
	Reason string     // what was wrong
}

// Error implements error.
func (e *DecodeError) Error() string {
	t := "empty"
	if e.Type >= 0x20 && e.Type < 0x7f {
		t = fmt.Sprintf("%q (0x%02x)", e.Type, e.Type)
	} else if e.Type != 0 || e.Offset > 0 {
		t = fmt.Sprintf("0x%02x", e.Type)
	}
	return fmt.Sprintf("decode pgoutput message %s at %v, offset %d: %s", t, e.LSN, e.Offset, e.Reason)
}

// wire reads the fields of one pgoutput message. The first error sticks:
// later reads return zero values, so a parse reads straight through and
// checks err once.
type wire struct {
	b   []byte
	off int
	lsn change.LSN
	err *DecodeError
}

func (w *wire) fail(reason string, args ...any) {
	if w.err != nil {
		return
	}
	var t byte
	if len(w.b) > 0 {
		t = w.b[0]
	}
	w.err = &DecodeError{Type: t, LSN: w.lsn, Offset: w.off, Reason: fmt.Sprintf(reason, args...)}
}

func (w *wire) need(n int, what string) bool {
	if w.err != nil {
		return false
	}
	if n < 0 || len(w.b)-w.off < n {
		w.fail("message ends inside %s (%d bytes left, want %d)", what, len(w.b)-w.off, n)
		return false
	}
	return true
}

func (w *wire) u8(what string) byte {
	if !w.need(1, what) {
		return 0
	}
	v := w.b[w.off]
	w.off++
	return v
}

func (w *wire) u16(what string) uint16 {
	if !w.need(2, what) {
		return 0
	}
	v := binary.BigEndian.Uint16(w.b[w.off:])
	w.off += 2
	return v
}

func (w *wire) u32(what string) uint32 {
	if !w.need(4, what) {
		return 0
	}
	v := binary.BigEndian.Uint32(w.b[w.off:])
	w.off += 4
	return v
}

func (w *wire) u64(what string) uint64 {
	if !w.need(8, what) {
		return 0
	}
	v := binary.BigEndian.Uint64(w.b[w.off:])
	w.off += 8
	return v
}

// str reads a NUL-terminated string.
func (w *wire) str(what string) string {
	if w.err != nil {
		return ""
	}
	for i := w.off; i < len(w.b); i++ {
		if w.b[i] == 0 {
			s := string(w.b[w.off:i])
			w.off = i + 1
			return s
		}
	}
	w.fail("%s is not NUL-terminated", what)
	return ""
}

// bytes returns the next n bytes, aliasing the message.
func (w *wire) bytes(n int, what string) []byte {
	if !w.need(n, what) {
		return nil
	}
	v := w.b[w.off : w.off+n : w.off+n]
	w.off += n
	return v
}

// end fails unless the whole message was read.
func (w *wire) end() {
	if w.err == nil && w.off != len(w.b) {
		w.fail("%d unexpected bytes after the message", len(w.b)-w.off)
	}
}

// tuple reads a TupleData into dst (appending) and returns it. Text and
// binary values alias the message bytes, so the message must be memory the
// decoder owns.
func (w *wire) tuple(dst []change.Value) []change.Value {
	n := int(w.u16("tuple column count"))
	for i := 0; i < n && w.err == nil; i++ {
		switch k := w.u8("tuple column kind"); k {
		case colNull:
			dst = append(dst, change.Value{Kind: change.Null})
		case colUnchanged:
			dst = append(dst, change.Value{Kind: change.Unchanged})
		case colText, colBinary:
			l := w.u32("value length")
			if l > uint32(len(w.b)) {
				w.off -= 4
				w.fail("value length %d of column %d exceeds the message", l, i+1)
				break
			}
			data := w.bytes(int(l), "value")
			kind := change.Text
			if k == colBinary {
				kind = change.Binary
			}
			dst = append(dst, change.Value{Kind: kind, Data: data})
		default:
			if w.err == nil {
				w.off--
				w.fail("unknown tuple column kind 0x%02x in column %d", k, i+1)
			}
		}
	}
	return dst
}

// beginMsg is a Begin message.
type beginMsg struct {
	finalLSN   change.LSN
	commitTime time.Time
	xid        uint32
}

func (w *wire) begin() beginMsg {
	var m beginMsg
	m.finalLSN = change.LSN(w.u64("final LSN"))
	m.commitTime = pgTime(int64(w.u64("commit time")))
	m.xid = w.u32("xid")
	w.end()
	return m
}

// commitMsg is a Commit or Stream Commit message.
type commitMsg struct {
	xid        uint32 // Stream Commit only
	flags      byte
	commitLSN  change.LSN
	endLSN     change.LSN
	commitTime time.Time
}

func (w *wire) commit(stream bool) commitMsg {
	var m commitMsg
	if stream {
		m.xid = w.u32("xid")
	}
	m.flags = w.u8("flags")
	m.commitLSN = change.LSN(w.u64("commit LSN"))
	m.endLSN = change.LSN(w.u64("end LSN"))
	m.commitTime = pgTime(int64(w.u64("commit time")))
	w.end()
	return m
}

// relation reads a Relation message body (after any xid).
func (w *wire) relation() *change.Relation {
	r := &change.Relation{}
	r.OID = w.u32("relation OID")
	r.Schema = w.str("namespace")
	r.Table = w.str("relation name")
	r.ReplicaIdentity = w.u8("replica identity")
	n := int(w.u16("column count"))
	// Each column takes at least 10 bytes: refuse counts the message
	// cannot hold before allocating for them.
	if w.err == nil && n*10 > len(w.b)-w.off {
		w.fail("column count %d exceeds the message", n)
	}
	if w.err != nil {
		return nil
	}
	r.Columns = make([]change.Column, n)
	for i := range r.Columns {
		c := &r.Columns[i]
		c.Key = w.u8("column flags")&columnKey != 0
		c.Name = w.str("column name")
		c.TypeOID = w.u32("column type OID")
		c.TypeMod = int32(w.u32("column type modifier"))
	}
	w.end()
	if w.err != nil {
		return nil
	}
	return r
}

// typeMsg reads a Type message body (after any xid).
func (w *wire) typeMsg() change.Type {
	var t change.Type
	t.OID = w.u32("type OID")
	t.Schema = w.str("type namespace")
	t.Name = w.str("type name")
	t.Kind = change.KindOther
	w.end()
	return t
}

// logicalMsg is a Message message.
type logicalMsg struct {
	transactional bool
	lsn           change.LSN
	prefix        string
	content       []byte // aliases the message
}

func (w *wire) message() logicalMsg {
	var m logicalMsg
	m.transactional = w.u8("flags")&messageTransactional != 0
	m.lsn = change.LSN(w.u64("message LSN"))
	m.prefix = w.str("prefix")
	l := w.u32("content length")
	if l > uint32(len(w.b)) {
		w.fail("content length %d exceeds the message", l)
	}
	m.content = w.bytes(int(l), "content")
	w.end()
	return m
}

// truncateMsg is a Truncate message.
type truncateMsg struct {
	flags byte
	oids  []uint32
}

func (w *wire) truncate() truncateMsg {
	var m truncateMsg
	n := int(w.u32("relation count"))
	m.flags = w.u8("truncate flags")
	if w.err == nil && (n < 0 || n > (len(w.b)-w.off)/4) {
		w.fail("relation count %d exceeds the message", n)
	}
	if w.err != nil {
		return m
	}
	m.oids = make([]uint32, n)
	for i := range m.oids {
		m.oids[i] = w.u32("relation OID")
	}
	w.end()
	return m
}

// sameRelation reports whether a and b describe the same shape.
func sameRelation(a, b *change.Relation) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil || a.OID != b.OID || a.Schema != b.Schema || a.Table != b.Table ||
		a.ReplicaIdentity != b.ReplicaIdentity || len(a.Columns) != len(b.Columns) {
		return false
	}
	for i := range a.Columns {
		if a.Columns[i] != b.Columns[i] {
			return false
		}
	}
	return true
}
