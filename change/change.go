package change

import "time"

// Event is one item of a change stream: a *Txn fragment or a *Heartbeat.
// Events arrive in commit order and Position never goes backwards.
type Event interface {
	// Position is the WAL position a consumer acknowledges once it has
	// durably handled this event (for a transaction, only meaningful on
	// its Last fragment).
	Position() LSN
}

// Txn is one fragment of a committed transaction. Small transactions are a
// single fragment (Fragment 0, Last true). Large ones are split into
// fragments of bounded size that share the same header fields; a consumer
// must treat the transaction as committed only when it sees Last.
type Txn struct {
	XID        uint32    // transaction id (0 for a non-transactional message)
	CommitLSN  LSN       // LSN of the commit record: the transaction's position
	EndLSN     LSN       // LSN just past the commit record
	CommitTime time.Time // commit timestamp, UTC
	Origin     string    // replication origin name, "" if none
	OriginLSN  LSN       // commit LSN on the origin server, 0 if none

	Fragment int      // index of this fragment within the transaction, from 0
	Last     bool     // this fragment ends the transaction
	Changes  []Change // this fragment's changes, in WAL order

	// Encoded holds this fragment's changes already encoded by the
	// consumer's own encoder (pgwal.DecoderOptions.StreamEncoder), the
	// output of one AppendChange call after another, in WAL order, in
	// place of Changes: a fragment has one or the other. Only a consumer
	// that set an encoder ever sees it.
	Encoded []byte
}

// Position implements Event.
func (t *Txn) Position() LSN { return t.CommitLSN }

// Heartbeat is a lag probe: a logical message written by the reader itself
// (pg_logical_emit_message) that came back through the stream. Every
// transaction that committed before it has been delivered before it, so the
// age of the newest delivered heartbeat bounds how stale a consumer is.
// Heartbeats are never reported as user changes.
type Heartbeat struct {
	LSN     LSN       // where the heartbeat's message sits in the WAL
	Seq     uint64    // rising number, per reader
	Written time.Time // when the reader wrote it (the writer's clock)
	Arrived time.Time // when the reader decoded it
	// Now is PostgreSQL's now() in the heartbeat's transaction: the
	// database's clock at the heartbeat's position, which queries using
	// now() are evaluated at (zero: the writer did not send it).
	Now time.Time
}

// Position implements Event.
func (h *Heartbeat) Position() LSN { return h.LSN }

// Op is the kind of a Change.
type Op uint8

// The kinds of change.
const (
	OpInsert   Op = iota + 1 // a row was inserted: New
	OpUpdate                 // a row was updated: New, and Old where PostgreSQL sent it
	OpDelete                 // a row was deleted: Old (key columns only unless OldIsRow)
	OpTruncate               // tables were truncated: Truncate
	OpMessage                // a logical message: Message
	OpRelation               // a relation's shape, before its first use and on every change: Rel
)

var opNames = [...]string{"", "insert", "update", "delete", "truncate", "message", "relation"}

// String returns the JSON name of the operation.
func (o Op) String() string {
	if int(o) < len(opNames) && o != 0 {
		return opNames[o]
	}
	return "unknown"
}

// Change is one change inside a transaction.
type Change struct {
	Op  Op
	Rel *Relation // the relation as it was when the change was made (insert, update, delete, relation)

	// Old is the old row for updates and deletes where PostgreSQL sent one.
	// With OldIsRow false it holds only the replica identity (key) columns
	// and the others are Absent; with OldIsRow true (REPLICA IDENTITY FULL)
	// it is the whole old row. Nil when PostgreSQL sent no old tuple (an
	// update that did not change the key under REPLICA IDENTITY DEFAULT).
	Old      Row
	OldIsRow bool

	// New is the new row for inserts and updates. A TOASTed value that the
	// update did not change is filled from Old when Old holds it, and
	// otherwise has Kind Unchanged: never Null and never missing.
	New Row

	// Changed reports, for updates, which columns' values differ between
	// Old and New. It is nil when it cannot be known (no whole old row); a
	// column whose New value is Unchanged is never reported as changed.
	Changed []bool

	Truncate *Truncate // for OpTruncate
	Message  *Message  // for OpMessage
}

// Row is a tuple of values, one per column of the change's relation, in the
// relation's column order.
type Row []Value

// Truncate describes a TRUNCATE of one or more tables.
type Truncate struct {
	Rels            []*Relation
	Cascade         bool
	RestartIdentity bool
}

// Message is a logical message written with pg_logical_emit_message.
type Message struct {
	LSN           LSN
	Transactional bool
	Prefix        string
	Content       []byte
}

// Kind tells what a Value holds.
type Kind uint8

// The kinds of value.
const (
	Absent    Kind = iota // not sent: a non-key column of a key-only old tuple
	Null                  // SQL NULL
	Text                  // Data is PostgreSQL's text form
	Binary                // Data is PostgreSQL's binary send form (binary mode)
	Unchanged             // an unchanged TOASTed value PostgreSQL did not send; the consumer's held copy stands
)

var kindNames = [...]string{"absent", "null", "text", "binary", "unchanged"}

// String names the kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Value is one column value, kept exactly as PostgreSQL sent it.
type Value struct {
	Kind Kind
	Data []byte // text or binary form; nil for Absent, Null and Unchanged
}

// TextValue returns a Text value holding s.
func TextValue(s string) Value { return Value{Kind: Text, Data: []byte(s)} }

// IsNull reports whether v is SQL NULL.
func (v Value) IsNull() bool { return v.Kind == Null }

// String returns the text form, or "" for values that have none.
func (v Value) String() string { return string(v.Data) }

// Relation is the shape of a table as the stream describes it.
type Relation struct {
	OID     uint32
	Schema  string
	Table   string
	Columns []Column

	// ReplicaIdentity is PostgreSQL's relreplident: 'd' default (primary
	// key), 'n' nothing, 'f' full row, 'i' a chosen index.
	ReplicaIdentity byte
}

// Column is one column of a Relation.
type Column struct {
	Name    string
	TypeOID uint32
	TypeMod int32 // atttypmod, -1 when none
	Key     bool  // part of the replica identity
	// AttNum is the column's attnum when the shape was read from the
	// catalog; 0 from the stream (pgoutput does not send it). A column
	// dropped and added again under its name has a new one.
	AttNum int16
}

// ColumnIndex returns the position of the named column, or -1.
func (r *Relation) ColumnIndex(name string) int {
	for i := range r.Columns {
		if r.Columns[i].Name == name {
			return i
		}
	}
	return -1
}

// QualifiedName returns "schema"."table" quoted as PostgreSQL would need.
func (r *Relation) QualifiedName() string {
	return QuoteIdent(r.Schema) + "." + QuoteIdent(r.Table)
}

// QuoteIdent quotes an identifier for use in SQL.
func QuoteIdent(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, s[i])
	}
	return string(append(b, '"'))
}
