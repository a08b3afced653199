package stdlib

import (
	"bytes"
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

// rows are a cached result read through database/sql. Each value is
// decoded from PostgreSQL's text form by pgx's codec for its column type,
// into the same Go value pgx's own driver gives for a live read; that is
// done once per published Result (see decoded), so a hit copies values.
type rows struct {
	conn *Conn // whose spare these are, or nil
	res  *readcache.Result
	dec  *decoded
	m    *pgtype.Map
	next int
	// funcs decode per read the columns of types the database defines
	// (dec.live), with the reading connection's type map.
	funcs []func([]byte) (driver.Value, error)
}

var (
	_ driver.RowsColumnTypeDatabaseTypeName = (*rows)(nil)
	_ driver.RowsColumnTypeLength           = (*rows)(nil)
	_ driver.RowsColumnTypePrecisionScale   = (*rows)(nil)
	_ driver.RowsColumnTypeScanType         = (*rows)(nil)
)

// firstNormalOID is PostgreSQL's FirstNormalObjectId: types with a lower
// OID are built in, and pgx's default codecs decode them the same on every
// connection. Types above it (enums, domains, extensions) may be
// registered differently per connection, so they are decoded per read.
const firstNormalOID = 16384

// decoded is what the driver derives once from a Result: column names,
// and every value of built-in types as the driver.Value a live read gives.
type decoded struct {
	cols  []string
	vals  [][]driver.Value
	clone []int // []byte columns: each read gets its own copy
	live  []int // columns decoded per read (types the database defines, or a value that failed to decode)
}

// decode decodes res; the rows of prev (the previous result's, when kept)
// that the delta left alone are taken as they are (from).
func decode(res *readcache.Result, prev *decoded, from []int32, m *pgtype.Map) *decoded {
	d := &decoded{cols: make([]string, len(res.Columns)), vals: make([][]driver.Value, len(res.Rows))}
	funcs := make([]func([]byte) (driver.Value, error), len(res.Columns))
	for i, c := range res.Columns {
		d.cols[i] = c.Name
		if c.TypeOID < firstNormalOID {
			funcs[i] = valueFunc(m, c.TypeOID)
		}
	}
	if prev != nil {
		for _, i := range prev.live {
			funcs[i] = nil // its kept values are placeholders
		}
	}
	n := len(res.Columns)
	flat := make([]driver.Value, n*readcache.ChangedRows(from, len(res.Rows)))
	for j, row := range res.Rows {
		if from != nil && from[j] >= 0 {
			d.vals[j] = prev.vals[from[j]]
			continue
		}
		d.vals[j], flat = flat[:n:n], flat[n:]
		for i, v := range row {
			if v == nil || funcs[i] == nil {
				continue
			}
			x, err := funcs[i](v)
			if err != nil {
				funcs[i] = nil // the read reports it
				continue
			}
			d.vals[j][i] = x
		}
	}
	for i, c := range res.Columns {
		switch {
		case funcs[i] == nil:
			d.live = append(d.live, i)
		case c.TypeOID == pgtype.ByteaOID || c.TypeOID == pgtype.JSONOID || c.TypeOID == pgtype.JSONBOID || c.TypeOID == pgtype.XMLOID:
			d.clone = append(d.clone, i)
		}
	}
	return d
}

func (r *rows) reset(c *Conn, res *readcache.Result, m *pgtype.Map) {
	*r = rows{conn: c, res: res, m: m}
	r.dec = res.Memo(readcache.MemoDriver, func(res *readcache.Result, prev any, from []int32) any {
		p, _ := prev.(*decoded)
		return decode(res, p, from, m)
	}).(*decoded)
}

// Columns returns the result's column names (shared by every read of the
// result: database/sql does not change them).
func (r *rows) Columns() []string { return r.dec.cols }

func (r *rows) Close() error {
	if r.conn != nil && r == &r.conn.spare {
		r.conn.spareBusy = false
	}
	return nil
}

func (r *rows) Next(dest []driver.Value) error {
	if r.next >= len(r.res.Rows) {
		return io.EOF
	}
	j := r.next
	r.next++
	copy(dest, r.dec.vals[j])
	for _, i := range r.dec.clone {
		if b, ok := dest[i].([]byte); ok {
			dest[i] = bytes.Clone(b)
		}
	}
	if len(r.dec.live) == 0 {
		return nil
	}
	if r.funcs == nil {
		r.funcs = make([]func([]byte) (driver.Value, error), len(r.res.Columns))
		for _, i := range r.dec.live {
			r.funcs[i] = valueFunc(r.m, r.res.Columns[i].TypeOID)
		}
	}
	row := r.res.Rows[j]
	for _, i := range r.dec.live {
		if row[i] == nil {
			dest[i] = nil
			continue
		}
		var err error
		if dest[i], err = r.funcs[i](row[i]); err != nil {
			return fmt.Errorf("convert field %d failed: %w", i, err)
		}
	}
	return nil
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

// varHeaderSize is the 4 bytes a varlena type's modifier counts.
const varHeaderSize = 4

// ColumnTypeLength reports what pgx's driver reports for a live read: the
// n of varchar(n) and char(n) from the column's type modifier (which the
// server sends in accepted frames), unbounded for text and bytea.
func (r *rows) ColumnTypeLength(i int) (int64, bool) {
	c := r.res.Columns[i]
	switch c.TypeOID {
	case pgtype.TextOID, pgtype.ByteaOID:
		return math.MaxInt64, true
	case pgtype.VarcharOID, pgtype.BPCharOID:
		return int64(typeMod(c.TypeMod) - varHeaderSize), true
	case pgtype.VarbitOID:
		return int64(typeMod(c.TypeMod)), true
	}
	return 0, false
}

// ColumnTypePrecisionScale reports numeric(p,s)'s precision and scale
// from the column's type modifier, as pgx's driver does for a live read.
func (r *rows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	c := r.res.Columns[i]
	if c.TypeOID != pgtype.NumericOID {
		return 0, 0, false
	}
	mod := typeMod(c.TypeMod) - varHeaderSize
	return int64((mod >> 16) & 0xffff), int64(mod & 0xffff), true
}

// typeMod is a column's type modifier, -1 when it has none.
func typeMod(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}

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
