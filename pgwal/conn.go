package pgwal

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// This file speaks the streaming replication protocol on a replication=database
// connection: IDENTIFY_SYSTEM, START_REPLICATION, and the CopyBoth messages
// (XLogData, keepalives, standby status updates).

// pgEpoch is PostgreSQL's epoch, from which protocol timestamps count microseconds.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// connectReplication opens a replication=database connection to the DSN's
// database. TLS and everything else come from the DSN as pgconn reads it.
//
// Reads go through a bufio.Reader bufSize bytes large below pgconn's own 8 KiB
// buffer, so a burst the walsender has sent is taken in one read syscall
// (and one wake-up) rather than one per 8 KiB; the returned reader tells
// how much of it is still buffered. bufSize 0 keeps pgconn's reads as they
// are.
func connectReplication(ctx context.Context, dsn string, bufSize int) (*pgconn.PgConn, *bufio.Reader, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("parse DSN: %w", err)
	}
	var br *bufio.Reader
	if bufSize > 0 {
		build := cfg.BuildFrontend
		cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
			br = bufio.NewReaderSize(r, bufSize)
			return build(br, w)
		}
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["application_name"] = appName(cfg.RuntimeParams["application_name"])
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, nil, explainConnectError(err)
	}
	return conn, br, nil
}

func appName(s string) string {
	if s == "" {
		return "freshet"
	}
	return s
}

// explainConnectError adds the fix to connection errors a person can act on.
func explainConnectError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "53300" && strings.Contains(pgErr.Message, "max_wal_senders"):
			return fmt.Errorf("open replication connection: all WAL senders are in use (%s): stop an idle replication client or raise max_wal_senders in postgresql.conf and restart PostgreSQL: %w", pgErr.Message, err)
		case pgErr.Code == "28000" && strings.Contains(pgErr.Message, "replication"):
			return fmt.Errorf("open replication connection: pg_hba.conf refuses replication connections for this role and database: add a line allowing them (database 'replication' for physical, the database name for logical) and reload: %w", err)
		case pgErr.Code == "42501":
			return fmt.Errorf("open replication connection: the role lacks the REPLICATION attribute: run ALTER ROLE <role> REPLICATION as a superuser: %w", err)
		}
	}
	return fmt.Errorf("open replication connection: %w", err)
}

// systemIdentity is the answer to IDENTIFY_SYSTEM.
type systemIdentity struct {
	SystemID string
	Timeline int32
	XLogPos  change.LSN
	DBName   string
}

// identifySystem runs IDENTIFY_SYSTEM.
func identifySystem(ctx context.Context, conn *pgconn.PgConn) (systemIdentity, error) {
	res, err := conn.Exec(ctx, "IDENTIFY_SYSTEM").ReadAll()
	if err != nil {
		return systemIdentity{}, fmt.Errorf("identify system: %w", err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) < 4 {
		return systemIdentity{}, errors.New("identify system: unexpected result shape")
	}
	return parseIdentifySystem(res[0].Rows[0])
}

func parseIdentifySystem(row [][]byte) (systemIdentity, error) {
	var id systemIdentity
	id.SystemID = string(row[0])
	var tl int64
	if _, err := fmt.Sscan(string(row[1]), &tl); err != nil {
		return id, fmt.Errorf("identify system: timeline %q: %w", row[1], err)
	}
	id.Timeline = int32(tl)
	lsn, err := change.ParseLSN(string(row[2]))
	if err != nil {
		return id, fmt.Errorf("identify system: %w", err)
	}
	id.XLogPos = lsn
	id.DBName = string(row[3])
	return id, nil
}

// startReplication sends START_REPLICATION and waits for the CopyBoth
// response; afterwards the connection carries only CopyData.
func startReplication(ctx context.Context, conn *pgconn.PgConn, slot string, start change.LSN, opts []string) error {
	sql := fmt.Sprintf("START_REPLICATION SLOT %s LOGICAL %s (%s)", slot, start, strings.Join(opts, ", "))
	conn.Frontend().SendQuery(&pgproto3.Query{String: sql})
	if err := conn.Frontend().Flush(); err != nil {
		return fmt.Errorf("start replication: %w", err)
	}
	for {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			return fmt.Errorf("start replication: %w", err)
		}
		switch m := msg.(type) {
		case *pgproto3.CopyBothResponse:
			return nil
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("start replication: %w", pgconn.ErrorResponseToPgError(m))
		case *pgproto3.NoticeResponse, *pgproto3.ParameterStatus:
		default:
			return fmt.Errorf("start replication: unexpected %T", msg)
		}
	}
}

