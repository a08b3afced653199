package shape

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// definition is what identifies a shape: two requests with equal
// definitions share one shape.
type definition struct {
	Schema  string   `json:"schema"`
	Table   string   `json:"table"`
	Where   string   `json:"where,omitempty"`
	Params  []string `json:"params,omitempty"`  // $1, $2, ... in order
	Columns []string `json:"columns,omitempty"` // nil: every column
	Replica word     `json:"replica"`           // default or full
	Log     word     `json:"log"`               // full or changes_only
}

// word is one of the fixed words of a definition (its replica and log
// modes), a byte in memory and the word itself in JSON, so that a shape
// does not hold two strings for them.
type word uint8

const (
	wordDefault word = iota
	wordFull
	wordChangesOnly
)

var words = [...]string{wordDefault: "default", wordFull: "full", wordChangesOnly: "changes_only"}

func (w word) String() string {
	if int(w) < len(words) {
		return words[w]
	}
	return "word(" + strconv.Itoa(int(w)) + ")"
}

// MarshalJSON writes the word.
func (w word) MarshalJSON() ([]byte, error) { return json.Marshal(w.String()) }

// UnmarshalJSON reads a word.
func (w *word) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	for i, x := range words {
		if x == s {
			*w = word(i)
			return nil
		}
	}
	return fmt.Errorf("unknown word %q", s)
}

// id is the definition's identity, a canonical JSON text.
func (d definition) id() string {
	b, _ := json.Marshal(d)
	return string(b)
}

// changesOnly reports log=changes_only (no initial snapshot).
func (d definition) changesOnly() bool { return d.Log == wordChangesOnly }

// full reports replica=full.
func (d definition) full() bool { return d.Replica == wordFull }

// request is a parsed GET /v1/shape.
type request struct {
	def    definition
	offset Offset
	now    bool // offset=now
	handle string
	live   bool
	sse    bool
	cursor string
	subset *subsetParams
}

// subsetParams are a subset snapshot's parameters (subset__* or a POST
// body).
type subsetParams struct {
	Where   string
	Params  map[string]string
	Limit   *int64
	Offset  *int64
	OrderBy string
}

// fieldErrors are 400 validation errors by field, as Electric answers
// them: {"message":"Invalid request","errors":{"field":["..."]}}. A
// subset's errors are nested under "subset" by its own fields
// ({"subset":{"limit":["..."]}}), as Ecto gives an embedded changeset's.
// Fields are written sorted, as Electric's JSON encoder writes a map.
type fieldErrors struct {
	order  []string
	msgs   map[string][]string
	subset *fieldErrors // errors.subset, when a subset parameter is wrong
}

func (e *fieldErrors) add(field, msg string) {
	if e.msgs == nil {
		e.msgs = map[string][]string{}
	}
	if _, ok := e.msgs[field]; !ok {
		e.order = append(e.order, field)
	}
	e.msgs[field] = append(e.msgs[field], msg)
}

// addSubset records an error of the subset's field (where, params,
// limit, offset, order_by).
func (e *fieldErrors) addSubset(field, msg string) {
	if e.subset == nil {
		e.subset = &fieldErrors{}
	}
	e.subset.add(field, msg)
}

func (e *fieldErrors) empty() bool { return len(e.order) == 0 && e.subset == nil }

// body is the 400 response body.
func (e *fieldErrors) body() []byte {
	b := []byte(`{"message":"Invalid request","errors":`)
	return append(e.appendObject(b), '}')
}

// appendObject writes {"field":["msg",...],...}, fields sorted.
func (e *fieldErrors) appendObject(b []byte) []byte {
	fields := slices.Clone(e.order)
	if e.subset != nil {
		fields = append(fields, "subset")
	}
	sort.Strings(fields)
	b = append(b, '{')
	for i, f := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, f)
		b = append(b, ':')
		if f == "subset" && e.subset != nil {
			b = e.subset.appendObject(b)
			continue
		}
		b = append(b, '[')
		for j, m := range e.msgs[f] {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, m)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// parseRequest reads the query string. Unknown parameters are ignored, as
