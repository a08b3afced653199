package s2s

import (
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the server's Prometheus metrics.
type Metrics struct {
	Connections   prometheus.Gauge
	Subscriptions *prometheus.GaugeVec     // by mode
	Refusals      *prometheus.CounterVec   // by reason
	Hydration     prometheus.Histogram     // seconds from subscribe to accepted
	CommitToWrite prometheus.Histogram     // seconds from a commit reaching the engine to its frames on a socket
	SlowConsumers prometheus.Counter       // connections closed for a full queue
	LagSeconds    prometheus.GaugeFunc     // age of the newest heartbeat passed
	QueueBytes    prometheus.GaugeFunc     // bytes queued on all connections
	HeartbeatLSN  prometheus.Gauge         // position of the newest heartbeat passed
	lastBeat      func() *change.Heartbeat // set by Register
}

// NewMetrics returns the server's metrics, not yet registered.
func NewMetrics() *Metrics {
	return &Metrics{
		Connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "freshet_s2s_connections",
			Help: "Open s2s WebSocket connections."}),
		Subscriptions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "freshet_s2s_subscriptions",
			Help: "Subscriptions held (hydrating or live), by mode."}, []string{"mode"}),
		Refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "freshet_s2s_refusals_total",
			Help: "Refused connections, subscriptions and frames, by reason."}, []string{"reason"}),
		Hydration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "freshet_s2s_hydration_seconds",
			Help:    "Time from a subscribe frame to its accepted frame.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		CommitToWrite: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "freshet_s2s_commit_to_write_seconds",
			Help: "Time from a transaction's commit reaching the engine from its change stream to the write that put the transaction's frames on a connection's socket, once per connection the transaction touched: the server's own part of commit-to-frame.",
			// Factor 1.25 from 50 µs to ~4 s: fine enough to read a
			// p99 of a few milliseconds off the buckets.
			Buckets: prometheus.ExponentialBuckets(0.00005, 1.25, 51)}),
		SlowConsumers: prometheus.NewCounter(prometheus.CounterOpts{Name: "freshet_s2s_slow_consumers_total",
			Help: "Connections closed because their outgoing queue passed its limit."}),
		HeartbeatLSN: prometheus.NewGauge(prometheus.GaugeOpts{Name: "freshet_heartbeat_lsn",
			Help: "WAL position of the newest heartbeat whose transactions were all delivered."}),
	}
}

// Register registers m for s with reg.
func (m *Metrics) Register(reg prometheus.Registerer, s *Server) error {
	m.LagSeconds = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "freshet_lag_seconds",
		Help: "Age of the newest WAL heartbeat whose preceding transactions were all delivered to the connections' queues (NaN before the first)."},
		func() float64 {
			ms, hb := s.lag(time.Now())
			if hb == nil {
				return nanValue()
			}
			return float64(ms) / 1000
		})
	m.QueueBytes = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "freshet_s2s_queue_bytes",
		Help: "Bytes waiting in the outgoing queues of all connections."},
		func() float64 { return float64(s.queueN.Load()) })
	for _, c := range []prometheus.Collector{m.Connections, m.Subscriptions, m.Refusals, m.Hydration,
		m.CommitToWrite, m.SlowConsumers, m.LagSeconds, m.QueueBytes, m.HeartbeatLSN} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *Metrics) heartbeat(hb *change.Heartbeat) { m.HeartbeatLSN.Set(float64(hb.LSN)) }

func nanValue() float64 {
	var zero float64
	return zero / zero
}
