package engine

import (
	"github.com/freshetdb/freshet/query"
)

// Codes of the refusals and endings the engine decides while running
// (Output.Code). A query it cannot serve at all carries the query
// package's code instead (query.CodeNoPrimaryKey, ...).
const (
	// CodeReadTimeout: a read took longer than Config.ReadTimeout
	// (retryable).
	CodeReadTimeout query.Code = "read_timeout"
	// CodeRowLimit: a read returned more rows than the row limit (not
	// retryable: the same query would return as many rows again).
	CodeRowLimit query.Code = "row_limit"
	// CodeReadFailed: a read failed for another reason, named in the
	// output's Reason (retryable).
	CodeReadFailed query.Code = "read_failed"
	// CodeTableDropped: a table the query reads no longer exists; a
	// table made again under its name is another table (retryable:
	// subscribing again compiles against the new schema and refuses with
	// query.CodeUnknownTable if it is still gone).
	CodeTableDropped query.Code = "table_dropped"
	// CodeSchemaChanged: a table the query reads was renamed, a column
	// it uses was dropped, renamed or changed type, a column was added to
	// a table it selects with *, or the table's replica identity changed
	// (retryable, as for CodeTableDropped).
	CodeSchemaChanged query.Code = "schema_changed"
	// CodeEngineStopped: the engine was closed or lost its change stream
	// (retryable, once it runs again).
	CodeEngineStopped query.Code = "engine_stopped"
	// CodeInternal: the engine was asked something it cannot do (a
	// subscription id used twice, a plan without sources); a bug in the
	// caller.
	CodeInternal query.Code = "internal"
)
