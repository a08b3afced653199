package change

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/freshetdb/freshet/internal/jsonstr"
)

// The JSON form of a transaction, printed one per line by `freshet tail`
// (docs/change-format.md has the whole specification):
//
//	{"lsn":"0/16B3748","end_lsn":"0/16B3778","xid":123,
//	 "commit_time":"2026-11-30T14:01:02.123456Z",
//	 "changes":[{"op":"insert","schema":"public","table":"t",
//	             "key":{"id":"1"},"new":{"id":"1","v":"x"}}]}
//
// Column values are PostgreSQL's text form as JSON strings, or null. An
// unchanged TOASTed value is {"unchanged":true}, a binary-mode value
// {"binary":"<base64>"}, and a text value that is not valid UTF-8 (a
// database in another encoding) {"base64":"<base64>"}, so nothing is ever
// lost or replaced.

// commitTimeLayout prints commit times in UTC with microseconds, always six
// digits, as PostgreSQL keeps them.
const commitTimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// AppendTxnJSON appends the JSON form of the transaction t to dst, without
// a trailing newline, and returns the extended buffer. t is taken as a
// whole transaction (its header and all its changes); a transaction that
// arrives in fragments is written with a TxnJSONWriter instead. Relation
// changes (OpRelation) are not part of the form and are skipped.
func AppendTxnJSON(dst []byte, t *Txn) []byte {
	dst = appendTxnHeader(dst, t, true)
	first := true
	for i := range t.Changes {
		dst, first = appendChangeSep(dst, &t.Changes[i], first)
	}
	return append(dst, "]}"...)
}

// appendTxnHeader appends everything up to and including `"changes":[`,
// with end_lsn only if withEnd.
func appendTxnHeader(dst []byte, t *Txn, withEnd bool) []byte {
	dst = append(dst, `{"lsn":"`...)
	dst = appendLSN(dst, t.CommitLSN)
	if withEnd {
		dst = append(dst, `","end_lsn":"`...)
		dst = appendLSN(dst, t.EndLSN)
	}
	dst = append(dst, `","xid":`...)
	dst = strconv.AppendUint(dst, uint64(t.XID), 10)
	dst = append(dst, `,"commit_time":"`...)
	dst = t.CommitTime.UTC().AppendFormat(dst, commitTimeLayout)
	dst = append(dst, '"')
	if t.Origin != "" {
		dst = append(dst, `,"origin":`...)
		dst = appendJSONString(dst, t.Origin)
		dst = append(dst, `,"origin_lsn":"`...)
		dst = appendLSN(dst, t.OriginLSN)
		dst = append(dst, '"')
	}
	return append(dst, `,"changes":[`...)
}

// appendChangeSep appends a change (with a leading comma unless first),
// skipping relation changes, and reports whether the next is still first.
func appendChangeSep(dst []byte, c *Change, first bool) ([]byte, bool) {
	if c.Op == OpRelation {
		return dst, first
	}
	if !first {
		dst = append(dst, ',')
	}
	return appendChangeJSON(dst, c), false
}

// appendLSN appends l in PostgreSQL's X/X form (upper-case hex).
func appendLSN(dst []byte, l LSN) []byte {
	start := len(dst)
	dst = strconv.AppendUint(dst, uint64(l>>32), 16)
	dst = append(dst, '/')
	dst = strconv.AppendUint(dst, uint64(uint32(l)), 16)
	for i := start; i < len(dst); i++ {
		if c := dst[i]; c >= 'a' && c <= 'f' {
			dst[i] = c - 'a' + 'A'
		}
	}
	return dst
}

