package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/freshetdb/freshet/internal/jsonstr"
)

// Version is the protocol version this package speaks. It is part of the
// endpoint's path ({base}/s2s/v1) and is sent in Hello.Protocol.
const Version = 1

// Path is the endpoint's path below the server's base path.
const Path = "/s2s/v1"

// DefaultMaxFrameBytes is the default limit on the size of one frame a peer
// accepts from the other side.
const DefaultMaxFrameBytes = 1 << 20

// MaxIDBytes is the longest subscription id the server takes (longer ones
// are answered with an error frame, code bad_id).
const MaxIDBytes = 256

// The frame types, as spelled in the "type" member.
const (
	TypeHello       = "hello"
	TypeLag         = "lag"
	TypeSubscribe   = "subscribe"
	TypeAccepted    = "accepted"
	TypeRefused     = "refused"
	TypeDelta       = "delta"
	TypeTouched     = "touched"
	TypeEnded       = "ended"
	TypeUnsubscribe = "unsubscribe"
	TypePing        = "ping"
	TypePong        = "pong"
	TypeError       = "error"
)

// The subscription modes (Subscribe.Mode).
const (
	ModeRows  = "rows"  // the result and its changes
	ModeTouch = "touch" // only that the result changed
)

// The forms of an ordered subscription's delta (Subscribe.DeltaOrder,
// Accepted.DeltaOrder).
const (
	// DeltaOrderFull: every delta of an ordered query carries Order, every
	// key of the result in order (the default, and what a server that
	// predates DeltaOrder sends).
	DeltaOrderFull = "full"
	// DeltaOrderMoves: a delta carries Moves, only the rows whose place
	// changed (each with the key now before it), and Size, so its bytes
	// grow with the change and not with the result.
	DeltaOrderMoves = "moves"
)

// The parameter formats (Param.Format), as in PostgreSQL's extended query
// protocol.
const (
	FormatText   = "text"   // Value is the parameter's text form
	FormatBinary = "binary" // Value is base64 (standard, padded) of its binary form
)

// Frame is any frame of the protocol.
type Frame interface {
	// FrameType returns the frame's "type" member.
	FrameType() string
}

// Hello is the server's first frame on every connection.
type Hello struct {
	Type string `json:"type"`
	// Protocol is the protocol version (Version).
	Protocol int `json:"protocol"`
	// Server is the server's software version.
	Server string `json:"server"`
	// SystemIdentifier and Database identify the PostgreSQL database the
	// server streams (pg_control_system()'s system_identifier, decimal).
	SystemIdentifier string `json:"system_identifier"`
	Database         string `json:"database"`
	// MaxSubscriptions is the most subscriptions this connection may hold
	// at once; 0 means no limit.
	MaxSubscriptions int `json:"max_subscriptions"`
	// MaxFrameBytes is the largest frame the server reads; 0 means no limit.
	MaxFrameBytes int `json:"max_frame_bytes"`
	// LagIntervalMS is how often the server sends a Lag frame.
	LagIntervalMS int `json:"lag_interval_ms"`
}

// Lag says how far behind PostgreSQL the answers on this connection may be.
type Lag struct {
	Type string `json:"type"`
	// MS is the age, in milliseconds, of the newest WAL heartbeat whose
	// preceding transactions have all been queued to this connection; nil
	// (JSON null) until the first heartbeat.
	MS *int64 `json:"ms"`
	// LSN is the position of that heartbeat ("" until the first).
	LSN string `json:"lsn,omitempty"`
	// WrittenUS is when that heartbeat was written (Unix microseconds,
	// the server's clock); nil until the first. MS was measured when the
	// frame was queued, so a client on a synchronized clock bounds an
	// answer's age by now minus WrittenUS, which also counts the time the
	// frame spent queued and in flight.
	WrittenUS *int64 `json:"written_us,omitempty"`
}

// Param is one bind parameter of a Subscribe.
type Param struct {
	// OID is the parameter's type; 0 lets the server infer it from its use.
	OID uint32 `json:"oid"`
	// Format is FormatText (the default when empty) or FormatBinary.
	Format string `json:"format,omitempty"`
	// Value is the parameter's value; nil (JSON null) is SQL NULL.
	Value *string `json:"value"`
}

