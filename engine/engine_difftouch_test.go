package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/freshetdb/freshet/change"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestDifferential's clocked touch-mode subscriptions ("+clock" in touch
// mode). Their result at a position P is the query's answer on the data
// at P with now() replaced by the clock of the last heartbeat at or
// before P, as for rows mode; a touch-mode subscriber gets no rows, so
// the oracle must know both what the data were at every commit and which
// clock the engine was given at which position:
//
//   - clockLog records every heartbeat the engine applies as a clock
//     (what Core.Clock is given: its position and the database's now()),
//     as the engine's Source hands it over (ackTap.onEvent), and the last
//     position the engine acknowledged (every output of an event at or
//     before it is with the sinks);
//   - clockTouch copies the subscription's table into a temporary table
//     before the round's first commit and after each commit (the writer's
//     observe), and answers the query on any copy at any clock: the copy
//     in a CTE named as the table, which shadows it, and now() replaced
//     by the clock's literal (atClock).
//
// check then walks the steps after the subscription's Accepted in
// position order: each heartbeat that moved the clock with no commit
// beside it, and each commit (with any heartbeat whose position falls
// between the WAL positions read around its COMMIT, whose order against
// it cannot be told). A heartbeat whose clock changed the answer must
// have been touched at its own position, a commit that changed it (with
// the clock of any such heartbeat) anywhere in its range; the clock of
// the Accepted must be the oracle's at its position, and a client that
// re-read the result at its last touch must hold the answer at the end.

// clockBeat is one heartbeat the engine applied as a clock.
type clockBeat struct {
	lsn change.LSN
	t   change.Timestamp
}

// clockLog records the clocks the engine is given (Core.Clock), in stream
// order, and the last position the engine acknowledged.
type clockLog struct {
	mu    sync.Mutex
	beats []clockBeat
	acked change.LSN
	// The core ignores a clock inside a transaction (state.clockTo):
	// inTxn and applied follow state.apply's rule.
	inTxn   bool
	applied change.LSN
}

// event sees an event before the engine applies it.
func (l *clockLog) event(ev change.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch ev := ev.(type) {
	case *change.Txn:
		if ev.Fragment == 0 || !l.inTxn {
			if ev.CommitLSN != 0 && ev.CommitLSN <= l.applied {
				return // a duplicate the core skips
			}
			l.inTxn = true
		}
		if ev.Last {
			l.inTxn = false
			l.applied = max(l.applied, ev.CommitLSN)
		}
	case *change.Heartbeat:
		if !ev.Now.IsZero() && !l.inTxn {
			l.beats = append(l.beats, clockBeat{lsn: ev.LSN, t: dbClock(ev.Now)})
		}
	}
}

// ack records a position the engine acknowledged.
func (l *clockLog) ack(lsn change.LSN) {
	l.mu.Lock()
	l.acked = max(l.acked, lsn)
	l.mu.Unlock()
}

// handled returns the clocks given at or before the last acknowledged
// position (their outputs are with the sinks) and that position.
func (l *clockLog) handled() ([]clockBeat, change.LSN) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []clockBeat
	for _, b := range l.beats {
		if b.lsn <= l.acked {
			out = append(out, b)
		}
	}
	slices.SortStableFunc(out, func(a, b clockBeat) int { return cmpU64(uint64(a.lsn), uint64(b.lsn)) })
	return out, l.acked
}

// clockAt is the engine's clock at lsn: the largest given at or before
// it (an earlier one than the last is ignored).
func clockAt(beats []clockBeat, lsn change.LSN) change.Timestamp {
	var c change.Timestamp
	for _, b := range beats {
		if b.lsn > lsn {
			break
		}
		if b.t.Cmp(c) > 0 {
			c = b.t
		}
	}
	return c
}

// clockTouch is a clocked touch-mode subscription and the copies of its
// table: snaps[0] before the round's first commit, commits[i].snap after
// commit i. The copies of one schema share a temporary table (gens),
// told apart by its first column: rows into a temporary table write no
// WAL, so copying costs no flush, and a new one is made after a schema
// change.
type clockTouch struct {
	dsub
	table   string
	round   int
	gens    []clockGen
	snaps   []clockSnap
	commits []clockCommit
	answers map[clockKey]string
}

// clockGen is a temporary table holding copies of the table under one
// schema: dclock_snap, then the table's columns (cols, quoted).
type clockGen struct {
	name, cols string
}

// clockSnap is a copy: rows of gens[gen] with dclock_snap = id; gen < 0:
// the table could not be read (dropped).
type clockSnap struct {
	gen, id int
}

