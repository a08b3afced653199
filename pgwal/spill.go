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
// written as one byte stream into fixed-size chunks (MemoryLimit/64,
// between 4 and 256 KiB; a record may cross from one chunk into the next). Once the chunks held by
// all open transactions pass MemoryLimit, the largest transaction's chunks
// are appended to its spill file and go back to the decoder's free list,
// so the buffer never grows by copying and spilling makes no garbage. At
// Stream Commit the records are read back in order (file, then memory) and
// decoded one fragment at a time.
//
// With a StreamEncoder, a change's record holds its encoding instead of
// its message, marked by the top bit of the length (a pgoutput message is
// below 1 GiB), and an empty encoding is not kept at all; Relation
// messages and heartbeats stay messages. Read back, encoded records
// become fragments' Encoded bytes as they are.
//
// Memory is counted by chunk capacity, not by bytes written, so what the
// decoder holds (chunks in use plus free ones) stays within MemoryLimit
// plus one chunk per open transaction.

const (
	recordHeader   = 8
	recordEncoded  = 1 << 31 // length bit: the record is a StreamEncoder's output
	maxEncodedFrag = 64 << 10
	minStreamChunk = 4 << 10
	maxStreamChunk = 256 << 10
)

// streamTxn is a streamed transaction not yet committed or aborted.
type streamTxn struct {
	xid       uint32
	origin    string
	chunks    [][]byte // records not yet spilled; each chunk has capacity Decoder.chunk
	memBytes  int64    // bytes of records in chunks
	file      *os.File // spill file, nil until the first spill
	fileBytes int64
	aborted   map[uint32]bool             // aborted subtransactions: their records are skipped
	rels      map[uint32]streamRel        // last shape each relation had in the stream
	local     map[uint32]*change.Relation // the same shapes, to decode changes as they arrive
}

type streamRel struct {
	rel    *change.Relation
	subxid uint32
}

// takeChunk returns an empty chunk, from the free list when it has one,
// and counts it as used.
func (d *Decoder) takeChunk() []byte {
	d.memUsed += int64(d.chunk)
	if n := len(d.free); n > 0 {
		c := d.free[n-1]
		d.free[n-1] = nil
		d.free = d.free[:n-1]
		return c[:0]
	}
	return make([]byte, 0, d.chunk)
}

// releaseChunks returns chunks that were never handed out (spilled or
// aborted records) to the free list.
func (d *Decoder) releaseChunks(cs [][]byte) {
	d.memUsed -= int64(len(cs) * d.chunk)
	for i, c := range cs {
		if int64((len(d.free)+1)*d.chunk) <= d.opts.MemoryLimit {
			d.free = append(d.free, c)
		}
		cs[i] = nil
	}
}

// write appends p to st's records, taking chunks as they fill.
func (d *Decoder) write(st *streamTxn, p []byte) {
	st.memBytes += int64(len(p))
	for len(p) > 0 {
		n := len(st.chunks)
		if n == 0 || len(st.chunks[n-1]) == d.chunk {
			st.chunks = append(st.chunks, d.takeChunk())
			n++
		}
		c := st.chunks[n-1]
		k := min(len(p), d.chunk-len(c))
		st.chunks[n-1] = append(c, p[:k]...)
		p = p[k:]
	}
}

// appendRecord keeps one message (or, encoded, one change's encoding) of
// subtransaction subxid.
func (d *Decoder) appendRecord(st *streamTxn, subxid uint32, msg []byte, encoded bool) {
	var h [recordHeader]byte
	n := uint32(len(msg))
	if encoded {
		n |= recordEncoded
	}
	binary.BigEndian.PutUint32(h[0:], n)
	binary.BigEndian.PutUint32(h[4:], subxid)
	d.write(st, h[:])
	d.write(st, msg)
}

// spill appends the in-memory records to the spill file and frees their
// chunks.
func (d *Decoder) spill(st *streamTxn) error {
	if len(st.chunks) == 0 {
		return nil
	}
	if st.file == nil {
		f, err := os.CreateTemp(d.opts.SpillDir, fmt.Sprintf("freshet-stream-%d-*.spill", st.xid))
		if err != nil {
			return fmt.Errorf("spill streamed transaction %d: create file (set DecoderOptions.SpillDir to a writable directory): %w", st.xid, err)
		}
		st.file = f
	}
	for _, c := range st.chunks {
		if _, err := st.file.Write(c); err != nil {
			return fmt.Errorf("spill streamed transaction %d: write %s: %w", st.xid, st.file.Name(), err)
		}
	}
	st.fileBytes += st.memBytes
	d.releaseChunks(st.chunks)
	st.chunks, st.memBytes = nil, 0
	return nil
}

// memReader reads records back from a transaction's chunks.
type memReader struct {
	chunks [][]byte
	ci, co int // next byte: chunk index and offset in it
	hdr    [recordHeader]byte
}

// header is where a record header that crosses chunks is put together.
func (m *memReader) header(int) []byte { return m.hdr[:] }

