package query

import (
	"context"
	"fmt"
)

// Compiling is bounded by its context as a whole, PostgreSQL's parser and
// deparser included: a caller's deadline (--compile-timeout) must answer
// in time, whatever the text. The Go work checks the context as it goes
// (tick); the C calls cannot be interrupted, so a large one runs on a
// goroutine of its own that Compile stops waiting for when the context
// ends (the call runs to its end and its result is dropped: it takes time
// in proportion to the text, which MaxSQLLength bounds, and touches
// nothing but its own memory). At most bigCallsN such calls run at once,
// so abandoned ones cannot pile up past the machine's cores; a compile
// waiting for a turn also gives up when its context ends.
const (
	// bigCall is the text size from which a C call runs on its own
	// goroutine: under it the call takes well under a millisecond or two.
	bigCall   = 16 << 10
	bigCallsN = 2
)

var bigCalls = make(chan struct{}, bigCallsN)

// tickEvery is how many units of compile work pass between two looks at
// the context.
const tickEvery = 1024

// tick counts one unit of compile work (a predicate node, an operand) and
// returns the context's error, every tickEvery units, once it has ended.
func (c *compiler) tick() error {
	c.work++
	if c.work%tickEvery != 0 {
		return nil
	}
	return c.ctxErr()
}

// ctxErr returns the context's error, wrapped, once it has ended.
func (c *compiler) ctxErr() error {
	if c.ctx == nil {
		return nil
	}
	if err := c.ctx.Err(); err != nil {
		return fmt.Errorf("compile query: %w", err)
	}
	return nil
}

// cgoCall runs fn, a call into pg_query for a text of size bytes, and
// returns its result, or ctx's error as soon as ctx ends.
func cgoCall[T any](ctx context.Context, size int, fn func() (T, error)) (T, error) {
	if ctx == nil || ctx.Done() == nil || size < bigCall {
		return fn()
	}
	var zero T
	select {
	case bigCalls <- struct{}{}:
	case <-ctx.Done():
		return zero, fmt.Errorf("compile query: %w", ctx.Err())
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() { <-bigCalls }()
		var r result
		defer func() {
			if p := recover(); p != nil {
				r.err = fmt.Errorf("pg_query: %v", p)
			}
			done <- r
		}()
		r.v, r.err = fn()
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, fmt.Errorf("compile query: %w", ctx.Err())
	}
}
