package pgtest

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// StatementCounter is a pgx.QueryTracer that counts the statements a
// connection sends to PostgreSQL, so a test can check that a read was
// answered without PostgreSQL seeing it. Set it as ConnConfig.Tracer.
type StatementCounter struct{ n atomic.Int64 }

// Count returns how many statements have been sent so far.
func (c *StatementCounter) Count() int64 { return c.n.Load() }

// TraceQueryStart counts a statement (pgx.QueryTracer).
func (c *StatementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

// TraceQueryEnd does nothing (pgx.QueryTracer).
func (c *StatementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
