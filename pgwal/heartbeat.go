package pgwal

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Heartbeats are written as transactional logical messages.
//
// On PostgreSQL 15 a walsender decodes only WAL that is flushed. A
// non-transactional message (pg_logical_emit_message(false, ...)) has no
// xid, so its statement ends without a commit record and without flushing:
// the message sits in the WAL buffers until something else flushes them,
// in practice the WAL writer's next round (wal_writer_delay, 200ms by
// default, longer when it hibernates on an idle server), or another
// transaction's commit. (PostgreSQL 17 added a flush argument for exactly
// this.) A transactional message gets an xid, and its commit flushes WAL
// under synchronous_commit = on, which the heartbeat connection sets for
// itself, so the heartbeat is decodable the moment the write returns.
//
// Measured by TestHeartbeatFlush (PostgreSQL 15.18, 2 cores, idle
// cluster, time from the write to its arrival at Next): transactional
// 0.03-0.5ms (one 4ms outlier in 13 samples); non-transactional 45-290ms,
// typically 200ms, i.e. one WAL writer round, also after 15s of idleness.
// The cost of the transactional form is one xid per heartbeat (two per
// second at the default interval); the decoder drops the empty transaction
// around it, so consumers see only the *change.Heartbeat.
//
// Between the intervals a heartbeat can be asked for (Reader.Beat): the
// engine does when a hydration read has its snapshot, so that on a quiet
// database the stream passes the read's WAL position within a heartbeat's
// round trip rather than at the next interval.
const heartbeatTransactional = true

// heartbeater writes heartbeats on its own ordinary connection: one every
// interval, and one more as soon as it can whenever beat asks.
type heartbeater struct {
	dsn      string
	prefix   string
	interval time.Duration
	log      *slog.Logger
	wg       sync.WaitGroup
	// now holds a token while a heartbeat is asked for (beat). Asked for
	// while one is being written, the token stays, so one more is written
	// after it: the answer to a request is always a heartbeat written
	// after the request, which is what makes it pass the database's WAL
	// position at the time of the request.
	now chan struct{}
}

// heartbeatParams keep the heartbeat connection from ever holding the
// database hostage: every statement and any stray open transaction ends
// within seconds, and its commit flushes.
var heartbeatParams = map[string]string{
	"statement_timeout":                   "5000",
	"lock_timeout":                        "1000",
	"idle_in_transaction_session_timeout": "10000",
	"synchronous_commit":                  "on",
}

func startHeartbeat(ctx context.Context, dsn, prefix string, interval time.Duration, log *slog.Logger) *heartbeater {
	h := &heartbeater{dsn: dsn, prefix: prefix, interval: interval, log: log, now: make(chan struct{}, 1)}
	h.wg.Add(1)
	go h.run(ctx)
	return h
}

// beat asks for a heartbeat now, without waiting: requests made while one
// is pending are answered together. A nil heartbeater ignores it.
func (h *heartbeater) beat() {
	if h == nil {
		return
	}
	select {
	case h.now <- struct{}{}:
	default:
	}
}

// wait waits for the heartbeat goroutine to end (after its context ends).
func (h *heartbeater) wait() {
	if h != nil {
		h.wg.Wait()
	}
}

func (h *heartbeater) run(ctx context.Context) {
	defer h.wg.Done()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	t := time.NewTicker(h.interval)
	defer t.Stop()
	var seq uint64
	failing := false
	backoff := time.Duration(0)
	var retryAt time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.now:
		}
		if time.Now().Before(retryAt) {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if conn == nil {
			c, err := connectNormal(wctx, h.dsn, heartbeatParams)
			if err != nil {
				cancel()
				backoff = min(max(2*backoff, h.interval), backoffMax)
				retryAt = time.Now().Add(backoff)
				if !failing && ctx.Err() == nil {
					h.log.Warn("heartbeat connection failed; retrying (lag is not measured meanwhile)", "err", err, "retry_in", backoff)
				}
				failing = true
				continue
			}
			conn = c
		}
		seq++
		err := emitHeartbeat(wctx, conn, h.prefix, seq, time.Now(), heartbeatTransactional)
		cancel()
		if err != nil {
			conn.Close(context.Background())
			conn = nil
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, h.interval), backoffMax)
			retryAt = time.Now().Add(backoff)
			if !failing {
				h.log.Warn("heartbeat write failed; reconnecting (lag is not measured meanwhile)", "err", err, "retry_in", backoff)
			}
			failing = true
			continue
		}
		if failing {
			h.log.Info("heartbeats resumed")
		}
		failing, backoff = false, 0
	}
}

// emitHeartbeat writes one heartbeat: content "<seq> <unix-micros>
// <db-unix-micros>", the last PostgreSQL's now() in the heartbeat's own
// transaction (the clock the engine evaluates now() in queries at:
// change.Heartbeat.Now). extract(epoch ...) is numeric, exact to the
// microsecond.
func emitHeartbeat(ctx context.Context, conn *pgx.Conn, prefix string, seq uint64, now time.Time, transactional bool) error {
	content := strconv.FormatUint(seq, 10) + " " + strconv.FormatInt(now.UnixMicro(), 10) + " "
	_, err := conn.Exec(ctx, "SELECT pg_logical_emit_message($1, $2, $3::text || (extract(epoch FROM now()) * 1000000)::int8::text)", transactional, prefix, content)
	return err
}
