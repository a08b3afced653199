package shape

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/freshetdb/freshet/engine"
)

// op is one change message of a shape's log at its offset.
type op struct {
	off Offset
	msg []byte
}

// generation is one snapshot of a shape's rows: its chunks are addressed
// by the virtual offsets 0_base ... 0_(base+n-1), and the log's changes
// after `at` follow it. A fresh client is served the newest generation,
// so it never replays more history than the log since that snapshot.
//
// A log=changes_only generation is served as one empty chunk (its
// clients get no snapshot), but its file holds the rows all the same, at
// the ranges in stored: a restart rebuilds the rows the log implies from
// them, so the re-hydration appends exactly what changed meanwhile.
//
// The rows' chunks are one, held in the generation itself (most shapes'
// snapshots are far below a chunk), or more, behind a pointer: 64 bytes
// either way, where a slice of one would cost its header and 16 bytes.
type generation struct {
	base       uint64
	at         pos
	one        [2]int64    // the rows' only chunk, when more is nil
	more       *[][2]int64 // the rows' chunks when there is not exactly one
	superseded int64       // when, in Unix milliseconds; 0 for the newest
	hidden     bool        // changes_only: served as one empty chunk
}

// newGeneration returns a generation of the rows' chunks.
func newGeneration(base uint64, at pos, chunks [][2]int64, hidden bool) *generation {
	g := &generation{base: base, at: at, hidden: hidden}
	if len(chunks) == 1 {
		g.one = chunks[0]
	} else {
		g.more = &chunks
	}
	return g
}

// chunks is the rows' chunks (stored, under changes_only).
func (g *generation) chunks() [][2]int64 {
	if g.more != nil {
		return *g.more
	}
	return [][2]int64{g.one}
}

// nChunks is how many chunks the rows are in.
func (g *generation) nChunks() int {
	if g.more != nil {
		return len(*g.more)
	}
	return 1
}

func (g *generation) last() uint64 {
	if g.hidden {
		return g.base
	}
	return g.base + uint64(g.nChunks()) - 1
}

// served is the generation's chunk at the virtual offset 0_(base+i).
func (g *generation) served(i uint64) [2]int64 {
	if g.hidden {
		return [2]int64{}
	}
	if g.more != nil {
		return (*g.more)[i]
	}
	if i != 0 {
		panic("shape: chunk " + strconv.FormatUint(i, 10) + " of a generation of one")
	}
	return g.one
}

// file is the generation's snapshot file name.
func (g *generation) file() string { return snapName(g.base) }

// status is where a shape's subscription is.
type status uint8

const (
	hydrating status = iota // subscribed, waiting for its result
	ready                   // live: the log is complete up to the engine's position
	gone                    // deleted, expired or out of scope
)

// Shape is one shape: its definition, handles, current rows, log and
// subscription. Its log is appended by the engine's goroutine (Send) as
// pending changes and made durable by the server's writer before any
// request can see them.
type Shape struct {
	srv  *Server
	ioMu sync.Mutex // serializes the shape's file writes (flush, collect)
	lay  *layout    // shared by the shapes of one table and column list
	name handle     // the first handle, which names its directory: never changes, so read without mu
	// The definition (definition()): its schema and table are the
	// layout's, its params and columns behind defx (nil when it has
	// neither); none of them changes (replica and logMode neither: they
	// sit beside st to share its word).
	where string
	defx  *defExtra

	mu               sync.Mutex
	st               status
	replica, logMode word
	sinceGen         int32 // changes since the newest generation
	sub              engine.SubID
	rows             rowSet      // by engine key; by Electric key while reloaded from disk
	gen              *generation // the newest generation (nil until the first is written); older ones in x.older
	log              *durableLog // nil until a change is durable
	x                *rare       // what a shape holds only at times; nil for an idle, synced, live shape
	lastOff          pos         // the last change's offset, pending ones included
	latest           pos         // the last durable change's offset (or chunk end)
	used             int64       // when a request last asked for it, Unix nanoseconds
}

// defExtra is the part of a shape's definition most shapes do not have:
// params and a column list.
type defExtra struct {
	params  []string
	columns []string
}

// definition is the shape's definition.
func (s *Shape) definition() definition {
	d := definition{Schema: s.lay.tableSchema, Table: s.lay.table, Where: s.where, Replica: s.replica, Log: s.logMode}
	if x := s.defx; x != nil {
		d.Params, d.Columns = x.params, x.columns
	}
	return d
}

// params are the definition's params.
func (s *Shape) params() []string {
	if s.defx == nil {
		return nil
	}
	return s.defx.params
}

