package readcache

import (
	"database/sql/driver"
	"encoding/base64"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/freshetdb/freshet/wire"
	"github.com/jackc/pgx/v5/pgtype"
)

// IsSelect reports whether sql is one statement that starts with SELECT
// (after whitespace, comments and opening parentheses) and does not lock
// rows. Anything else goes to PostgreSQL unasked.
func IsSelect(sql string) bool {
	if v, ok := selectMemo.Load(sql); ok {
		return v.(bool)
	}
	ok := isSelect(sql)
	if selectMemoN.Load() < maxSelectMemo {
		if _, loaded := selectMemo.LoadOrStore(sql, ok); !loaded {
			selectMemoN.Add(1)
		}
	}
	return ok
}

// A program sends the same few statements again and again: their
// verdicts are remembered (up to maxSelectMemo of them).
var (
	selectMemo    sync.Map
	selectMemoN   atomic.Int64
	maxSelectMemo int64 = 10_000
)

func isSelect(sql string) bool {
	s := skipSpace(sql)
	for strings.HasPrefix(s, "(") {
		s = skipSpace(s[1:])
	}
	if len(s) < 6 || !strings.EqualFold(s[:6], "select") {
		return false
	}
	if len(s) > 6 && isIdent(s[6]) {
		return false
	}
	// A second statement, or a locking clause: PostgreSQL's business.
	body := strings.TrimRight(strings.TrimSpace(s), ";")
	if strings.Contains(body, ";") {
		return false
	}
	for _, w := range lockWords {
		if containsFold(body, w) {
			return false
		}
	}
	return true
}

var lockWords = []string{" FOR UPDATE", " FOR SHARE", " FOR NO KEY", " FOR KEY SHARE", " INTO "}

// containsFold reports whether s holds sub (which starts with a space)
// after any whitespace character, ignoring ASCII case, without allocating.
func containsFold(s, sub string) bool {
	w := sub[1:]
	for i := 0; i+len(sub) <= len(s); i++ {
		switch s[i] {
		case ' ', '\n', '\t', '\r', '\f':
			if strings.EqualFold(s[i+1:i+len(sub)], w) {
				return true
			}
		}
	}
	return false
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func skipSpace(s string) string {
	for {
		s = strings.TrimLeft(s, " \t\r\n\f")
		switch {
		case strings.HasPrefix(s, "--"):
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				return ""
			}
			s = s[i+1:]
		case strings.HasPrefix(s, "/*"):
			i := strings.Index(s, "*/")
			if i < 0 {
				return ""
			}
			s = s[i+2:]
		default:
			return s
		}
	}
}

// Params turns bind arguments into the subscribe frame's parameters: each
// encoded in PostgreSQL's text form by pgx's codec for its Go type (m), with
// OID 0 so the engine infers the type from its use as PostgreSQL does.
// []byte goes in the binary format (its bytes as they are). ok is false for
// a value pgx cannot encode: the read then goes to PostgreSQL.
func Params(m *pgtype.Map, args []any) (params []wire.Param, ok bool) {
	if len(args) == 0 {
		return nil, true
	}
	params = make([]wire.Param, len(args))
	for i, a := range args {
		p, ok := param(m, a)
		if !ok {
			return nil, false
		}
		params[i] = p
	}
	return params, true
}

func param(m *pgtype.Map, a any) (wire.Param, bool) {
	str := func(s string) wire.Param { return wire.Param{Value: &s} }
	switch v := a.(type) {
	case nil:
		return wire.Param{}, true
	case string:
		if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			return wire.Param{}, false
		}
		return str(v), true
	case int:
		return str(strconv.Itoa(v)), true
	case int64:
		return str(strconv.FormatInt(v, 10)), true
	case int32:
		return str(strconv.FormatInt(int64(v), 10)), true
	case int16:
		return str(strconv.FormatInt(int64(v), 10)), true
	case int8:
		return str(strconv.FormatInt(int64(v), 10)), true
	case uint32:
		return str(strconv.FormatUint(uint64(v), 10)), true
	case uint16:
		return str(strconv.FormatUint(uint64(v), 10)), true
	case bool:
		return str(strconv.FormatBool(v)), true
	case []byte:
		if v == nil {
			return wire.Param{}, true
		}
		s := base64.StdEncoding.EncodeToString(v)
		return wire.Param{Format: wire.FormatBinary, Value: &s}, true
	}
	if m == nil {
		return wire.Param{}, false
	}
	t, ok := m.TypeForValue(a)
	if !ok {
		// A driver.Valuer pgx has no plan for: use its value.
		if vr, isV := a.(driver.Valuer); isV {
			v, err := vr.Value()
			if err != nil {
				return wire.Param{}, false
			}
			if _, again := v.(driver.Valuer); again {
				return wire.Param{}, false
			}
			return param(m, v)
		}
		return wire.Param{}, false
	}
	buf, err := m.Encode(t.OID, pgtype.TextFormatCode, a, nil)
	if err != nil {
		return wire.Param{}, false
	}
	if buf == nil {
		return wire.Param{}, true
	}
	if !utf8.Valid(buf) {
		return wire.Param{}, false
	}
	s := string(buf)
	return wire.Param{Value: &s}, true
}

// Key returns the cache key of sql with params: the SQL and the bytes of
// every bind, so two reads share an entry exactly when PostgreSQL would see
// the same statement.
func Key(sql string, params []wire.Param) string {
	n := len(sql) + 1
	for _, p := range params {
		n += 6
		if p.Value != nil {
			n += len(*p.Value)
		}
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(sql)
	for _, p := range params {
		b.WriteByte(0)
		switch {
		case p.Value == nil:
			b.WriteByte('n')
		case p.Format == wire.FormatBinary:
			b.WriteByte('b')
		default:
			b.WriteByte('t')
		}
		if p.Value != nil {
			b.WriteString(strconv.Itoa(len(*p.Value)))
			b.WriteByte(':')
			b.WriteString(*p.Value)
		}
	}
	return b.String()
}