// appendChangeJSON appends one change object.
func appendChangeJSON(dst []byte, c *Change) []byte {
	dst = append(dst, `{"op":"`...)
	dst = append(dst, c.Op.String()...)
	dst = append(dst, '"')
	switch c.Op {
	case OpInsert, OpUpdate, OpDelete:
		var schema, table string
		if c.Rel != nil {
			schema, table = c.Rel.Schema, c.Rel.Table
		}
		dst = append(dst, `,"schema":`...)
		dst = appendJSONString(dst, schema)
		dst = append(dst, `,"table":`...)
		dst = appendJSONString(dst, table)
		keyRow := c.New
		if c.Op == OpDelete {
			keyRow = c.Old
		}
		if c.Rel != nil && hasKeyValue(c.Rel, keyRow) {
			dst = append(dst, `,"key":`...)
			dst = appendRowJSON(dst, c.Rel, keyRow, true)
		}
		if c.Old != nil {
			dst = append(dst, `,"old":`...)
			dst = appendRowJSON(dst, c.Rel, c.Old, false)
		}
		if c.New != nil {
			dst = append(dst, `,"new":`...)
			dst = appendRowJSON(dst, c.Rel, c.New, false)
		}
	case OpTruncate:
		dst = append(dst, `,"tables":[`...)
		tr := c.Truncate
		if tr == nil {
			tr = &Truncate{}
		}
		for i, r := range tr.Rels {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"schema":`...)
			dst = appendJSONString(dst, r.Schema)
			dst = append(dst, `,"table":`...)
			dst = appendJSONString(dst, r.Table)
			dst = append(dst, '}')
		}
		dst = append(dst, `],"cascade":`...)
		dst = strconv.AppendBool(dst, tr.Cascade)
		dst = append(dst, `,"restart_identity":`...)
		dst = strconv.AppendBool(dst, tr.RestartIdentity)
	case OpMessage:
		m := c.Message
		if m == nil {
			m = &Message{}
		}
		dst = append(dst, `,"prefix":`...)
		dst = appendJSONString(dst, m.Prefix)
		dst = append(dst, `,"content":`...)
		dst = appendJSONBytesOrBase64(dst, m.Content)
		dst = append(dst, `,"transactional":`...)
		dst = strconv.AppendBool(dst, m.Transactional)
	}
	return append(dst, '}')
}

// hasKeyValue reports whether row holds a value for a key column of r.
func hasKeyValue(r *Relation, row Row) bool {
	for i := range row {
		if i < len(r.Columns) && r.Columns[i].Key && row[i].Kind != Absent {
			return true
		}
	}
	return false
}

// appendRowJSON appends a row as an object of column name to value,
// omitting Absent columns (and, with keyOnly, non-key columns).
func appendRowJSON(dst []byte, rel *Relation, row Row, keyOnly bool) []byte {
	dst = append(dst, '{')
	first := true
	for i := range row {
		v := &row[i]
		if v.Kind == Absent {
			continue
		}
		var col *Column
		if rel != nil && i < len(rel.Columns) {
			col = &rel.Columns[i]
		}
		if keyOnly && (col == nil || !col.Key) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		if col != nil {
			dst = appendJSONString(dst, col.Name)
		} else {
			dst = append(dst, '"')
			dst = strconv.AppendInt(dst, int64(i+1), 10)
			dst = append(dst, '"')
		}
		dst = append(dst, ':')
		dst = appendValueJSON(dst, v)
	}
	return append(dst, '}')
}

// appendValueJSON appends one column value.
func appendValueJSON(dst []byte, v *Value) []byte {
	switch v.Kind {
	case Null:
		return append(dst, "null"...)
	case Text:
		return appendJSONBytesOrBase64(dst, v.Data)
	case Binary:
		dst = append(dst, `{"binary":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, v.Data)
		return append(dst, `"}`...)
	case Unchanged:
		return append(dst, `{"unchanged":true}`...)
	}
	return append(dst, "null"...) // Absent is never written; be safe
}

