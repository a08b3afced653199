package s2s

import (
	"encoding/base64"
	"sync"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/query"
	"github.com/freshetdb/freshet/wire"
)

// encoder turns engine outputs into frame bodies. Rows are encoded once
// per transaction however many subscriptions receive them: the engine
// hands every subscriber of a view the same ResultRow slices, so an
// encoding is looked up by the address of the row's values (and of a
// delta's row, removal and order slices) until the transaction changes.
// A frame is then the subscription's own prefix followed by shared bytes.
type encoder struct {
	types change.TypeResolver

	mu    sync.Mutex
	lsn   change.LSN
	rows  map[*any][]byte     // one row's {"key":..,"values":[..]}
	parts map[partKey][]byte  // a delta's body after its id
	whole map[frameKey][]byte // a whole delta frame, shared by the subscriptions with its id
	colT  map[uint32]change.Type
	rowN  int // rows encoded (not reused), for tests
}

type frameKey struct {
	id string
	partKey
}

type partKey struct {
	rows    *engine.ResultRow
	removed *engine.Key
	order   *engine.Key
	count   int64
	moves   bool // the order as Moves and Size (wire.DeltaOrderMoves)
}

func newEncoder(types change.TypeResolver) *encoder {
	return &encoder{types: types, rows: map[*any][]byte{}, parts: map[partKey][]byte{}, whole: map[frameKey][]byte{}, colT: map[uint32]change.Type{}}
}

// resetLocked forgets cached encodings when a new transaction starts.
func (e *encoder) resetLocked(lsn change.LSN) {
	if lsn == e.lsn {
		return
	}
	e.lsn = lsn
	clear(e.rows)
	clear(e.parts)
	clear(e.whole)
}

func (e *encoder) typeLocked(oid uint32) change.Type {
	if t, ok := e.colT[oid]; ok {
		return t
	}
	t, ok := change.BuiltinType(oid)
	if !ok && e.types != nil {
		t, ok = e.types.Type(oid)
	}
	if !ok {
		t = change.Type{OID: oid, Kind: change.KindOther}
	}
	e.colT[oid] = t
	return t
}

func appendKey(dst []byte, k engine.Key) []byte {
	dst = append(dst, '"')
	dst = base64.RawURLEncoding.AppendEncode(dst, []byte(k))
	return append(dst, '"')
}

// appendRowLocked appends {"key":"..","values":[..]}.
func (e *encoder) appendRowLocked(dst []byte, cols []query.Output, r *engine.ResultRow, cache bool) []byte {
	if cache && len(r.Values) > 0 {
		if b, ok := e.rows[&r.Values[0]]; ok {
			return append(dst, b...)
		}
	}
	e.rowN++
	start := len(dst)
	dst = append(dst, `{"key":`...)
	dst = appendKey(dst, r.Key)
	dst = append(dst, `,"values":[`...)
	for i, v := range r.Values {
		if i > 0 {
			dst = append(dst, ',')
		}
		if v == nil {
			dst = append(dst, "null"...)
			continue
		}
		var oid uint32
		if i < len(cols) {
			oid = cols[i].TypeOID
		}
		text, err := change.AppendText(nil, e.typeLocked(oid), v, e.types)
		if err != nil {
			// A value the change package cannot print is a bug in
			// the engine's decoding; send null rather than a lie
			// would hide it, so send the error text in its place.
			text = []byte("!" + err.Error())
		}
		dst = wire.AppendString(dst, string(text))
	}
	dst = append(dst, "]}"...)
	if cache && len(r.Values) > 0 {
		e.rows[&r.Values[0]] = append([]byte(nil), dst[start:]...)
	}
	return dst
}

func appendKeys(dst []byte, name string, keys []engine.Key) []byte {
	dst = append(dst, `,"`...)
	dst = append(dst, name...)
	dst = append(dst, `":[`...)
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendKey(dst, k)
	}
	return append(dst, ']')
}

