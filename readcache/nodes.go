package readcache

import (
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/freshetdb/freshet/wire"
)

// node is one engine of FRESHET_URL's list and its sockets.
type node struct {
	url   string
	i     int
	id    uint64 // the url's hash, mixed into every key's score
	socks []*socket
}

// alive reports whether the engine has shown it is alive within DeadAfter:
// a hello or a lag frame on any of its sockets. A lagging engine that
// still sends lag frames is alive (its reads go to PostgreSQL while it
// lags, and its keys stay); one whose connections are gone, or that has
// gone silent, is dead once DeadAfter has passed, and its keys move.
func (n *node) alive(now int64, deadAfter time.Duration) bool {
	for _, s := range n.socks {
		if at := s.seenAt.Load(); at > 0 && time.Duration(now-at) < deadAfter {
			return true
		}
	}
	return false
}

func hrwID(url string) uint64 { return xxhash.Sum64String(url) }

// score is the rendezvous (highest random weight) score of key on n:
// every process computes the same, so every backend sends one query to
// one engine and identical queries share one view and one hydration read.
func (n *node) score(key string) uint64 {
	h := xxhash.New()
	var b [8]byte
	for i := range b {
		b[i] = byte(n.id >> (8 * i))
	}
	_, _ = h.Write(b[:])
	_, _ = h.WriteString(key)
	return h.Sum64()
}

// aliveSet returns which engines are alive now, as a bit set (at most 64
// engines take part in routing; the rest only when all of those are
// dead).
func (c *Cache) aliveSet(now int64) uint64 {
	var set uint64
	for i, n := range c.nodes {
		if i < 64 && n.alive(now, c.cfg.DeadAfter) {
			set |= 1 << i
		}
	}
	return set
}

// home returns key's engine: the highest score among the alive ones, or
// among all when none is alive (a cache just started, or every engine
// gone: keys wait where they will most likely live).
func (c *Cache) home(key string, alive uint64) *node {
	var best *node
	var bestScore uint64
	for i, n := range c.nodes {
		if alive != 0 && (i >= 64 || alive&(1<<i) == 0) {
			continue
		}
		if s := n.score(key); best == nil || s > bestScore {
			best, bestScore = n, s
		}
	}
	return best
}

// homeOf is e's engine: its home among the alive engines that have not
// refused it too_many_subscriptions (among all alive ones when every one
// has).
func (c *Cache) homeOf(e *entry, alive uint64) *node {
	if m := alive &^ e.full.Load(); m != 0 {
		alive = m
	}
	return c.home(e.key, alive)
}

// spill sends the entry subscribed as id on s to its next engine when s's
// engine refused it too_many_subscriptions (bounded-load routing,
// docs/scale-out.md): every cache computes the same next choice, so
// identical queries still meet on one engine. It reports false when there
// is no other alive engine to try (the refusal then stands).
func (c *Cache) spill(s *socket, id string) bool {
	if s.node.i >= 64 {
		return false
	}
	s.mu.Lock()
	e := s.subs[id]
	if e == nil {
		s.mu.Unlock()
		return false
	}
	full := e.full.Load() | 1<<s.node.i
	alive := c.aliveSet(c.Now()) &^ full
	if alive == 0 {
		s.mu.Unlock()
		return false
	}
	e.full.Store(full)
	delete(s.subs, id)
	delete(s.held, e)
	e.id = ""
	s.mu.Unlock()
	n := c.home(e.key, alive)
	to := n.socks[int(hrwID(e.key)%uint64(len(n.socks)))]
	e.sock.Store(to)
	c.spilt.Add(1)
	to.subscribe(e)
	if e.state.Load() == stateDead {
		to.drop(e)
	}
	return true
}

// Spilt returns how many keys were sent to their next engine because
// their first choice refused too_many_subscriptions.
func (c *Cache) Spilt() int64 { return c.spilt.Load() }

// rebalanceInterval is how often the engines' health is looked at.
const rebalanceInterval = 100 * time.Millisecond

// rebalanceLoop moves keys when the set of alive engines changes: the
// keys of an engine that died go to their next choice, and an engine that
// comes (back) takes its share. With rendezvous hashing no other key
// moves.
func (c *Cache) rebalanceLoop() {
	t := time.NewTicker(rebalanceInterval)
	defer t.Stop()
	var last uint64
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		alive := c.aliveSet(c.Now())
		if alive == last || alive == 0 {
			continue
		}
		last = alive
		c.rebalance(alive)
	}
}

// rebalance moves every key not on its home engine there.
func (c *Cache) rebalance(alive uint64) {
	var moves []*entry
	for _, s := range c.socks {
		s.mu.Lock()
		for e := range s.held {
			if c.homeOf(e, alive) != s.node {
				moves = append(moves, e)
			}
		}
		s.mu.Unlock()
	}
	for _, e := range moves {
		c.move(e, alive)
	}
	if len(moves) > 0 {
		c.log.Info("freshet read cache: moved keys to their engines", "keys", len(moves), "alive", alive)
	}
}

// move takes e off its socket and subscribes it on its home engine. Until
// that engine accepts it, reads of e go to PostgreSQL; the subscription
// asks for min_lsn, so the answer is never older than one seen before.
func (c *Cache) move(e *entry, alive uint64) {
	from := e.sock.Load()
	n := c.homeOf(e, alive)
	if n == from.node {
		return
	}
	to := n.socks[int(hrwID(e.key)%uint64(len(n.socks)))]
	if !from.release(e) {
		return // dead, or moved meanwhile
	}
	e.sock.Store(to)
	c.moved.Add(1)
	to.subscribe(e)
	if e.state.Load() == stateDead {
		to.drop(e)
	}
}

// release takes a live, pending or stale e off s (unsubscribing it) and
// marks it stale, so reads of it go to PostgreSQL until it is accepted
// elsewhere. It reports false when e is not s's.
func (s *socket) release(e *entry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.held[e]; !ok || e.sock.Load() != s {
		return false
	}
	delete(s.held, e)
	if e.id != "" {
		delete(s.subs, e.id)
		if s.up.Load() {
			b, _ := wire.Encode(&wire.Unsubscribe{ID: e.id})
			s.enqueueLocked(b)
		}
		e.id = ""
	}
	if e.state.CompareAndSwap(stateLive, stateStale) || e.state.CompareAndSwap(statePending, stateStale) {
		e.decide()
	}
	return true
}

// saw raises the floor to lsn, a position an engine reported.
func (c *Cache) saw(lsn string) {
	v := lsnOf(lsn)
	for {
		old := c.floor.Load()
		if v <= old || c.floor.CompareAndSwap(old, v) {
			return
		}
	}
}

// Moved returns how many keys were moved between engines.
func (c *Cache) Moved() int64 { return c.moved.Load() }

// EngineOf returns the URL of the engine key is subscribed on ("" when the
// key is not held).
func (c *Cache) EngineOf(key string) string {
	if c.entries == nil {
		return ""
	}
	e, ok := c.entries.GetIfPresent(key)
	if !ok {
		return ""
	}
	return e.sock.Load().url
}

// lsnOf parses an LSN's text form "X/Y" (0 when empty or malformed).
func lsnOf(s string) uint64 {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil {
		return 0
	}
	return h<<32 | l
}

// formatLSN is lsnOf's inverse.
func formatLSN(v uint64) string {
	return strings.ToUpper(strconv.FormatUint(v>>32, 16)) + "/" + strings.ToUpper(strconv.FormatUint(v&0xffffffff, 16))
}