// rare is what a shape holds only at times (a 409's handles, its end,
// a waiting request's channel, the bodies requests share, the writes
// waiting for the writer): an idle, synced shape holds none of it, so
// it is made on first use and dropped once empty again (trimLocked).
type rare struct {
	rotated []handle               // the handles given after name (a 409 does), the current one last
	end     *ending                // why it is gone (nil while it is not)
	changed chan struct{}          // nil until a request waits (waitLocked)
	bodies  map[Offset]*sharedBody // by request offset, while requests hold them (holdBodyLocked)
	writes  *writes                // nil while everything the engine sent is durable
	older   []*generation          // the generations before gen still kept, oldest first
}

// rareLocked is the shape's rare part, made on first use.
func (s *Shape) rareLocked() *rare {
	if s.x == nil {
		s.x = &rare{}
	}
	return s.x
}

// trimLocked drops the rare part once it holds nothing.
func (s *Shape) trimLocked() {
	if x := s.x; x != nil && x.rotated == nil && x.end == nil && x.changed == nil && x.bodies == nil && x.writes == nil && x.older == nil {
		s.x = nil
	}
}

// rotatedLocked is the handles given after name, the current one last.
func (s *Shape) rotatedLocked() []handle {
	if s.x == nil {
		return nil
	}
	return s.x.rotated
}

// endLocked is why the shape is gone (nil while it is not).
func (s *Shape) endLocked() *ending {
	if s.x == nil {
		return nil
	}
	return s.x.end
}

// pendingLocked is what the engine sent that is not durable yet (nil:
// nothing).
func (s *Shape) pendingLocked() *writes {
	if s.x == nil {
		return nil
	}
	return s.x.writes
}

// olderLocked is the generations before the newest still kept, oldest
// first.
func (s *Shape) olderLocked() []*generation {
	if s.x == nil {
		return nil
	}
	return s.x.older
}

// oldestLocked is the oldest generation kept (nil before the first).
func (s *Shape) oldestLocked() *generation {
	if o := s.olderLocked(); len(o) > 0 {
		return o[0]
	}
	return s.gen
}

// gensLocked ranges over the generations kept, oldest first.
func (s *Shape) gensLocked(yield func(*generation) bool) {
	for _, g := range s.olderLocked() {
		if !yield(g) {
			return
		}
	}
	if s.gen != nil {
		yield(s.gen)
	}
}

// pushGenLocked makes g the newest generation.
func (s *Shape) pushGenLocked(g *generation) {
	if s.gen != nil {
		x := s.rareLocked()
		x.older = append(x.older, s.gen)
	}
	s.gen = g
}

// pos is an offset that is never the -1 one: 16 B where an Offset takes
// 24, for the positions a shape keeps.
type pos struct{ tx, op uint64 }

// posOf is o as a pos; o is never the -1 offset.
func posOf(o Offset) pos {
	if o.Before {
		panic("shape: the -1 offset kept as a position")
	}
	return pos{o.Tx, o.Op}
}

// off is p as an Offset.
func (p pos) off() Offset { return Offset{Tx: p.tx, Op: p.op} }

// durableLog is a shape's log once it holds a change: most shapes of an
// app change rarely, and an idle one need not carry its fields. Its
// pointer and name change under both ioMu and mu (flush and collect), so
// flush reads them under ioMu alone.
type durableLog struct {
	name string // the file: log-1, log-2, ... (collect rewrites it to the next)
	tail []op   // the durable changes after gens[0].at
}

// firstLog is the log file of a shape whose log was never rewritten.
const firstLog = "log-1"

// writes is what the engine sent that is not yet durable; flush takes it
// whole, so a synced shape holds none.
type writes struct {
	snap *snapJob // a generation to write
	ops  []op     // changes to append
}

// writesLocked returns the shape's pending writes, made on first use.
func (s *Shape) writesLocked() *writes {
	x := s.rareLocked()
	if x.writes == nil {
		x.writes = &writes{}
	}
	return x.writes
}

// snapPendingLocked reports whether a generation waits to be written.
func (s *Shape) snapPendingLocked() bool { w := s.pendingLocked(); return w != nil && w.snap != nil }

// tailOpsLocked is the durable log after gens[0].at.
func (s *Shape) tailOpsLocked() []op {
	if s.log == nil {
		return nil
	}
	return s.log.tail
}

// logFile is the name of the log file; the caller holds ioMu or mu.
func (s *Shape) logFile() string {
	if s.log == nil {
		return firstLog
	}
	return s.log.name
}

// handlesLocked is every handle of the shape, the current one last.
func (s *Shape) handlesLocked() []string {
	out := []string{s.name.String()}
	for _, h := range s.rotatedLocked() {
		out = append(out, h.String())
	}
	return out
}

// ending is why a shape is gone.
type ending struct {
	why  string
	code int // a failed first hydration: the status to answer (else 0)
}