// read returns the next n bytes: a slice of the chunk when they lie in
// one, otherwise a copy into buf (grown when short). It returns false when
// fewer than n bytes are left.
func (m *memReader) read(n int, buf func(int) []byte) ([]byte, bool) {
	for m.ci < len(m.chunks) && m.co == len(m.chunks[m.ci]) {
		m.ci, m.co = m.ci+1, 0
	}
	if m.ci >= len(m.chunks) {
		return nil, n == 0
	}
	if c := m.chunks[m.ci]; m.co+n <= len(c) {
		b := c[m.co : m.co+n : m.co+n]
		m.co += n
		return b, true
	}
	out := buf(n)
	for k := 0; k < n; {
		for m.ci < len(m.chunks) && m.co == len(m.chunks[m.ci]) {
			m.ci, m.co = m.ci+1, 0
		}
		if m.ci >= len(m.chunks) {
			return nil, false
		}
		c := m.chunks[m.ci]
		w := copy(out[k:], c[m.co:])
		k += w
		m.co += w
	}
	return out, true
}

// record reads the next record: its message, subtransaction xid and
// whether it is encoded.
func (m *memReader) record(buf func(int) []byte) (msg []byte, subxid uint32, encoded, ok bool) {
	hb, ok := m.read(recordHeader, m.header)
	if !ok {
		return nil, 0, false, false
	}
	n := binary.BigEndian.Uint32(hb[0:])
	subxid = binary.BigEndian.Uint32(hb[4:])
	msg, ok = m.read(int(n&^recordEncoded), buf)
	return msg, subxid, n&recordEncoded != 0, ok
}

// abortSub drops the records of an aborted subtransaction: at once from
// memory, and at read-back from the spill file.
func (d *Decoder) abortSub(st *streamTxn, subxid uint32) {
	if st.aborted == nil {
		st.aborted = make(map[uint32]bool)
	}
	st.aborted[subxid] = true
	for oid, r := range st.rels {
		if r.subxid == subxid {
			delete(st.rels, oid)
			delete(st.local, oid)
		}
	}
	old := st.chunks
	st.chunks, st.memBytes = nil, 0
	m := &memReader{chunks: old}
	var tmp []byte
	grow := func(n int) []byte {
		if cap(tmp) < n {
			tmp = make([]byte, n)
		}
		return tmp[:n]
	}
	for {
		msg, sub, enc, ok := m.record(grow)
		if !ok {
			break
		}
		if sub != subxid {
			d.appendRecord(st, sub, msg, enc)
		}
	}
	d.releaseChunks(old)
}

// discard drops the transaction, returns its chunks to the free list and
// removes its spill file.
func (d *Decoder) discard(st *streamTxn) error {
	d.releaseChunks(st.chunks)
	st.chunks, st.memBytes = nil, 0
	return st.removeFile()
}

// removeFile closes and removes the spill file, if any.
func (st *streamTxn) removeFile() error {
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

// dropFree lets the free chunks go once no streamed transaction is open,
// so an idle decoder holds no buffer.
func (d *Decoder) dropFree() {
	if len(d.streams) == 0 {
		clear(d.free)
		d.free = nil
	}
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
			if err := d.discard(st); err != nil {
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
	if d.opts.StreamEncoder != nil && w.err == nil && d.encodable(t, w) {
		return d.encodeInStream(st, subxid, t, w)
	}
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
			st.local = make(map[uint32]*change.Relation)
		}
		st.rels[r.OID] = streamRel{rel: r, subxid: subxid}
		st.local[r.OID] = r
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
	return d.keep(st, subxid, w.b, false)
}

// keep appends a record to st, spilling as needed: first, so that the
// record's chunks are taken within the limit, and again after, for a
// record larger than the limit.
func (d *Decoder) keep(st *streamTxn, subxid uint32, rec []byte, encoded bool) error {
	if err := d.maybeSpill(int64(recordHeader + len(rec))); err != nil {
		return err
	}
	d.appendRecord(st, subxid, rec, encoded)
	return d.maybeSpill(0)
}

// encodable reports whether a stream message (w positioned after its xid)
// is a change for the StreamEncoder: a row change, a truncate, or a
// transactional logical message other than a heartbeat. Relation messages
// and heartbeats stay messages (heartbeats become Heartbeat events at the
// commit); a non-transactional message is emitted at once.
func (d *Decoder) encodable(t byte, w *wire) bool {
	switch t {
	case msgInsert, msgUpdate, msgDelete, msgTruncate:
		return true
	case msgMessage:
		r := wire{b: w.b, off: w.off}
		m := r.message()
		return r.err == nil && m.transactional && (d.opts.HeartbeatPrefix == "" || m.prefix != d.opts.HeartbeatPrefix)
	}
	return false
}

// encodeInStream decodes a streamed change as it arrives (w positioned
// after its xid), with the stream's own relation shapes, and keeps its
// StreamEncoder encoding rather than the message.
func (d *Decoder) encodeInStream(st *streamTxn, subxid uint32, t byte, w *wire) error {
	if d.enc == nil {
		enc := d.opts.StreamEncoder
		d.enc = &txnBuilder{encode: func(c *change.Change) { d.encBuf = enc.AppendChange(d.encBuf, c) }}
	}
	d.encBuf = d.encBuf[:0]
	var err error
	if t == msgMessage {
		err = d.applyMessage(d.enc, w)
	} else {
		err = d.applyChange(d.enc, w, t, st.local)
	}
	if err != nil || len(d.encBuf) == 0 {
		return err
	}
	err = d.keep(st, subxid, d.encBuf, true)
	if cap(d.encBuf) > maxEncodedFrag {
		d.encBuf = nil // one huge value: do not hold its buffer
	}
	return err
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
	w.fail("%s tuple marker %q, want one of %q", msg, k, string(want)) // a copy: want stays on the stack
	return 0
}

func (w *wire) errOrNil() error {
	if w.err != nil {
		return w.err
	}
	return nil
}

// maybeSpill writes the largest in-memory transactions to disk until
// room more bytes fit within MemoryLimit.
func (d *Decoder) maybeSpill(room int64) error {
	for d.memUsed+room > d.opts.MemoryLimit {
		var big *streamTxn
		for _, st := range d.streams {
			if big == nil || len(st.chunks) > len(big.chunks) {
				big = st
			}
		}
		if big == nil || len(big.chunks) == 0 {
			return nil
		}
		if err := d.spill(big); err != nil {
			return err
		}
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
	// Its chunks now belong to the read-back: values will slice into them,
	// so they are never reused.
	d.memUsed -= int64(len(st.chunks) * d.chunk)
	d.dropFree()
	// The stream's final relation shapes are current from now on, for the
	// transactions that follow (PostgreSQL will not send them again).
	for _, r := range st.rels {
		d.setRelation(r.rel)
	}
	r := &replay{d: d, st: st, mem: memReader{chunks: st.chunks}}
	st.chunks = nil
	r.b = d.newTxn(change.Txn{
		XID: m.xid, CommitLSN: m.commitLSN, EndLSN: m.endLSN, CommitTime: m.commitTime, Origin: st.origin,
	}, &r.out)
	if st.file != nil {
		if _, err := st.file.Seek(0, io.SeekStart); err != nil {
			_ = st.removeFile()
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
		err := d.discard(st)
		d.dropFree()
		return err
	}
	d.abortSub(st, subxid)
	return nil
}

// replay reads a committed streamed transaction back and decodes it one
// fragment at a time.
type replay struct {
	d        *Decoder
	st       *streamTxn
	b        *txnBuilder
	out      []change.Event
	rd       *bufio.Reader      // spill file, nil once read or when none
	mem      memReader          // the records that were never spilled
	memFreed int                // chunks before this one are let go
	hdr      [recordHeader]byte // a record header read from the spill file
	buf      []byte             // an encoded record read from the spill file
	local    map[uint32]*change.Relation
	done     bool
}

// next returns the next event of the transaction, or nil after its last.
func (r *replay) next() (change.Event, error) {
	for len(r.out) == 0 {
		if r.done {
			return nil, nil
		}
		rec, sub, enc, err := r.read()
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
		if enc {
			r.b.addEncoded(rec, maxEncodedFrag)
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

// read returns the next record, in memory the decoder owns (an encoded
// one in memory reused by the next read: addEncoded copies it).
func (r *replay) read() (rec []byte, subxid uint32, encoded bool, err error) {
	if r.rd != nil {
		h := r.hdr[:]
		if _, err := io.ReadFull(r.rd, h); err != nil {
			if err != io.EOF {
				return nil, 0, false, fmt.Errorf("read back streamed transaction %d from %s: %w", r.st.xid, r.st.file.Name(), err)
			}
			r.rd = nil
		} else {
			w := binary.BigEndian.Uint32(h[0:])
			n, encoded := w&^recordEncoded, w&recordEncoded != 0
			if int64(n) > r.st.fileBytes {
				return nil, 0, false, fmt.Errorf("read back streamed transaction %d from %s: record of %d bytes in a %d-byte file: the file is corrupt", r.st.xid, r.st.file.Name(), n, r.st.fileBytes)
			}
			if encoded {
				if cap(r.buf) < int(n) || cap(r.buf) > maxEncodedFrag && int(n) <= maxEncodedFrag {
					r.buf = make([]byte, n, max(n, 4<<10))
				}
				rec = r.buf[:n]
			} else {
				rec = r.d.slab.alloc(int(n))
			}
			if _, err := io.ReadFull(r.rd, rec); err != nil {
				return nil, 0, false, fmt.Errorf("read back streamed transaction %d from %s: %w", r.st.xid, r.st.file.Name(), err)
			}
			return rec, binary.BigEndian.Uint32(h[4:]), encoded, nil
		}
	}
	// Records in memory are never written again: values may slice into
	// them. A chunk read to its end is let go, so the consumer's dropping
	// its values frees it.
	rec, sub, enc, ok := r.mem.record(r.d.slab.alloc)
	for ; r.memFreed < r.mem.ci; r.memFreed++ {
		r.mem.chunks[r.memFreed] = nil
	}
	if !ok {
		return nil, 0, false, io.EOF
	}
	return rec, sub, enc, nil
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
	r.mem = memReader{}
	return r.st.removeFile()
}