// Electric's server ignores them (clients add their own).
func parseRequest(q url.Values) (*request, *fieldErrors) {
	var errs fieldErrors
	r := &request{}
	table := q.Get("table")
	if table == "" {
		errs.add("table", "can't be blank")
	} else if schema, name, err := parseTable(table); err != nil {
		errs.add("table", err.Error())
	} else {
		r.def.Schema, r.def.Table = schema, name
	}
	off := q.Get("offset")
	switch off {
	case "":
		errs.add("offset", "can't be blank")
	case "now":
		r.now = true
	default:
		o, err := parseOffset(off)
		if err != nil {
			errs.add("offset", err.Error())
		}
		r.offset = o
	}
	start := r.now || (off != "" && r.offset.Before)
	if !start && errs.msgs["offset"] == nil {
		r.handle = q.Get("handle")
		if r.handle == "" && off != "" {
			errs.add("handle", "can't be blank when offset != -1")
		}
	}
	if v, ok := q["live"]; ok && len(v) > 0 {
		r.live = v[0] != "false"
	}
	if r.live && off == "-1" {
		errs.add("live", "can't be true when offset == -1")
	} else if r.live && r.now {
		errs.add("live", "can't be true when offset is 'now'")
	}
	for _, name := range []string{"live_sse", "experimental_live_sse"} {
		if v, ok := q[name]; ok && len(v) > 0 && v[0] != "false" {
			r.sse = true
		}
	}
	if r.sse && !r.live {
		errs.add("live_sse", "can't be true unless live is also true")
		r.sse = false
	}
	r.cursor = q.Get("cursor")
	r.def.Where = q.Get("where")
	r.def.Params = parseParams(q, &errs)
	if c, ok := q["columns"]; ok {
		cols, err := parseColumns(c[0])
		if err != nil {
			errs.add("columns", err.Error())
		} else {
			r.def.Columns = cols
		}
	}
	r.def.Replica = wordDefault
	switch v := q.Get("replica"); v {
	case "", "default":
	case "full":
		r.def.Replica = wordFull
	default:
		errs.add("replica", "is invalid")
	}
	r.def.Log = wordFull
	switch v := q.Get("log"); v {
	case "", "full":
	case "changes_only":
		r.def.Log = wordChangesOnly
	default:
		errs.add("log", "is invalid")
	}
	r.subset = parseSubsetQuery(q, &errs)
	if errs.empty() {
		return r, nil
	}
	return r, &errs
}