// layout is what shapes of one table and column list share: the columns,
// the key, the electric-schema header, the relation and key prefix.
type layout struct {
	cols   []column
	pk     []int // indexes into cols, in key order
	schema string
	rel    []byte   // the relation header ["schema","table"]
	keyPfx []byte   // "schema"."table"
	names  [][]byte // each column's "name": in a value object

	tableSchema, table string // the table's schema and name, shared by its shapes' definitions
}

// snapJob is a generation waiting to be written.
type snapJob struct {
	base  uint64
	at    Offset
	rows  []entry
	first bool // the initial snapshot (the Accepted's order: none)
}

// dir is the shape's directory.
func (s *Shape) dir() string { return filepath.Join(s.srv.cfg.DataDir, s.name.String()) }

// file is the path of one of the shape's files.
func (s *Shape) file(name string) string {
	return filepath.Join(s.srv.cfg.DataDir, s.name.String(), name)
}

// handle returns the current handle.
func (s *Shape) handleLocked() string { return s.currentLocked().String() }

// currentLocked is the current handle.
func (s *Shape) currentLocked() handle {
	r := s.rotatedLocked()
	if len(r) == 0 {
		return s.name
	}
	return r[len(r)-1]
}

// Handle returns the shape's current handle.
func (s *Shape) Handle() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handleLocked()
}

// waitLocked returns the channel closed at the shape's next change; it is
// made only when a request waits (most shapes have no waiter most of the
// time, and a channel is 96 bytes).
func (s *Shape) waitLocked() <-chan struct{} {
	x := s.rareLocked()
	if x.changed == nil {
		x.changed = make(chan struct{})
	}
	return x.changed
}

func (s *Shape) wakeLocked() {
	if x := s.x; x != nil && x.changed != nil {
		close(x.changed)
		x.changed = nil
		s.trimLocked()
	}
}

// Send implements engine.Sink: it runs on the engine's goroutine and
// never blocks on I/O.
func (s *Shape) Send(out engine.Output) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st == gone {
		return
	}
	switch out.Kind {
	case engine.OutputAccepted:
		s.acceptedLocked(out)
	case engine.OutputDelta:
		s.deltaLocked(out)
	case engine.OutputRefused, engine.OutputEnded:
		s.endedLocked(out)
	}
}

// newEntry renders a result row of the engine (its key and values) into
// an entry.
func (s *Shape) newEntry(key engine.Key, vals []any, sc *scratch) (entry, error) {
	sc.reset()
	for i, c := range s.lay.cols {
		if i >= len(vals) || vals[i] == nil {
			sc.null()
			continue
		}
		b, err := s.srv.render.appendText(sc.vals, c.typ, vals[i])
		if err != nil {
			return entry{}, err
		}
		if c.rec != nil {
			from := len(sc.vals)
			text := string(b[from:])
			if b, err = c.rec.rewrite(b[:from], text); err != nil {
				return entry{}, fmt.Errorf("render a %s value: %w", c.typ.Name, err)
			}
		}
		sc.vals = b
		sc.ended()
	}
	return sc.entry(sc.electricKey(s.lay), string(key)), nil
}

// acceptedRows are an Accepted's rows, in no particular order: the
// engine's held rows, decoded one at a time (the shape subscribes in
// engine.ModeRowsUnordered), or its Rows for a query it cannot hand over
// held.
func acceptedRows(out engine.Output) (int, iter.Seq2[engine.Key, []any]) {
	if out.Rows == nil {
		return out.Held.Len(), out.Held.All()
	}
	return len(out.Rows), func(yield func(engine.Key, []any) bool) {
		for _, rr := range out.Rows {
			if !yield(rr.Key, rr.Values) {
				return
			}
		}
	}
}

