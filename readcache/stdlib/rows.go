package stdlib

import (
	"database/sql/driver"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/freshetdb/freshet/readcache"
	"github.com/jackc/pgx/v5/pgtype"
)

// rows are a cached result read through database/sql: each value is
// decoded from PostgreSQL's text form by pgx's codec for its column type,
// into the same Go value pgx's own driver gives for a live read.
type rows struct {
	res   *readcache.Result
	m     *pgtype.Map
	next  int
	cols  []string
	funcs []func([]byte) (driver.Value, error)
}

var (
	_ driver.RowsColumnTypeDatabaseTypeName = (*rows)(nil)
	_ driver.RowsColumnTypeLength           = (*rows)(nil)
	_ driver.RowsColumnTypePrecisionScale   = (*rows)(nil)
	_ driver.RowsColumnTypeScanType         = (*rows)(nil)
)

func newRows(res *readcache.Result, m *pgtype.Map) *rows {
	return &rows{res: res, m: m}
}

func (r *rows) Columns() []string {
	if r.cols == nil {
		r.cols = make([]string, len(r.res.Columns))
		for i, c := range r.res.Columns {
			r.cols[i] = c.Name
		}
	}
	return r.cols
}

func (r *rows) Close() error { return nil }

func (r *rows) Next(dest []driver.Value) error {
	if r.next >= len(r.res.Rows) {
		return io.EOF
	}
	if r.funcs == nil {
		r.makeFuncs()
	}
	row := r.res.Rows[r.next]
	r.next++
	for i, v := range row {
		if v == nil {
			dest[i] = nil
			continue
		}
		var err error
		if dest[i], err = r.funcs[i](v); err != nil {
			return fmt.Errorf("convert field %d failed: %w", i, err)
		}
	}
	return nil
}

func (r *rows) makeFuncs() {
	r.funcs = make([]func([]byte) (driver.Value, error), len(r.res.Columns))
	for i, c := range r.res.Columns {
		r.funcs[i] = valueFunc(r.m, c.TypeOID)
	}
}

// valueFunc returns the decoder of one column: the driver.Value kinds pgx's
// stdlib driver produces for the type (bool, []byte, int64, float64,
// time.Time, string), decoded from the text form.
func valueFunc(m *pgtype.Map, oid uint32) func([]byte) (driver.Value, error) {
	const text = pgtype.TextFormatCode
	// Each plan is made once per column, for the target's type.
	switch oid {
	case pgtype.BoolOID:
		var d bool
		plan := m.PlanScan(oid, text, &d)
		return func(src []byte) (driver.Value, error) {
			err := plan.Scan(src, &d)
			return d, err
		}
	case pgtype.ByteaOID, pgtype.JSONOID, pgtype.JSONBOID, pgtype.XMLOID:
		var proto []byte
		plan := m.PlanScan(oid, text, &proto)
		return func(src []byte) (driver.Value, error) {
			var d []byte // fresh: never hand out the cache's bytes or a reused buffer
			if err := plan.Scan(src, &d); err != nil {
				return nil, err
			}
			if len(d) > 0 && len(src) > 0 && &d[0] == &src[0] {
				d = append([]byte(nil), d...)
			}
			return d, nil
		}
	case pgtype.CIDOID, pgtype.OIDOID, pgtype.XIDOID:
		var d pgtype.Uint32
		plan := m.PlanScan(oid, text, &d)
		return func(src []byte) (driver.Value, error) {
			if err := plan.Scan(src, &d); err != nil {
				return nil, err
			}
			return d.Value()
		}
	case pgtype.DateOID:
		var d pgtype.Date
		plan := m.PlanScan(oid, text, &d)
		return func(src []byte) (driver.Value, error) {
			if err := plan.Scan(src, &d); err != nil {
				return nil, err
			}
			return d.Value()
		}
	case pgtype.Float4OID:
		var d float32
		plan := m.PlanScan(oid, text, &d)
		return func(src []byte) (driver.Value, error) {
			err := plan.Scan(src, &d)
			return float64(d), err
		}
	case pgtype.Float8OID:
		var d float64
		plan := m.PlanScan(oid, text, &d)
		return func(src []byte) (driver.Value, error) {
			err := plan.Scan(src, &d)
			return d, err
		}
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID:
		var d int64
		plan := m.PlanScan(oid, text, &d)
		return func(src []byte) (driver.Value, error) {
			err := plan.Scan(src, &d)
			return d, err
		}
	case pgtype.TimestampOID:
		var d pgtype.Timestamp
		plan := m.PlanScan(oid, text, &d)
		return func(src []byte) (driver.Value, error) {
			if err := plan.Scan(src, &d); err != nil {
				return nil, err
			}
			return d.Value()
		}
	case pgtype.TimestamptzOID:
		var d pgtype.Timestamptz
		plan := m.PlanScan(oid, text, &d)
		return func(src []byte) (driver.Value, error) {
			if err := plan.Scan(src, &d); err != nil {
				return nil, err
			}
			return d.Value()
		}
	}
	var d string
	plan := m.PlanScan(oid, text, &d)
	return func(src []byte) (driver.Value, error) {
		err := plan.Scan(src, &d)
		return d, err
	}
}

func (r *rows) ColumnTypeDatabaseTypeName(i int) string {
	oid := r.res.Columns[i].TypeOID
	if t, ok := r.m.TypeForOID(oid); ok {
		return strings.ToUpper(t.Name)
	}
	return strconv.FormatUint(uint64(oid), 10)
}

// ColumnTypeLength: the s2s protocol carries no type modifiers, so
// varchar(n) and bpchar(n) lengths are unknown here.
func (r *rows) ColumnTypeLength(i int) (int64, bool) {
	switch r.res.Columns[i].TypeOID {
	case pgtype.TextOID, pgtype.ByteaOID:
		return math.MaxInt64, true
	}
	return 0, false
}

// ColumnTypePrecisionScale: numeric's precision and scale are type
// modifiers, which the s2s protocol does not carry.
func (r *rows) ColumnTypePrecisionScale(int) (int64, int64, bool) { return 0, 0, false }

func (r *rows) ColumnTypeScanType(i int) reflect.Type {
	switch r.res.Columns[i].TypeOID {
	case pgtype.Float8OID:
		return reflect.TypeFor[float64]()
	case pgtype.Float4OID:
		return reflect.TypeFor[float32]()
	case pgtype.Int8OID:
		return reflect.TypeFor[int64]()
	case pgtype.Int4OID:
		return reflect.TypeFor[int32]()
	case pgtype.Int2OID:
		return reflect.TypeFor[int16]()
	case pgtype.BoolOID:
		return reflect.TypeFor[bool]()
	case pgtype.NumericOID:
		return reflect.TypeFor[float64]()
	case pgtype.DateOID, pgtype.TimestampOID, pgtype.TimestamptzOID:
		return reflect.TypeFor[time.Time]()
	case pgtype.ByteaOID:
		return reflect.TypeFor[[]byte]()
	}
	return reflect.TypeFor[string]()
}