// parseParams reads params[1]=v&params[2]=w (and the JSON form
// params={"1":"v"}). The list is dense: $n for n up to the highest given.
func parseParams(q url.Values, errs *fieldErrors) []string {
	got := map[int]string{}
	for k, v := range q {
		if !strings.HasPrefix(k, "params[") || !strings.HasSuffix(k, "]") || len(v) == 0 {
			continue
		}
		n, err := strconv.Atoi(k[len("params[") : len(k)-1])
		if err != nil || n < 1 || n > 65535 {
			errs.add("params", "keys must be positive integers, like params[1]")
			continue
		}
		got[n] = v[0]
	}
	if j := q.Get("params"); j != "" {
		var m map[string]string
		if err := json.Unmarshal([]byte(j), &m); err != nil {
			errs.add("params", "params must be valid JSON")
		}
		for k, v := range m {
			n, err := strconv.Atoi(k)
			if err != nil || n < 1 || n > 65535 {
				errs.add("params", "keys must be positive integers")
				continue
			}
			got[n] = v
		}
	}
	if len(got) == 0 {
		return nil
	}
	keys := make([]int, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	out := make([]string, keys[len(keys)-1])
	for i := range out {
		v, ok := got[i+1]
		if !ok {
			errs.add("params", "param $"+strconv.Itoa(i+1)+" is missing (params must be numbered from 1 without gaps)")
			return nil
		}
		out[i] = v
	}
	return out
}

// parseTable reads name or schema.name with PostgreSQL's identifier rules.
func parseTable(s string) (schema, name string, err error) {
	parts, err := splitIdents(s, '.')
	if err != nil {
		return "", "", err
	}
	switch len(parts) {
	case 1:
		return "public", parts[0], nil
	case 2:
		return parts[0], parts[1], nil
	}
	return "", "", errors.New("Invalid table name: use name or schema.name, quoting names with capitals or special characters")
}

// parseColumns reads a comma-separated list of identifiers.
func parseColumns(s string) ([]string, error) {
	cols, err := splitIdents(s, ',')
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	out := cols[:0]
	for _, c := range cols {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out, nil
}

// splitIdents splits on sep outside double quotes; unquoted parts are
// lower-cased and trimmed, quoted ones kept with "" as a quote.
func splitIdents(s string, sep byte) ([]string, error) {
	var out []string
	i := 0
	for {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		var id string
		if i < len(s) && s[i] == '"' {
			var b strings.Builder
			i++
			closed := false
			for i < len(s) {
				if s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						b.WriteByte('"')
						i += 2
						continue
					}
					i++
					closed = true
					break
				}
				b.WriteByte(s[i])
				i++
			}
			if !closed {
				return nil, errors.New("Invalid unterminated quoted identifier")
			}
			id = b.String()
			if id == "" {
				return nil, errors.New("Invalid zero-length delimited identifier")
			}
			for i < len(s) && s[i] == ' ' {
				i++
			}
		} else {
			j := i
			for j < len(s) && s[j] != sep {
				if s[j] == '"' {
					return nil, errors.New("Invalid identifier: a quote inside an unquoted name")
				}
				j++
			}
			id = strings.ToLower(strings.TrimSpace(s[i:j]))
			i = j
			if id == "" {
				return nil, errors.New("Invalid zero-length identifier")
			}
		}
		out = append(out, id)
		if i >= len(s) {
			return out, nil
		}
		if s[i] != sep {
			return nil, errors.New("Invalid identifier list near " + strconv.Quote(s[i:]))
		}
		i++
	}
}

// parseSubsetQuery reads subset__* parameters (nil when there are
// none); their errors go to errs' subset.
func parseSubsetQuery(q url.Values, errs *fieldErrors) *subsetParams {
	any := false
	for k := range q {
		if strings.HasPrefix(k, "subset__") && k != "subset__where_expr" && k != "subset__order_by_expr" {
			any = true
		}
	}
	if !any {
		return nil
	}
	var sub fieldErrors
	sp := &subsetParams{Where: q.Get("subset__where"), OrderBy: q.Get("subset__order_by")}
	if p := q.Get("subset__params"); p != "" {
		var msg string
		if sp.Params, msg = parseSubsetParamsJSON([]byte(p)); msg != "" {
			sub.add("params", msg)
		}
	}
	num := func(name string) *int64 {
		s := q.Get(name)
		if s == "" {
			return nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			sub.add(strings.TrimPrefix(name, "subset__"), "is invalid")
			return nil
		}
		return &n
	}
	sp.Limit, sp.Offset = num("subset__limit"), num("subset__offset")
	sp.check(&sub)
	if !sub.empty() {
		errs.subset = &sub
		return nil
	}
	return sp
}

// parseSubsetParamsJSON reads subset params given as a JSON object,
// {"1":"abc"}; numbers and booleans are taken as their text, as
// Electric's JsonOrMapStringParams takes them.
func parseSubsetParamsJSON(b []byte) (map[string]string, string) {
	var raw any
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, "params must be valid JSON"
	}
	return subsetParamsMap(raw)
}