func (s *Shape) acceptedLocked(out engine.Output) {
	n, all := acceptedRows(out)
	fresh := newRowSet(n, false)
	var order []entry
	first := s.gen == nil && !s.snapPendingLocked()
	if first {
		order = make([]entry, 0, n)
	}
	var sc scratch
	for k, vals := range all {
		e, err := s.newEntry(k, vals, &sc)
		if err != nil {
			s.failLocked(500, err.Error())
			return
		}
		fresh.put(e)
		if order != nil {
			order = append(order, e)
		}
	}
	at := Offset{Tx: uint64(out.LSN)}
	if first {
		// The first result: generation 0 is its snapshot (stored but
		// not served under log=changes_only), and the log starts after
		// it.
		s.rows = fresh
		s.writesLocked().snap = &snapJob{base: 0, at: at, first: true, rows: order}
		s.lastOff = posOf(maxOffset(s.lastOff.off(), at))
		s.st = ready
		s.srv.dirty(s)
		return
	}
	// A result again (after a restart or a retryable end): what changed
	// meanwhile is appended as ordinary changes at the result's position,
	// in the engine's key order (the Accepted has none: sorted here).
	lsn := uint64(out.LSN)
	var ops []op
	old := &s.rows
	rows := make([]entry, 0, fresh.len())
	fresh.each(func(e entry) { rows = append(rows, e) })
	slices.SortFunc(rows, func(a, b entry) int { return cmpStr(a.look(), b.look()) })
	seen := make(map[string]bool, len(rows))
	for _, e := range rows {
		k := e.look()
		if old.byKey() {
			k = e.key()
		}
		if o, ok := old.get(k); ok {
			seen[o.key()] = true
			if m := s.updateMsg(o, e, lsn, 0); m != nil {
				ops = append(ops, op{msg: m})
			}
		} else {
			ops = append(ops, op{msg: s.insertMsg(e, lsn, 0)})
		}
	}
	var gone []entry
	old.each(func(e entry) {
		if !seen[e.key()] {
			gone = append(gone, e)
		}
	})
	slices.SortFunc(gone, func(a, b entry) int { return cmpStr(a.key(), b.key()) })
	for _, e := range gone {
		ops = append(ops, op{msg: s.deleteMsg(e, lsn, 0)})
	}
	s.rows = fresh
	s.appendLocked(lsn, ops)
	s.st = ready
	s.srv.dirty(s)
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func maxOffset(a, b Offset) Offset {
	if a.Compare(b) >= 0 {
		return a
	}
	return b
}

func (s *Shape) deltaLocked(out engine.Output) {
	if s.st != ready {
		return
	}
	lsn := uint64(out.LSN)
	var ops []op
	// A row an update gave a new primary key is Electric's split: a
	// delete of the old key naming the new one (key_change_to), then an
	// insert of the whole new row naming the old one (key_change_from).
	var keyTo map[engine.Key]int // removed key -> index in out.Rows
	var paired []bool            // out.Rows already rendered as a split's insert
	if len(out.KeyChanges) > 0 {
		at := make(map[engine.Key]int, len(out.Rows))
		for i, rr := range out.Rows {
			at[rr.Key] = i
		}
		keyTo = make(map[engine.Key]int, len(out.KeyChanges))
		for _, kc := range out.KeyChanges {
			if _, held := s.rows.get(string(kc.To)); !held {
				if i, ok := at[kc.To]; ok {
					keyTo[kc.From] = i
				}
			}
		}
		paired = make([]bool, len(out.Rows))
	}
	var sc scratch
	for _, k := range out.Removed {
		e, ok := s.rows.get(string(k))
		if !ok {
			continue
		}
		s.rows.del(string(k))
		if i, ok := keyTo[k]; ok {
			ne, err := s.newEntry(out.Rows[i].Key, out.Rows[i].Values, &sc)
			if err != nil {
				s.renderFailedLocked(err)
				return
			}
			paired[i] = true
			s.rows.put(ne)
			if ne.key() != e.key() {
				ops = append(ops, op{msg: s.keyChangeDeleteMsg(e, ne, out.XID)}, op{msg: s.keyChangeInsertMsg(e, ne, out.XID)})
			} else if m := s.updateMsg(e, ne, lsn, out.XID); m != nil {
				ops = append(ops, op{msg: m})
			}
			continue
		}
		ops = append(ops, op{msg: s.deleteMsg(e, lsn, out.XID)})
	}
	for i, rr := range out.Rows {
		if paired != nil && paired[i] {
			continue
		}
		e, err := s.newEntry(rr.Key, rr.Values, &sc)
		if err != nil {
			s.renderFailedLocked(err)
			return
		}
		if old, ok := s.rows.get(string(rr.Key)); ok {
			if old.key() != e.key() {
				// The key's text changed with the same engine key
				// (cannot happen for the same typed values); treat as
				// delete and insert.
				ops = append(ops, op{msg: s.deleteMsg(old, lsn, out.XID)}, op{msg: s.insertMsg(e, lsn, out.XID)})
			} else if m := s.updateMsg(old, e, lsn, out.XID); m != nil {
				ops = append(ops, op{msg: m})
			}
		} else {
			ops = append(ops, op{msg: s.insertMsg(e, lsn, out.XID)})
		}
		s.rows.put(e)
	}
	if len(ops) == 0 {
		return
	}
	s.appendLocked(lsn, ops)
	s.srv.dirty(s)
}

func (s *Shape) renderFailedLocked(err error) {
	s.srv.log.Error("shape: a value could not be rendered; the shape is dropped", "handle", s.handleLocked(), "err", err)
	s.goneLocked("a value could not be rendered: " + err.Error())
}

// appendLocked numbers a transaction's changes and queues them. Offsets
// are lsn_1, lsn_2, ...: op 0 is never used, so lsn_0 lies before every
// change of the transaction committed at lsn. Two batches at one lsn (a
// re-hydration landing at the position of the last transaction) continue
// the numbering.
func (s *Shape) appendLocked(lsn uint64, ops []op) {
	if len(ops) == 0 {
		return
	}
	n := uint64(1)
	if last := s.lastOff.off(); last.Tx == lsn && !last.Virtual() {
		n = last.Op + 1
	}
	for i := range ops {
		ops[i].off = Offset{Tx: lsn, Op: n}
		ops[i].msg = finishHeaders(ops[i].msg, lsn, n, i == len(ops)-1)
		n++
	}
	s.lastOff = posOf(ops[len(ops)-1].off)
	w := s.writesLocked()
	w.ops = append(w.ops, ops...)
	s.sinceGen += int32(len(ops))
}

// finishHeaders closes a change message's headers with its position.
func finishHeaders(m []byte, lsn, opn uint64, last bool) []byte {
	m = append(m, `,"lsn":"`...)
	m = strconv.AppendUint(m, lsn, 10)
	m = append(m, `","op_position":`...)
	m = strconv.AppendUint(m, opn, 10)
	if last {
		m = append(m, `,"last":true`...)
	}
	return append(m, "}}"...)
}

// msgHead starts a change message: key, value (and old_value), and the
// headers up to the position, which finishHeaders adds.
func (s *Shape) msgHead(key string, value, old []byte, opName string, xid uint32) []byte {
	m := make([]byte, 0, len(key)+len(value)+len(old)+128)
	m = append(m, `{"key":`...)
	m = appendJSONString(m, key)
	m = append(m, `,"value":`...)
	m = append(m, value...)
	if old != nil {
		m = append(m, `,"old_value":`...)
		m = append(m, old...)
	}
	m = append(m, `,"headers":{"operation":"`...)
	m = append(m, opName...)
	m = append(m, `","relation":`...)
	m = append(m, s.lay.rel...)
	if xid != 0 {
		m = append(m, `,"txids":[`...)
		m = strconv.AppendUint(m, uint64(xid), 10)
		m = append(m, ']')
	}
	return m
}

// appendValues writes {"col":"v",...} for the columns where pick is true
// (all when pick is nil).
func (s *Shape) appendValues(dst []byte, e entry, pick func(i int) bool) []byte {
	dst = append(dst, '{')
	first := true
	for i := range s.lay.cols {
		if pick != nil && !pick(i) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, s.lay.names[i]...)
		if v, ok := e.val(i); ok {
			dst = appendJSONString(dst, v)
		} else {
			dst = append(dst, "null"...)
		}
	}
	return append(dst, '}')
}

