package ticketdesk

import (
	"context"
	"log/slog"
	"sync"
)

// RefusalLog is a slog.Handler for readcache.Config.Logger that records
// the engine's refusal code of every query the read cache reports refused
// (its debug record "freshet read cache: query refused", with code and
// sql), so a verifier or a dashboard can say why a read went to
// PostgreSQL. Every record is also passed to Next when Next takes its
// level.
type RefusalLog struct {
	next slog.Handler
	s    *refusalState // shared by the handlers WithAttrs and WithGroup return
}

type refusalState struct {
	mu     sync.Mutex
	codes  map[string]string
	counts map[string]int64
}

// NewRefusalLog returns a RefusalLog passing records on to next (nil:
// none).
func NewRefusalLog(next slog.Handler) *RefusalLog {
	return &RefusalLog{next: next, s: &refusalState{codes: map[string]string{}, counts: map[string]int64{}}}
}

// Code returns the refusal code recorded for a SQL text, or "".
func (l *RefusalLog) Code(sql string) string {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.s.codes[sql]
}

// Counts returns how many refusals were recorded, by code.
func (l *RefusalLog) Counts() map[string]int64 {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	out := make(map[string]int64, len(l.s.counts))
	for k, v := range l.s.counts {
		out[k] = v
	}
	return out
}

// Enabled takes every level: refusals are logged at debug.
func (l *RefusalLog) Enabled(context.Context, slog.Level) bool { return true }

// Handle records a refusal and passes the record on.
func (l *RefusalLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "freshet read cache: query refused" {
		var code, sql string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "code":
				code = a.Value.String()
			case "sql":
				sql = a.Value.String()
			}
			return true
		})
		l.s.mu.Lock()
		l.s.codes[sql] = code
		l.s.counts[code]++
		l.s.mu.Unlock()
	}
	if l.next != nil && l.next.Enabled(ctx, r.Level) {
		return l.next.Handle(ctx, r)
	}
	return nil
}

// WithAttrs returns a handler recording into the same log.
func (l *RefusalLog) WithAttrs(as []slog.Attr) slog.Handler {
	n := *l
	if l.next != nil {
		n.next = l.next.WithAttrs(as)
	}
	return &n
}

// WithGroup returns a handler recording into the same log.
func (l *RefusalLog) WithGroup(name string) slog.Handler {
	n := *l
	if l.next != nil {
		n.next = l.next.WithGroup(name)
	}
	return &n
}
