package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// snapshotBegin, a LOCK of the read's tables (lockSQL: it takes no
// snapshot), then snapshotSQL open a hydration read. The transaction's
// snapshot is fixed by
// its first statement, the SELECT, before the SELECT evaluates anything, so
// the WAL position it reads comes after the snapshot:
//
//   - On a primary, pg_current_wal_insert_lsn() is at or past the end of
//     every commit record written so far. A transaction becomes visible only
//     when it leaves the proc array, which it does after inserting its
//     commit record; so every transaction visible in the snapshot has a
//     commit LSN below the position read.
//   - On a standby (pg_is_in_recovery()) there is no insert position;
//     pg_last_wal_replay_lsn() is the end of the last record replayed. A
//     transaction becomes visible to standby snapshots while its commit
//     record is replayed, just before the replay position moves past the
//     record, so a visible transaction's commit LSN (the record's start) is
//     at most the position read. The core lands a read once its position
//     is at or past Snapshot.LSN, which covers both.
//
// CASE evaluates only the branch it takes, so the insert position is never
// asked of a standby (where it is an error). The settings pin the text
// forms to the ones the change format decodes; SET LOCAL keeps them to this
// transaction, so a pooler (PgBouncer in transaction mode) sees no session
// state. They come after the SELECT: SET takes no snapshot, but the SELECT
// must be the first statement that does, and settings change only how
// values are printed, which no statement before the read prints.
const (
	snapshotBegin = `BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY`
	snapshotSQL   = `SELECT pg_current_snapshot()::text, (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END)::text, (extract(epoch FROM now()) * 1000000)::int8::text;
SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO, MDY'; SET LOCAL IntervalStyle = 'postgres';
SET LOCAL extra_float_digits = 1; SET LOCAL bytea_output = 'hex'`
)

// ErrSnapshotBehind is wrapped by a read that could not get a snapshot
// containing every transaction the engine had applied when the read was
// asked for (a standby replaying behind the change stream) within the read
// timeout.
var ErrSnapshotBehind = errors.New("read snapshot is behind the change stream")

// appliedLog remembers the transactions the core goroutine has applied,
// so a hydration read can check that its snapshot contains every one
// applied before the read was asked for. The core buffers a view's
// transactions only from the moment it asks for the read; a transaction
// applied before that and missing from the snapshot would never reach the
// view. That happens when a committing backend has written and flushed its
// commit record (so the stream delivered it) but not yet left the proc
// array when the snapshot is taken, and when the reads go to a standby that
// replays behind the stream. The read then retries with a new snapshot.
type appliedLog struct {
	mu   sync.Mutex
	seq  uint64     // transactions recorded so far
	pos  change.LSN // the core's position after the last record
	ring []appliedTxn
}

type appliedTxn struct {
	xid uint32
	seq uint64
}

// appliedLogSize bounds how many recent transactions are remembered. Only
// the last few can still be in progress in a new snapshot on a primary; on
// a standby the position check covers the rest.
const appliedLogSize = 1 << 14

func newAppliedLog() *appliedLog { return &appliedLog{ring: make([]appliedTxn, appliedLogSize)} }

// record notes that the core started applying transaction xid.
func (l *appliedLog) record(xid uint32) {
	if xid == 0 {
		return
	}
	l.mu.Lock()
	l.seq++
	l.ring[l.seq%appliedLogSize] = appliedTxn{xid: xid, seq: l.seq}
	l.mu.Unlock()
}

// advance notes the core's position.
func (l *appliedLog) advance(pos change.LSN) {
	l.mu.Lock()
	if pos > l.pos {
		l.pos = pos
	}
	l.mu.Unlock()
}

// mark is the log's state when a read is asked for.
type appliedMark struct {
	seq uint64
	pos change.LSN
}

func (l *appliedLog) markNow() appliedMark {
	l.mu.Lock()
	defer l.mu.Unlock()
	return appliedMark{seq: l.seq, pos: l.pos}
}