func (s *Shape) isPK(i int) bool { return s.lay.cols[i].pkIndex >= 0 }

func (s *Shape) insertMsg(e entry, _ uint64, xid uint32) []byte {
	return s.msgHead(e.key(), s.appendValues(nil, e, nil), nil, "insert", xid)
}

func (s *Shape) deleteMsg(e entry, _ uint64, xid uint32) []byte {
	if s.definition().full() {
		return s.msgHead(e.key(), s.appendValues(nil, e, nil), nil, "delete", xid)
	}
	return s.msgHead(e.key(), s.appendValues(nil, e, s.isPK), nil, "delete", xid)
}

// keyChangeDeleteMsg is the first half of a primary-key change, as
// Electric's LogItems.from_change splits an update whose key changed: a
// delete of the old key (its key columns, or the whole old row under
// replica=full) with key_change_to naming the new key.
func (s *Shape) keyChangeDeleteMsg(old, e entry, xid uint32) []byte {
	m := s.deleteMsg(old, 0, xid)
	m = append(m, `,"key_change_to":`...)
	return appendJSONString(m, e.key())
}

// keyChangeInsertMsg is its second half: an insert of the whole new row
// with key_change_from naming the old key (no old_value, as Electric's).
func (s *Shape) keyChangeInsertMsg(old, e entry, xid uint32) []byte {
	m := s.insertMsg(e, 0, xid)
	m = append(m, `,"key_change_from":`...)
	return appendJSONString(m, old.key())
}

// updateMsg is nil when nothing the shape selects changed.
func (s *Shape) updateMsg(old, e entry, _ uint64, xid uint32) []byte {
	changed := make([]bool, len(s.lay.cols))
	anyc := false
	for i := range s.lay.cols {
		if !sameVal(old, e, i) {
			changed[i], anyc = true, true
		}
	}
	if !anyc {
		return nil
	}
	ch := func(i int) bool { return changed[i] }
	if s.definition().full() {
		return s.msgHead(e.key(), s.appendValues(nil, e, nil), s.appendValues(nil, old, ch), "update", xid)
	}
	return s.msgHead(e.key(), s.appendValues(nil, e, func(i int) bool { return changed[i] || s.isPK(i) }), nil, "update", xid)
}

