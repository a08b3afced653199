package shape

import (
	"bytes"
	"encoding/json"
	"fmt"
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
type generation struct {
	base       uint64
	at         Offset
	chunks     [][2]int64
	file       string
	superseded time.Time // zero for the newest
}

func (g *generation) last() uint64 { return g.base + uint64(len(g.chunks)) - 1 }

// status is where a shape's subscription is.
type status uint8

const (
	hydrating status = iota // subscribed, waiting for its result
	ready                   // live: the log is complete up to the engine's position
	gone                    // deleted, expired or out of scope
)

// entry is a row of the shape's current result.
type entry struct {
	key string // Electric's key
	r   row
}

// Shape is one shape: its definition, handles, current rows, log and
// subscription. Its log is appended by the engine's goroutine (Send) as
// pending changes and made durable by the server's writer before any
// request can see them.
type Shape struct {
	srv  *Server
	ioMu sync.Mutex // serializes the shape's file writes (flush, collect)
	def  definition
	dir  string
	lay  *layout // shared by the shapes of one table and column list

	mu       sync.Mutex
	handles  []string // the current one last
	st       status
	why      string // gone, or a failed first hydration: the reason
	failCode int    // a failed first hydration: the status to answer
	sub      engine.SubID
	rows     map[string]*entry // by engine key; by Electric key while reloaded
	reloaded bool              // rows came from disk: match the next result by Electric key
	gens     []*generation
	tail     []op // durable changes after gens[0].at
	pending  []op // sent by the engine, not yet durable
	snapJob  *snapJob
	lastOff  Offset        // the last change's offset, pending ones included
	latest   Offset        // the last durable change's offset (or chunk end)
	changed  chan struct{} // nil until a request waits (waitLocked)
	used     time.Time
	logName  string
	logBytes int64
	sinceGen int // changes since the newest generation
}

// layout is what shapes of one table and column list share: the columns,
// the key, the electric-schema header, the relation and key prefix.
type layout struct {
	cols   []column
	pk     []int // indexes into cols, in key order
	schema string
	rel    []byte // the relation header ["schema","table"]
	keyPfx []byte // "schema"."table"
}

// snapJob is a generation waiting to be written.
type snapJob struct {
	base  uint64
	at    Offset
	rows  []*entry
	first bool // the initial snapshot (the engine's order, not sorted)
}

// handle returns the current handle.
func (s *Shape) handleLocked() string { return s.handles[len(s.handles)-1] }

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
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

func (s *Shape) wakeLocked() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
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

func (s *Shape) rowOf(vals []any) (row, error) {
	r := make(row, len(s.lay.cols))
	for i, v := range vals {
		if i >= len(r) || v == nil {
			continue
		}
		t, err := s.srv.render.text(s.lay.cols[i].typ, v)
		if err != nil {
			return nil, err
		}
		r[i] = val{s: t, ok: true}
	}
	return r, nil
}

// keyOf builds Electric's key: "schema"."table"/"pk1"/"pk2".
func (s *Shape) keyOf(r row) string {
	b := append([]byte(nil), s.lay.keyPfx...)
	for _, i := range s.lay.pk {
		b = append(b, '/')
		if !r[i].ok {
			b = append(b, '_')
			continue
		}
		b = append(b, '"')
		for j := 0; j < len(r[i].s); j++ {
			if r[i].s[j] == '/' {
				b = append(b, '/')
			}
			b = append(b, r[i].s[j])
		}
		b = append(b, '"')
	}
	return string(b)
}

func (s *Shape) acceptedLocked(out engine.Output) {
	fresh := make(map[string]*entry, len(out.Rows))
	order := make([]*entry, 0, len(out.Rows))
	for _, rr := range out.Rows {
		r, err := s.rowOf(rr.Values)
		if err != nil {
			s.failLocked(500, err.Error())
			return
		}
		e := &entry{key: s.keyOf(r), r: r}
		fresh[string(rr.Key)] = e
		order = append(order, e)
	}
	at := Offset{Tx: uint64(out.LSN)}
	if len(s.gens) == 0 && s.snapJob == nil {
		// The first result: generation 0 is its snapshot (none under
		// log=changes_only), and the log starts after it.
		s.rows = fresh
		job := &snapJob{base: 0, at: at, first: true}
		if !s.def.changesOnly() {
			job.rows = order
		}
		s.snapJob = job
		s.lastOff = maxOffset(s.lastOff, at)
		s.st = ready
		s.srv.dirty(s)
		return
	}
	// A result again (after a restart or a retryable end): what changed
	// meanwhile is appended as ordinary changes at the result's position.
	lsn := uint64(out.LSN)
	var ops []op
	byKey := s.rows
	if s.reloaded {
		byKey = make(map[string]*entry, len(s.rows))
		for _, e := range s.rows {
			byKey[e.key] = e
		}
	}
	seen := make(map[*entry]bool, len(fresh))
	ekeys := make([]string, 0, len(fresh))
	for k := range fresh {
		ekeys = append(ekeys, k)
	}
	sort.Strings(ekeys)
	for _, k := range ekeys {
		e := fresh[k]
		look := k
		if s.reloaded {
			look = e.key
		}
		if old := byKey[look]; old != nil {
			seen[old] = true
			if m := s.updateMsg(old, e, lsn, 0); m != nil {
				ops = append(ops, op{msg: m})
			}
		} else {
			ops = append(ops, op{msg: s.insertMsg(e, lsn, 0)})
		}
	}
	var gone []*entry
	for _, e := range byKey {
		if !seen[e] {
			gone = append(gone, e)
		}
	}
	slices.SortFunc(gone, func(a, b *entry) int { return cmpStr(a.key, b.key) })
	for _, e := range gone {
		ops = append(ops, op{msg: s.deleteMsg(e, lsn, 0)})
	}
	s.rows, s.reloaded = fresh, false
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
	if s.st != ready || s.rows == nil {
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
			if i, ok := at[kc.To]; ok && s.rows[string(kc.To)] == nil {
				keyTo[kc.From] = i
			}
		}
		paired = make([]bool, len(out.Rows))
	}
	for _, k := range out.Removed {
		e := s.rows[string(k)]
		if e == nil {
			continue
		}
		delete(s.rows, string(k))
		if i, ok := keyTo[k]; ok {
			ne, err := s.entryOf(out.Rows[i].Values)
			if err != nil {
				s.renderFailedLocked(err)
				return
			}
			paired[i] = true
			s.rows[string(out.Rows[i].Key)] = ne
			if ne.key != e.key {
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
		e, err := s.entryOf(rr.Values)
		if err != nil {
			s.renderFailedLocked(err)
			return
		}
		if old := s.rows[string(rr.Key)]; old != nil {
			if old.key != e.key {
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
		s.rows[string(rr.Key)] = e
	}
	if len(ops) == 0 {
		return
	}
	s.appendLocked(lsn, ops)
	s.srv.dirty(s)
}

// entryOf renders a row the engine sent.
func (s *Shape) entryOf(vals []any) (*entry, error) {
	r, err := s.rowOf(vals)
	if err != nil {
		return nil, err
	}
	return &entry{key: s.keyOf(r), r: r}, nil
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
	if s.lastOff.Tx == lsn && !s.lastOff.Virtual() {
		n = s.lastOff.Op + 1
	}
	for i := range ops {
		ops[i].off = Offset{Tx: lsn, Op: n}
		ops[i].msg = finishHeaders(ops[i].msg, lsn, n, i == len(ops)-1)
		n++
	}
	s.lastOff = ops[len(ops)-1].off
	s.pending = append(s.pending, ops...)
	s.sinceGen += len(ops)
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
func (s *Shape) appendValues(dst []byte, r row, pick func(i int) bool) []byte {
	dst = append(dst, '{')
	first := true
	for i, c := range s.lay.cols {
		if pick != nil && !pick(i) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendJSONString(dst, c.name)
		dst = append(dst, ':')
		if r[i].ok {
			dst = appendJSONString(dst, r[i].s)
		} else {
			dst = append(dst, "null"...)
		}
	}
	return append(dst, '}')
}

func (s *Shape) isPK(i int) bool { return s.lay.cols[i].pkIndex >= 0 }

func (s *Shape) insertMsg(e *entry, _ uint64, xid uint32) []byte {
	return s.msgHead(e.key, s.appendValues(nil, e.r, nil), nil, "insert", xid)
}

func (s *Shape) deleteMsg(e *entry, _ uint64, xid uint32) []byte {
	if s.def.full() {
		return s.msgHead(e.key, s.appendValues(nil, e.r, nil), nil, "delete", xid)
	}
	return s.msgHead(e.key, s.appendValues(nil, e.r, s.isPK), nil, "delete", xid)
}

// keyChangeDeleteMsg is the first half of a primary-key change, as
// Electric's LogItems.from_change splits an update whose key changed: a
// delete of the old key (its key columns, or the whole old row under
// replica=full) with key_change_to naming the new key.
func (s *Shape) keyChangeDeleteMsg(old, e *entry, xid uint32) []byte {
	m := s.deleteMsg(old, 0, xid)
	m = append(m, `,"key_change_to":`...)
	return appendJSONString(m, e.key)
}

// keyChangeInsertMsg is its second half: an insert of the whole new row
// with key_change_from naming the old key (no old_value, as Electric's).
func (s *Shape) keyChangeInsertMsg(old, e *entry, xid uint32) []byte {
	m := s.insertMsg(e, 0, xid)
	m = append(m, `,"key_change_from":`...)
	return appendJSONString(m, old.key)
}

// updateMsg is nil when nothing the shape selects changed.
func (s *Shape) updateMsg(old, e *entry, _ uint64, xid uint32) []byte {
	changed := make([]bool, len(s.lay.cols))
	anyc := false
	for i := range s.lay.cols {
		if old.r[i] != e.r[i] {
			changed[i], anyc = true, true
		}
	}
	if !anyc {
		return nil
	}
	ch := func(i int) bool { return changed[i] }
	if s.def.full() {
		return s.msgHead(e.key, s.appendValues(nil, e.r, nil), s.appendValues(nil, old.r, ch), "update", xid)
	}
	return s.msgHead(e.key, s.appendValues(nil, e.r, func(i int) bool { return changed[i] || s.isPK(i) }), nil, "update", xid)
}

// snapshotMsg is a snapshot row: headers with operation and relation only.
func (s *Shape) snapshotMsg(dst []byte, e *entry) []byte {
	dst = append(dst, `{"key":`...)
	dst = appendJSONString(dst, e.key)
	dst = append(dst, `,"value":`...)
	dst = s.appendValues(dst, e.r, nil)
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
	if len(s.gens) == 0 && s.snapJob == nil {
		s.failLocked(400, out.Reason)
		return
	}
	s.srv.log.Info("shape: out of scope", "handle", s.handleLocked(), "code", out.Code, "reason", out.Reason)
	s.goneLocked(out.Reason)
}

// failLocked records that the first hydration failed: requests waiting
// for it are answered with code and the reason, and the shape is removed.
func (s *Shape) failLocked(code int, why string) {
	s.failCode = code
	s.goneLocked(why)
}

// goneLocked takes the shape out of service: its handles answer 409 from
// now on, and its files are removed.
func (s *Shape) goneLocked(why string) {
	if s.st == gone {
		return
	}
	s.st, s.why = gone, why
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
	job, batch := s.snapJob, s.pending
	s.snapJob, s.pending = nil, nil
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
		for _, old := range s.gens {
			if old.superseded.IsZero() {
				old.superseded = time.Now()
			}
		}
		s.gens = append(s.gens, g)
		if job.first {
			s.latest = maxOffset(s.latest, Offset{Tx: 0, Op: g.last()})
		}
		s.sinceGen = len(s.pending)
		for _, o := range batch {
			if o.off.Compare(g.at) > 0 {
				s.sinceGen++
			}
		}
	}
	s.tail = append(s.tail, batch...)
	if len(batch) > 0 {
		s.latest = batch[len(batch)-1].off
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
	if s.snapJob != nil || len(s.gens) == 0 || s.sinceGen < max(cfg.CompactMin, len(s.rows)) {
		return
	}
	g := s.gens[len(s.gens)-1]
	rows := make([]*entry, 0, len(s.rows))
	if !s.def.changesOnly() {
		for _, e := range s.rows {
			rows = append(rows, e)
		}
		slices.SortFunc(rows, func(a, b *entry) int { return cmpStr(a.key, b.key) })
	}
	s.snapJob = &snapJob{base: g.last() + 1, at: s.lastOff, rows: rows}
	s.sinceGen = 0
	s.srv.dirty(s)
}

// writeGeneration writes a snapshot's chunks.
func (s *Shape) writeGeneration(job *snapJob) (*generation, error) {
	limit := s.srv.cfg.ChunkBytes
	var chunks [][]byte
	var cur []byte
	for _, e := range job.rows {
		if len(cur) > 0 {
			cur = append(cur, ',')
		}
		cur = s.snapshotMsg(cur, e)
		if len(cur) >= limit {
			chunks = append(chunks, cur)
			cur = nil
		}
	}
	if len(cur) > 0 || len(chunks) == 0 {
		chunks = append(chunks, cur)
	}
	name := snapName(job.base)
	ranges, err := writeSnapshot(filepath.Join(s.dir, name), chunks)
	if err != nil {
		return nil, fmt.Errorf("write snapshot: %w", err)
	}
	return &generation{base: job.base, at: job.at, chunks: ranges, file: name}, nil
}

// appendLog appends changes to the log file and syncs it.
func (s *Shape) appendLog(batch []op) error {
	var b []byte
	for _, o := range batch {
		b = appendRecord(b, o)
	}
	f, err := os.OpenFile(filepath.Join(s.dir, s.logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
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
	s.logBytes += int64(len(b))
	return f.Close()
}

func (s *Shape) saveGensLocked() error {
	gf := gensFile{Log: s.logName}
	for _, g := range s.gens {
		gf.Gens = append(gf.Gens, genFile{Base: g.base, At: g.at.String(), Chunks: g.chunks, Superseded: unixMS(g.superseded)})
	}
	return writeJSON(filepath.Join(s.dir, "gens.json"), gf)
}

func (s *Shape) saveMetaLocked() error {
	return writeJSON(filepath.Join(s.dir, "meta.json"), meta{Version: 1, Def: s.def, Handles: s.handles, Schema: s.lay.schema, Created: time.Now().UnixMilli()})
}

// collect drops generations superseded longer ago than the retention
// (and all but the newest MaxGenerations), with the log before the oldest
// generation kept. A client holding an offset into what was dropped gets
// a 409 and starts again from the newest generation.
func (s *Shape) collect(now time.Time) error {
	s.ioMu.Lock()
	defer s.ioMu.Unlock()
	s.mu.Lock()
	cfg := s.srv.cfg
	drop := 0
	for i, g := range s.gens {
		if i == len(s.gens)-1 {
			break
		}
		if len(s.gens)-drop > cfg.MaxGenerations || now.Sub(g.superseded) > cfg.Retention {
			drop = i + 1
		}
	}
	if drop == 0 || s.st == gone {
		s.mu.Unlock()
		return nil
	}
	dropped := s.gens[:drop]
	s.gens = slices.Clone(s.gens[drop:])
	from := s.gens[0].at
	cut := sort.Search(len(s.tail), func(i int) bool { return s.tail[i].off.Compare(from) > 0 })
	s.tail = slices.Clone(s.tail[cut:])
	keep := s.tail
	oldLog := s.logName
	newLog := nextLogName(oldLog)
	// Rewriting the log runs under the lock so no flush interleaves; it
	// holds at most the changes since the oldest kept generation.
	var b []byte
	for _, o := range keep {
		b = appendRecord(b, o)
	}
	err := writeAtomic(filepath.Join(s.dir, newLog), b)
	if err == nil {
		s.logName, s.logBytes = newLog, int64(len(b))
		err = s.saveGensLocked()
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("rewrite shape log: %w", err)
	}
	os.Remove(filepath.Join(s.dir, oldLog))
	for _, g := range dropped {
		os.Remove(filepath.Join(s.dir, g.file))
	}
	return nil
}

// reload reads a shape's files: its generations, its log (a torn tail
// cut), and its rows as of the log's end.
func (s *Shape) reload() error {
	var gf gensFile
	if err := readJSON(filepath.Join(s.dir, "gens.json"), &gf); err != nil {
		return fmt.Errorf("read gens.json: %w", err)
	}
	if len(gf.Gens) == 0 || gf.Log == "" {
		return fmt.Errorf("gens.json names no generation")
	}
	for _, g := range gf.Gens {
		at, err := parseOffset(g.At)
		if err != nil {
			return fmt.Errorf("gens.json: offset %q: %w", g.At, err)
		}
		s.gens = append(s.gens, &generation{base: g.Base, at: at, chunks: g.Chunks, file: snapName(g.Base), superseded: fromUnixMS(g.Superseded)})
	}
	s.logName = gf.Log
	path := filepath.Join(s.dir, gf.Log)
	ops, good, err := readLog(path)
	if err != nil {
		return fmt.Errorf("read shape log: %w", err)
	}
	if st, err := os.Stat(path); err == nil && st.Size() > good {
		s.srv.log.Warn("shape: cutting a torn log tail", "dir", s.dir, "bytes", st.Size()-good)
		if err := os.Truncate(path, good); err != nil {
			return fmt.Errorf("cut torn shape log: %w", err)
		}
	}
	s.logBytes = good
	from := s.gens[0].at
	for _, o := range ops {
		if o.off.Compare(from) > 0 {
			s.tail = append(s.tail, o)
		}
	}
	g := s.gens[len(s.gens)-1]
	s.latest = Offset{Op: g.last()}
	if len(s.tail) > 0 {
		s.latest = s.tail[len(s.tail)-1].off
	}
	s.lastOff = maxOffset(s.latest, g.at)
	// Rows: the newest snapshot, then the log after it.
	colIdx := make(map[string]int, len(s.lay.cols))
	for i, c := range s.lay.cols {
		colIdx[c.name] = i
	}
	s.rows = map[string]*entry{}
	s.reloaded = true
	for i := range g.chunks {
		b, err := readChunk(filepath.Join(s.dir, g.file), g.chunks[i])
		if err != nil {
			return fmt.Errorf("read snapshot: %w", err)
		}
		var msgs []json.RawMessage
		if err := json.Unmarshal(append(append([]byte{'['}, b...), ']'), &msgs); err != nil {
			return fmt.Errorf("parse snapshot: %w", err)
		}
		for _, m := range msgs {
			if err := s.replay(m, colIdx); err != nil {
				return err
			}
		}
	}
	for _, o := range s.tail {
		if o.off.Compare(g.at) > 0 {
			if err := s.replay(o.msg, colIdx); err != nil {
				return err
			}
			s.sinceGen++
		}
	}
	return nil
}

// replay applies one stored message to the reloaded rows.
func (s *Shape) replay(m []byte, colIdx map[string]int) error {
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
	set := func(r row) row {
		for k, v := range msg.Value {
			if i, ok := colIdx[k]; ok {
				if v == nil {
					r[i] = val{}
				} else {
					r[i] = val{s: *v, ok: true}
				}
			}
		}
		return r
	}
	switch msg.Headers.Operation {
	case "insert":
		s.rows[msg.Key] = &entry{key: msg.Key, r: set(make(row, len(s.lay.cols)))}
	case "update":
		old := s.rows[msg.Key]
		if old == nil {
			return fmt.Errorf("stored update of %s, which the log does not hold", msg.Key)
		}
		s.rows[msg.Key] = &entry{key: msg.Key, r: set(slices.Clone(old.r))}
	case "delete":
		delete(s.rows, msg.Key)
	}
	return nil
}

var _ engine.Sink = (*Shape)(nil)
