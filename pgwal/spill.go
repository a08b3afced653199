package pgwal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/freshetdb/freshet/change"
)

// A streamed transaction (protocol 2) arrives in blocks between Stream
// Start and Stream Stop, interleaved with other transactions, and is only
// known to commit at Stream Commit. Its messages are kept as records:
//
//	uint32 length of msg | uint32 (sub)transaction xid | msg
//
// first in memory, and once the decoder's buffered bytes pass MemoryLimit,
// the largest transaction's records are appended to its spill file. At
// Stream Commit the records are read back in order (file, then memory) and
// decoded one fragment at a time.

const recordHeader = 8

// streamTxn is a streamed transaction not yet committed or aborted.
type streamTxn struct {
	xid       uint32
	origin    string
	mem       []byte   // records not yet spilled
	file      *os.File // spill file, nil until the first spill
	fileBytes int64
	aborted   map[uint32]bool      // aborted subtransactions: their records are skipped
	rels      map[uint32]streamRel // last shape each relation had in the stream
}

type streamRel struct {
	rel    *change.Relation
	subxid uint32
}

func (st *streamTxn) append(subxid uint32, msg []byte) int {
	var h [recordHeader]byte
	binary.BigEndian.PutUint32(h[0:], uint32(len(msg)))
	binary.BigEndian.PutUint32(h[4:], subxid)
	st.mem = append(st.mem, h[:]...)
	st.mem = append(st.mem, msg...)
	return recordHeader + len(msg)
}

// spill appends the in-memory records to the spill file and frees them.
func (st *streamTxn) spill(dir string) error {
	if len(st.mem) == 0 {
		return nil
	}
	if st.file == nil {
		f, err := os.CreateTemp(dir, fmt.Sprintf("freshet-stream-%d-*.spill", st.xid))
		if err != nil {
			return fmt.Errorf("spill streamed transaction %d: create file (set DecoderOptions.SpillDir to a writable directory): %w", st.xid, err)
		}
		st.file = f
	}
	if _, err := st.file.Write(st.mem); err != nil {
		return fmt.Errorf("spill streamed transaction %d: write %s: %w", st.xid, st.file.Name(), err)
	}
	st.fileBytes += int64(len(st.mem))
	st.mem = nil
	return nil
}

// abortSub drops the records of an aborted subtransaction: at once from
// memory, and at read-back from the spill file.
func (st *streamTxn) abortSub(subxid uint32) (freed int) {
	if st.aborted == nil {
		st.aborted = make(map[uint32]bool)
	}
	st.aborted[subxid] = true
	for oid, r := range st.rels {
		if r.subxid == subxid {
			delete(st.rels, oid)
		}
	}
	kept := st.mem[:0]
	for off := 0; off+recordHeader <= len(st.mem); {
		n := int(binary.BigEndian.Uint32(st.mem[off:]))
		sub := binary.BigEndian.Uint32(st.mem[off+4:])
		end := off + recordHeader + n
		if sub != subxid {
			kept = append(kept, st.mem[off:end]...)
		}
		off = end
	}
	freed = len(st.mem) - len(kept)
	st.mem = kept
	return freed
}

// discard drops the transaction and removes its spill file.
func (st *streamTxn) discard() error {
	st.mem = nil
	if st.file == nil {
		return nil
	}
	name := st.file.Name()
	err := errors.Join(st.file.Close(), os.Remove(name))
	st.file = nil
	if err != nil {
		return fmt.Errorf("remove spill file of streamed transaction %d: %w", st.xid, err)
	}
	return nil
}

func (d *Decoder) streamStart(w *wire) error {
	xid := w.u32("xid")
	first := w.u8("first segment flag")
	w.end()
	if w.err == nil && d.opts.ProtoVersion < 2 {
		w.fail("Stream Start under protocol version %d (streaming needs version 2)", d.opts.ProtoVersion)
	}
	if w.err == nil && d.txn != nil {
		w.fail("Stream Start of transaction %d inside transaction %d", xid, d.txn.hdr.XID)
	}
	if w.err != nil {
		return w.err
	}
	st := d.streams[xid]
	if first == 1 {
		if st != nil {
			// The transaction is being streamed again from its start.
			d.memUsed -= int64(len(st.mem))
			if err := st.discard(); err != nil {
				return err
			}
		}
		st = &streamTxn{xid: xid}
		d.streams[xid] = st
	} else if st == nil {
		w.fail("stream segment of transaction %d whose first segment was not seen", xid)
		return w.err
	}
	d.inStream, d.streamXID = true, xid
	return nil
}