func subsetParamsMap(raw any) (map[string]string, string) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, "params must be a JSON object"
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case string:
			out[k] = x
		case float64:
			out[k] = strconv.FormatFloat(x, 'f', -1, 64)
		case bool:
			out[k] = strconv.FormatBool(x)
		default:
			return nil, "params must be a JSON object of strings"
		}
	}
	return out, ""
}

// check applies Electric's rules for limit, offset and order_by, with
// Ecto's messages: order_by is required once a limit or an offset is
// given as an integer (one that is not is "is invalid" only).
func (sp *subsetParams) check(errs *fieldErrors) {
	if sp.Limit != nil && *sp.Limit < 1 {
		errs.add("limit", "must be greater than 0")
	}
	if sp.Offset != nil && *sp.Offset < 0 {
		errs.add("offset", "must be greater than or equal to 0")
	}
	if (sp.Limit != nil || sp.Offset != nil) && sp.OrderBy == "" {
		errs.add("order_by", "order_by is required when limit or offset is present")
	}
}

// parseSubsetBody reads a POST body: the subset flat or under "subset".
// A body that is not a JSON object is answered as Electric answers it; a
// wrong subset field is a fieldErrors under errors.subset.
func parseSubsetBody(body []byte) (*subsetParams, int, []byte) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		var anyv any
		if json.Unmarshal(body, &anyv) == nil {
			return nil, 400, []byte(`{"error":"Request body must be a JSON object"}`)
		}
		d, _ := json.Marshal(err.Error())
		return nil, 400, append(append([]byte(`{"error":"Invalid JSON in request body","details":`), d...), '}')
	}
	if top == nil {
		return nil, 400, []byte(`{"error":"Request body must be a JSON object"}`)
	}
	if inner, ok := top["subset"]; ok {
		top = nil
		if err := json.Unmarshal(inner, &top); err != nil || top == nil {
			return nil, 400, []byte(`{"error":"Request body must be a JSON object"}`)
		}
	}
	var sub fieldErrors
	sp := &subsetParams{}
	str := func(name string, dst *string) {
		if v, ok := top[name]; ok && string(v) != "null" {
			if json.Unmarshal(v, dst) != nil {
				sub.add(name, "is invalid")
			}
		}
	}
	str("where", &sp.Where)
	str("order_by", &sp.OrderBy)
	num := func(name string) *int64 {
		v, ok := top[name]
		if !ok || string(v) == "null" {
			return nil
		}
		var n int64
		if json.Unmarshal(v, &n) != nil {
			sub.add(name, "is invalid")
			return nil
		}
		return &n
	}
	sp.Limit, sp.Offset = num("limit"), num("offset")
	if v, ok := top["params"]; ok && string(v) != "null" {
		var raw any
		var msg string
		if json.Unmarshal(v, &raw) != nil {
			msg = "params must be valid JSON"
		} else if s, isStr := raw.(string); isStr {
			// The JSON text of the object, as subset__params carries it.
			sp.Params, msg = parseSubsetParamsJSON([]byte(s))
		} else {
			sp.Params, msg = subsetParamsMap(raw)
		}
		if msg != "" {
			sub.add("params", msg)
		}
	}
	sp.check(&sub)
	if !sub.empty() {
		return nil, 400, (&fieldErrors{subset: &sub}).body()
	}
	return sp, 0, nil
}

// subsetParamList turns {"1":"a","2":"b"} into a dense list.
func subsetParamList(m map[string]string) ([]string, string) {
	if len(m) == 0 {
		return nil, ""
	}
	n := 0
	for k := range m {
		i, err := strconv.Atoi(k)
		if err != nil || i < 1 || i > 65535 {
			return nil, "params keys must be positive integers"
		}
		n = max(n, i)
	}
	out := make([]string, n)
	for i := range out {
		v, ok := m[strconv.Itoa(i+1)]
		if !ok {
			return nil, "param $" + strconv.Itoa(i+1) + " is missing"
		}
		out[i] = v
	}
	return out, ""
}
