package pgwal

import (
	"bytes"
	"errors"
	"strconv"
	"time"

	"github.com/freshetdb/freshet/change"
)

// Defaults for DecoderOptions.
const (
	DefaultFragmentChanges = 4096
	DefaultFragmentBytes   = 4 << 20
	DefaultMemoryLimit     = 64 << 20
)

// DecoderOptions configure a Decoder.
type DecoderOptions struct {
	ProtoVersion    int    // 1 or 2 (2 = streaming of in-progress transactions); 0 means 1
	Binary          bool   // values arrive in binary form ('b' tuples); both forms are accepted either way
	HeartbeatPrefix string // logical messages with exactly this prefix are heartbeats, never user changes; "" = none
	FragmentChanges int    // most changes per fragment (default 4096)
	FragmentBytes   int    // most message bytes per fragment (default 4 MiB)
	MemoryLimit     int64  // protocol 2: bytes of streamed chunks buffered in memory across xids before spilling (default 64 MiB)
	SpillDir        string // where spilled streamed transactions go (default os.TempDir()); files removed when done

	// Types resolves type OIDs with full catalog knowledge. Optional: the
	// decoder records pgoutput Type messages itself (see Decoder.Type).
	Types change.TypeResolver

	// StreamEncoder, when set, decodes and encodes the changes of a
	// streamed transaction (protocol 2) as they arrive, and keeps them (in
	// memory and spilled, within MemoryLimit as ever) in the encoder's
	// form rather than as pgoutput: its fragments then carry Encoded
	// bytes instead of Changes, and its Stream Commit costs reading bytes
	// back, not decoding the transaction after the server has sent it.
	// Optional; transactions that are not streamed are unaffected.
	StreamEncoder StreamEncoder
}

// A StreamEncoder turns changes into a consumer's output form
// (change.JSONEncoder for `freshet tail`). AppendChange appends c's
// encoding to dst; it may append nothing. It is called on the decoding
// goroutine while the transaction streams, possibly for changes of a
// transaction that aborts later, and must not keep c or its values, which
// live only for the call. OpRelation changes are never passed: an encoded
// transaction's fragments carry no relation changes.
type StreamEncoder interface {
	AppendChange(dst []byte, c *change.Change) []byte
}

// Decoder turns pgoutput messages into change events. It does no I/O
// except to its spill directory, and is not safe for concurrent use: one
// goroutine calls Decode with each message in stream order and then Next
// until it returns nil.
type Decoder struct {
	opts DecoderOptions

	rels  map[uint32]*relEntry
	types map[uint32]change.Type

	txn *txnBuilder // the open Begin...Commit transaction, nil outside one

	inStream  bool
	streamXID uint32                // top-level xid of the open stream block
	streams   map[uint32]*streamTxn // streamed transactions not yet committed or aborted
	memUsed   int64                 // bytes of chunks held by streams (their capacity)
	free      [][]byte              // empty chunks for streams to reuse
	chunk     int                   // size of a stream chunk

	queue  []change.Event
	qhead  int
	replay *replay // a committed streamed transaction being read back

	slab    slab
	scratch []change.Value

	enc     *txnBuilder    // with a StreamEncoder: passes each streamed change to it
	encBuf  []byte         // the last change's encoding
	encVals []change.Value // values of the change being encoded, reused
	encFlag []bool
}

// relEntry is what the decoder knows of one relation: its current shape,
// and the shape last emitted to the consumer as an OpRelation change.
type relEntry struct {
	cur     *change.Relation
	emitted *change.Relation
}

// NewDecoder returns a Decoder with opts, defaults filled in.
func NewDecoder(opts DecoderOptions) *Decoder {
	if opts.ProtoVersion <= 0 {
		opts.ProtoVersion = 1
	}
	if opts.FragmentChanges <= 0 {
		opts.FragmentChanges = DefaultFragmentChanges
	}
	if opts.FragmentBytes <= 0 {
		opts.FragmentBytes = DefaultFragmentBytes
	}
	if opts.MemoryLimit <= 0 {
		opts.MemoryLimit = DefaultMemoryLimit
	}
	return &Decoder{
		opts:    opts,
		chunk:   int(min(max(opts.MemoryLimit/64, minStreamChunk), maxStreamChunk)),
		rels:    make(map[uint32]*relEntry),
		types:   make(map[uint32]change.Type),
		streams: make(map[uint32]*streamTxn),
	}
}