// clockCommit is one committed transaction: its LSN lies in [before, after).
type clockCommit struct {
	before, after change.LSN
	snap          int
	stmts         []string
}

type clockKey struct {
	snap int
	t    change.Timestamp
}

// snapshot copies the table as it is now, into a new temporary table
// when the schema may have changed (ddl) or there is none yet.
func (ct *clockTouch) snapshot(ctx context.Context, conn *pgconn.PgConn, ddl bool) (int, error) {
	id := len(ct.snaps)
	gone := func(err error) (int, error) {
		if _, undefined := undefinedObject(err); !undefined {
			return 0, fmt.Errorf("copy %s: %w", ct.table, err)
		}
		ct.snaps = append(ct.snaps, clockSnap{gen: -1})
		return id, nil
	}
	if ddl || len(ct.gens) == 0 {
		res := conn.ExecParams(ctx, "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped",
			[][]byte{[]byte(ct.table)}, nil, nil, nil).Read()
		if res.Err != nil {
			return gone(res.Err)
		}
		gen := clockGen{name: fmt.Sprintf("dclock_%d_%d", ct.round, len(ct.gens)), cols: string(res.Rows[0][0])}
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TEMP TABLE %s AS SELECT 0 AS dclock_snap, * FROM %s LIMIT 0", gen.name, ct.table)).ReadAll(); err != nil {
			return gone(err)
		}
		ct.gens = append(ct.gens, gen)
	}
	gen := len(ct.gens) - 1
	if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s SELECT %d, %s FROM %s", ct.gens[gen].name, id, ct.gens[gen].cols, ct.table)).ReadAll(); err != nil {
		return gone(err)
	}
	ct.snaps = append(ct.snaps, clockSnap{gen: gen, id: id})
	return id, nil
}

// observe copies the table after a commit (the writer's observe).
func (ct *clockTouch) observe(ctx context.Context, conn *pgconn.PgConn, stmts []string, before, after change.LSN) error {
	ddl := slices.ContainsFunc(stmts, ddlTable.MatchString)
	i, err := ct.snapshot(ctx, conn, ddl)
	if err != nil {
		return err
	}
	ct.commits = append(ct.commits, clockCommit{before: before, after: after, snap: i, stmts: stmts})
	return nil
}

// drop drops the copies.
func (ct *clockTouch) drop(ctx context.Context, conn *pgconn.PgConn) error {
	for _, g := range ct.gens {
		if _, err := conn.Exec(ctx, "DROP TABLE "+g.name).ReadAll(); err != nil {
			return err
		}
	}
	return nil
}

// errBroken: the query no longer runs on a copy (a schema change).
var errBroken = errors.New("the query no longer runs")

// answer is PostgreSQL's answer to the query on copy snap at clock t.
func (ct *clockTouch) answer(ctx context.Context, conn *pgconn.PgConn, snap int, t change.Timestamp) (string, error) {
	k := clockKey{snap, t}
	if a, ok := ct.answers[k]; ok {
		return a, nil
	}
	sn := ct.snaps[snap]
	if sn.gen < 0 {
		return "", errBroken
	}
	g := ct.gens[sn.gen]
	sql := fmt.Sprintf("WITH %s AS (SELECT %s FROM %s WHERE dclock_snap = %d) %s", ct.table, g.cols, g.name, sn.id, atClock(ct.q.ref, t))
	res := conn.ExecParams(ctx, sql, bindValues(ct.q.binds), bindOIDs(ct.q.binds), bindFormats(ct.q.binds), nil).Read()
	if _, undefined := undefinedObject(res.Err); undefined {
		return "", errBroken
	} else if res.Err != nil {
		return "", fmt.Errorf("reference %q: %w", sql, res.Err)
	}
	a := canonical(res.Rows, ct.q.ordered)
	if ct.answers == nil {
		ct.answers = map[clockKey]string{}
	}
	ct.answers[k] = a
	return a, nil
}

// clockStep is what may change a clocked result: a heartbeat's clock
// (commit < 0), or a commit with the heartbeats whose order against it
// cannot be told. A touch in [from, to) answers it.
type clockStep struct {
	from, to change.LSN
	commit   int
	t        change.Timestamp // the largest clock of its heartbeats (zero: none)
}

// check verifies the subscription's touches (see the comment at the top
// of the file) against the heartbeats the engine had handled by acked.
func (ct *clockTouch) check(ctx context.Context, conn *pgconn.PgConn, beats []clockBeat, acked change.LSN, total *diffTotals) error {
	ct.rec.mu.Lock()
	outs := slices.Clone(ct.rec.outs)
	ct.rec.mu.Unlock()
	var acc *Output
	var touches []change.LSN
	for i, o := range outs {
		switch o.Kind {
		case OutputAccepted:
			acc = &outs[i]
		case OutputTouched:
			touches = append(touches, o.LSN)
		case OutputRefused, OutputEnded:
			return nil // ended by a schema change (checked by the caller), or refused
		}
	}
	if acc == nil {
		return fmt.Errorf("no Accepted")
	}
	if want := clockAt(beats, acc.LSN); acc.Clock != want {
		return fmt.Errorf("the Accepted at %s carries the clock %s, and the engine was last given %s at or before it", acc.LSN, fmtClock(acc.Clock), fmtClock(want))
	}
	// The steps, in position order.
	var steps []clockStep
	j := 0
	for i, c := range ct.commits {
		for ; j < len(beats) && beats[j].lsn < c.before; j++ {
			steps = append(steps, clockStep{from: beats[j].lsn, to: beats[j].lsn + 1, commit: -1, t: beats[j].t})
		}
		if c.after > acked {
			// Not handled yet (cannot be: the engine quiesced), nor what
			// follows it.
			beats = beats[:j]
			break
		}
		st := clockStep{from: c.before, to: c.after, commit: i}
		for ; j < len(beats) && beats[j].lsn < c.after; j++ {
			if beats[j].t.Cmp(st.t) > 0 {
				st.t = beats[j].t
			}
		}
		steps = append(steps, st)
	}
	for ; j < len(beats); j++ {
		steps = append(steps, clockStep{from: beats[j].lsn, to: beats[j].lsn + 1, commit: -1, t: beats[j].t})
	}

	total.touchClockSubs++
	total.touchShapes[ct.q.shape]++
	explained := make([]bool, len(touches))
	snap := 0
	var clock change.Timestamp
	lastTouch := acc.LSN
	if len(touches) > 0 {
		lastTouch = touches[len(touches)-1]
	}
	seen := clockKey{-1, change.Timestamp{}} // the state a re-read at the last touch finds
	for _, st := range steps {
		nsnap, nclock := snap, clock
		if st.t.Cmp(clock) > 0 {
			nclock = st.t
		}
		if st.commit >= 0 {
			nsnap = ct.commits[st.commit].snap
		}
		if st.from > acc.LSN {
			was, err := ct.answer(ctx, conn, snap, clock)
			if err == nil {
				var now string
				now, err = ct.answer(ctx, conn, nsnap, nclock)
				if err == nil && was != now {
					found := false
					for k, l := range touches {
						if l >= st.from && l < st.to {
							found, explained[k] = true, true
						}
					}
					what := "the clock moving from " + fmtClock(clock) + " to " + fmtClock(nclock) + " at " + st.from.String() + " (a heartbeat, no write)"
					if st.commit >= 0 {
						total.touchClockTxns++
						what = fmt.Sprintf("the transaction committed in [%s, %s) (clock %s, then %s): %s", st.from, st.to, fmtClock(clock), fmtClock(nclock), strings.Join(ct.commits[st.commit].stmts, "; "))
					} else {
						total.touchClockBeats++
					}
					if !found {
						return fmt.Errorf("%s changed the result, and no touched came at its position (touched at %v, accepted at %s); result before:\n%s\nafter:\n%s",
							what, touches, acc.LSN, strings.ReplaceAll(was, "\x00", " "), strings.ReplaceAll(now, "\x00", " "))
					}
				}
			}
			if err == errBroken {
				return nil // the engine must end it (checked by the caller)
			} else if err != nil {
				return err
			}
		}
		snap, clock = nsnap, nclock
		if st.from <= lastTouch {
			seen = clockKey{snap, clock}
		}
	}
	if seen.snap >= 0 {
		// What a client holds that re-read the result at its last touch.
		got, err := ct.answer(ctx, conn, seen.snap, seen.t)
		if err == nil {
			var want string
			want, err = ct.answer(ctx, conn, snap, clock)
			if err == nil && got != want {
				return fmt.Errorf("a client that re-read at the last touch (%s) holds the answer at clock %s, not the answer at the end (clock %s):\n%s\nagainst:\n%s",
					lastTouch, fmtClock(seen.t), fmtClock(clock), strings.ReplaceAll(got, "\x00", " "), strings.ReplaceAll(want, "\x00", " "))
			}
		}
		if err != nil && err != errBroken {
			return err
		}
	}
	total.touchClockTouches += len(touches)
	for _, e := range explained {
		if !e {
			total.touchClockFalse++
		}
	}
	return nil
}
