package shape

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/freshetdb/freshet/query"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	pg_query "github.com/pganalyze/pg_query_go/v6"
	"github.com/pganalyze/pg_query_go/v6/parser"
)

// displaySettings are Electric's session settings, so that values read
// by a subset print as the log's do.
const displaySettings = `SET LOCAL bytea_output = 'hex'; SET LOCAL DateStyle = 'ISO, DMY'; SET LOCAL TimeZone = 'UTC'; ` +
	`SET LOCAL extra_float_digits = 1; SET LOCAL IntervalStyle = 'iso_8601'; SET LOCAL statement_timeout = '30s'`

// serveSubset answers a subset snapshot: the shape's rows matching the
// subset's where, ordered and limited, read in one REPEATABLE READ
// transaction whose snapshot (xmin, xmax, xip) and WAL position the
// client uses to drop log changes the subset already holds.
func (srv *Server) serveSubset(w http.ResponseWriter, r *http.Request, s *Shape, req *request, handle string) {
	sp := req.subset
	// A subset the checks refuse is Electric's validation error, a list
	// of messages under errors.subset.<field>; one PostgreSQL refuses
	// when it runs is its query_subset error, the message alone.
	subErr := func(field, msg string) {
		fe := &fieldErrors{}
		fe.addSubset(field, msg)
		writeFieldErrors(w, r, fe)
	}
	queryErr := func(field, msg string) {
		b := []byte(`{"message":"Invalid request","errors":{"subset":{`)
		b = appendJSONString(b, field)
		b = append(b, ':')
		b = appendJSONString(b, msg)
		writeError(w, r, http.StatusBadRequest, append(b, "}}}"...))
	}
	params, msg := subsetParamList(sp.Params)
	if msg != "" {
		subErr("params", msg)
		return
	}
	where := ""
	if sp.Where != "" {
		refs, err := checkWhere(sp.Where)
		if err != nil {
			subErr("where", err.Error())
			return
		}
		for _, rf := range refs {
			if rf.n > len(params) {
				subErr("params", fmt.Sprintf("the where clause uses $%d but no such param is given", rf.n))
				return
			}
		}
		if err := checkColumns(wherePrefix, sp.Where, s.selects); err != nil {
			subErr("where", "a subset's where "+err.Error())
			return
		}
		where = renumber(sp.Where, refs, len(s.params()))
	}
	if sp.OrderBy != "" {
		if err := checkOrderBy(sp.OrderBy); err != nil {
			subErr("order_by", err.Error())
			return
		}
		if err := checkColumns("SELECT 1 ORDER BY ", sp.OrderBy, s.selects); err != nil {
			subErr("order_by", "a subset's order_by "+err.Error())
			return
		}
	}
	var sb strings.Builder
	sb.WriteString(shapeSQL(s.definition(), s.lay.cols))
	if where != "" {
		if s.where != "" {
			sb.WriteString(" AND (")
		} else {
			sb.WriteString(" WHERE (")
		}
		sb.WriteString(where)
		sb.WriteString(")")
	}
	sqlNoOrder := sb.String()
	if sp.OrderBy != "" {
		sb.WriteString(" ORDER BY ")
		sb.WriteString(sp.OrderBy)
	}
	if sp.Limit != nil {
		sb.WriteString(" LIMIT " + strconv.FormatInt(*sp.Limit, 10))
	}
	if sp.Offset != nil {
		sb.WriteString(" OFFSET " + strconv.FormatInt(*sp.Offset, 10))
	}
	sql := sb.String()
	all := append(append([]string(nil), s.params()...), params...)
	// The query layer's grammar bounds what a subset may say, as it
	// bounds a shape's where: the same refusal, naming the construct.
	if ref, err := srv.validate(r.Context(), sqlNoOrder, all); err != nil {
		// Compiling asks PostgreSQL about the query, which may refuse a
		// value of it (an enum's unknown label): the client's error.
		if pe := pgError(err); pe != "" {
			queryErr("where", pe)
			return
		}
		srv.internalError(w, r, err)
		return
	} else if ref != nil {
		subErr("where", ref.Message)
		return
	}
	res, err := srv.readSubset(r.Context(), s, sql, all)
	if err != nil {
		if pe := pgError(err); pe != "" {
			queryErr("where", pe)
			return
		}
		srv.internalError(w, r, err)
		return
	}
	// The offset to continue from: where a normal request at the same
	// offset would leave the client (for -1, the first chunk's end).
	s.mu.Lock()
	var end Offset
	if req.offset.Before {
		end = Offset{Op: s.gen.base}
	} else {
		end = req.offset
	}
	s.mu.Unlock()
	h := w.Header()
	h.Set("electric-handle", handle)
	h.Set("electric-offset", end.String())
	h.Set("electric-schema", s.lay.schema)
	// Electric's subset headers (put_resp_headers for :subset) carry
	// no electric-has-data, etag or cursor.
	h.Set("electric-snapshot", "true")
	h.Set("cache-control", "no-cache")
	h.Set("content-type", jsonType)
	w.Write(res)
}

