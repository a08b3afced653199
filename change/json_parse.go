package change

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
)

// ParseTxnJSON reads one line of the JSON form back into a whole
// transaction (Fragment 0, Last true). Relations are rebuilt from what the
// line holds: each change gets a Relation with its schema, table and the
// columns its rows name, in order, with Key set for the columns of "key"
// (OIDs and type information are not part of the form and stay zero).
// OldIsRow is set when the old row holds a column outside the key. Changed
// is not part of the form and stays nil. Encoding the result again with
// AppendTxnJSON gives back the same line.
func ParseTxnJSON(line []byte) (*Txn, error) {
	var raw struct {
		LSN        *LSN              `json:"lsn"`
		EndLSN     LSN               `json:"end_lsn"`
		XID        uint32            `json:"xid"`
		CommitTime string            `json:"commit_time"`
		Origin     string            `json:"origin"`
		OriginLSN  LSN               `json:"origin_lsn"`
		Changes    []json.RawMessage `json:"changes"`
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return nil, fmt.Errorf("parse transaction JSON: %w", err)
	}
	if raw.LSN == nil {
		return nil, fmt.Errorf("parse transaction JSON: no \"lsn\"")
	}
	t := &Txn{XID: raw.XID, CommitLSN: *raw.LSN, EndLSN: raw.EndLSN, Origin: raw.Origin, OriginLSN: raw.OriginLSN, Last: true}
	if raw.CommitTime != "" {
		ct, err := time.Parse(time.RFC3339Nano, raw.CommitTime)
		if err != nil {
			return nil, fmt.Errorf("parse transaction %s: commit_time: %w", t.CommitLSN, err)
		}
		t.CommitTime = ct.UTC()
	}
	t.Changes = make([]Change, 0, len(raw.Changes))
	for i, rc := range raw.Changes {
		c, err := parseChangeJSON(rc)
		if err != nil {
			return nil, fmt.Errorf("parse transaction %s: change %d: %w", t.CommitLSN, i+1, err)
		}
		t.Changes = append(t.Changes, c)
	}
	return t, nil
}

func parseChangeJSON(b []byte) (Change, error) {
	var rc struct {
		Op     string `json:"op"`
		Schema string `json:"schema"`
		Table  string `json:"table"`
		Key    json.RawMessage
		Old    json.RawMessage
		New    json.RawMessage
		Tables []struct {
			Schema string `json:"schema"`
			Table  string `json:"table"`
		} `json:"tables"`
		Cascade         bool            `json:"cascade"`
		RestartIdentity bool            `json:"restart_identity"`
		Prefix          string          `json:"prefix"`
		Content         json.RawMessage `json:"content"`
		Transactional   bool            `json:"transactional"`
	}
	if err := json.Unmarshal(b, &rc); err != nil {
		return Change{}, err
	}
	var c Change
	switch rc.Op {
	case "insert":
		c.Op = OpInsert
	case "update":
		c.Op = OpUpdate
	case "delete":
		c.Op = OpDelete
	case "truncate":
		c.Op = OpTruncate
		c.Truncate = &Truncate{Cascade: rc.Cascade, RestartIdentity: rc.RestartIdentity}
		for _, tb := range rc.Tables {
			c.Truncate.Rels = append(c.Truncate.Rels, &Relation{Schema: tb.Schema, Table: tb.Table})
		}
		return c, nil
	case "message":
		c.Op = OpMessage
		content, err := parseValueJSON(rc.Content)
		if err != nil {
			return Change{}, fmt.Errorf("content: %w", err)
		}
		c.Message = &Message{Prefix: rc.Prefix, Content: content.Data, Transactional: rc.Transactional}
		return c, nil
	default:
		return Change{}, fmt.Errorf("unknown op %q", rc.Op)
	}
	rel := &Relation{Schema: rc.Schema, Table: rc.Table}
	key, err := parseRowJSON(rc.Key)
	if err != nil {
		return Change{}, fmt.Errorf("key: %w", err)
	}
	old, err := parseRowJSON(rc.Old)
	if err != nil {
		return Change{}, fmt.Errorf("old: %w", err)
	}
	nw, err := parseRowJSON(rc.New)
	if err != nil {
		return Change{}, fmt.Errorf("new: %w", err)
	}
	// Columns: those of the new row, then any only the old row or the key
	// names.
	index := map[string]int{}
	addCols := func(cols []namedValue) {
		for _, nv := range cols {
			if _, ok := index[nv.name]; !ok {
				index[nv.name] = len(rel.Columns)
				rel.Columns = append(rel.Columns, Column{Name: nv.name, TypeMod: -1})
			}
		}
	}
	addCols(nw)
	addCols(old)
	addCols(key)
	for _, nv := range key {
		rel.Columns[index[nv.name]].Key = true
	}
	row := func(cols []namedValue) Row {
		r := make(Row, len(rel.Columns))
		for _, nv := range cols {
			r[index[nv.name]] = nv.v
		}
		return r
	}
	c.Rel = rel
	if rc.New != nil && !bytes.Equal(rc.New, []byte("null")) {
		c.New = row(nw)
	}
	if rc.Old != nil && !bytes.Equal(rc.Old, []byte("null")) {
		c.Old = row(old)
		for _, nv := range old {
			if !rel.Columns[index[nv.name]].Key {
				c.OldIsRow = true
			}
		}
	}
	return c, nil
}

type namedValue struct {
	name string
	v    Value
}

// parseRowJSON reads a row object, keeping its column order.
func parseRowJSON(b json.RawMessage) ([]namedValue, error) {
	if b == nil || bytes.Equal(b, []byte("null")) {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("want an object")
	}
	var out []namedValue
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var rv json.RawMessage
		if err := dec.Decode(&rv); err != nil {
			return nil, fmt.Errorf("column %q: %w", name, err)
		}
		v, err := parseValueJSON(rv)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", name, err)
		}
		out = append(out, namedValue{name, v})
	}
	return out, nil
}

// parseValueJSON reads one value: a string (text), null, or one of the
// objects {"unchanged":true}, {"binary":"..."}, {"base64":"..."}.
func parseValueJSON(b json.RawMessage) (Value, error) {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || bytes.Equal(b, []byte("null")):
		return Value{Kind: Null}, nil
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return Value{}, err
		}
		return Value{Kind: Text, Data: []byte(s)}, nil
	case b[0] == '{':
		var o struct {
			Unchanged bool    `json:"unchanged"`
			Binary    *string `json:"binary"`
			Base64    *string `json:"base64"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return Value{}, err
		}
		switch {
		case o.Unchanged:
			return Value{Kind: Unchanged}, nil
		case o.Binary != nil:
			d, err := base64.StdEncoding.DecodeString(*o.Binary)
			if err != nil {
				return Value{}, fmt.Errorf("binary: %w", err)
			}
			return Value{Kind: Binary, Data: d}, nil
		case o.Base64 != nil:
			d, err := base64.StdEncoding.DecodeString(*o.Base64)
			if err != nil {
				return Value{}, fmt.Errorf("base64: %w", err)
			}
			return Value{Kind: Text, Data: d}, nil
		}
	}
	return Value{}, fmt.Errorf("want a string, null, {\"unchanged\":true}, {\"binary\":...} or {\"base64\":...}, got %s", clip(string(b)))
}