// Subscribe asks the server to follow a query.
type Subscribe struct {
	Type string `json:"type"`
	// ID is the client's name for the subscription, unique among its live
	// subscriptions on this connection; every frame about it carries it.
	ID     string  `json:"id"`
	SQL    string  `json:"sql"`
	Params []Param `json:"params,omitempty"`
	// Mode is ModeRows or ModeTouch.
	Mode string `json:"mode"`
	// MinLSN, when set, is the oldest position the client accepts an
	// answer at: the server answers accepted only once its position is at
	// or past it (every replica of one database follows one LSN space),
	// and refuses with CodeBehind (retryable) if it does not get there in
	// time. A client moving a query to another replica sends the newest
	// position it has seen, so its reads never go back in time. Optional:
	// a server that predates it ignores it.
	MinLSN string `json:"min_lsn,omitempty"`
	// DeltaOrder asks for the form of an ordered query's deltas:
	// DeltaOrderMoves, or DeltaOrderFull (the default when empty).
	// Optional: a server that predates it ignores it and sends Order, so
	// a client that asks must still read Order when a delta carries it.
	DeltaOrder string `json:"delta_order,omitempty"`
}

// Column is one column of a result.
type Column struct {
	Name    string `json:"name"`
	TypeOID uint32 `json:"type_oid"`
	// TypeMod is the column's type modifier (atttypmod: the n of
	// varchar(n), the precision and scale of numeric(p,s)), as PostgreSQL's
	// RowDescription reports it; nil when the column has none (-1) or the
	// server does not send it.
	TypeMod *int32 `json:"type_mod,omitempty"`
}

// OrderKey is one ORDER BY key of a result: the output column it sorts
// by (-1 when the column is not in the output), and its direction.
type OrderKey struct {
	Column     int  `json:"column"`
	Desc       bool `json:"desc,omitempty"`
	NullsFirst bool `json:"nulls_first,omitempty"`
}

// Row is one row of a result: its identity and its values.
type Row struct {
	// Key identifies the row within the subscription's result (opaque; the
	// same row keeps the same key while it stays in the result).
	Key string `json:"key"`
	// Values are the output columns' values in PostgreSQL's text form, nil
	// for NULL.
	Values []*string `json:"values"`
}

// Accepted says a subscription is live: its result is exact at LSN and
// every change after LSN will follow.
type Accepted struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	Mode string `json:"mode"`
	// LSN is the position the result is exact at.
	LSN string `json:"lsn"`
	// Columns, Order, Limit, Offset and Rows are sent in rows mode.
	Columns []Column   `json:"columns,omitempty"`
	Order   []OrderKey `json:"order,omitempty"`
	// Limit is the query's LIMIT, nil when it has none.
	Limit  *int64 `json:"limit,omitempty"`
	Offset int64  `json:"offset,omitempty"`
	// Rows is the whole result in order (rows mode).
	Rows []Row `json:"rows"`
	// Count is the result of a COUNT(*) query, in text form.
	Count *string `json:"count,omitempty"`
	// DeltaOrder is DeltaOrderMoves when the subscribe asked for it and
	// the query is ordered (or limited): its deltas carry Moves and Size
	// instead of Order. Empty otherwise.
	DeltaOrder string `json:"delta_order,omitempty"`
}

// Refused says a subscription was not made.
type Refused struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	// Code names the reason in a stable word (see docs/s2s-protocol.md).
	Code   string `json:"code"`
	Reason string `json:"reason"`
	// Retryable says subscribing again later may succeed (a limit, a
	// timeout, a schema that may change); false means it never will and
	// the client should read PostgreSQL instead.
	Retryable bool `json:"retryable"`
}