// snapshotMsg is a snapshot row: headers with operation and relation only.
func (s *Shape) snapshotMsg(dst []byte, e entry) []byte {
	dst = append(dst, `{"key":`...)
	dst = appendJSONString(dst, e.key())
	dst = append(dst, `,"value":`...)
	dst = s.appendValues(dst, e, nil)
	dst = append(dst, `,"headers":{"operation":"insert","relation":`...)
	dst = append(dst, s.lay.rel...)
	return append(dst, "}}"...)
}

func (s *Shape) endedLocked(out engine.Output) {
	if out.Retryable && !s.srv.closing() {
		s.st = hydrating
		s.srv.log.Info("shape: subscription ended; subscribing again", "handle", s.handleLocked(), "code", out.Code, "reason", out.Reason)
		s.srv.resubscribe(s)
		return
	}
	if s.srv.closing() {
		return
	}
	if s.gen == nil && !s.snapPendingLocked() {
		s.failLocked(400, out.Reason)
		return
	}
	s.srv.log.Info("shape: out of scope", "handle", s.handleLocked(), "code", out.Code, "reason", out.Reason)
	s.goneLocked(out.Reason)
}

// failLocked records that the first hydration failed: requests waiting
// for it are answered with code and the reason, and the shape is removed.
func (s *Shape) failLocked(code int, why string) {
	s.goneLocked(why)
	s.x.end.code = code
}

// goneLocked takes the shape out of service: its handles answer 409 from
// now on, and its files are removed.
func (s *Shape) goneLocked(why string) {
	if s.st == gone {
		return
	}
	s.st = gone
	s.rareLocked().end = &ending{why: why}
	s.wakeLocked()
	s.srv.forget(s)
}