// missing returns a transaction applied at or before m that snap does not
// contain, or reports that the snapshot's position is behind m's.
func (l *appliedLog) missing(m appliedMark, snap Snapshot) (xid uint32, behind, found bool) {
	if snap.LSN < m.pos {
		return 0, true, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := uint64(0); i < appliedLogSize && i < m.seq; i++ {
		e := l.ring[(m.seq-i)%appliedLogSize]
		if e.seq != m.seq-i {
			break // overwritten by newer ones
		}
		if !snap.Visible(e.xid) {
			return e.xid, false, true
		}
		// Ids below xmin are visible, and the ring is in apply order,
		// which is commit order, not id order: keep looking.
	}
	return 0, false, false
}

// ReadSQL returns the read's SQL: SQL, or when it is empty the plan
// rendered with Render (Plan.Render, whose cost grows with the query's
// size: call it on the goroutine that runs the read).
func (r ReadRequest) ReadSQL() string {
	if r.SQL != "" || r.Plan == nil {
		return r.SQL
	}
	return r.Plan.Render(r.Render)
}

// reader runs hydration reads on a pool of its own.
type reader struct {
	pool  *pgxpool.Pool
	types change.TypeResolver
	log   *appliedLog
	// timeout bounds a whole read: the connection, the snapshot and every
	// row.
	timeout time.Duration
	// beat, when set, asks the stream to pass the database's current
	// position (Beater): called once a read's snapshot is taken, so the
	// heartbeat travels while the rows are read.
	beat func()
}

// read runs req: it opens a REPEATABLE READ transaction, takes its snapshot
// and WAL position, checks the snapshot contains what was applied at m,
// runs the request's SQL and decodes its rows. It returns the rows and
// whether they are complete (fewer than req.Want, or no LIMIT).
func (h *reader) read(ctx context.Context, req ReadRequest, m appliedMark) (Snapshot, []query.Row, bool, error) {
	return readIn(ctx, h, req, m, h.rows)
}

// readHeld is read for a read of a single-table view: each row comes back
// encoded as the core holds it (rowVals, in the source's column order)
// rather than as a query.Row of typed values. The values are decoded
// exactly as read decodes them and encoded at once, so what the read
// keeps holds no pointers for the garbage collector to follow but one per
// row: on a large read that is most of the client's work saved.
func (h *reader) readHeld(ctx context.Context, req ReadRequest, m appliedMark) (Snapshot, []rowVals, bool, error) {
	return readIn(ctx, h, req, m, h.heldRows)
}

// readIn runs rows in the read's snapshot (inSnapshot).
func readIn[T any](ctx context.Context, h *reader, req ReadRequest, m appliedMark,
	rows func(context.Context, *pgxpool.Conn, ReadRequest) ([]T, bool, error)) (Snapshot, []T, bool, error) {
	var out []T
	snap, complete, err := h.inSnapshot(ctx, req, m, func(conn *pgxpool.Conn) (bool, error) {
		var complete bool
		var err error
		out, complete, err = rows(ctx, conn, req)
		return complete, err
	})
	return snap, out, complete, err
}

// heldReadable reports whether req can be read with readHeld: a read of
// the whole query of a single-table view.
func heldReadable(req ReadRequest) bool {
	return req.Plan != nil && len(req.Plan.Sources) == 1 && len(req.Sources) == 1
}

// readFor runs req with readHeld when it can, else with read.
func (h *reader) readFor(ctx context.Context, req ReadRequest, m appliedMark) (Snapshot, []query.Row, []rowVals, bool, error) {
	if heldReadable(req) {
		snap, held, complete, err := h.readHeld(ctx, req, m)
		return snap, nil, held, complete, err
	}
	snap, rows, complete, err := h.read(ctx, req, m)
	return snap, rows, nil, complete, err
}

// inSnapshot opens the read's transaction and snapshot, checks it against
// m, runs fn in it and commits.
func (h *reader) inSnapshot(ctx context.Context, req ReadRequest, m appliedMark, fn func(*pgxpool.Conn) (bool, error)) (Snapshot, bool, error) {
	if h.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
		defer cancel()
	}
	conn, err := h.pool.Acquire(ctx)
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("acquire read connection: %w", err)
	}
	// pgxpool destroys a connection released inside a transaction or
	// closed, so every error path below may simply release it.
	defer conn.Release()
	pc := conn.Conn().PgConn()

	var snap Snapshot
	var waiting error // why the last snapshot was not good enough
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		snap, err = beginSnapshot(ctx, pc, req)
		if err == nil {
			xid, behind, found := h.log.missing(m, snap)
			if !found {
				break
			}
			if behind {
				waiting = fmt.Errorf("%w: the read database has replayed to %s, the stream is at %s (is the DSN a lagging replica?)",
					ErrSnapshotBehind, snap.LSN, m.pos)
			} else {
				waiting = fmt.Errorf("%w: transaction %d is committed in the stream but not visible to snapshot %s",
					ErrSnapshotBehind, xid, snap)
			}
			err = pc.Exec(ctx, "ROLLBACK").Close()
			if err == nil {
				select {
				case <-ctx.Done():
					err = ctx.Err()
				case <-time.After(wait):
					continue
				}
			}
		}
		if waiting != nil && ctx.Err() != nil {
			// The deadline passed while waiting for a good snapshot: say
			// so rather than which step it interrupted.
			return Snapshot{}, false, fmt.Errorf("%w: %w", waiting, ctx.Err())
		}
		return Snapshot{}, false, err
	}

	if h.beat != nil {
		// The read lands once the stream is at or past snap.LSN; a
		// heartbeat written from now on is past it.
		h.beat()
	}
	complete, err := fn(conn)
	if err != nil {
		return Snapshot{}, false, err
	}
	if err := pc.Exec(ctx, "COMMIT").Close(); err != nil {
		return Snapshot{}, false, fmt.Errorf("end read transaction: %w", err)
	}
	return snap, complete, nil
}

