package query

import (
	"errors"
	"fmt"

	"github.com/freshetdb/freshet/change"
)

// ErrColumnMissing is returned (wrapped) by Source.Decode when the change's
// relation lacks a column the plan needs: the column was dropped or renamed,
// and the subscription must be compiled again or ended.
var ErrColumnMissing = errors.New("needed column missing from relation")

// ErrNotHeld is returned (wrapped) by Source.Decode when a needed value was
// not sent (an unchanged TOASTed value, or a non-key column of a key-only
// old tuple) and no held row supplies it.
var ErrNotHeld = errors.New("value not sent and not held")

// Matches reports whether rel is this source's table (by OID).
func (s *Source) Matches(rel *change.Relation) bool { return rel.OID == s.Table.OID }

// Decode returns a row of a change as this source's values (its Columns, in
// order), decoded with change.DecodeOID. Values PostgreSQL did not send are
// taken from held, the engine's copy of the same row (nil when it holds
// none). A needed column that is missing from rel, or whose type changed,
// returns an error wrapping ErrColumnMissing.
func (s *Source) Decode(rel *change.Relation, row change.Row, held []any, r change.TypeResolver) ([]any, error) {
	out := make([]any, len(s.Columns))
	for i, c := range s.Columns {
		j := rel.ColumnIndex(c.Name)
		if j < 0 || j >= len(row) {
			return nil, fmt.Errorf("decode %s.%s: column %s: %w", rel.Schema, rel.Table, c.Name, ErrColumnMissing)
		}
		if rc := rel.Columns[j]; rc.TypeOID != c.DeclaredOID && rc.TypeOID != c.TypeOID {
			return nil, fmt.Errorf("decode %s.%s: column %s is now of type %d, not %d: %w", rel.Schema, rel.Table, c.Name, rc.TypeOID, c.DeclaredOID, ErrColumnMissing)
		}
		v := row[j]
		if v.Kind == change.Absent || v.Kind == change.Unchanged {
			if held == nil {
				return nil, fmt.Errorf("decode %s.%s: column %s (%s): %w", rel.Schema, rel.Table, c.Name, v.Kind, ErrNotHeld)
			}
			out[i] = held[i]
			continue
		}
		x, err := change.DecodeOID(c.TypeOID, v, r)
		if err != nil {
			return nil, fmt.Errorf("decode %s.%s: column %s: %w", rel.Schema, rel.Table, c.Name, err)
		}
		out[i] = x
	}
	return out, nil
}

// AppendKey appends the source's primary key, read from vals (its Columns'
// values), in AppendKey's encoding: equal keys mean the same row.
func (s *Source) AppendKey(dst []byte, vals []any) []byte {
	for i := 0; i < s.KeyN; i++ {
		dst = AppendKey(dst, s.Columns[i].TypeOID, vals[i])
	}
	return dst
}