// appendMoves appends the moves member, absent when no row moved.
func appendMoves(dst []byte, ms []engine.Move) []byte {
	if len(ms) == 0 {
		return dst
	}
	dst = append(dst, `,"moves":[`...)
	for i, m := range ms {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"key":`...)
		dst = appendKey(dst, m.Key)
		dst = append(dst, `,"after":`...)
		if m.Head {
			dst = append(dst, "null"...)
		} else {
			dst = appendKey(dst, m.After)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func appendCount(dst []byte, n int64) []byte {
	dst = append(dst, `,"count":"`...)
	dst = wire.AppendInt(dst, n)
	return append(dst, '"')
}

// accepted encodes an Accepted frame for the subscription id. moves: the
// subscribe asked for wire.DeltaOrderMoves, said back when the query is
// ordered.
func (e *encoder) accepted(id string, mode engine.Mode, o *engine.Output, moves bool) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := append([]byte(nil), `{"type":"accepted","id":`...)
	b = wire.AppendString(b, id)
	b = append(b, `,"mode":"`...)
	b = append(b, mode.String()...)
	b = append(b, `","lsn":"`...)
	b = append(b, o.LSN.String()...)
	b = append(b, '"')
	if mode == engine.ModeTouch {
		return append(b, `,"rows":null}`...)
	}
	b = append(b, `,"columns":[`...)
	for i, c := range o.Columns {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = wire.AppendString(b, c.Name)
		b = append(b, `,"type_oid":`...)
		b = wire.AppendInt(b, int64(c.TypeOID))
		if c.TypeMod >= 0 {
			b = append(b, `,"type_mod":`...)
			b = wire.AppendInt(b, int64(c.TypeMod))
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	b = appendWindow(b, o.Plan)
	b = append(b, `,"rows":[`...)
	for i := range o.Rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = e.appendRowLocked(b, o.Columns, &o.Rows[i], false)
	}
	b = append(b, ']')
	if isCount(o.Columns) {
		b = appendCount(b, o.Count)
	}
	if moves && ordered(o.Plan) {
		b = append(b, `,"delta_order":"moves"`...)
	}
	return append(b, '}')
}

// ordered reports whether p's deltas carry an order: ORDER BY, LIMIT or
// OFFSET.
func ordered(p *query.Plan) bool {
	return p != nil && (len(p.Order) > 0 || p.Limit >= 0 || p.Offset > 0)
}

// appendWindow appends the order, limit and offset members of an
// accepted frame: each ORDER BY key as the index of the output column it
// sorts by (-1 when the query sorts by a column it does not output).
func appendWindow(b []byte, p *query.Plan) []byte {
	if p == nil {
		return b
	}
	if len(p.Order) > 0 {
		b = append(b, `,"order":[`...)
		for i, k := range p.Order {
			if i > 0 {
				b = append(b, ',')
			}
			col := p.OrderOutput(i)
			b = append(b, `{"column":`...)
			b = wire.AppendInt(b, int64(col))
			if k.Desc {
				b = append(b, `,"desc":true`...)
			}
			if k.NullsFirst {
				b = append(b, `,"nulls_first":true`...)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if p.Limit >= 0 {
		b = append(b, `,"limit":`...)
		b = wire.AppendInt(b, p.Limit)
	}
	if p.Offset > 0 {
		b = append(b, `,"offset":`...)
		b = wire.AppendInt(b, p.Offset)
	}
	return b
}

func isCount(cols []query.Output) bool { return len(cols) == 1 && cols[0].Source == -1 }

// delta encodes a Delta frame for the subscription id. cols are the
// columns its Accepted carried; moves: an ordered query's order goes as
// Moves and Size (wire.DeltaOrderMoves), not as every key.
func (e *encoder) delta(id string, cols []query.Output, o *engine.Output, moves bool) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.resetLocked(o.LSN)
	count := isCount(cols)
	pk := partKey{count: -1, moves: moves && o.Order != nil}
	if len(o.Rows) > 0 {
		pk.rows = &o.Rows[0]
	}
	if len(o.Removed) > 0 {
		pk.removed = &o.Removed[0]
	}
	if len(o.Order) > 0 {
		pk.order = &o.Order[0]
	}
	if count {
		pk.count = o.Count
	}
	shareable := pk.rows != nil || pk.removed != nil || pk.order != nil || count
	// Subscriptions of one view on many connections often carry the same
	// id (a client library's counter): their frames are the same bytes,
	// built once and queued on every connection. Queued frames are never
	// written to.
	fk := frameKey{id, pk}
	if shareable && !count {
		if f, ok := e.whole[fk]; ok {
			return f
		}
	}
	b := make([]byte, 0, 64)
	b = append(b, `{"type":"delta","id":`...)
	b = wire.AppendString(b, id)
	b = append(b, `,"lsn":"`...)
	b = append(b, o.LSN.String()...)
	b = append(b, '"')
	if shareable {
		if body, ok := e.parts[pk]; ok && len(body) > 0 {
			b = append(b, body...)
			if !count {
				e.whole[fk] = b
			}
			return b
		}
	}
	start := len(b)
	if len(o.Rows) > 0 {
		b = append(b, `,"upsert":[`...)
		for i := range o.Rows {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.appendRowLocked(b, cols, &o.Rows[i], true)
		}
		b = append(b, ']')
	}
	if len(o.Removed) > 0 {
		b = appendKeys(b, "remove", o.Removed)
	}
	if pk.moves {
		b = appendMoves(b, o.Moves)
		b = append(b, `,"size":`...)
		b = wire.AppendInt(b, int64(len(o.Order)))
	} else if o.Order != nil {
		b = appendKeys(b, "order", o.Order)
	}
	if count {
		b = appendCount(b, o.Count)
	}
	b = append(b, '}')
	if shareable && !count {
		e.parts[pk] = append([]byte(nil), b[start:]...)
		e.whole[fk] = b
	}
	return b
}

func simpleFrame(typ, id, code, reason string, retryable bool) []byte {
	b := append([]byte(nil), `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","id":`...)
	b = wire.AppendString(b, id)
	b = append(b, `,"code":`...)
	b = wire.AppendString(b, code)
	b = append(b, `,"reason":`...)
	b = wire.AppendString(b, reason)
	if retryable {
		return append(b, `,"retryable":true}`...)
	}
	return append(b, `,"retryable":false}`...)
}