// beginSnapshot opens the read transaction, locks the read's tables and
// returns its snapshot. A read of a table the query selects with * also
// reads the table's shape in the snapshot and checks it against the plan
// (a column added changes what * means); the other changes to the plan's
// columns show in the SELECT's own result description (checkFields).
func beginSnapshot(ctx context.Context, pc *pgconn.PgConn, req ReadRequest) (Snapshot, error) {
	sql := snapshotBegin + ";\n"
	at := 1 // the snapshot query's result
	if lock := lockSQL(req); lock != "" {
		sql += lock + ";\n"
		at++
	}
	oids := starOIDs(req)
	if len(oids) > 0 {
		// shapeQuery with its parameter inlined: one round trip.
		sql += snapshotSQL + ";\n" + strings.Replace(shapeQuery, "$1", "'"+oidList(oids)+"'", 1)
	} else {
		sql += snapshotSQL
	}
	res, err := pc.Exec(ctx, sql).ReadAll()
	if err != nil {
		if code, ok := undefinedObject(err); ok {
			// The LOCK found no table by that name: it was dropped or
			// renamed since the plan was made.
			src := req.Plan.Sources[req.Sources[0]].Table
			return Snapshot{}, &ShapeError{Code: code, Reason: fmt.Sprintf("table %s.%s was dropped or renamed (%v)", src.Schema, src.Name, err), Schema: src.Schema, Table: src.Name}
		}
		return Snapshot{}, fmt.Errorf("open read transaction: %w", err)
	}
	if len(res) <= at || len(res[at].Rows) != 1 || len(res[at].Rows[0]) != 3 {
		return Snapshot{}, fmt.Errorf("open read transaction: unexpected reply to the snapshot query (%d results)", len(res))
	}
	if len(oids) > 0 {
		shapes, err := parseShapes(res[len(res)-1].Rows)
		if err != nil {
			return Snapshot{}, err
		}
		if err := checkReadShapes(req, shapes); err != nil {
			return Snapshot{}, err
		}
	}
	row := res[at].Rows[0]
	snap, err := ParseSnapshot(string(row[0]))
	if err != nil {
		return Snapshot{}, fmt.Errorf("open read transaction: %w", err)
	}
	if row[1] == nil {
		return Snapshot{}, errors.New("open read transaction: the server reports no WAL position (a standby that has not replayed anything yet?)")
	}
	if snap.LSN, err = change.ParseLSN(string(row[1])); err != nil {
		return Snapshot{}, fmt.Errorf("open read transaction: %w", err)
	}
	// now() of the read's transaction: a clocked view lands the read
	// once the clock is past it.
	us, err := strconv.ParseInt(string(row[2]), 10, 64)
	if err != nil {
		return Snapshot{}, fmt.Errorf("open read transaction: now(): %w", err)
	}
	snap.Now = dbClock(time.UnixMicro(us))
	return snap, nil
}

// readCol is one column of a read's result: how it decodes.
type readCol struct {
	typ    change.Type
	oid    uint32
	fast   fastKind // fastNone: change.Decode
	binary bool     // read in binary form
}

// rowSlab is how many rows' values are allocated at once: fewer, larger
// allocations, at the price of a slab staying alive while any of its rows
// is held.
const rowSlab = 64