// selects reports whether the shape selects column c.
func (s *Shape) selects(c string) bool {
	for _, col := range s.lay.cols {
		if col.name == c {
			return true
		}
	}
	return false
}

// checkOrderBy accepts an ORDER BY list of plain column names, each
// with ASC/DESC and NULLS FIRST/LAST.
func checkOrderBy(ob string) error {
	const prefix = "SELECT 1 ORDER BY "
	res, err := pg_query.Parse(prefix + ob)
	if err != nil {
		var pe *parser.Error
		if errors.As(err, &pe) {
			return fmt.Errorf("At location %d: %s", pe.Cursorpos, pe.Message)
		}
		return err
	}
	sel := (*pg_query.SelectStmt)(nil)
	if len(res.Stmts) == 1 {
		sel = res.Stmts[0].Stmt.GetSelectStmt()
	}
	if sel == nil || sel.LimitCount != nil || sel.LimitOffset != nil || len(sel.LockingClause) > 0 {
		return errors.New("order_by is a list of columns, each with ASC or DESC and NULLS FIRST or LAST")
	}
	for _, it := range sel.SortClause {
		sb := it.GetSortBy()
		if sb == nil || sb.Node.GetColumnRef() == nil || len(sb.Node.GetColumnRef().Fields) != 1 || len(sb.UseOp) > 0 {
			return errors.New("order_by may name only columns of the table (no expressions)")
		}
	}
	return nil
}

// validate compiles sql through the query layer and returns its refusal.
func (srv *Server) validate(ctx context.Context, sql string, params []string) (*query.Refusal, error) {
	opts := query.DefaultOptions()
	opts.Catalog = query.NewPGCatalog(srv.cfg.Pool)
	_, ref, err := query.Compile(ctx, sql, textBinds(params), opts)
	return ref, err
}

// pgError is the message of an error PostgreSQL answered the query
// with because of what the query says (wrapped or not: a data exception,
// class 22, or a syntax error or access rule violation, class 42), or ""
// for any other failure, which is the server's.
func pgError(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "42")) {
		return pe.Error()
	}
	return ""
}

// readSubset runs the subset's query and builds its body.
func (srv *Server) readSubset(ctx context.Context, s *Shape, sql string, params []string) ([]byte, error) {
	tx, err := srv.cfg.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, displaySettings); err != nil {
		return nil, err
	}
	var xmin, xmax, lsn string
	var xip []string
	err = tx.QueryRow(ctx, `SELECT pg_snapshot_xmin(s)::text, pg_snapshot_xmax(s)::text,
	       ARRAY(SELECT x::text FROM pg_snapshot_xip(s) x ORDER BY x::text::numeric),
	       (pg_current_wal_lsn() - '0/0')::text
	  FROM pg_current_snapshot() s`).Scan(&xmin, &xmax, &xip, &lsn)
	if err != nil {
		return nil, err
	}
	if hook := srv.subsetHook.Load(); hook != nil {
		(*hook)()
	}
	args := make([]any, len(params))
	for i, p := range params {
		args[i] = p
	}
	rows, err := tx.Query(ctx, sql, append([]any{pgx.QueryResultFormats{pgx.TextFormatCode}}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var mb [4]byte
	_, _ = rand.Read(mb[:])
	mark := binary.LittleEndian.Uint32(mb[:]) & 0x7fffffff
	b := []byte(`{"metadata":{"xmin":`)
	b = appendJSONString(b, xmin)
	b = append(b, `,"xmax":`...)
	b = appendJSONString(b, xmax)
	b = append(b, `,"xip_list":[`...)
	for i, x := range xip {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, x)
	}
	b = append(b, `],"snapshot_mark":`...)
	b = strconv.AppendUint(b, uint64(mark), 10)
	b = append(b, `,"database_lsn":`...)
	b = appendJSONString(b, lsn)
	b = append(b, `},"data":[`...)
	n := 0
	var sc scratch
	for rows.Next() {
		raw := rows.RawValues()
		sc.reset()
		for i := range s.lay.cols {
			if i < len(raw) && raw[i] != nil {
				sc.vals = append(sc.vals, raw[i]...)
				sc.ended()
			} else {
				sc.null()
			}
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		e := sc.entry(sc.electricKey(s.lay), "")
		b = append(b, `{"key":`...)
		b = appendJSONString(b, e.key())
		b = append(b, `,"value":`...)
		b = s.appendValues(b, e, nil)
		b = append(b, `,"headers":{"operation":"insert","relation":`...)
		b = append(b, s.lay.rel...)
		b = append(b, `,"snapshot_mark":`...)
		b = strconv.AppendUint(b, uint64(mark), 10)
		b = append(b, "}}"...)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return append(b, "]}"...), nil
}
