package pgwal

import (
	"encoding/binary"
	"time"

	"github.com/freshetdb/freshet/change"
)

// This file is a small pgoutput encoder for tests: it builds the messages
// PostgreSQL's pgoutput sends, following the protocol documentation
// ("Logical Replication Message Formats").

// col is one TupleData column.
type col struct {
	kind byte // 'n', 'u', 't' or 'b'
	data string
}

func txt(s string) col    { return col{colText, s} }
func bin(s string) col    { return col{colBinary, s} }
func null() col           { return col{kind: colNull} }
func toast() col          { return col{kind: colUnchanged} }
func cols(c ...col) []col { return c }

type buf []byte

func (b buf) u8(v byte) buf { return append(b, v) }
func (b buf) u16(v uint16) buf {
	return binary.BigEndian.AppendUint16(b, v)
}
func (b buf) u32(v uint32) buf {
	return binary.BigEndian.AppendUint32(b, v)
}
func (b buf) u64(v uint64) buf {
	return binary.BigEndian.AppendUint64(b, v)
}
func (b buf) str(s string) buf { return append(append(b, s...), 0) }
func (b buf) ts(t time.Time) buf {
	return b.u64(uint64(t.UnixMicro() - pgEpochMicros))
}
func (b buf) tuple(cs []col) buf {
	b = b.u16(uint16(len(cs)))
	for _, c := range cs {
		b = b.u8(c.kind)
		if c.kind == colText || c.kind == colBinary {
			b = b.u32(uint32(len(c.data)))
			b = append(b, c.data...)
		}
	}
	return b
}

// enc encodes change messages; with stream set they carry xid, as inside
// a Stream Start...Stop block.
type enc struct {
	stream bool
	xid    uint32
}

func (e enc) head(t byte) buf {
	b := buf{t}
	if e.stream {
		b = b.u32(e.xid)
	}
	return b
}

func encBegin(final change.LSN, ts time.Time, xid uint32) []byte {
	return buf{msgBegin}.u64(uint64(final)).ts(ts).u32(xid)
}

func encCommit(commit, end change.LSN, ts time.Time) []byte {
	return buf{msgCommit}.u8(0).u64(uint64(commit)).u64(uint64(end)).ts(ts)
}

func encOrigin(lsn change.LSN, name string) []byte {
	return buf{msgOrigin}.u64(uint64(lsn)).str(name)
}

func (e enc) relation(r *change.Relation) []byte {
	b := e.head(msgRelation).u32(r.OID).str(r.Schema).str(r.Table).u8(r.ReplicaIdentity).u16(uint16(len(r.Columns)))
	for _, c := range r.Columns {
		var f byte
		if c.Key {
			f = columnKey
		}
		b = b.u8(f).str(c.Name).u32(c.TypeOID).u32(uint32(c.TypeMod))
	}
	return b
}

func (e enc) typ(oid uint32, schema, name string) []byte {
	return e.head(msgType).u32(oid).str(schema).str(name)
}

func (e enc) insert(oid uint32, row []col) []byte {
	return e.head(msgInsert).u32(oid).u8(tupleNew).tuple(row)
}

// update encodes an Update; oldKind is 0 (no old tuple), 'K' or 'O'.
func (e enc) update(oid uint32, oldKind byte, old, row []col) []byte {
	b := e.head(msgUpdate).u32(oid)
	if oldKind != 0 {
		b = b.u8(oldKind).tuple(old)
	}
	return b.u8(tupleNew).tuple(row)
}

func (e enc) delete(oid uint32, oldKind byte, old []col) []byte {
	return e.head(msgDelete).u32(oid).u8(oldKind).tuple(old)
}

func (e enc) truncate(flags byte, oids ...uint32) []byte {
	b := e.head(msgTruncate).u32(uint32(len(oids))).u8(flags)
	for _, o := range oids {
		b = b.u32(o)
	}
	return b
}

func (e enc) message(transactional bool, lsn change.LSN, prefix, content string) []byte {
	var f byte
	if transactional {
		f = messageTransactional
	}
	return e.head(msgMessage).u8(f).u64(uint64(lsn)).str(prefix).u32(uint32(len(content))).append(content)
}

func (b buf) append(s string) buf { return append(b, s...) }

func encStreamStart(xid uint32, first bool) []byte {
	var f byte
	if first {
		f = 1
	}
	return buf{msgStreamStart}.u32(xid).u8(f)
}

func encStreamStop() []byte { return []byte{msgStreamStop} }

func encStreamCommit(xid uint32, commit, end change.LSN, ts time.Time) []byte {
	return buf{msgStreamCommit}.u32(xid).u8(0).u64(uint64(commit)).u64(uint64(end)).ts(ts)
}

func encStreamAbort(xid, subxid uint32) []byte {
	return buf{msgStreamAbort}.u32(xid).u32(subxid)
}
