package engine

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/freshetdb/freshet/change"
)

// Snapshot is the point a hydration read ran at: PostgreSQL's MVCC snapshot
// (pg_current_snapshot(), 64-bit transaction ids with their epoch) and a WAL
// position read in the same statement. It decides which streamed
// transactions the read already contains.
//
// Every transaction visible in the snapshot has a commit LSN below LSN:
// PostgreSQL inserts (and flushes) a commit record before the transaction
// leaves the proc array, a snapshot sees a transaction only once it has
// left the proc array, and the snapshot is fixed before the statement reads
// the WAL position. The reverse does not hold: a transaction whose commit
// record lies below LSN may still be running in the snapshot (it was between
// writing its commit record and leaving the proc array), so Visible, not the
// LSN, says whether a read contains a transaction.
type Snapshot struct {
	Xmin, Xmax uint64   // xid8: epoch in the high 32 bits
	Xip        []uint64 // in progress at the snapshot, sorted
	LSN        change.LSN
	// Now is now() in the read's transaction: a view whose query
	// depends on the clock lands the read only once the core's clock
	// (Core.Clock) is at or past it. Zero asks for nothing past a clock.
	Now change.Timestamp
}

// ParseSnapshot parses pg_snapshot's text form, "xmin:xmax:xip,xip,...".
func ParseSnapshot(s string) (Snapshot, error) {
	var snap Snapshot
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return snap, fmt.Errorf("parse snapshot %q: want xmin:xmax:xip-list", s)
	}
	var err error
	if snap.Xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return snap, fmt.Errorf("parse snapshot %q: xmin: %w", s, err)
	}
	if snap.Xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return snap, fmt.Errorf("parse snapshot %q: xmax: %w", s, err)
	}
	if snap.Xmin > snap.Xmax {
		return snap, fmt.Errorf("parse snapshot %q: xmin is above xmax", s)
	}
	if parts[2] != "" {
		for _, f := range strings.Split(parts[2], ",") {
			x, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return snap, fmt.Errorf("parse snapshot %q: xip: %w", s, err)
			}
			if x < snap.Xmin || x >= snap.Xmax {
				return snap, fmt.Errorf("parse snapshot %q: xip %d outside [xmin, xmax)", s, x)
			}
			snap.Xip = append(snap.Xip, x)
		}
		slices.Sort(snap.Xip)
	}
	return snap, nil
}

// String returns the snapshot in pg_snapshot's text form followed by its
// LSN.
func (s Snapshot) String() string {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(s.Xmin, 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatUint(s.Xmax, 10))
	b.WriteByte(':')
	for i, x := range s.Xip {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(x, 10))
	}
	b.WriteString("@")
	b.WriteString(s.LSN.String())
	return b.String()
}

// Widen turns a 32-bit transaction id from the stream into the 64-bit
// xid8 it stands for, taking the epoch from Xmax: of the ids with those low
// 32 bits, the one nearest Xmax (PostgreSQL keeps every live id within 2^31
// of the next one to be assigned). An id that would fall before the first
// epoch returns 0, which is older than any snapshot.
func (s Snapshot) Widen(xid uint32) uint64 {
	d := int64(int32(xid - uint32(s.Xmax)))
	w := int64(s.Xmax) + d
	if w < 0 {
		return 0
	}
	return uint64(w)
}

// Visible reports whether the committed top-level transaction xid (as the
// stream gives it) is contained in a read made in this snapshot: it
// committed before the snapshot was taken. XID 0 (a non-transactional
// message) is never visible: it changes no rows.
func (s Snapshot) Visible(xid uint32) bool {
	if xid == 0 {
		return false
	}
	return s.Visible64(s.Widen(xid))
}

// Visible64 is Visible for an xid8.
func (s Snapshot) Visible64(x uint64) bool {
	if x < s.Xmin {
		return true
	}
	if x >= s.Xmax {
		return false
	}
	_, found := slices.BinarySearch(s.Xip, x)
	return !found
}