// Relation returns the current shape of a relation by OID, as the last
// Relation message described it.
func (d *Decoder) Relation(oid uint32) (*change.Relation, bool) {
	e := d.rels[oid]
	if e == nil || e.cur == nil {
		return nil, false
	}
	return e.cur, true
}

// Type returns what is known of a type by OID: the Types resolver's answer
// when it has one, otherwise the namespace and name of a pgoutput Type
// message (Kind KindOther). Decoder therefore is a change.TypeResolver.
func (d *Decoder) Type(oid uint32) (change.Type, bool) {
	if d.opts.Types != nil {
		if t, ok := d.opts.Types.Type(oid); ok {
			return t, true
		}
	}
	t, ok := d.types[oid]
	return t, ok
}

var _ change.TypeResolver = (*Decoder)(nil)

// Close removes spill files. The Decoder must not be used afterwards.
func (d *Decoder) Close() error {
	var errs []error
	for xid, st := range d.streams {
		errs = append(errs, d.discard(st))
		delete(d.streams, xid)
	}
	d.dropFree()
	if d.replay != nil {
		errs = append(errs, d.replay.close())
		d.replay = nil
	}
	d.memUsed = 0
	return errors.Join(errs...)
}

// Reset discards every transaction not yet committed (an open Begin, every
// streamed transaction and its spill file), as after a reconnect, when
// PostgreSQL sends them again from the start. Relations, types and events
// already ready for Next are kept; every relation is emitted again before
// its next use, since the discarded part may have held its OpRelation.
func (d *Decoder) Reset() error {
	d.txn = nil
	d.inStream = false
	for _, e := range d.rels {
		e.emitted = nil
	}
	var errs []error
	for xid, st := range d.streams {
		errs = append(errs, d.discard(st))
		delete(d.streams, xid)
	}
	d.dropFree()
	d.memUsed = 0
	return errors.Join(errs...)
}

// Next returns the next ready event (*change.Txn fragment or
// *change.Heartbeat), or nil when none is ready. Call it until nil after
// every Decode. A committed streamed transaction is read back from memory
// and disk one fragment per call, so it never sits in memory whole.
func (d *Decoder) Next() (change.Event, error) {
	if d.qhead < len(d.queue) {
		ev := d.queue[d.qhead]
		d.queue[d.qhead] = nil
		d.qhead++
		if d.qhead == len(d.queue) {
			d.queue, d.qhead = d.queue[:0], 0
		}
		return ev, nil
	}
	if d.replay != nil {
		ev, err := d.replay.next()
		if err != nil || ev == nil {
			cerr := d.replay.close()
			d.replay = nil
			if err == nil {
				err = cerr
			}
		}
		return ev, err
	}
	return nil, nil
}

func (d *Decoder) emit(ev change.Event) { d.queue = append(d.queue, ev) }

// Decode takes one pgoutput message (an XLogData payload) and the
// XLogData's WALStart. It copies what it keeps, so msg may be reused by the
// caller. Malformed messages yield a *DecodeError; Decode never panics.
func (d *Decoder) Decode(msg []byte, walStart change.LSN) error {
	if d.replay != nil {
		// The caller did not drain Next: finish the streamed transaction
		// now so events and relation shapes keep stream order.
		for d.replay != nil {
			ev, err := d.replay.next()
			if err != nil || ev == nil {
				cerr := d.replay.close()
				d.replay = nil
				if err == nil {
					err = cerr
				}
				if err != nil {
					return err
				}
				break
			}
			d.emit(ev)
		}
	}
	if len(msg) == 0 {
		return &DecodeError{LSN: walStart, Reason: "empty message"}
	}
	w := &wire{b: msg, off: 1, lsn: walStart}
	t := msg[0]
	if d.inStream {
		return d.decodeInStream(t, w)
	}
	switch t {
	case msgBegin:
		m := w.begin()
		if w.err == nil && d.txn != nil {
			w.fail("Begin of transaction %d inside transaction %d (no Commit between)", m.xid, d.txn.hdr.XID)
		}
		if w.err != nil {
			return w.err
		}
		d.txn = d.newTxn(change.Txn{XID: m.xid, CommitLSN: m.finalLSN, CommitTime: m.commitTime}, &d.queue)
	case msgCommit:
		m := w.commit(false)
		if w.err == nil && d.txn == nil {
			w.fail("Commit outside a transaction")
		}
		if w.err != nil {
			return w.err
		}
		b := d.txn
		d.txn = nil
		b.hdr.CommitLSN, b.hdr.EndLSN, b.hdr.CommitTime = m.commitLSN, m.endLSN, m.commitTime
		b.finish()
	case msgOrigin:
		lsn := change.LSN(w.u64("origin commit LSN"))
		name := w.str("origin name")
		w.end()
		if w.err == nil && d.txn == nil {
			w.fail("Origin outside a transaction")
		}
		if w.err != nil {
			return w.err
		}
		d.txn.setOrigin(name, lsn)
	case msgRelation:
		r := w.relation()
		if w.err != nil {
			return w.err
		}
		d.setRelation(r)
	case msgType:
		t := w.typeMsg()
		if w.err != nil {
			return w.err
		}
		d.types[t.OID] = t
	case msgInsert, msgUpdate, msgDelete, msgTruncate:
		if d.txn == nil {
			w.fail("change outside a transaction")
			return w.err
		}
		w.b = d.slab.own(msg)
		return d.applyChange(d.txn, w, t, nil)
	case msgMessage:
		w.b = d.slab.own(msg)
		return d.applyMessage(d.txn, w)
	case msgStreamStart:
		return d.streamStart(w)
	case msgStreamStop:
		w.fail("Stream Stop outside a stream block")
		return w.err
	case msgStreamCommit:
		return d.streamCommit(w)
	case msgStreamAbort:
		return d.streamAbort(w)
	default:
		w.off = 0
		w.fail("unknown message type")
		return w.err
	}
	return nil
}

// setRelation records a Relation message's shape, keeping the old pointer
// when nothing changed so no needless OpRelation is emitted.
func (d *Decoder) setRelation(r *change.Relation) {
	e := d.rels[r.OID]
	if e == nil {
		e = &relEntry{}
		d.rels[r.OID] = e
	}
	if !sameRelation(e.cur, r) {
		e.cur = r
	}
}

// useRel returns the relation a change refers to (from local, the
// streamed transaction's own Relation messages, else the current shapes)
// and emits an OpRelation change first when the consumer has not seen that
// shape yet.
func (d *Decoder) useRel(b *txnBuilder, w *wire, oid uint32, local map[uint32]*change.Relation) *change.Relation {
	e := d.rels[oid]
	var r *change.Relation
	if local != nil {
		r = local[oid]
	}
	if r == nil && e != nil {
		r = e.cur
	}
	if r == nil {
		w.fail("relation OID %d used before any Relation message described it", oid)
		return nil
	}
	if b.encode != nil {
		// An encoded transaction carries no relation changes (and may
		// still abort): what the consumer has seen does not change.
		return r
	}
	if e == nil {
		e = &relEntry{}
		d.rels[oid] = e
	}
	if e.emitted != r {
		if !sameRelation(e.emitted, r) {
			b.add(change.Change{Op: change.OpRelation, Rel: r}, 0)
		}
		e.emitted = r
	}
	return r
}

// applyChange decodes an Insert, Update, Delete or Truncate whose bytes the
// decoder owns (w positioned after the type byte and any xid) and adds it to
// b.
func (d *Decoder) applyChange(b *txnBuilder, w *wire, t byte, local map[uint32]*change.Relation) error {
	if t == msgTruncate {
		m := w.truncate()
		if w.err != nil {
			return w.err
		}
		tr := &change.Truncate{
			Rels:            make([]*change.Relation, len(m.oids)),
			Cascade:         m.flags&truncateCascade != 0,
			RestartIdentity: m.flags&truncateRestartIdentity != 0,
		}
		for i, oid := range m.oids {
			tr.Rels[i] = d.useRel(b, w, oid, local)
		}
		if w.err != nil {
			return w.err
		}
		b.add(change.Change{Op: change.OpTruncate, Truncate: tr}, 0)
		return nil
	}
	oid := w.u32("relation OID")
	if w.err != nil {
		return w.err
	}
	rel := d.useRel(b, w, oid, local)
	if w.err != nil {
		return w.err
	}
	n := len(rel.Columns)
	size := len(w.b)
	switch t {
	case msgInsert:
		if k := w.u8("tuple marker"); w.err == nil && k != tupleNew {
			w.off--
			w.fail("Insert tuple marker %q, want 'N'", k)
		}
		row := d.row(w, rel, d.values(b, n))
		w.end()
		if w.err != nil {
			return w.err
		}
		b.add(change.Change{Op: change.OpInsert, Rel: rel, New: row}, size)
	case msgUpdate:
		c := change.Change{Op: change.OpUpdate, Rel: rel}
		k := w.u8("tuple marker")
		var vals []change.Value
		if k == tupleKey || k == tupleOld {
			vals = d.values(b, 2*n)
			c.Old = d.row(w, rel, vals[n:])
			c.OldIsRow = k == tupleOld
			if k == tupleKey && w.err == nil {
				keyOnly(rel, c.Old)
			}
			k = w.u8("tuple marker")
		}
		if w.err == nil && k != tupleNew {
			w.off--
			w.fail("Update tuple marker %q, want 'K', 'O' or 'N'", k)
		}
		if vals == nil {
			vals = d.values(b, n)
		}
		c.New = d.row(w, rel, vals[:n:n])
		w.end()
		if w.err != nil {
			return w.err
		}
		if c.Old != nil {
			for i := range c.New {
				if c.New[i].Kind == change.Unchanged {
					if o := c.Old[i]; o.Kind != change.Absent && o.Kind != change.Unchanged {
						c.New[i] = o
					}
				}
			}
			if c.OldIsRow {
				c.Changed = d.bools(b, n)
				for i := range c.New {
					nv, ov := c.New[i], c.Old[i]
					c.Changed[i] = nv.Kind != change.Unchanged && (nv.Kind != ov.Kind || !bytes.Equal(nv.Data, ov.Data))
				}
			}
		}
		b.add(c, size)
	case msgDelete:
		c := change.Change{Op: change.OpDelete, Rel: rel}
		k := w.u8("tuple marker")
		if w.err == nil && k != tupleKey && k != tupleOld {
			w.off--
			w.fail("Delete tuple marker %q, want 'K' or 'O'", k)
		}
		c.Old = d.row(w, rel, d.values(b, n))
		c.OldIsRow = k == tupleOld
		if k == tupleKey && w.err == nil {
			keyOnly(rel, c.Old)
		}
		w.end()
		if w.err != nil {
			return w.err
		}
		b.add(c, size)
	}
	return nil
}

// values returns room for n values of a change for b: from the slab, or,
// when b encodes each change at once, from a buffer reused for the next.
func (d *Decoder) values(b *txnBuilder, n int) []change.Value {
	if b.encode == nil {
		return d.slab.values(n)
	}
	if cap(d.encVals) < n {
		d.encVals = make([]change.Value, n)
	}
	v := d.encVals[:n:n]
	clear(v)
	return v
}

// bools is values for an update's Changed flags.
func (d *Decoder) bools(b *txnBuilder, n int) []bool {
	if b.encode == nil {
		return d.slab.bools(n)
	}
	if cap(d.encFlag) < n {
		d.encFlag = make([]bool, n)
	}
	return d.encFlag[:n:n]
}

// row reads a tuple into dst (len 0 or n, capacity n) and checks that it
// has the relation's column count.
func (d *Decoder) row(w *wire, rel *change.Relation, dst []change.Value) change.Row {
	start := w.off
	row := w.tuple(dst[:0])
	if w.err == nil && len(row) != len(rel.Columns) {
		w.off = start
		w.fail("tuple has %d columns, relation %s (OID %d) has %d", len(row), rel.QualifiedName(), rel.OID, len(rel.Columns))
	}
	return row
}

