package readcache

import (
	"database/sql/driver"
	"encoding/base64"
	"encoding/binary"
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

// The cache key of a read is built by appending, so that a hit allocates
// nothing: AppendKey starts it with the SQL, AppendArg adds each bind.
// Layout: the SQL's length (4 bytes, big endian) and the SQL, then per
// bind a kind byte ('n' NULL, 't' text, 'b' binary as base64) and, unless
// NULL, the value's length (4 bytes) and the value exactly as the subscribe
// frame carries it. The key thus holds everything the subscribe needs
// (paramsOf reads it back) and two reads share an entry exactly when
// PostgreSQL would see the same statement.

// AppendKey appends the start of sql's cache key to dst.
func AppendKey(dst []byte, sql string) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(sql)))
	return append(dst, sql...)
}

// AppendArg appends one bind argument to a key started by AppendKey: its
// PostgreSQL text form as pgx's codec for its Go type (m) writes it, sent
// with OID 0 so the engine infers the type from its use as PostgreSQL
// does; []byte goes in the binary format (its bytes as they are). ok is
// false for a value pgx cannot encode, or whose text is not valid UTF-8:
// the read then goes to PostgreSQL.
func AppendArg(dst []byte, m *pgtype.Map, a any) (key []byte, ok bool) {
	switch v := a.(type) {
	case nil:
		return append(dst, 'n'), true
	case string:
		if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			return dst, false
		}
		return append(binary.BigEndian.AppendUint32(append(dst, 't'), uint32(len(v))), v...), true
	case int:
		return endText(strconv.AppendInt(startText(dst), int64(v), 10), len(dst)), true
	case int64:
		return endText(strconv.AppendInt(startText(dst), v, 10), len(dst)), true
	case int32:
		return endText(strconv.AppendInt(startText(dst), int64(v), 10), len(dst)), true
	case int16:
		return endText(strconv.AppendInt(startText(dst), int64(v), 10), len(dst)), true
	case int8:
		return endText(strconv.AppendInt(startText(dst), int64(v), 10), len(dst)), true
	case uint32:
		return endText(strconv.AppendUint(startText(dst), uint64(v), 10), len(dst)), true
	case uint16:
		return endText(strconv.AppendUint(startText(dst), uint64(v), 10), len(dst)), true
	case bool:
		return endText(strconv.AppendBool(startText(dst), v), len(dst)), true
	case []byte:
		if v == nil {
			return append(dst, 'n'), true
		}
		dst = binary.BigEndian.AppendUint32(append(dst, 'b'), uint32(base64.StdEncoding.EncodedLen(len(v))))
		return base64.StdEncoding.AppendEncode(dst, v), true
	}
	if m == nil {
		return dst, false
	}
	t, ok := m.TypeForValue(a)
	if !ok {
		// A driver.Valuer pgx has no plan for: use its value.
		if vr, isV := a.(driver.Valuer); isV {
			v, err := vr.Value()
			if err != nil {
				return dst, false
			}
			if _, again := v.(driver.Valuer); again {
				return dst, false
			}
			return AppendArg(dst, m, v)
		}
		return dst, false
	}
	head := len(dst)
	out, err := m.Encode(t.OID, pgtype.TextFormatCode, a, startText(dst))
	switch {
	case err != nil:
		return dst, false
	case out == nil: // NULL
		return append(dst, 'n'), true
	case !utf8.Valid(out[head+5:]):
		return dst, false
	}
	return endText(out, head), true
}

// startText starts a text bind whose value is appended next; endText
// then writes its length (head is len(dst) before startText).
func startText(dst []byte) []byte { return append(dst, 't', 0, 0, 0, 0) }

func endText(dst []byte, head int) []byte {
	binary.BigEndian.PutUint32(dst[head+1:], uint32(len(dst)-head-5))
	return dst
}

// Key returns the cache key of sql with params, as AppendKey and AppendArg
// build it from the bind arguments.
func Key(sql string, params []wire.Param) string {
	b := AppendKey(nil, sql)
	for _, p := range params {
		switch {
		case p.Value == nil:
			b = append(b, 'n')
			continue
		case p.Format == wire.FormatBinary:
			b = append(b, 'b')
		default:
			b = append(b, 't')
		}
		b = binary.BigEndian.AppendUint32(b, uint32(len(*p.Value)))
		b = append(b, *p.Value...)
	}
	return string(b)
}

// Params turns bind arguments into the subscribe frame's parameters, as
// AppendArg keys them (for Cache.Read); ok is false when one cannot be
// keyed.
func Params(m *pgtype.Map, args []any) (params []wire.Param, ok bool) {
	b := AppendKey(nil, "")
	for _, a := range args {
		if b, ok = AppendArg(b, m, a); !ok {
			return nil, false
		}
	}
	_, params, ok = paramsOf(string(b))
	return params, ok
}

// paramsOf reads a key back into the subscribe frame's SQL and
// parameters; ok is false for a key AppendKey did not make.
func paramsOf(key string) (sql string, params []wire.Param, ok bool) {
	if len(key) < 4 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint32([]byte(key[:4])))
	if len(key)-4 < n {
		return "", nil, false
	}
	sql, rest := key[4:4+n], key[4+n:]
	for len(rest) > 0 {
		kind := rest[0]
		rest = rest[1:]
		if kind == 'n' {
			params = append(params, wire.Param{})
			continue
		}
		if (kind != 't' && kind != 'b') || len(rest) < 4 {
			return "", nil, false
		}
		n := int(binary.BigEndian.Uint32([]byte(rest[:4])))
		if len(rest)-4 < n {
			return "", nil, false
		}
		v := rest[4 : 4+n]
		p := wire.Param{Value: &v}
		if kind == 'b' {
			p.Format = wire.FormatBinary
		}
		params = append(params, p)
		rest = rest[4+n:]
	}
	return sql, params, true
}