// pluginOptions returns pgoutput's options for START_REPLICATION.
func pluginOptions(proto int, publication string, binary bool) []string {
	opts := []string{
		fmt.Sprintf("proto_version '%d'", proto),
		"publication_names " + quoteLiteral(quoteIdentIfNeeded(publication)),
		"messages 'true'",
	}
	if binary {
		opts = append(opts, "binary 'true'")
	}
	if proto >= 2 {
		opts = append(opts, "streaming 'on'")
	}
	return opts
}

// quoteIdentIfNeeded quotes a publication name for pgoutput's
// publication_names list, which PostgreSQL splits as identifiers.
func quoteIdentIfNeeded(s string) string {
	if validName(s) {
		return s
	}
	return change.QuoteIdent(s)
}

func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// xlogData is one XLogData CopyData message ('w').
type xlogData struct {
	WALStart     change.LSN
	ServerWALEnd change.LSN
	Data         []byte // aliases the receive buffer
}

// keepalive is a primary keepalive message ('k').
type keepalive struct {
	ServerWALEnd   change.LSN
	ReplyRequested bool
}

// parseCopyData parses a CopyData payload from the walsender: a keepalive
// (ka set), an error, or else XLogData (x). x is a value, not a pointer,
// so the receiver's copy of it stays off the heap: one allocation per
// message otherwise.
func parseCopyData(b []byte) (x xlogData, ka *keepalive, err error) {
	if len(b) == 0 {
		return x, nil, errors.New("parse replication message: empty CopyData")
	}
	switch b[0] {
	case 'w':
		if len(b) < 25 {
			return x, nil, fmt.Errorf("parse XLogData: %d bytes, want at least 25", len(b))
		}
		return xlogData{
			WALStart:     change.LSN(binary.BigEndian.Uint64(b[1:])),
			ServerWALEnd: change.LSN(binary.BigEndian.Uint64(b[9:])),
			Data:         b[25:],
		}, nil, nil
	case 'k':
		if len(b) < 18 {
			return x, nil, fmt.Errorf("parse keepalive: %d bytes, want 18", len(b))
		}
		return x, &keepalive{
			ServerWALEnd:   change.LSN(binary.BigEndian.Uint64(b[1:])),
			ReplyRequested: b[17] != 0,
		}, nil
	default:
		return x, nil, fmt.Errorf("parse replication message: unknown type %q", b[0])
	}
}

// appendStatusUpdate appends a standby status update ('r') wrapped in a
// CopyData frame, ready to write to the socket.
func appendStatusUpdate(dst []byte, write, flush, apply change.LSN, now time.Time, replyRequested bool) []byte {
	dst = append(dst, 'd', 0, 0, 0, 4+1+8*4+1)
	dst = append(dst, 'r')
	dst = binary.BigEndian.AppendUint64(dst, uint64(write))
	dst = binary.BigEndian.AppendUint64(dst, uint64(flush))
	dst = binary.BigEndian.AppendUint64(dst, uint64(apply))
	dst = binary.BigEndian.AppendUint64(dst, uint64(now.Sub(pgEpoch).Microseconds()))
	if replyRequested {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// statusWriter writes standby status updates straight to the socket, so it
// can do so while another goroutine blocks reading (pgconn's read side runs
// independently of raw writes once the connection is in CopyBoth mode).
type statusWriter struct {
	conn net.Conn
	buf  []byte
}

func (w *statusWriter) send(write, flush change.LSN, timeout time.Duration) error {
	w.buf = appendStatusUpdate(w.buf[:0], write, flush, flush, time.Now(), false)
	if timeout > 0 {
		_ = w.conn.SetWriteDeadline(time.Now().Add(timeout))
	}
	_, err := w.conn.Write(w.buf)
	if err != nil {
		return fmt.Errorf("send standby status update: %w", err)
	}
	return nil
}
