package engine

import (
	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

// SubID identifies a subscription. The runtime chooses it; it is unique per
// engine for the subscription's whole life.
type SubID uint64

// ReadID identifies a read the core asked for (a hydration, a refill or a
// re-hydration).
type ReadID uint64

// Mode is what a subscriber receives.
type Mode uint8

// The subscription modes.
const (
	// ModeRows: the whole result when accepted, then a Delta for every
	// transaction that changed it.
	ModeRows Mode = iota
	// ModeTouch: an Accepted without rows, then a Touched for every
	// transaction that changed the result (a cache invalidation signal).
	ModeTouch
	// ModeRowsUnordered: ModeRows for a subscriber that needs no order
	// in its first result (the shape API's snapshot has none): the
	// Accepted of a query without ORDER BY comes in no particular order
	// (ModeRows sorts it by key), and when the query is one table's
	// columns (no join, aggregate or computed output), as Output.Held
	// rather than Rows. Deltas are as in ModeRows.
	ModeRowsUnordered
)

// String names the mode.
func (m Mode) String() string {
	switch m {
	case ModeTouch:
		return "touch"
	case ModeRowsUnordered:
		return "rows-unordered"
	}
	return "rows"
}

// Default settings of CoreOptions.
const (
	DefaultWindowMargin = 32
	DefaultReadRowLimit = 1_000_000
)

// CoreOptions tune a Core. The zero value of a field takes its default.
type CoreOptions struct {
	// WindowMargin is how many rows beyond OFFSET+LIMIT a window view
	// holds, so that rows leaving the window are replaced without a read.
	WindowMargin int
	// ReadRowLimit is copied into every ReadRequest: a read that returns
	// more rows refuses its subscriptions (the runtime answers it with a
	// ReadFailure of CodeRowLimit). It also bounds a join view: the joined
	// rows it holds, and those it examines in one landing or one
	// transaction; past either it ends CodeRowLimit. Negative lifts it.
	ReadRowLimit int
	// Types resolves type OIDs the change format does not know built in
	// (enums, domains, arrays of them). May be nil.
	Types change.TypeResolver
}

func (o CoreOptions) withDefaults() CoreOptions {
	if o.WindowMargin <= 0 {
		o.WindowMargin = DefaultWindowMargin
	}
	if o.ReadRowLimit == 0 {
		o.ReadRowLimit = DefaultReadRowLimit
	}
	if o.ReadRowLimit < 0 {
		o.ReadRowLimit = 0
	}
	return o
}

// ReadRequest asks the runtime to read rows from PostgreSQL and hand them
// back with Core.ReadDone, together with the snapshot the read ran in.
type ReadRequest struct {
	ID   ReadID
	Plan *query.Plan
	// Sources lists which of Plan.Sources a result row fills, left to
	// right: each column of the result is the next of
	// Plan.Sources[s].Columns for s in Sources (decode it by that column's
	// Type). Deliver each row as a query.Row of len(Plan.Sources) with
	// row[s] set for s in Sources and nil elsewhere. A read of the whole
	// query lists every source; a read of one source of a join lists one.
	Sources []int
	// SQL and its parameters, ready for pgconn's ExecParams. SQL is empty
	// for a read of the whole query (a view of one table): rendering it
	// parses and prints the query again, which takes time in the query's
	// size, so the core leaves it to whoever runs the read (the engine's
	// read workers), off the goroutine every client's work waits on.
	// ReadSQL returns the SQL either way.
	SQL string
	// Render is how Plan renders the read's SQL when SQL is empty.
	Render     query.RenderOptions
	Args       [][]byte
	ArgOIDs    []uint32
	ArgFormats []int16
	// Want is the LIMIT the SQL carries (0: none). A read that returns
	// fewer rows than Want, or has no LIMIT, is complete.
	Want int64
	// RowLimit: a read returning more rows fails, answered with a
	// ReadFailure of CodeRowLimit, not retryable (0: no limit).
	RowLimit int
}

// ReadResult answers a ReadRequest (Core.ReadDone): the read's rows and
// the snapshot it ran in, or how it failed.
type ReadResult struct {
	// Snapshot is the snapshot the read ran in.
	Snapshot Snapshot
	// Rows are the read's rows, shaped as ReadRequest.Sources says. The
	// core keeps them.
	Rows []query.Row
	// Encoded holds the rows of a single-source read already encoded as
	// the core holds them, in place of Rows (the engine's reader decodes
	// PostgreSQL's wire format straight into them). Only this package's
	// reader makes them; any other caller gives Rows.
	Encoded EncodedRows
	// Complete says the read returned every row its query selects (fewer
	// than ReadRequest.Want, or no LIMIT).
	Complete bool
	// Failed, when not nil, says the read failed and how; the other fields
	// are then ignored.
	Failed *ReadFailure
}

// ReadFailure is a failed read as the runtime classified it: the core
// refuses (or ends) the read's view's subscriptions with exactly this.
type ReadFailure struct {
	// Code is one of CodeReadTimeout, CodeRowLimit, CodeReadFailed,
	// CodeTableDropped, CodeSchemaChanged.
	Code query.Code
	// Reason says what went wrong, for a person.
	Reason string
	// Retryable says whether subscribing again may succeed: false when
	// the same query would fail the same way (over the row limit, a value
	// PostgreSQL rejects).
	Retryable bool
}

// EncodedRows are a single-source read's rows encoded as the core holds
// them: each row's values in the source's column order
// (ReadRequest.Sources names the one source). The zero value holds none.
type EncodedRows struct{ rows []rowVals }

// Len returns the number of rows.
func (r EncodedRows) Len() int { return len(r.rows) }

// OutputKind is the kind of an Output.
type OutputKind uint8

// The kinds of output.
const (
	// OutputAccepted: the subscription is live. Rows mode: Columns and the
	// whole result in Rows, in order (Count for a COUNT(*) query);
	// ModeRowsUnordered: in Rows or Held, see there.
	OutputAccepted OutputKind = iota + 1
	// OutputDelta: the result changed in the transaction committed at LSN:
	// Rows are upserted (by Key), Removed keys are gone, Count is the new
	// count, and Order (for a query with ORDER BY) lists every key of the
	// whole result in order.
	OutputDelta
	// OutputTouched: touch mode; the result changed at LSN.
	OutputTouched
	// OutputRefused: the subscription could not be served (Reason,
	// Retryable); it is gone.
	OutputRefused
	// OutputEnded: a live subscription ended (Reason, Retryable); it is
	// gone.
	OutputEnded
)

var outputKindNames = [...]string{"", "accepted", "delta", "touched", "refused", "ended"}

// String names the output kind.
func (k OutputKind) String() string {
	if int(k) < len(outputKindNames) && k != 0 {
		return outputKindNames[k]
	}
	return "unknown"
}

// Key is a result row's identity: the query.AppendKey encodings of every
// source's primary key values, in source order (a null-extended source
// contributes NULLs). Compare keys as strings.
type Key string

// KeyChange is one row whose primary key an UPDATE changed: From is the
// key it had before the transaction, To the key it has after.
type KeyChange struct {
	From, To Key
}

// Move is one row of a Delta's Moves: Key is now right after After, or
// first when Head.
type Move struct {
	Key   Key
	After Key
	Head  bool
}

// ResultRow is one row of a result: its identity and its values in
// Plan.Output order (change's typed forms, nil for NULL).
type ResultRow struct {
	Key    Key
	Values []any
}

// Output is one thing a subscriber must be told.
type Output struct {
	Sub  SubID
	Kind OutputKind
	// LSN is the commit LSN of the transaction for a Delta or Touched, and
	// the position the result is exact at for Accepted.
	LSN change.LSN
	// XID is, for a Delta that a transaction caused, that
	// transaction's top-level xid (0 for one a landed read caused). The
	// shape API sends it to clients, which compare it with the snapshots
	// they asked for.
	XID     uint32
	Columns []query.Output // Accepted (rows mode): the result's columns
	// Plan is, for Accepted, the subscription's compiled query: its
	// ORDER BY, LIMIT and OFFSET describe the window Rows are.
	Plan *query.Plan
	Rows []ResultRow // Accepted: the whole result; Delta: rows upserted
	// Held is, for an Accepted in ModeRowsUnordered of a query of one
	// table's columns without ORDER BY, the whole result as the engine
	// holds it, in no particular order; Rows is then nil.
	Held    HeldRows
	Removed []Key // Delta: rows removed
	// Order is, for a Delta of a query with ORDER BY, the keys of the whole
	// result in order after the change; nil otherwise.
	Order []Key
	// Moves is, for such a Delta, the same change of order told by the
	// rows whose place changed (rows that entered among them), in their
	// new order, each with the row now before it: what a subscriber that
	// holds the old order needs to reach Order (empty when no row moved).
	// Every subscriber of a view gets the same slice.
	Moves []Move
	// KeyChanges is, for a Delta of a single-table view without ORDER BY
	// or aggregates, the rows an UPDATE of the transaction gave a new
	// primary key that were in the result before and are in it after:
	// each From is in Removed and each To in Rows (not in the result
	// before the transaction). The change stream says so (an update that
	// changes the key carries the old key), so the pair is never guessed
	// from values. Every subscriber of a view gets the same slice.
	KeyChanges []KeyChange
	// Count is the count of a COUNT(*) query (Accepted and Delta).
	Count int64
	// Clock is, for an Accepted or Delta of a query that compares a
	// column with the time (query.Plan.Clock), the database clock the
	// result is exact at: the query's answer with now() replaced by it
	// (Core.Clock).
	Clock change.Timestamp
	// Code names why, for Refused and Ended, in a stable word: one of the
	// engine's Code* values, or a query.Code.
	Code      query.Code
	Reason    string // Refused, Ended: the why, for a person
	Retryable bool   // Refused, Ended: subscribing again may succeed
}

// Ready is what the core produced since the last call to Core.Ready.
type Ready struct {
	// Reads the runtime must run, each answered with Core.ReadDone.
	Reads []ReadRequest
	// Outputs in the order produced: all outputs of one transaction come
	// before any of the next.
	Outputs []Output
}

// Empty reports whether there is nothing to do.
func (r Ready) Empty() bool { return len(r.Reads) == 0 && len(r.Outputs) == 0 }

// Core is the engine's deterministic state machine: views, the rows they
// hold, the routing indexes, and hydration bookkeeping. It has no
// goroutines, no I/O and no clock. One goroutine owns it: it calls
// Subscribe, Unsubscribe, Apply, Advance and ReadDone, and after each call
// (or a batch of them) collects Ready. Nothing is safe for concurrent use.
type Core struct {
	opts CoreOptions
	st   *state
}

// NewCore returns an empty core.
func NewCore(opts CoreOptions) *Core {
	opts = opts.withDefaults()
	return &Core{opts: opts, st: newState(opts)}
}

// Subscribe registers sub on a compiled plan in the given mode. If a view
// with the same plan.Key exists, sub shares it (its Accepted comes once the
// view is live: at once if it is); otherwise the core creates a view and
// asks for its hydration read in Ready.Reads. A SubID already subscribed is
// refused.
func (c *Core) Subscribe(sub SubID, plan *query.Plan, mode Mode) { c.st.subscribe(sub, plan, mode) }

// Unsubscribe removes sub. Its view goes with its last subscriber (a read
// still running for it is then ignored when it lands). Unknown ids are
// ignored; nothing is output for sub afterwards.
func (c *Core) Unsubscribe(sub SubID) { c.st.unsubscribe(sub) }

// Apply applies one fragment of a committed transaction. Fragments come in
// commit order; the outputs of a transaction are produced when its Last
// fragment is applied. The core keeps t and the values in it (it must not
// be modified afterwards). A transaction whose CommitLSN is not beyond the
// last one applied is a duplicate and ignored (Advance does not count).
func (c *Core) Apply(t *change.Txn) {
	c.st.recycleRows()
	c.st.apply(t)
}

// Advance tells the core the stream has passed lsn: every transaction
// with a commit LSN below lsn has been applied (a heartbeat's position, or
// a keepalive's once everything before it was delivered; not the server's
// WAL end while decoding lags). Reads waiting for the stream to pass their
// snapshot may land.
func (c *Core) Advance(lsn change.LSN) {
	c.st.recycleRows()
	c.st.advance(lsn)
}

// Clock tells the core the database's clock: now() was t at position lsn
// (a heartbeat's, read in its own transaction), and the stream has passed
// lsn as Advance says. A view whose query compares a column with the time
// (query.Plan.Clock) moves the rows the clock passed in or out of its
// result, in one delta at lsn; a clock not later than the last one only
// advances. A clocked view's result at a position is its query's answer
// there with now() replaced by the last clock given at or before it. A
// clocked view's read lands only once a clock at or past the read's
// Snapshot.Now has been given.
func (c *Core) Clock(lsn change.LSN, t change.Timestamp) {
	c.st.recycleRows()
	c.st.clockTo(lsn, t)
}

// ReadDone delivers the result of the read id: its rows and the snapshot
// it ran in, or its failure, already classified (ReadFailure). The rows
// land once the core's position has passed res.Snapshot.LSN: the
// transactions streamed since the read was asked for and not visible in
// the snapshot are applied to them, and the view goes live at the core's
// position. A failure refuses (or ends) the view's subscriptions with its
// code, reason and retryable flag. A read the core no longer waits for
// (its view ended, or it was asked again) is ignored.
func (c *Core) ReadDone(id ReadID, res ReadResult) {
	c.st.recycleRows()
	c.st.readDone(id, res)
}

// Tables returns the tables the views read, by OID: what a catalog check
// must look at.
func (c *Core) Tables() []TableRef { return c.st.tableRefs() }

// CheckCatalog tells the core what the catalog says now about the tables
// checked (OIDs, from Tables): shapes holds those of them that exist, in
// the form the change stream describes them (change.Relation, Key marking
// the replica identity's columns). A checked table missing from shapes was
// dropped. Every view a table's current shape breaks ends: Ended (or
// Refused while hydrating) with CodeTableDropped or CodeSchemaChanged,
// retryable. The catalog may be ahead of the stream: a view ends as soon
// as its table's new shape is known, even before the stream reaches the
// change. It returns the tables whose shape ended a view (a catalog cache
// should read them again).
func (c *Core) CheckCatalog(checked []uint32, shapes map[uint32]*change.Relation) []TableRef {
	return c.st.checkCatalog(checked, shapes)
}

// Unpublished tells the core that the publication (named publication)
// no longer carries the tables oids: every view reading one ends, Ended
// (or Refused while hydrating) with query.CodeNotPublished, retryable,
// since no change to the table will reach it again.
func (c *Core) Unpublished(oids []uint32, publication string) { c.st.unpublished(oids, publication) }

// Ready returns, and forgets, what the core produced since the last call.
// The Outputs slice is the core's: it is valid until the next call of a
// Core method other than Position, Passed and Stats (the next outputs
// are written over it), so range over it, or copy it, before calling the
// core again. The Output values in it, and the slices they hold (Rows,
// their Values, Removed, ...), are the caller's to keep.
func (c *Core) Ready() Ready { return c.st.ready() }

// Position is the commit LSN of the last transaction applied (or the last
// Advance).
func (c *Core) Position() change.LSN { return c.st.pos }

// Passed is the position every subscriber's result is exact at, once the
// outputs of Ready are handed out: Position, held back while a view whose
// subscribers hold a result re-reads it (a window that shrank below what
// it holds, a TOASTed value it lacks), to just before the commit that made
// it re-read, until the read lands and its delta is out. A promise that
// the stream has been passed (a lag frame, an acknowledgement a cache
// serves by) must not go beyond it.
func (c *Core) Passed() change.LSN { return c.st.passed() }

// Stats are counters describing a Core.
type Stats struct {
	Views        int // views, live or hydrating
	Subs         int // subscriptions
	HeldRows     int // distinct (table, key) rows held
	PendingReads int // reads asked for and not landed
}

// Stats returns the core's counters.
func (c *Core) Stats() Stats { return c.st.stats() }
