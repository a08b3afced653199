package readcache

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Reason says why a read was not answered from the cache. ReasonNone means
// it was.
type Reason int

// The reasons a read goes to PostgreSQL.
const (
	ReasonNone         Reason = iota // served from the cache
	ReasonDisabled                   // no cache configured, or the engine follows another database
	ReasonRoute                      // a route flag sent it to PostgreSQL
	ReasonNotSelect                  // not a single SELECT
	ReasonTransaction                // inside a transaction
	ReasonAfterWrite                 // within the read-your-writes window after a write
	ReasonRefused                    // the engine refused the query
	ReasonLag                        // the engine is too far behind (or its lag is unknown)
	ReasonDisconnected               // the socket holding the key is down, or identity not yet checked
	ReasonEvicted                    // the entry was evicted while it was being filled
	ReasonTimeout                    // no verdict within VerdictTimeout
	ReasonLimit                      // the process holds MaxSubscriptions
	ReasonUnsupported                // a bind value the cache cannot key
	ReasonHydrating                  // the engine has not answered the key's subscription yet (VerdictTimeout 0: not waited for)
	reasonN
)

var reasonNames = [reasonN]string{"none", "disabled", "route", "not_select", "transaction", "after_write",
	"refused", "lag", "disconnected", "evicted", "timeout", "limit", "unsupported", "hydrating"}

func (r Reason) String() string {
	if r >= 0 && r < reasonN {
		return reasonNames[r]
	}
	return "unknown"
}

// Stats are a Cache's counters since it was opened.
type Stats struct {
	// Hits are reads answered from memory with no round trip; Misses are
	// reads that subscribed (or waited for a subscription) and were then
	// answered from its first result.
	Hits, Misses int64
	// Postgres counts reads sent to PostgreSQL, by reason name.
	Postgres map[string]int64
	// Entries and Bytes are the cache's current size (entries include
	// pending and refused ones).
	Entries int
	Bytes   int64
	// Subscriptions is how many subscriptions are held.
	Subscriptions int64
	// Connected is how many sockets are up and checked.
	Connected int
}

type counters struct {
	hits, misses atomic.Int64
	pg           [reasonN]atomic.Int64
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	s := Stats{Hits: c.n.hits.Load(), Misses: c.n.misses.Load(), Postgres: map[string]int64{}}
	for r := ReasonDisabled; r < reasonN; r++ {
		s.Postgres[r.String()] = c.n.pg[r].Load()
	}
	if c.entries != nil {
		s.Entries = c.entries.EstimatedSize()
		s.Bytes = int64(c.entries.WeightedSize())
	}
	s.Subscriptions = c.subN.Load()
	for _, sk := range c.socks {
		if sk.usable() {
			s.Connected++
		}
	}
	return s
}

// Collector returns a Prometheus collector of the cache's counters:
// freshet_readcache_hits_total, _misses_total,
// _postgres_reads_total{reason}, _entries, _bytes, _subscriptions and
// _sockets_connected.
func (c *Cache) Collector() prometheus.Collector { return &collector{c: c} }

var (
	descHits  = prometheus.NewDesc("freshet_readcache_hits_total", "Reads answered from the cache with no round trip.", nil, nil)
	descMiss  = prometheus.NewDesc("freshet_readcache_misses_total", "Reads answered from a subscription's first result.", nil, nil)
	descPG    = prometheus.NewDesc("freshet_readcache_postgres_reads_total", "Reads sent to PostgreSQL, by reason.", []string{"reason"}, nil)
	descEnt   = prometheus.NewDesc("freshet_readcache_entries", "Cache entries (live, pending and refused).", nil, nil)
	descBytes = prometheus.NewDesc("freshet_readcache_bytes", "Approximate bytes held by cached results.", nil, nil)
	descSubs  = prometheus.NewDesc("freshet_readcache_subscriptions", "Subscriptions held on the engine.", nil, nil)
	descConn  = prometheus.NewDesc("freshet_readcache_sockets_connected", "Sockets connected to the engine and checked.", nil, nil)
)

type collector struct{ c *Cache }

func (k *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHits, descMiss, descPG, descEnt, descBytes, descSubs, descConn} {
		ch <- d
	}
}

func (k *collector) Collect(ch chan<- prometheus.Metric) {
	s := k.c.Stats()
	ch <- prometheus.MustNewConstMetric(descHits, prometheus.CounterValue, float64(s.Hits))
	ch <- prometheus.MustNewConstMetric(descMiss, prometheus.CounterValue, float64(s.Misses))
	for r := ReasonDisabled; r < reasonN; r++ {
		ch <- prometheus.MustNewConstMetric(descPG, prometheus.CounterValue, float64(s.Postgres[r.String()]), r.String())
	}
	ch <- prometheus.MustNewConstMetric(descEnt, prometheus.GaugeValue, float64(s.Entries))
	ch <- prometheus.MustNewConstMetric(descBytes, prometheus.GaugeValue, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(descSubs, prometheus.GaugeValue, float64(s.Subscriptions))
	ch <- prometheus.MustNewConstMetric(descConn, prometheus.GaugeValue, float64(s.Connected))
}
