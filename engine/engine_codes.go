package engine

import (
	"context"
	"errors"
	"strings"

	"github.com/freshetdb/freshet/query"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrRowLimit is wrapped by the reader's error for a read that returned
// more rows than its ReadRequest.RowLimit. Subscriptions refused for it are
// not retryable (the same query would return as many rows again).
var ErrRowLimit = errors.New("read returned more rows than the row limit")

// classifyRead says what a failed read means for its subscriptions, as
// the core is told it (ReadFailure): the code (readCode), the reason (the
// error's text, which may quote the value PostgreSQL rejected: the
// subscriber sent it), and whether subscribing again may succeed. Not
// retryable: a read over the row limit, and one PostgreSQL rejected for
// the query's own text or binds whatever the rows hold (invalidInput) or
// for an integrity rule (class 23). A row that raises evaluating an
// expression (query.CodeEvalError) stays retryable, as a write may change
// the row; binds and constants out of their type's range are refused by
// the query layer before any read. Everything else (a timeout, a lost
// connection, a schema change) may pass next time.
func classifyRead(err error) ReadFailure {
	code := readCode(err)
	retryable := code != CodeRowLimit
	if state := sqlState(err); invalidInput[state] || strings.HasPrefix(state, "23") {
		retryable = false
	}
	return ReadFailure{Code: code, Reason: "read failed: " + err.Error(), Retryable: retryable}
}

// invalidInput lists the data exceptions (SQLSTATE class 22) only the
// query's own text or binds can raise: a value stored in the database is
// valid in its encoding, so no write makes the read pass.
var invalidInput = map[string]bool{
	"22021": true, // character_not_in_repertoire: invalid UTF-8 in a text bind, byte 0xFF or NUL
	"22P05": true, // untranslatable_character
}

// sqlState returns the SQLSTATE of a PostgreSQL error err wraps, or "".
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// readCode classifies a failed read by its error's type and SQLSTATE.
func readCode(err error) query.Code {
	var pe *pgconn.PgError
	var se *ShapeError
	switch {
	case errors.As(err, &se):
		return se.Code
	case errors.Is(err, ErrRowLimit):
		return CodeRowLimit
	case errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err):
		return CodeReadTimeout
	case errors.As(err, &pe) && pe.Code == "42P01": // undefined_table
		return CodeTableDropped
	case errors.As(err, &pe) && (pe.Code == "42703" || pe.Code == "42804" || pe.Code == "42883"): // undefined_column, datatype_mismatch, undefined_function
		// A read renders only the plan's columns, operators and casts of
		// their types: one PostgreSQL no longer has (text >= float8 after
		// ALTER COLUMN TYPE text) means the plan's shape is gone.
		return CodeSchemaChanged
	case errors.As(err, &pe) && invalidInput[pe.Code]:
		return CodeReadFailed // the query's input, not a row, is at fault
	case errors.As(err, &pe) && strings.HasPrefix(pe.Code, "22"): // data_exception: division by zero, out of range, ...
		return query.CodeEvalError
	}
	return CodeReadFailed
}