// Delta is a change of a rows-mode subscription's result in the
// transaction committed at LSN.
type Delta struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	LSN  string `json:"lsn"`
	// Upsert are rows added or changed, by Key.
	Upsert []Row `json:"upsert,omitempty"`
	// Remove are keys of rows that left the result.
	Remove []string `json:"remove,omitempty"`
	// Order, for a query with ORDER BY, lists every key of the result in
	// order after the change.
	Order []string `json:"order,omitempty"`
	// Count is the new count of a COUNT(*) query.
	Count *string `json:"count,omitempty"`
	// Moves, under DeltaOrderMoves, are the rows whose place in the
	// order changed (rows that entered the result among them), in their
	// new order, each with the key of the row now before it. Rows not
	// named keep their relative order.
	Moves []Move `json:"moves,omitempty"`
	// Size, under DeltaOrderMoves, is the number of rows in the result
	// after the change (a check: a client whose result has another size
	// lost track of it and subscribes again).
	Size *int `json:"size,omitempty"`
}

// Move is one row of a Delta's Moves: its key and the key of the row
// before it in the new order (nil when it is now the first row).
type Move struct {
	Key   string  `json:"key"`
	After *string `json:"after"`
}

// Touched lists the touch-mode subscriptions whose results changed in the
// transaction committed at LSN.
type Touched struct {
	Type string   `json:"type"`
	LSN  string   `json:"lsn"`
	IDs  []string `json:"ids"`
}

// Ended says the server ended a live subscription; no frame about it
// follows.
type Ended struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	Code      string `json:"code"`
	Reason    string `json:"reason"`
	Retryable bool   `json:"retryable"`
}

// Unsubscribe ends a subscription. No frame about it follows.
type Unsubscribe struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// Ping asks the server for a Pong carrying the same Data.
type Ping struct {
	Type string `json:"type"`
	Data string `json:"data,omitempty"`
}

// Pong answers a Ping. Every frame queued before the Ping was read has
// been sent before it.
type Pong struct {
	Type string `json:"type"`
	Data string `json:"data,omitempty"`
}

// Error says the server could not use a frame the client sent; the
// connection stays usable.
type Error struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// ID is the subscription id of the frame, when it could be read.
	ID string `json:"id,omitempty"`
}

// Refusal and error codes.
const (
	CodeBadFrame      = "bad_frame"       // not a JSON object, or a member of the wrong type
	CodeUnknownType   = "unknown_type"    // a "type" this side does not know
	CodeFrameTooLarge = "frame_too_large" // longer than the peer's max_frame_bytes
	CodeBadID         = "bad_id"          // empty id, or an id already in use
	CodeBadMode       = "bad_mode"        // mode is not rows or touch
	CodeBadParam      = "bad_param"       // a parameter's format or value cannot be read
	CodeUnknownID     = "unknown_id"      // unsubscribe of an id not subscribed
	CodeTooMany       = "too_many_subscriptions"
	CodeShuttingDown  = "shutting_down"
	CodeInternal      = "internal"
	// Codes of refused and ended frames for reads and schema changes.
	CodeTimeout       = "timeout"        // compiling, or a read, took too long
	CodeBehind        = "behind"         // the server did not reach the subscribe's min_lsn in time (retryable)
	CodeRowLimit      = "row_limit"      // a read returned more rows than the server's row limit
	CodeReadFailed    = "read_failed"    // a read failed for another reason (in the reason)
	CodeTableDropped  = "table_dropped"  // a table the query reads was dropped
	CodeSchemaChanged = "schema_changed" // a table the query reads changed shape
	// CodeResultTooLarge: a result (accepted) or a change to it (delta)
	// is bigger than the connection's outgoing queue may hold.
	CodeResultTooLarge = "result_too_large"
)

// WebSocket close codes the server uses (besides 1000 and 1001).
const (
	// CloseSlowConsumer: the connection's outgoing queue passed its limit
	// because the client did not read fast enough; its subscriptions
	// ended.
	CloseSlowConsumer = 4000
	// CloseStreamLost: the server lost its change stream; subscriptions
	// ended and the client should reconnect.
	CloseStreamLost = 4001
)