// keyOnly marks the non-key columns of a key tuple ('K') Absent:
// PostgreSQL sends them as nulls, but they were not sent at all.
func keyOnly(rel *change.Relation, row change.Row) {
	for i := range row {
		if !rel.Columns[i].Key && row[i].Kind == change.Null {
			row[i] = change.Value{Kind: change.Absent}
		}
	}
}

// applyMessage decodes a logical message whose bytes the decoder owns. A
// transactional message joins b; a non-transactional one is emitted at
// once. Heartbeats become *change.Heartbeat events.
func (d *Decoder) applyMessage(b *txnBuilder, w *wire) error {
	m := w.message()
	if w.err != nil {
		return w.err
	}
	if m.transactional && b == nil {
		w.fail("transactional message outside a transaction")
		return w.err
	}
	if d.opts.HeartbeatPrefix != "" && m.prefix == d.opts.HeartbeatPrefix {
		hb, ok := parseHeartbeat(m.lsn, m.content)
		if !ok {
			// Not one of ours after all: dropping it is safer than
			// stopping the stream on bytes that will be resent forever.
			return nil
		}
		if m.transactional {
			b.heartbeats = append(b.heartbeats, hb)
		} else {
			d.emit(hb)
		}
		return nil
	}
	c := change.Change{Op: change.OpMessage, Message: &change.Message{
		LSN:           m.lsn,
		Transactional: m.transactional,
		Prefix:        m.prefix,
		Content:       m.content,
	}}
	if m.transactional {
		b.add(c, len(w.b))
		return nil
	}
	d.emit(&change.Txn{CommitLSN: m.lsn, Last: true, Changes: []change.Change{c}})
	return nil
}

// parseHeartbeat reads a heartbeat's content: "<seq> <unix-micros>",
// then " <db-unix-micros>" (PostgreSQL's now()) from writers that send
// it.
func parseHeartbeat(lsn change.LSN, content []byte) (*change.Heartbeat, bool) {
	s, us, ok := bytes.Cut(content, []byte{' '})
	if !ok {
		return nil, false
	}
	seq, err := strconv.ParseUint(string(s), 10, 64)
	if err != nil {
		return nil, false
	}
	us, dbus, hasNow := bytes.Cut(us, []byte{' '})
	micros, err := strconv.ParseInt(string(us), 10, 64)
	if err != nil {
		return nil, false
	}
	hb := &change.Heartbeat{LSN: lsn, Seq: seq, Written: time.UnixMicro(micros).UTC(), Arrived: time.Now()}
	if hasNow {
		db, err := strconv.ParseInt(string(dbus), 10, 64)
		if err != nil {
			return nil, false
		}
		hb.Now = time.UnixMicro(db).UTC()
	}
	return hb, true
}

// txnBuilder cuts one transaction into fragments as its changes arrive.
type txnBuilder struct {
	hdr        change.Txn // header fields shared by all fragments
	maxChanges int
	maxBytes   int
	out        *[]change.Event

	frag       *change.Txn // fragment being filled, nil before its first change
	fragBytes  int
	emitted    int // fragments emitted so far
	lastLen    int // changes in the last fragment emitted: the next one's likely size
	heartbeats []*change.Heartbeat

	// encode, when set, takes each change at once instead of a fragment
	// (the StreamEncoder path); relation changes are not passed.
	encode func(c *change.Change)
	held   change.Change // the change being encoded
}

func (d *Decoder) newTxn(hdr change.Txn, out *[]change.Event) *txnBuilder {
	return &txnBuilder{hdr: hdr, maxChanges: d.opts.FragmentChanges, maxBytes: d.opts.FragmentBytes, out: out}
}

func (b *txnBuilder) setOrigin(name string, lsn change.LSN) {
	b.hdr.Origin, b.hdr.OriginLSN = name, lsn
	if b.frag != nil {
		b.frag.Origin, b.frag.OriginLSN = name, lsn
	}
}