// decodeInStream handles a message inside a Stream Start...Stop block.
func (d *Decoder) decodeInStream(t byte, w *wire) error {
	st := d.streams[d.streamXID]
	switch t {
	case msgStreamStop:
		w.end()
		if w.err != nil {
			return w.err
		}
		d.inStream = false
		return nil
	case msgOrigin:
		w.u64("origin commit LSN")
		st.origin = w.str("origin name")
		w.end()
		return w.errOrNil()
	case msgType:
		w.u32("xid")
		t := w.typeMsg()
		if w.err != nil {
			return w.err
		}
		d.types[t.OID] = t
		return nil
	case msgRelation, msgInsert, msgUpdate, msgDelete, msgTruncate, msgMessage:
	case msgBegin, msgCommit, msgStreamStart, msgStreamCommit, msgStreamAbort:
		w.off = 0
		w.fail("message not allowed inside the stream block of transaction %d", d.streamXID)
		return w.err
	default:
		w.off = 0
		w.fail("unknown message type")
		return w.err
	}
	subxid := w.u32("xid")
	// Check the message now, so a malformed one fails where it arrived,
	// not when the transaction commits.
	switch t {
	case msgRelation:
		r := w.relation()
		if w.err != nil {
			return w.err
		}
		if st.rels == nil {
			st.rels = make(map[uint32]streamRel)
		}
		st.rels[r.OID] = streamRel{rel: r, subxid: subxid}
	case msgInsert:
		w.u32("relation OID")
		w.marker("Insert", tupleNew)
		d.scratch = w.tuple(d.scratch[:0])
	case msgUpdate:
		w.u32("relation OID")
		if k := w.marker("Update", tupleKey, tupleOld, tupleNew); k != tupleNew {
			d.scratch = w.tuple(d.scratch[:0])
			w.marker("Update", tupleNew)
		}
		d.scratch = w.tuple(d.scratch[:0])
	case msgDelete:
		w.u32("relation OID")
		w.marker("Delete", tupleKey, tupleOld)
		d.scratch = w.tuple(d.scratch[:0])
	case msgTruncate:
		w.truncate()
	case msgMessage:
		m := w.message()
		if w.err != nil {
			return w.err
		}
		if !m.transactional {
			w.b = d.slab.own(w.b)
			w.off = 5
			return d.applyMessage(nil, w)
		}
	}
	w.end()
	if w.err != nil {
		return w.err
	}
	clear(d.scratch)
	n := st.append(subxid, w.b)
	d.memUsed += int64(n)
	return d.maybeSpill()
}

// marker reads a tuple marker and fails unless it is one of want.
func (w *wire) marker(msg string, want ...byte) byte {
	k := w.u8("tuple marker")
	if w.err != nil {
		return 0
	}
	for _, m := range want {
		if k == m {
			return k
		}
	}
	w.off--
	w.fail("%s tuple marker %q, want one of %q", msg, k, want)
	return 0
}

func (w *wire) errOrNil() error {
	if w.err != nil {
		return w.err
	}
	return nil
}

// maybeSpill writes the largest in-memory transactions to disk until the
// buffered bytes are within MemoryLimit.
func (d *Decoder) maybeSpill() error {
	for d.memUsed > d.opts.MemoryLimit {
		var big *streamTxn
		for _, st := range d.streams {
			if big == nil || len(st.mem) > len(big.mem) {
				big = st
			}
		}
		if big == nil || len(big.mem) == 0 {
			return nil
		}
		n := len(big.mem)
		if err := big.spill(d.opts.SpillDir); err != nil {
			return err
		}
		d.memUsed -= int64(n)
	}
	return nil
}

func (d *Decoder) streamCommit(w *wire) error {
	m := w.commit(true)
	if w.err != nil {
		return w.err
	}
	st := d.streams[m.xid]
	if st == nil {
		w.fail("Stream Commit of transaction %d, which was never streamed", m.xid)
		return w.err
	}
	delete(d.streams, m.xid)
	d.memUsed -= int64(len(st.mem))
	// The stream's final relation shapes are current from now on, for the
	// transactions that follow (PostgreSQL will not send them again).
	for _, r := range st.rels {
		d.setRelation(r.rel)
	}
	r := &replay{d: d, st: st}
	r.b = d.newTxn(change.Txn{
		XID: m.xid, CommitLSN: m.commitLSN, EndLSN: m.endLSN, CommitTime: m.commitTime, Origin: st.origin,
	}, &r.out)
	if st.file != nil {
		if _, err := st.file.Seek(0, io.SeekStart); err != nil {
			_ = st.discard()
			return fmt.Errorf("read back streamed transaction %d: seek %s: %w", m.xid, st.file.Name(), err)
		}
		r.rd = bufio.NewReaderSize(st.file, 64<<10)
	}
	d.replay = r
	return nil
}

