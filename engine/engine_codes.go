package engine

import (
	"context"
	"errors"
	"strings"

	"github.com/freshetdb/freshet/query"
	"github.com/jackc/pgx/v5/pgconn"
)

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
	case errors.As(err, &pe) && (pe.Code == "42703" || pe.Code == "42804"): // undefined_column, datatype_mismatch
		return CodeSchemaChanged
	case errors.As(err, &pe) && strings.HasPrefix(pe.Code, "22"): // data_exception: division by zero, out of range, ...
		return query.CodeEvalError
	}
	return CodeReadFailed
}
