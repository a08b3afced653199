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
// On PostgreSQL 15 a walsender decodes only WAL that is flushed to disk. A
// non-transactional message (pg_logical_emit_message(false, ...)) is
// inserted into the WAL buffers and nothing flushes it: it has no xid, so
// its statement's commit writes no commit record and does not flush, and
// the WAL writer only flushes whole pages or asynchronous commits. A lone
// one reaches the stream only when some later activity flushes WAL
// (measured: not within 5s on an idle server, see TestHeartbeatFlush).
// (PostgreSQL 17 added a flush argument for exactly this.) A transactional
// message gets an xid, and its commit flushes WAL when synchronous_commit
// is on, which this connection sets for itself, so a lone heartbeat
// arrives within milliseconds. The cost is one xid per heartbeat (two per
// second at the default interval); the decoder drops the empty
// transaction around it, so consumers see only the *change.Heartbeat.
const heartbeatTransactional = true

// heartbeater writes heartbeats on its own ordinary connection.
type heartbeater struct {
	dsn      string
	prefix   string
	interval time.Duration
	log      *slog.Logger
	wg       sync.WaitGroup
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
	h := &heartbeater{dsn: dsn, prefix: prefix, interval: interval, log: log}
	h.wg.Add(1)
	go h.run(ctx)
	return h
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

// emitHeartbeat writes one heartbeat: content "<seq> <unix-micros>".
func emitHeartbeat(ctx context.Context, conn *pgx.Conn, prefix string, seq uint64, now time.Time, transactional bool) error {
	content := strconv.FormatUint(seq, 10) + " " + strconv.FormatInt(now.UnixMicro(), 10)
	_, err := conn.Exec(ctx, "SELECT pg_logical_emit_message($1, $2, $3)", transactional, prefix, content)
	return err
}
