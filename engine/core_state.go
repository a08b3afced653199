package engine

import (
	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

// state is the Core's state.
type state struct {
	opts CoreOptions
	pos  change.LSN // last commit applied or Advance position
	out  Ready
	// applied is the commit LSN of the last transaction applied: a
	// transaction at or below it is a duplicate.
	applied change.LSN

	views index[query.PlanKey, *view] // by plan.Key
	// The clock (core_clock.go): the database's now() at clockLSN, the
	// position of the Clock call that set it; clocked are the views whose
	// query depends on it.
	clock    change.Timestamp
	clockSet bool
	clockLSN change.LSN
	clocked  map[*view]struct{}
	subs     index[SubID, *sub]
	tables   map[uint32]*table
	// dyingTables are the tables that freed row ids in the current core
	// call (recycleRows).
	dyingTables []*table
	// holderSrcs are the view sources by holder id (viewSource.hid, 0
	// unused): a held row names its holders by it (4 bytes, not a
	// pointer's 8). Freed ids wait in dyingHIDs for the next core call,
	// as row ids do, then in freeHIDs.
	holderSrcs          [][]*viewSource // in chunks of holderChunk
	freeHIDs, dyingHIDs []uint32
	nextViewID          uint64
	// colSets interns view sources' layout positions (viewSource.col):
	// the views of one shape read the same slots, so they share one
	// slice (never written to once made). Keyed by the positions'
	// varints; forgotten all at once past maxColSets.
	colSets map[string][]int
	colKey  []byte // scratch for colSets' key
	colBuf  []int  // scratch for a view source's positions

	// reads asked for and not landed; txnLog holds, while any is
	// pending, the committed transactions since the oldest of them was
	// asked for (a read replays those its snapshot does not contain).
	reads index[ReadID, *read]
	// doneReads are the reads answered and not landed yet (some may be
	// gone from reads: they are skipped).
	doneReads  []ReadID
	nextReadID ReadID
	txnLog     []*loggedTxn
	txnLogBase int // absolute index of txnLog[0]

	// The transaction being applied. The overlay holds every row it
	// changed, as it has left it so far, over the held rows (which keep
	// their values until finish settles the transaction); overlayRows
	// lists the same rows in the order first changed.
	inTxn       bool
	cur         *loggedTxn
	overlay     map[rowRef]*overlayRow
	overlayRows []*overlayRow
	dirty       []*view // views touched by the transaction, to settle
	changeSeq   uint64  // numbers the changes routed (viewSource.touchedIn)
	refresh     []*view // views to re-read once the transaction is settled
	// refilling are the views that went to re-read their result (some
	// may have landed since: touchRefilling drops them).
	refilling []*view

	// Scratch reused across transactions, so that a change allocates
	// only what it keeps.
	spare           *loggedTxn        // a transaction record not kept in the log
	freeOverlayRows []*overlayRow     // overlay rows of settled transactions
	touchFn         func(*viewSource) // touchOnce, bound once (route.match takes it)
	routedKeys      [2]string         // the old and new key of the change being routed
	keysBuf         []string
	nextsBuf        []settleNext
	cmpBuf          []byte // sameOutput's scratch
	scratchRow      rowScratch
	rowsBuf         []ResultRow // settle's delta rows before they are cut from mem
	mem             applyMem    // the apply path's memory (core_arena.go)
	// handed is the Outputs slice the last ready returned: the next
	// outputs are written over it (Core.Ready's rule).
	handed []Output
}

// read is a read asked for and not landed yet.
type read struct {
	id       ReadID
	v        *view
	src      int // -1: the whole query; else one source of a join
	logStart int // absolute txnLog index of the first transaction it may miss
	want     int64
	done     bool
	snap     Snapshot
	rows     []query.Row
	held     []rowVals // a single-table read's rows, encoded (readHeld)
	complete bool
}

// loggedTxn is a committed transaction kept for reads that have not landed.
type loggedTxn struct {
	xid     uint32
	lsn     change.LSN
	changes []*change.Change
}

// rowRef names a row: its table's OID and its row key.
type rowRef struct {
	oid uint32
	key string
}

// overlayRow is a row changed by the transaction being applied: the
// overlay's entry for it.
type overlayRow struct {
	tb     *table
	key    string
	before rowVals // the row before the transaction (zero: not held)
	after  []any   // nil: deleted
	id     rowID   // the held row, once the transaction is settling (finish)
	// fresh: id is a new row, out of the key set until finish sees a
	// view hold it.
	fresh bool
	// from is, when an UPDATE of the transaction gave the row its key,
	// the key the row had before the transaction ("" otherwise): a
	// delta reports the pair (Output.KeyChanges).
	from string
}

// newState returns an empty state.
func newState(opts CoreOptions) *state {
	s := &state{
		opts:    opts,
		clocked: make(map[*view]struct{}),
		tables:  make(map[uint32]*table),
		overlay: make(map[rowRef]*overlayRow),
		mem:     newApplyMem(),
	}
	s.touchFn = s.touchOnce
	return s
}

// ready returns, and forgets, the reads and outputs produced so far.
func (s *state) ready() Ready {
	r := s.out
	// The next outputs reuse r's slice; what the last call handed out
	// beyond r's outputs is cleared, so that it keeps no rows alive.
	if n := len(s.handed); n > len(r.Outputs) {
		clear(s.handed[len(r.Outputs):n])
	}
	if cap(r.Outputs) > maxRecycledOutputs {
		// One transaction reached that many subscriptions: its array
		// goes to the collector rather than staying for good.
		s.handed, s.out = nil, Ready{}
		return r
	}
	s.handed = r.Outputs
	s.out = Ready{Outputs: r.Outputs[:0]}
	return r
}

// maxRecycledOutputs bounds the array ready keeps for the next outputs (an Output is about
// 300 bytes: 16,384 of them hold about 5 MB), so one transaction that
// reached a million subscriptions does not keep its array for good.
const maxRecycledOutputs = 1 << 14

// dropRow takes row id of tb out of its key set and frees it when
// nothing holds it (rowTable.drop), noting tb for recycleRows.
func (s *state) dropRow(tb *table, id rowID) {
	n := len(tb.rows.dying)
	tb.rows.drop(id)
	if n == 0 && len(tb.rows.dying) > 0 {
		s.dyingTables = append(s.dyingTables, tb)
	}
}

// freeRow frees row id of tb, out of its key set and held by none.
func (s *state) freeRow(tb *table, id rowID) {
	if len(tb.rows.dying) == 0 {
		s.dyingTables = append(s.dyingTables, tb)
	}
	tb.rows.freeID(id)
}

// recycleRows makes the row ids and holder ids freed by the core's
// earlier calls reusable (rowTable.recycle): a call begins with it, so
// that no id freed during a call is reused in it.
func (s *state) recycleRows() {
	for i, tb := range s.dyingTables {
		tb.rows.recycle()
		s.dyingTables[i] = nil
	}
	s.dyingTables = s.dyingTables[:0]
	s.freeHIDs = append(s.freeHIDs, s.dyingHIDs...)
	s.dyingHIDs = s.dyingHIDs[:0]
}

// holderChunk is how many view sources a chunk of state.holderSrcs
// holds: the registry grows a chunk at a time, not by doubling.
const holderChunk = 1024

// holderSrc returns the view source of holder id hid.
func (s *state) holderSrc(hid uint32) *viewSource {
	return s.holderSrcs[hid/holderChunk][hid%holderChunk]
}

// newHolderID gives vs its holder id.
func (s *state) newHolderID(vs *viewSource) {
	if n := len(s.freeHIDs); n > 0 {
		vs.hid = s.freeHIDs[n-1]
		s.freeHIDs = s.freeHIDs[:n-1]
	} else {
		last := len(s.holderSrcs) - 1
		if last < 0 || len(s.holderSrcs[last]) == holderChunk {
			s.holderSrcs = append(s.holderSrcs, make([]*viewSource, 0, holderChunk))
			last++
			if last == 0 {
				s.holderSrcs[0] = append(s.holderSrcs[0], nil) // 0: no holder
			}
		}
		vs.hid = uint32(last*holderChunk + len(s.holderSrcs[last]))
		s.holderSrcs[last] = append(s.holderSrcs[last], nil)
	}
	s.holderSrcs[vs.hid/holderChunk][vs.hid%holderChunk] = vs
}

// freeHolderID frees the holder id of vs, a view source that holds no
// row any more.
func (s *state) freeHolderID(vs *viewSource) {
	s.holderSrcs[vs.hid/holderChunk][vs.hid%holderChunk] = nil
	s.dyingHIDs = append(s.dyingHIDs, vs.hid)
}

// stats counts the views, subscriptions, held rows and pending reads.
func (s *state) stats() Stats {
	st := Stats{Views: s.views.len(), Subs: s.subs.len(), PendingReads: s.reads.len()}
	for _, tb := range s.tables {
		st.HeldRows += tb.rows.len()
	}
	return st
}

// cmpU64 compares two integers for slices.SortFunc.
func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// keepingLog reports whether committed transactions are logged: while a
// read is pending, it may have to replay them when it lands.
func (s *state) keepingLog() bool { return s.reads.len() > 0 }

// cmpStr compares two strings for slices.SortFunc.
func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