// rows runs req's SQL in the open transaction and decodes its rows.
func (h *reader) rows(ctx context.Context, conn *pgxpool.Conn, req ReadRequest) ([]query.Row, bool, error) {
	plan := req.Plan
	var out rowChunks[query.Row]
	var sl slabs
	var rowsSlab [][]any
	var valSlab []any
	n, err := h.scan(ctx, conn, req, func(cols []readCol, keyCol []int, vals [][]byte) error {
		if len(rowsSlab) < len(plan.Sources) {
			rowsSlab = make([][]any, rowSlab*len(plan.Sources))
		}
		if len(valSlab) < len(cols) {
			valSlab = make([]any, rowSlab*len(cols))
		}
		row := query.Row(rowsSlab[:len(plan.Sources):len(plan.Sources)])
		rowsSlab = rowsSlab[len(plan.Sources):]
		for k, s := range req.Sources {
			src := plan.Sources[s]
			first := keyCol[k]
			// A null-extended source has NULL keys (a primary key is
			// never NULL in a row that exists).
			if src.Nullable && vals[first] == nil {
				continue
			}
			n := len(src.Columns)
			vs := valSlab[:n:n]
			valSlab = valSlab[n:]
			for j := range vs {
				b := vals[first+j]
				if b == nil {
					continue
				}
				v, err := decodeValue(&sl, cols[first+j], b, h.types)
				if err != nil {
					return fmt.Errorf("read %s.%s: %w", src.Alias, src.Columns[j].Name, err)
				}
				vs[j] = v
			}
			row[s] = vs
		}
		out.add(row)
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out.rows(), req.Want <= 0 || int64(n) < req.Want, nil
}

// heldRows reads the rows of a single-table read (heldReadable), each
// encoded in the source's column order.
func (h *reader) heldRows(ctx context.Context, conn *pgxpool.Conn, req ReadRequest) ([]rowVals, bool, error) {
	src := req.Plan.Sources[0]
	var out rowChunks[rowVals]
	var sl slabs
	var buf []byte
	n, err := h.scan(ctx, conn, req, func(cols []readCol, _ []int, vals [][]byte) error {
		b := buf[:0]
		var boxes []any
		for j, c := range cols {
			if vals[j] == nil {
				b = append(b, tagNull)
				continue
			}
			if nb, ok, err := appendHeldText(b, &sl, c, vals[j]); err != nil {
				return fmt.Errorf("read %s.%s: %w", src.Alias, src.Columns[j].Name, err)
			} else if ok {
				b = nb
				continue
			}
			v, err := decodeValue(&sl, c, vals[j], h.types)
			if err != nil {
				return fmt.Errorf("read %s.%s: %w", src.Alias, src.Columns[j].Name, err)
			}
			b, boxes = appendVal(b, v, boxes)
		}
		buf = b
		rv := rowVals{enc: string(b)}
		if boxes != nil {
			bx := boxes
			rv.boxes = &bx
		}
		out.add(rv) // the slabs' batches are garbage once used: nothing keeps a value
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out.rows(), req.Want <= 0 || int64(n) < req.Want, nil
}

// scan runs req's SQL and calls fn with each row's values (the
// connection's buffers: fn must copy what it keeps), returning the
// number of rows.
func (h *reader) scan(ctx context.Context, conn *pgxpool.Conn, req ReadRequest, fn func(cols []readCol, keyCol []int, vals [][]byte) error) (int, error) {
	cols, keyCol := readColumns(req)
	formats := resultFormats(cols)
	pc := conn.Conn().PgConn()
	rr := pc.ExecParams(ctx, req.SQL, req.Args, req.ArgOIDs, req.ArgFormats, formats)
	if fds := rr.FieldDescriptions(); fds != nil {
		if len(fds) != len(cols) {
			rr.Close()
			return 0, fmt.Errorf("read %q: got %d columns, want %d", req.SQL, len(fds), len(cols))
		}
		if err := checkFields(req, fds); err != nil {
			rr.Close()
			return 0, err
		}
	}
	n := 0
	for rr.NextRow() {
		if req.RowLimit > 0 && n >= req.RowLimit {
			// Stop the server sending the rest: close the connection
			// (the pool replaces it) rather than reading it all.
			conn.Hijack().Close(context.Background())
			return 0, fmt.Errorf("%w: the query selects more than %d rows (raise the row limit or narrow the query)", ErrRowLimit, req.RowLimit)
		}
		vals := rr.Values()
		if len(vals) != len(cols) {
			rr.Close()
			return 0, fmt.Errorf("read %q: got %d values, want %d", req.SQL, len(vals), len(cols))
		}
		if err := fn(cols, keyCol, vals); err != nil {
			rr.Close()
			return 0, err
		}
		n++
	}
	if _, err := rr.Close(); err != nil {
		return 0, fmt.Errorf("read rows: %w", err)
	}
	return n, nil
}

// rowChunks collects a read's rows in chunks that double in size, then
// copies them once into a slice of the exact length: append would grow a
// large slice by a quarter at a time, allocating and copying about five
// times the final size.
type rowChunks[T any] struct {
	full [][]T
	cur  []T
	n    int
}

func (c *rowChunks[T]) add(r T) {
	if len(c.cur) == cap(c.cur) {
		if c.cur != nil {
			c.full = append(c.full, c.cur)
		}
		c.cur = make([]T, 0, min(max(2*cap(c.cur), 64), 1<<16))
	}
	c.cur = append(c.cur, r)
	c.n++
}

// rows returns every row added, in order.
func (c *rowChunks[T]) rows() []T {
	if len(c.full) == 0 {
		return c.cur
	}
	out := make([]T, 0, c.n)
	for _, ch := range c.full {
		out = append(out, ch...)
	}
	return append(out, c.cur...)
}

// readColumns returns the columns of req's result, and for each entry of
// req.Sources the index in them of its first (key) column.
func readColumns(req ReadRequest) (cols []readCol, keyCol []int) {
	for _, s := range req.Sources {
		keyCol = append(keyCol, len(cols))
		for _, c := range req.Plan.Sources[s].Columns {
			k := fastKindOf(c.Type, c.TypeOID)
			cols = append(cols, readCol{typ: c.Type, oid: c.TypeOID, fast: k, binary: k.binaryForm()})
		}
	}
	return cols, keyCol
}

// resultFormats returns the result format codes for cols. Columns come in
// text form, which the change format decodes exactly for every type,
// except the fixed-size types whose binary form is their value
// (fastKind.binaryForm).
func resultFormats(cols []readCol) []int16 {
	formats := make([]int16, len(cols))
	for i, c := range cols {
		if c.binary {
			formats[i] = 1
		}
	}
	return formats
}

// decodeValue decodes one column's value (text or binary form, as the
// column is read), into sl for the common built-in types. b is the connection's buffer: nothing decoded may keep
// it.
func decodeValue(sl *slabs, c readCol, b []byte, types change.TypeResolver) (any, error) {
	if c.binary {
		if c.fast != fastNone {
			v, err := sl.decodeBinary(c.fast, c.oid, b)
			if err != nil {
				return nil, fmt.Errorf("decode %s: %w", c.typ.Name, err)
			}
			return v, nil
		}
		return change.DecodeOID(c.oid, change.Value{Kind: change.Binary, Data: b}, types)
	}
	if c.fast != fastNone {
		v, err := sl.decode(c.fast, unsafe.String(unsafe.SliceData(b), len(b)))
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", c.typ.Name, err)
		}
		return v, nil
	}
	v := change.Value{Kind: change.Text, Data: b}
	if c.typ.OID != 0 {
		return change.Decode(c.typ, v, types)
	}
	return change.DecodeOID(c.oid, v, types)
}

// appendHeldText appends the encoding of a text or numeric column's value
// straight from its text form, when the column is one: the encoding of
// both is the text itself (PostgreSQL's numeric_out prints exactly what
// change.Numeric.Append prints for the value it parses to; a numeric is
// parsed first all the same, to refuse what is not one). ok is false for
// other columns.
func appendHeldText(dst []byte, sl *slabs, c readCol, b []byte) (out []byte, ok bool, err error) {
	if c.binary {
		return dst, false, nil
	}
	var tag byte
	switch c.fast {
	case fastText:
		tag = tagString
	case fastNumeric:
		if _, err := sl.numeric(unsafe.String(unsafe.SliceData(b), len(b))); err != nil {
			return dst, false, fmt.Errorf("decode %s: %w", c.typ.Name, err)
		}
		tag = tagNumeric
	default:
		return dst, false, nil
	}
	dst = binary.AppendUvarint(append(dst, tag), uint64(len(b)))
	return append(dst, b...), true, nil
}