func (d *Decoder) streamAbort(w *wire) error {
	xid := w.u32("xid")
	subxid := w.u32("subtransaction xid")
	w.end()
	if w.err != nil {
		return w.err
	}
	st := d.streams[xid]
	if st == nil {
		return nil // nothing of it was kept
	}
	if subxid == xid || subxid == 0 {
		delete(d.streams, xid)
		d.memUsed -= int64(len(st.mem))
		return st.discard()
	}
	d.memUsed -= int64(st.abortSub(subxid))
	return nil
}

// replay reads a committed streamed transaction back and decodes it one
// fragment at a time.
type replay struct {
	d     *Decoder
	st    *streamTxn
	b     *txnBuilder
	out   []change.Event
	rd    *bufio.Reader // spill file, nil once read or when none
	memAt int           // next record in st.mem
	local map[uint32]*change.Relation
	done  bool
}

// next returns the next event of the transaction, or nil after its last.
func (r *replay) next() (change.Event, error) {
	for len(r.out) == 0 {
		if r.done {
			return nil, nil
		}
		rec, sub, err := r.read()
		if err == io.EOF {
			r.b.finish()
			r.done = true
			continue
		}
		if err != nil {
			return nil, err
		}
		if r.st.aborted[sub] {
			continue
		}
		if err := r.apply(rec); err != nil {
			return nil, fmt.Errorf("decode streamed transaction %d: %w", r.st.xid, err)
		}
	}
	ev := r.out[0]
	r.out[0] = nil
	r.out = r.out[1:]
	if len(r.out) == 0 {
		r.out = nil
	}
	return ev, nil
}

// read returns the next record, in memory the decoder owns.
func (r *replay) read() ([]byte, uint32, error) {
	if r.rd != nil {
		var h [recordHeader]byte
		if _, err := io.ReadFull(r.rd, h[:]); err != nil {
			if err != io.EOF {
				return nil, 0, fmt.Errorf("read back streamed transaction %d from %s: %w", r.st.xid, r.st.file.Name(), err)
			}
			r.rd = nil
		} else {
			n := binary.BigEndian.Uint32(h[0:])
			if int64(n) > r.st.fileBytes {
				return nil, 0, fmt.Errorf("read back streamed transaction %d from %s: record of %d bytes in a %d-byte file: the file is corrupt", r.st.xid, r.st.file.Name(), n, r.st.fileBytes)
			}
			rec := r.d.slab.alloc(int(n))
			if _, err := io.ReadFull(r.rd, rec); err != nil {
				return nil, 0, fmt.Errorf("read back streamed transaction %d from %s: %w", r.st.xid, r.st.file.Name(), err)
			}
			return rec, binary.BigEndian.Uint32(h[4:]), nil
		}
	}
	mem := r.st.mem
	if r.memAt+recordHeader > len(mem) {
		return nil, 0, io.EOF
	}
	n := int(binary.BigEndian.Uint32(mem[r.memAt:]))
	sub := binary.BigEndian.Uint32(mem[r.memAt+4:])
	start := r.memAt + recordHeader
	r.memAt = start + n
	// Records in memory are never written again: values may alias them.
	return mem[start:r.memAt:r.memAt], sub, nil
}

// apply decodes one record (a whole in-stream message, xid included).
func (r *replay) apply(rec []byte) error {
	d := r.d
	if len(rec) == 0 {
		return &DecodeError{Reason: "empty record in the spill file"}
	}
	w := &wire{b: rec, off: 1}
	t := rec[0]
	w.u32("xid")
	switch t {
	case msgRelation:
		rel := w.relation()
		if w.err != nil {
			return w.err
		}
		cur := r.local[rel.OID]
		if cur == nil {
			if e := d.rels[rel.OID]; e != nil {
				cur = e.cur
			}
		}
		if sameRelation(cur, rel) {
			rel = cur
		}
		if r.local == nil {
			r.local = make(map[uint32]*change.Relation)
		}
		r.local[rel.OID] = rel
		return nil
	case msgMessage:
		return d.applyMessage(r.b, w)
	default:
		return d.applyChange(r.b, w, t, r.local)
	}
}

func (r *replay) close() error {
	r.done = true
	return r.st.discard()
}
