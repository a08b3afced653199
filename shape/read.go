package shape

import (
	"sort"
)

// chunkResult is what a request at an offset is answered with.
type chunkResult struct {
	msgs     [][]byte // messages, or one snapshot chunk's comma-joined bytes
	snapshot bool     // msgs[0] is a snapshot chunk
	end      Offset
	upToDate bool // the chunk reaches the shape's latest offset
	stale    bool // the offset points into what is no longer kept: 409
	wait     bool // nothing can be answered until the shape is ready
}

// readLocked answers a request at o with the next chunk after it. It does
// no I/O but returns snapshot chunk locations; the caller reads them.
func (s *Shape) readLocked(o Offset, limit int) (chunkResult, *chunkLoc) {
	cur := s.gen
	if cur == nil {
		return chunkResult{wait: true}, nil
	}
	if o.Before {
		// A fresh client: the newest generation's first chunk, never
		// up-to-date (so that the answer can be cached long).
		return chunkResult{snapshot: true, end: Offset{Op: cur.base}}, &chunkLoc{file: s.file(cur.file()), r: cur.served(0)}
	}
	if o.Virtual() {
		for g := range s.gensLocked {
			if o.Op < g.base || o.Op > g.last() {
				continue
			}
			if o.Op < g.last() {
				next := o.Op + 1
				res := chunkResult{snapshot: true, end: Offset{Op: next}}
				if next == g.last() && g == cur && !s.hasAfter(g.at.off()) && s.st == ready {
					res.upToDate = true
				}
				return res, &chunkLoc{file: s.file(g.file()), r: g.served(next - g.base)}
			}
			// The generation's last chunk: its log follows.
			res := s.tailLocked(g.at.off(), limit)
			if len(res.msgs) == 0 {
				res.end = o
			}
			return res, nil
		}
		if o.Op < s.oldestLocked().base {
			return chunkResult{stale: true}, nil
		}
		// Past the newest generation's last chunk. While the shape's
		// latest offset is that chunk, this is out of bounds (the
		// caller's, as for a real offset past the latest). Once the
		// shape has changes, Electric serves such an offset as the end
		// of the snapshot: the log from its start (in Freshet, the
		// newest generation's log).
		if s.latest.off().Compare(o) < 0 {
			return chunkResult{end: o}, nil
		}
		res := s.tailLocked(cur.at.off(), limit)
		if len(res.msgs) == 0 {
			res.end = cur.at.off()
		}
		return res, nil
	}
	if o.Compare(s.oldestLocked().at.off()) < 0 {
		return chunkResult{stale: true}, nil
	}
	res := s.tailLocked(o, limit)
	if len(res.msgs) == 0 {
		res.end = o
	}
	return res, nil
}

// chunkLoc is a snapshot chunk to read from disk.
type chunkLoc struct {
	file string
	r    [2]int64
}

func (s *Shape) hasAfter(o Offset) bool {
	tail := s.tailOpsLocked()
	return len(tail) > 0 && tail[len(tail)-1].off.Compare(o) > 0
}

// tailLocked returns the durable changes after o, up to the byte limit
// (at least one).
func (s *Shape) tailLocked(o Offset, limit int) chunkResult {
	tail := s.tailOpsLocked()
	i := sort.Search(len(tail), func(i int) bool { return tail[i].off.Compare(o) > 0 })
	var res chunkResult
	n := 0
	for ; i < len(tail); i++ {
		res.msgs = append(res.msgs, tail[i].msg)
		res.end = tail[i].off
		n += len(tail[i].msg) + 1
		if n >= limit {
			i++
			break
		}
	}
	res.upToDate = i >= len(tail) && s.st == ready
	return res
}

// resumeLocked is the global_last_seen_lsn to report: R such that every
// change of the shape with a commit LSN below R has been served and every
// change not yet served has a commit LSN of at least R. The offset R_0,
// where Electric's SSE client resumes, therefore lies after all of the
// former and before all of the latter. pos is the engine's position, read
// before the lock: every output up to it is in the shape (pending or
// durable).
func (s *Shape) resumeLocked(pos uint64) uint64 {
	if w := s.pendingLocked(); w != nil && len(w.ops) > 0 {
		return w.ops[0].off.Tx
	}
	r := pos + 1
	if l := s.latest.off(); !l.Virtual() && l.Tx+1 > r {
		r = l.Tx + 1
	}
	return r
}