// flush makes pending changes and a pending snapshot durable, then
// publishes them to readers. It runs on the server's writer goroutine.
func (s *Shape) flush() error {
	s.ioMu.Lock()
	defer s.ioMu.Unlock()
	s.mu.Lock()
	if s.st == gone {
		s.mu.Unlock()
		return nil
	}
	var job *snapJob
	var batch []op
	if w := s.pendingLocked(); w != nil {
		job, batch = w.snap, w.ops
		s.x.writes = nil
		s.trimLocked()
	}
	s.mu.Unlock()
	var g *generation
	if job != nil {
		var err error
		if g, err = s.writeGeneration(job); err != nil {
			return err
		}
	}
	if len(batch) > 0 {
		if err := s.appendLog(batch); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if g != nil {
		for old := range s.gensLocked {
			if old.superseded == 0 {
				old.superseded = time.Now().UnixMilli()
			}
		}
		s.pushGenLocked(g)
		if job.first {
			s.latest = posOf(maxOffset(s.latest.off(), Offset{Tx: 0, Op: g.last()}))
		}
		s.sinceGen = 0
		if w := s.pendingLocked(); w != nil {
			s.sinceGen = int32(len(w.ops))
		}
		for _, o := range batch {
			if o.off.Compare(g.at.off()) > 0 {
				s.sinceGen++
			}
		}
	}
	if len(batch) > 0 {
		if s.log == nil {
			s.log = &durableLog{name: firstLog}
		}
		s.log.tail = append(s.log.tail, batch...)
		s.latest = posOf(batch[len(batch)-1].off)
	}
	if g != nil || len(batch) > 0 {
		if err := s.saveGensLocked(); err != nil {
			return err
		}
	}
	s.wakeLocked()
	s.maybeCompactLocked()
	return nil
}

// maybeCompactLocked starts a new generation once the log since the
// newest one holds more changes than the result has rows (and at least
// CompactMin): a fresh client then reads at most about twice the result.
func (s *Shape) maybeCompactLocked() {
	cfg := s.srv.cfg
	if s.snapPendingLocked() || s.gen == nil || int(s.sinceGen) < max(cfg.CompactMin, s.rows.len()) {
		return
	}
	g := s.gen
	// The rows are written under log=changes_only too (and not served):
	// a restart rebuilds the shape's rows from the newest generation.
	rows := make([]entry, 0, s.rows.len())
	s.rows.each(func(e entry) { rows = append(rows, e) })
	slices.SortFunc(rows, func(a, b entry) int { return cmpStr(a.key(), b.key()) })
	s.writesLocked().snap = &snapJob{base: g.last() + 1, at: s.lastOff.off(), rows: rows}
	s.sinceGen = 0
	s.srv.dirty(s)
}

// writeGeneration writes a snapshot's chunks: each is written to the
// file as soon as it reaches the chunk threshold, from one buffer reused
// chunk after chunk, and the file is synced once at the end. Under
// log=changes_only the chunks are stored, and one empty chunk is served.
func (s *Shape) writeGeneration(job *snapJob) (*generation, error) {
	name := snapName(job.base)
	ranges, err := s.writeSnapshot(s.file(name), job.rows)
	if err != nil {
		return nil, fmt.Errorf("write snapshot: %w", err)
	}
	if s.definition().changesOnly() {
		return newGeneration(job.base, posOf(job.at), ranges, true), nil
	}
	return newGeneration(job.base, posOf(job.at), ranges, false), nil
}

func (s *Shape) writeSnapshot(path string, rows []entry) ([][2]int64, error) {
	limit := s.srv.cfg.ChunkBytes
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ranges [][2]int64
	var pos int64
	// The buffer grows to a chunk (the threshold plus one row) and is
	// reused for the next; it starts small, since most shapes' snapshots
	// are far below the threshold (a buffer of the threshold for each
	// would be 10 MiB allocated and cleared per snapshot).
	cur := make([]byte, 0, min(limit, 64<<10))
	write := func() error {
		if _, err := f.Write(cur); err != nil {
			return err
		}
		ranges = append(ranges, [2]int64{pos, int64(len(cur))})
		pos += int64(len(cur))
		cur = cur[:0]
		return nil
	}
	for _, e := range rows {
		if len(cur) > 0 {
			cur = append(cur, ',')
		}
		cur = s.snapshotMsg(cur, e)
		if len(cur) >= limit {
			if err := write(); err != nil {
				return nil, err
			}
		}
	}
	if len(cur) > 0 || len(ranges) == 0 {
		if err := write(); err != nil {
			return nil, err
		}
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	return ranges, f.Close()
}

// appendLog appends changes to the log file and syncs it.
func (s *Shape) appendLog(batch []op) error {
	var b []byte
	for _, o := range batch {
		b = appendRecord(b, o)
	}
	f, err := os.OpenFile(s.file(s.logFile()), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open shape log: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("append shape log: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync shape log: %w", err)
	}
	return f.Close()
}

func (s *Shape) saveGensLocked() error {
	gf := gensFile{Log: s.logFile()}
	for g := range s.gensLocked {
		f := genFile{Base: g.base, At: g.at.off().String(), Chunks: g.chunks(), Superseded: g.superseded}
		if g.hidden {
			f.Chunks, f.Stored = [][2]int64{{0, 0}}, g.chunks()
		}
		gf.Gens = append(gf.Gens, f)
	}
	return writeJSON(s.file("gens.json"), gf)
}

func (s *Shape) saveMetaLocked() error {
	return writeJSON(s.file("meta.json"), meta{Version: 1, Def: s.definition(), Handles: s.handlesLocked(), Schema: s.lay.schema, Created: time.Now().UnixMilli()})
}

// collect drops generations superseded longer ago than the retention,
// and, past the newest MaxGenerations, those superseded longer ago than
// a cached response can point into them (Config.CacheLife), with the log
// before the oldest generation kept. A client holding an offset into what
// was dropped gets a 409 and starts again from the newest generation.
func (s *Shape) collect(now time.Time) error {
	s.ioMu.Lock()
	defer s.ioMu.Unlock()
	s.mu.Lock()
	cfg := s.srv.cfg
	older := s.olderLocked()
	drop := 0
	for i, g := range older {
		age := now.Sub(time.UnixMilli(g.superseded))
		if len(older)+1-drop > cfg.MaxGenerations && age > cfg.CacheLife() || age > cfg.Retention {
			drop = i + 1
		}
	}
	if drop == 0 || s.st == gone {
		s.mu.Unlock()
		return nil
	}
	dropped := slices.Clone(older[:drop])
	if drop == len(older) {
		s.x.older = nil
		s.trimLocked()
	} else {
		s.x.older = slices.Clone(older[drop:])
	}
	from := s.oldestLocked().at.off()
	tail := s.tailOpsLocked()
	cut := sort.Search(len(tail), func(i int) bool { return tail[i].off.Compare(from) > 0 })
	keep := slices.Clone(tail[cut:])
	if s.log != nil {
		s.log.tail = keep
	}
	oldLog := s.logFile()
	newLog := nextLogName(oldLog)
	// Rewriting the log runs under the lock so no flush interleaves; it
	// holds at most the changes since the oldest kept generation.
	var b []byte
	for _, o := range keep {
		b = appendRecord(b, o)
	}
	err := writeAtomic(s.file(newLog), b)
	if err == nil {
		if s.log == nil {
			s.log = &durableLog{}
		}
		s.log.name = newLog
		err = s.saveGensLocked()
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("rewrite shape log: %w", err)
	}
	os.Remove(s.file(oldLog))
	for _, g := range dropped {
		os.Remove(s.file(g.file()))
	}
	return nil
}

// reload reads a shape's files: its generations, its log (a torn tail
// cut), and its rows as of the log's end.
func (s *Shape) reload() error {
	var gf gensFile
	if err := readJSON(s.file("gens.json"), &gf); err != nil {
		return fmt.Errorf("read gens.json: %w", err)
	}
	if len(gf.Gens) == 0 || gf.Log == "" {
		return fmt.Errorf("gens.json names no generation")
	}
	for _, g := range gf.Gens {
		at, err := parseOffset(g.At)
		if err == nil && at.Before {
			err = errors.New("not a position")
		}
		if err != nil {
			return fmt.Errorf("gens.json: offset %q: %w", g.At, err)
		}
		ng := newGeneration(g.Base, posOf(at), g.Chunks, false)
		if g.Stored != nil {
			ng = newGeneration(g.Base, posOf(at), g.Stored, true)
		}
		ng.superseded = g.Superseded
		s.pushGenLocked(ng)
	}
	if g := s.gen; s.definition().changesOnly() && !g.hidden {
		// Written before changes_only generations kept their rows: what
		// the log implies cannot be rebuilt, so the shape is not served
		// again rather than served inexactly.
		return fmt.Errorf("gens.json: the changes_only generation %d keeps no rows (written by an older freshet)", g.base)
	}
	s.log = &durableLog{name: gf.Log}
	path := s.file(gf.Log)
	ops, good, err := readLog(path)
	if err != nil {
		return fmt.Errorf("read shape log: %w", err)
	}
	if st, err := os.Stat(path); err == nil && st.Size() > good {
		s.srv.log.Warn("shape: cutting a torn log tail", "dir", s.dir(), "bytes", st.Size()-good)
		if err := os.Truncate(path, good); err != nil {
			return fmt.Errorf("cut torn shape log: %w", err)
		}
	}
	from := s.oldestLocked().at.off()
	for _, o := range ops {
		if o.off.Compare(from) > 0 {
			s.log.tail = append(s.log.tail, o)
		}
	}
	g := s.gen
	s.latest = pos{op: g.last()}
	if tail := s.log.tail; len(tail) > 0 {
		s.latest = posOf(tail[len(tail)-1].off)
	}
	s.lastOff = posOf(maxOffset(s.latest.off(), g.at.off()))
	// Rows: the newest snapshot, then the log after it.
	colIdx := make(map[string]int, len(s.lay.cols))
	for i, c := range s.lay.cols {
		colIdx[c.name] = i
	}
	s.rows = newRowSet(0, true)
	r := &replayer{s: s, colIdx: colIdx}
	for _, c := range g.chunks() {
		b, err := readChunk(s.file(g.file()), c)
		if err != nil {
			return fmt.Errorf("read snapshot: %w", err)
		}
		var msgs []json.RawMessage
		if err := json.Unmarshal(append(append([]byte{'['}, b...), ']'), &msgs); err != nil {
			return fmt.Errorf("parse snapshot: %w", err)
		}
		for _, m := range msgs {
			if err := r.replay(m); err != nil {
				return err
			}
		}
	}
	for _, o := range s.log.tail {
		if o.off.Compare(g.at.off()) > 0 {
			if err := r.replay(o.msg); err != nil {
				return err
			}
			s.sinceGen++
		}
	}
	return nil
}

// replayer rebuilds a shape's rows from its stored messages.
type replayer struct {
	s      *Shape
	colIdx map[string]int
	sc     scratch
	vals   []*string
}

// replay applies one stored message to the reloaded rows.
func (r *replayer) replay(m []byte) error {
	s := r.s
	var msg struct {
		Key     string             `json:"key"`
		Value   map[string]*string `json:"value"`
		Headers struct {
			Operation string `json:"operation"`
		} `json:"headers"`
	}
	dec := json.NewDecoder(bytes.NewReader(m))
	if err := dec.Decode(&msg); err != nil {
		return fmt.Errorf("parse stored message: %w", err)
	}
	// build makes the row: base's values (none for an insert) with the
	// message's on top.
	build := func(base *entry) entry {
		r.vals = r.vals[:0]
		for i := range s.lay.cols {
			var v *string
			if base != nil {
				if t, ok := base.val(i); ok {
					v = &t
				}
			}
			r.vals = append(r.vals, v)
		}
		for k, v := range msg.Value {
			if i, ok := r.colIdx[k]; ok {
				r.vals[i] = v
			}
		}
		r.sc.reset()
		for _, v := range r.vals {
			if v == nil {
				r.sc.null()
			} else {
				r.sc.text(*v)
			}
		}
		return r.sc.entry([]byte(msg.Key), "")
	}
	switch msg.Headers.Operation {
	case "insert":
		s.rows.put(build(nil))
	case "update":
		old, ok := s.rows.get(msg.Key)
		if !ok {
			return fmt.Errorf("stored update of %s, which the log does not hold", msg.Key)
		}
		s.rows.put(build(&old))
	case "delete":
		s.rows.del(msg.Key)
	}
	return nil
}

var _ engine.Sink = (*Shape)(nil)