// add appends c, first emitting the current fragment if it is full. A full
// fragment waits for the next change so the one Commit ends is never empty.
func (b *txnBuilder) add(c change.Change, size int) {
	if b.encode != nil {
		if c.Op != change.OpRelation {
			// Through a field, so c itself stays off the heap.
			b.held = c
			b.encode(&b.held)
			b.held = change.Change{}
		}
		return
	}
	if b.frag != nil && (len(b.frag.Changes) >= b.maxChanges || b.fragBytes >= b.maxBytes || len(b.frag.Encoded) > 0) {
		b.flush(false)
	}
	if b.frag == nil {
		f := b.hdr
		f.Fragment = b.emitted
		// A large transaction's fragments fill alike: size the next one
		// like the last rather than growing it by copies.
		f.Changes = make([]change.Change, 0, max(min(b.maxChanges, 8), b.lastLen))
		b.frag = &f
	}
	b.frag.Changes = append(b.frag.Changes, c)
	b.fragBytes += size
}

// addEncoded appends encoded changes, first emitting the current fragment
// if it holds Changes or is full. Fragments of encoded bytes are cut at
// most bytes (a larger single record makes a larger fragment).
func (b *txnBuilder) addEncoded(p []byte, most int) {
	if b.frag != nil && (len(b.frag.Changes) > 0 || len(b.frag.Encoded) >= most) {
		b.flush(false)
	}
	if b.frag == nil {
		f := b.hdr
		f.Fragment = b.emitted
		f.Encoded = make([]byte, 0, max(most, len(p)))
		b.frag = &f
	}
	b.frag.Encoded = append(b.frag.Encoded, p...)
	b.fragBytes += len(p)
}

func (b *txnBuilder) flush(last bool) {
	f := b.frag
	if f == nil {
		h := b.hdr
		h.Fragment = b.emitted
		f = &h
	}
	f.Last = last
	if last {
		f.CommitLSN, f.EndLSN, f.CommitTime = b.hdr.CommitLSN, b.hdr.EndLSN, b.hdr.CommitTime
	}
	*b.out = append(*b.out, f)
	b.lastLen = len(f.Changes)
	b.frag, b.fragBytes = nil, 0
	b.emitted++
}

// finish ends the transaction (header complete): the last fragment, then
// its heartbeats. A transaction of heartbeats alone yields no fragment.
func (b *txnBuilder) finish() {
	if b.frag != nil || b.emitted > 0 || len(b.heartbeats) == 0 {
		b.flush(true)
	}
	for _, hb := range b.heartbeats {
		// The heartbeat became visible at the commit: that is its
		// position, so positions never go backwards.
		hb.LSN = b.hdr.CommitLSN
		*b.out = append(*b.out, hb)
	}
	b.heartbeats = nil
}

// slab hands out memory for decoded messages in chunks, so decoding a row
// costs a fraction of an allocation. Handed-out pieces are capped slices
// and never reused.
type slab struct {
	data  []byte
	vals  []change.Value
	flags []bool
}

const (
	slabBytes  = 16 << 10
	slabValues = 256
	slabBools  = 512
)

// own copies msg into decoder-owned memory.
func (s *slab) own(msg []byte) []byte {
	b := s.alloc(len(msg))
	copy(b, msg)
	return b
}

// alloc returns n bytes of decoder-owned memory.
func (s *slab) alloc(n int) []byte {
	if n > slabBytes/4 {
		return make([]byte, n)
	}
	if cap(s.data)-len(s.data) < n {
		s.data = make([]byte, 0, slabBytes)
	}
	l := len(s.data)
	s.data = s.data[:l+n]
	return s.data[l : l+n : l+n]
}

func (s *slab) values(n int) []change.Value {
	if n > slabValues/4 {
		return make([]change.Value, n)
	}
	if cap(s.vals)-len(s.vals) < n {
		s.vals = make([]change.Value, 0, slabValues)
	}
	l := len(s.vals)
	s.vals = s.vals[:l+n]
	return s.vals[l : l+n : l+n]
}

func (s *slab) bools(n int) []bool {
	if n > slabBools/4 {
		return make([]bool, n)
	}
	if cap(s.flags)-len(s.flags) < n {
		s.flags = make([]bool, 0, slabBools)
	}
	l := len(s.flags)
	s.flags = s.flags[:l+n]
	return s.flags[l : l+n : l+n]
}