// appendJSONBytesOrBase64 appends b as a JSON string when it is valid
// UTF-8, else as {"base64":"..."}.
func appendJSONBytesOrBase64(dst, b []byte) []byte {
	start := len(dst)
	if out, ok := jsonstr.Append(dst, b, false); ok {
		return out
	}
	dst = append(dst[:start], `{"base64":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, `"}`...)
}

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes
// U+FFFD (identifiers and prefixes only: values never take this path).
func appendJSONString(dst []byte, s string) []byte {
	out, _ := jsonstr.Append(dst, s, true)
	return out
}

// AppendRelationJSON appends the JSON form of a relation (the shape of a
// table), for tools; `freshet tail` does not print relations:
//
//	{"oid":16384,"schema":"public","table":"t","replica_identity":"d",
//	 "columns":[{"name":"id","type_oid":23,"type_mod":-1,"key":true}]}
func AppendRelationJSON(dst []byte, r *Relation) []byte {
	dst = append(dst, `{"oid":`...)
	dst = strconv.AppendUint(dst, uint64(r.OID), 10)
	dst = append(dst, `,"schema":`...)
	dst = appendJSONString(dst, r.Schema)
	dst = append(dst, `,"table":`...)
	dst = appendJSONString(dst, r.Table)
	dst = append(dst, `,"replica_identity":`...)
	if r.ReplicaIdentity == 0 {
		dst = append(dst, `""`...)
	} else {
		dst = appendJSONString(dst, string(rune(r.ReplicaIdentity)))
	}
	dst = append(dst, `,"columns":[`...)
	for i := range r.Columns {
		c := &r.Columns[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"name":`...)
		dst = appendJSONString(dst, c.Name)
		dst = append(dst, `,"type_oid":`...)
		dst = strconv.AppendUint(dst, uint64(c.TypeOID), 10)
		dst = append(dst, `,"type_mod":`...)
		dst = strconv.AppendInt(dst, int64(c.TypeMod), 10)
		dst = append(dst, `,"key":`...)
		dst = strconv.AppendBool(dst, c.Key)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// JSONEncoder encodes changes as elements of a transaction's "changes"
// array, for a TxnJSONWriter to write from a fragment's Encoded bytes
// (pgwal.DecoderOptions.StreamEncoder). It holds no state, so any
// goroutine may use it.
type JSONEncoder struct{}

// AppendChange appends c's JSON form to dst with a leading comma, or
// nothing for a relation change (not part of the form).
func (JSONEncoder) AppendChange(dst []byte, c *Change) []byte {
	if c.Op == OpRelation {
		return dst
	}
	return appendChangeJSON(append(dst, ','), c)
}

// jsonFlushSize is how much a TxnJSONWriter buffers before writing through,
// so a transaction of any size is written in bounded memory.
const jsonFlushSize = 64 << 10

// ErrFragmentOrder is returned by TxnJSONWriter.Write when fragments do not
// follow one another: a fragment other than 0 without a transaction open,
// or fragment 0 while the previous transaction has not seen its Last.
var ErrFragmentOrder = errors.New("transaction fragments out of order")

// TxnJSONWriter writes transactions in the JSON form, one line each, as
// their fragments arrive: fragment 0 writes the header, every fragment its
// changes, and the Last fragment closes the object and ends the line. At
// most about 64 KiB plus one change is held, so a transaction of a million
// rows is written without being held.
//
// The reader knows a transaction's end LSN only at its commit, so earlier
// fragments carry EndLSN 0. When fragment 0 is also the Last one, or
// already carries an EndLSN, the line is exactly AppendTxnJSON's;
// otherwise "end_lsn" is left out of the header and written after
// "changes", as the object's last field. The line of a transaction is
// complete only once its Last fragment has been written; a reader that
// stops in the middle leaves a line without its newline, which a resuming
// reader discards.
type TxnJSONWriter struct {
	w       io.Writer
	buf     []byte
	open    bool // a transaction's header has been written, its end not yet
	first   bool // no change written yet in the open transaction
	lsn     LSN  // the open transaction's commit LSN
	endLate bool // end_lsn goes after "changes"
	nextSeq int  // the fragment expected next
}

// NewTxnJSONWriter returns a TxnJSONWriter writing to w. It does not
// buffer beyond a transaction's end: after Write of a Last fragment the
// whole line has been passed to w.
func NewTxnJSONWriter(w io.Writer) *TxnJSONWriter {
	return &TxnJSONWriter{w: w, buf: make([]byte, 0, 4096)}
}

// Write writes one fragment of a transaction: its Changes, or its
// Encoded bytes as JSONEncoder made them (written through as they are).
func (jw *TxnJSONWriter) Write(t *Txn) error {
	if t.Fragment == 0 {
		if jw.open {
			return fmt.Errorf("write transaction %s: %w: fragment 0 before the Last fragment of transaction %s", t.CommitLSN, ErrFragmentOrder, jw.lsn)
		}
		jw.endLate = !t.Last && t.EndLSN == 0
		jw.buf = appendTxnHeader(jw.buf[:0], t, !jw.endLate)
		jw.open, jw.first, jw.lsn, jw.nextSeq = true, true, t.CommitLSN, 0
	} else if !jw.open || t.Fragment != jw.nextSeq || t.CommitLSN != jw.lsn {
		return fmt.Errorf("write transaction %s: %w: got fragment %d, want %d of transaction %s", t.CommitLSN, ErrFragmentOrder, t.Fragment, jw.nextSeq, jw.lsn)
	}
	jw.nextSeq++
	if p := t.Encoded; len(p) > 0 {
		if jw.first {
			if p[0] != ',' {
				jw.open = false
				return fmt.Errorf("write transaction %s: encoded changes do not start with a comma: not JSONEncoder's form", t.CommitLSN)
			}
			p, jw.first = p[1:], false
		}
		if err := jw.flush(); err != nil {
			return err
		}
		if _, err := jw.w.Write(p); err != nil {
			jw.open = false
			return fmt.Errorf("write transaction %s: %w", jw.lsn, err)
		}
	}
	for i := range t.Changes {
		jw.buf, jw.first = appendChangeSep(jw.buf, &t.Changes[i], jw.first)
		if len(jw.buf) >= jsonFlushSize {
			if err := jw.flush(); err != nil {
				return err
			}
		}
	}
	if t.Last {
		if jw.endLate {
			jw.buf = append(jw.buf, `],"end_lsn":"`...)
			jw.buf = appendLSN(jw.buf, t.EndLSN)
			jw.buf = append(jw.buf, "\"}\n"...)
		} else {
			jw.buf = append(jw.buf, "]}\n"...)
		}
		jw.open = false
		return jw.flush()
	}
	return nil
}

func (jw *TxnJSONWriter) flush() error {
	if len(jw.buf) == 0 {
		return nil
	}
	_, err := jw.w.Write(jw.buf)
	jw.buf = jw.buf[:0]
	if err != nil {
		jw.open = false
		return fmt.Errorf("write transaction %s: %w", jw.lsn, err)
	}
	return nil
}

// Open reports whether a transaction has been started and not yet ended.
func (jw *TxnJSONWriter) Open() bool { return jw.open }