func (*Hello) FrameType() string       { return TypeHello }
func (*Lag) FrameType() string         { return TypeLag }
func (*Subscribe) FrameType() string   { return TypeSubscribe }
func (*Accepted) FrameType() string    { return TypeAccepted }
func (*Refused) FrameType() string     { return TypeRefused }
func (*Delta) FrameType() string       { return TypeDelta }
func (*Touched) FrameType() string     { return TypeTouched }
func (*Ended) FrameType() string       { return TypeEnded }
func (*Unsubscribe) FrameType() string { return TypeUnsubscribe }
func (*Ping) FrameType() string        { return TypePing }
func (*Pong) FrameType() string        { return TypePong }
func (*Error) FrameType() string       { return TypeError }

// ErrTooLarge is wrapped by Decode's error for a frame over the limit.
var ErrTooLarge = errors.New("frame too large")

// DecodeError is Decode's error for a frame it cannot read. Code is one of
// CodeBadFrame, CodeUnknownType and CodeFrameTooLarge; ID is the frame's
// "id" member when that much could be read.
type DecodeError struct {
	Code string
	ID   string
	Err  error
}

func (e *DecodeError) Error() string { return "decode frame: " + e.Err.Error() }
func (e *DecodeError) Unwrap() error { return e.Err }

// Decode reads one frame. max limits its size in bytes (0: no limit).
// Unknown members are ignored so that either side can add some.
func Decode(b []byte, max int) (Frame, error) {
	if max > 0 && len(b) > max {
		return nil, &DecodeError{Code: CodeFrameTooLarge, Err: fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(b), max)}
	}
	var head struct {
		Type *string         `json:"type"`
		ID   json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, &DecodeError{Code: CodeBadFrame, Err: fmt.Errorf("not a JSON object: %w", err)}
	}
	id := ""
	if len(head.ID) > 0 {
		_ = json.Unmarshal(head.ID, &id)
	}
	if head.Type == nil {
		return nil, &DecodeError{Code: CodeBadFrame, ID: id, Err: errors.New(`no "type" member`)}
	}
	var f Frame
	switch *head.Type {
	case TypeHello:
		f = &Hello{}
	case TypeLag:
		f = &Lag{}
	case TypeSubscribe:
		f = &Subscribe{}
	case TypeAccepted:
		f = &Accepted{}
	case TypeRefused:
		f = &Refused{}
	case TypeDelta:
		f = &Delta{}
	case TypeTouched:
		f = &Touched{}
	case TypeEnded:
		f = &Ended{}
	case TypeUnsubscribe:
		f = &Unsubscribe{}
	case TypePing:
		f = &Ping{}
	case TypePong:
		f = &Pong{}
	case TypeError:
		f = &Error{}
	default:
		return nil, &DecodeError{Code: CodeUnknownType, ID: id, Err: fmt.Errorf("unknown frame type %q", truncate(*head.Type, 64))}
	}
	if err := json.Unmarshal(b, f); err != nil {
		return nil, &DecodeError{Code: CodeBadFrame, ID: id, Err: fmt.Errorf("read %s frame: %w", *head.Type, err)}
	}
	return f, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Encode returns f's JSON text, with its "type" member set.
func Encode(f Frame) ([]byte, error) {
	setType(f)
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode %s frame: %w", f.FrameType(), err)
	}
	return b, nil
}

func setType(f Frame) {
	t := f.FrameType()
	switch f := f.(type) {
	case *Hello:
		f.Type = t
	case *Lag:
		f.Type = t
	case *Subscribe:
		f.Type = t
	case *Accepted:
		f.Type = t
	case *Refused:
		f.Type = t
	case *Delta:
		f.Type = t
	case *Touched:
		f.Type = t
	case *Ended:
		f.Type = t
	case *Unsubscribe:
		f.Type = t
	case *Ping:
		f.Type = t
	case *Pong:
		f.Type = t
	case *Error:
		f.Type = t
	}
}

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// so the output is always valid JSON. It lets a server build frames
// piecewise, reusing the encoding of a row shared by many frames.
func AppendString(dst []byte, s string) []byte {
	out, _ := jsonstr.Append(dst, s, true)
	return out
}

// AppendInt appends n as a JSON number.
func AppendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }
