package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/query"
	"github.com/jackc/pgx/v5/pgconn"
)

// fastSamples are PostgreSQL text outputs of each type fastDecoder handles.
var fastSamples = map[uint32][]string{
	change.OIDInt2:        {"0", "-32768", "32767", "7"},
	change.OIDInt4:        {"0", "-2147483648", "2147483647", "42"},
	change.OIDInt8:        {"0", "-9223372036854775808", "9223372036854775807", "9007199254740993"},
	change.OIDText:        {"", "a", "héllo", "tab\there", "a'b\"c"},
	change.OIDVarchar:     {"", "x"},
	change.OIDBPChar:      {"ab  ", "x"},
	change.OIDName:        {"pg_class"},
	change.OIDBool:        {"t", "f"},
	change.OIDFloat8:      {"0", "-0", "1.5", "1e-10", "1.7976931348623157e+308", "Infinity", "-Infinity", "NaN", "0.1"},
	change.OIDNumeric:     {"0", "1.50", "-2.25", "100000000000000000000.1", "NaN", "Infinity", "-Infinity", "0.000"},
	change.OIDTimestamptz: {"2024-01-01 00:00:00+00", "2024-01-01 12:30:00.5+00", "infinity", "-infinity", "0044-03-15 12:00:00+00 BC"},
	change.OIDTimestamp:   {"2024-01-01 00:00:00", "1999-12-31 23:59:59.999999", "infinity"},
	change.OIDDate:        {"2024-02-29", "infinity", "-infinity", "0001-01-01 BC"},
	change.OIDUUID:        {"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "00000000-0000-0000-0000-000000000000"},
}

// sameDecoded is reflect.DeepEqual, except that floats are compared by
// their bits (NaN is itself, -0 is not 0).
func sameDecoded(a, b any) bool {
	if x, ok := a.(float64); ok {
		y, ok := b.(float64)
		return ok && (math.Float64bits(x) == math.Float64bits(y) || math.IsNaN(x) && math.IsNaN(y))
	}
	return reflect.DeepEqual(a, b)
}

// TestFastDecoders checks the read path's decoders give exactly what
// change.Decode gives. Every sample is decoded many times into one set of
// slabs, from a buffer overwritten after each value as the connection's
// is, and all are compared at the end: a value sharing storage with
// another value or with the buffer shows up as a mismatch.
func TestFastDecoders(t *testing.T) {
	type decoded struct {
		oid  uint32
		in   string
		got  any
		want any
	}
	var sl slabs
	var all []decoded
	buf := make([]byte, 0, 64)
	for round := 0; round < 3*slabMax/len(fastSamples); round++ {
		for oid, samples := range fastSamples {
			typ, _ := change.BuiltinType(oid)
			k := fastKindOf(typ, oid)
			if k == fastNone {
				t.Fatalf("fastKindOf(%d) = fastNone, want a decoder", oid)
			}
			for _, s := range samples {
				want, err := change.DecodeOID(oid, change.TextValue(s), nil)
				if err != nil {
					t.Fatalf("DecodeOID(%d, %q): %v", oid, s, err)
				}
				buf = append(buf[:0], s...)
				got, err := sl.decode(k, unsafe.String(unsafe.SliceData(buf), len(buf)))
				for i := range buf {
					buf[i] = '#'
				}
				if err != nil {
					t.Fatalf("fast decode %d %q: %v", oid, s, err)
				}
				all = append(all, decoded{oid, s, got, want})
			}
		}
	}
	for _, d := range all {
		if !sameDecoded(d.got, d.want) {
			t.Fatalf("fast decode %d %q = %#v, want %#v", d.oid, d.in, d.got, d.want)
		}
	}
	if k := fastKindOf(change.Type{OID: 99999, Kind: change.KindDomain, Base: change.OIDInt4}, 99999); k != fastNone {
		t.Errorf("fastKindOf of a domain = %d, want fastNone", k)
	}
}

// TestFastDecodeErrors checks the fast decoders refuse what change.Decode
// refuses.
func TestFastDecodeErrors(t *testing.T) {
	tests := []struct {
		oid uint32
		in  string
	}{
		{change.OIDInt4, "x"},
		{change.OIDInt8, "99999999999999999999"},
		{change.OIDBool, "x"},
		{change.OIDNumeric, ""},
		{change.OIDNumeric, "-"},
		{change.OIDNumeric, "."},
		{change.OIDNumeric, "1.2.3"},
		{change.OIDNumeric, "12a"},
		{change.OIDTimestamptz, "yesterday"},
		{change.OIDUUID, "abc"},
	}
	for _, tt := range tests {
		typ, _ := change.BuiltinType(tt.oid)
		var sl slabs
		if _, err := change.DecodeOID(tt.oid, change.TextValue(tt.in), nil); err == nil {
			t.Fatalf("DecodeOID(%d, %q) accepted it; pick a sample it refuses", tt.oid, tt.in)
		}
		if got, err := sl.decode(fastKindOf(typ, tt.oid), tt.in); err == nil {
			t.Errorf("fast decode %d %q = %#v, want an error", tt.oid, tt.in, got)
		}
	}
}

// FuzzFastDecoders: whatever change.Decode accepts, printed back in
// PostgreSQL's text form, decodes the same through the fast path.
func FuzzFastDecoders(f *testing.F) {
	for oid, samples := range fastSamples {
		for _, s := range samples {
			f.Add(oid, s)
		}
	}
	f.Fuzz(func(t *testing.T, oid uint32, s string) {
		typ, ok := change.BuiltinType(oid)
		if !ok {
			return
		}
		k := fastKindOf(typ, oid)
		if k == fastNone {
			return
		}
		v, err := change.DecodeOID(oid, change.TextValue(s), nil)
		if err != nil || v == nil {
			return
		}
		canon, err := change.FormatOID(oid, v, nil)
		if err != nil {
			return
		}
		want, err := change.DecodeOID(oid, change.TextValue(canon), nil)
		if err != nil {
			t.Fatalf("DecodeOID(%d, %q) (printed from %q): %v", oid, canon, s, err)
		}
		var sl slabs
		got, err := sl.decode(k, canon)
		if err != nil {
			t.Fatalf("fast decode %d %q: %v", oid, canon, err)
		}
		if !sameDecoded(got, want) {
			t.Fatalf("fast decode %d %q = %#v, want %#v", oid, canon, got, want)
		}
	})
}

// FuzzFastNumeric: the numeric fast path accepts what change.ParseNumeric
// accepts, refuses what it refuses, and gives the same value, for any
// input (not only numeric_out's forms).
func FuzzFastNumeric(f *testing.F) {
	for _, s := range append(fastSamples[change.OIDNumeric], "-0", "1.", ".5", "0001.10", "123456789012345678", "1234567890123456789", "1e3", " 1", "+1", "--1") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, werr := change.ParseNumeric(s)
		var sl slabs
		got, gerr := sl.numeric(s)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("numeric(%q) error %v, ParseNumeric error %v", s, gerr, werr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("numeric(%q) = %#v, want %#v", s, got, want)
		}
	})
}

// binarySamples are SQL literals of each type read in binary form,
// extremes and infinities included.
var binarySamples = map[uint32][]string{
	change.OIDInt2:        {"0", "-32768", "32767"},
	change.OIDInt4:        {"0", "-2147483648", "2147483647"},
	change.OIDInt8:        {"0", "-9223372036854775808", "9223372036854775807", "255", "256"},
	change.OIDBool:        {"true", "false"},
	change.OIDTimestamptz: {"2024-01-01 12:30:00.5+00", "2024-06-30 23:59:59.999999-07", "0044-03-15 12:00:00+00 BC", "4714-11-24 00:00:00+00 BC", "294276-12-31 23:59:59.999999+00", "infinity", "-infinity", "epoch"},
	change.OIDTimestamp:   {"2024-01-01 12:30:00.5", "0044-03-15 12:00:00 BC", "4714-11-24 00:00:00 BC", "294276-12-31 23:59:59.999999", "infinity", "-infinity"},
	change.OIDDate:        {"2024-02-29", "4714-11-24 BC", "5874897-12-31", "2000-01-01", "infinity", "-infinity"},
	change.OIDUUID:        {"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff"},
}

// TestFastBinary reads sample values of every type the read takes in
// binary form from PostgreSQL twice, as text (in the read's session
// settings) and as binary, and checks the binary decoder gives exactly
// what change.Decode gives for the text.
func TestFastBinary(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	pc, err := pgconn.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	if err := pc.Exec(ctx, "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, MDY'").Close(); err != nil {
		t.Fatal(err)
	}
	var sl slabs
	for oid, samples := range binarySamples {
		typ, _ := change.BuiltinType(oid)
		k := fastKindOf(typ, oid)
		if !k.binaryForm() {
			t.Fatalf("type %d: fastKindOf = %d, not read in binary form", oid, k)
		}
		for _, lit := range samples {
			sql := fmt.Sprintf("SELECT '%s'::%s, '%s'::%s", lit, typ.Name, lit, typ.Name)
			res := pc.ExecParams(ctx, sql, nil, nil, nil, []int16{0, 1}).Read()
			if res.Err != nil {
				t.Fatalf("%s: %v", sql, res.Err)
			}
			if got := res.FieldDescriptions[1].DataTypeOID; got != oid {
				t.Fatalf("%s: column of type %d, want %d", sql, got, oid)
			}
			want, err := change.DecodeOID(oid, change.Value{Kind: change.Text, Data: res.Rows[0][0]}, nil)
			if err != nil {
				t.Fatalf("%s: decode text %q: %v", sql, res.Rows[0][0], err)
			}
			wantBin, err := change.DecodeOID(oid, change.Value{Kind: change.Binary, Data: res.Rows[0][1]}, nil)
			if err != nil {
				t.Fatalf("%s: decode binary: %v", sql, err)
			}
			got, err := sl.decodeBinary(k, oid, res.Rows[0][1])
			if err != nil {
				t.Fatalf("%s: fast binary decode: %v", sql, err)
			}
			if !sameDecoded(got, want) || !sameDecoded(wantBin, want) {
				t.Errorf("%s: fast binary %#v, change binary %#v, want (text %q) %#v", sql, got, wantBin, res.Rows[0][0], want)
			}
		}
	}
}

// FuzzFastBinary: the binary decoders accept what change.Decode accepts in
// binary form, refuse what it refuses, and give the same value.
func FuzzFastBinary(f *testing.F) {
	f.Add(change.OIDInt8, []byte{0, 0, 0, 0, 0, 0, 1, 0})
	f.Add(change.OIDInt2, []byte{0x80, 0})
	f.Add(change.OIDTimestamptz, []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add(change.OIDDate, []byte{0x80, 0, 0, 0})
	f.Add(change.OIDBool, []byte{1})
	f.Add(change.OIDUUID, make([]byte, 16))
	f.Fuzz(func(t *testing.T, oid uint32, b []byte) {
		typ, ok := change.BuiltinType(oid)
		if !ok {
			return
		}
		k := fastKindOf(typ, oid)
		if !k.binaryForm() {
			return
		}
		want, werr := change.DecodeOID(oid, change.Value{Kind: change.Binary, Data: b}, nil)
		var sl slabs
		got, gerr := sl.decodeBinary(k, oid, b)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("decodeBinary(%d, %x) error %v, change.Decode error %v", oid, b, gerr, werr)
		}
		if werr == nil && !sameDecoded(got, want) {
			t.Fatalf("decodeBinary(%d, %x) = %#v, want %#v", oid, b, got, want)
		}
	})
}

// TestReadRetypedColumn: a read of a plan whose columns were retyped (or
// whose table was dropped, or made again under its name) after the plan was
// made fails with a ShapeError naming the change, instead of reading the
// new shape as if it were the old one.
func TestReadRetypedColumn(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	const plain, star = "SELECT id, n, s, d FROM t ORDER BY id", "SELECT * FROM t ORDER BY id"
	tests := []struct {
		name, sql, ddl string
		code           query.Code // "": the read succeeds
		reason         string     // in the error
	}{
		{"retyped", plain, `ALTER TABLE t ALTER n TYPE int8`, CodeSchemaChanged, `column "n" of table public.t changed type`},
		{"typmod", plain, `ALTER TABLE t ALTER s TYPE varchar(20)`, CodeSchemaChanged, `column "s" of table public.t changed type`},
		{"dropped column", plain, `ALTER TABLE t DROP COLUMN d`, CodeSchemaChanged, `column t.d does not exist`},
		{"renamed column", plain, `ALTER TABLE t RENAME COLUMN d TO d2`, CodeSchemaChanged, `column t.d does not exist`},
		{"dropped and added", plain, `ALTER TABLE t DROP COLUMN d; ALTER TABLE t ADD COLUMN d date`, CodeSchemaChanged, `column "d" of table public.t was dropped and added again`},
		{"dropped table", plain, `DROP TABLE t`, CodeTableDropped, `table public.t was dropped or renamed`},
		{"made again", plain, `DROP TABLE t; CREATE TABLE t (id int4 PRIMARY KEY, n int4, s varchar(10), d date)`, CodeTableDropped, `table public.t was dropped`},
		{"column added, not selected", plain, `ALTER TABLE t ADD COLUMN x int`, "", ""},
		{"column added, selected with *", star, `ALTER TABLE t ADD COLUMN x int`, CodeSchemaChanged, `column "x" was added to table public.t, which the query selects with *`},
		{"identity, *", star, `CREATE UNIQUE INDEX t_n ON t (s); ALTER TABLE t ALTER s SET NOT NULL; ALTER TABLE t REPLICA IDENTITY USING INDEX t_n`, CodeSchemaChanged, `the replica identity of table public.t changed`},
		// A read of named columns does not see a replica identity change:
		// the stream's next Relation and the catalog check do
		// (TestEngineSchemaChanges).
		{"identity", plain, `CREATE UNIQUE INDEX t_n ON t (s); ALTER TABLE t ALTER s SET NOT NULL; ALTER TABLE t REPLICA IDENTITY USING INDEX t_n`, "", ""},
	}
	opts := query.DefaultOptions()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS t; CREATE TABLE t (id int4 PRIMARY KEY, n int4, s varchar(10), d date);
				INSERT INTO t VALUES (1, -7, 'a', '2024-02-29'), (2, NULL, 'b', '-infinity')`); err != nil {
				t.Fatal(err)
			}
			opts.Catalog = query.NewPGCatalog(pool)
			plan, refusal, err := query.Compile(ctx, tt.sql, nil, opts)
			if err != nil || refusal != nil {
				t.Fatalf("compile: %v %v", err, refusal)
			}
			if _, err := pool.Exec(ctx, tt.ddl); err != nil {
				t.Fatal(err)
			}
			args, oids, formats := plan.Args()
			req := ReadRequest{ID: 1, Plan: plan, Sources: []int{0}, SQL: plan.Render(query.RenderOptions{Columns: query.SelectNeeded}), Args: args, ArgOIDs: oids, ArgFormats: formats}
			rd := &reader{pool: pool, log: newAppliedLog(), timeout: time.Minute}
			_, rows, _, err := rd.read(ctx, req, appliedMark{})
			_, held, _, herr := rd.readHeld(ctx, req, appliedMark{})
			if (err == nil) != (herr == nil) || err != nil && err.Error() != herr.Error() || len(held) != len(rows) {
				t.Fatalf("readHeld = %d rows, %v; read = %d rows, %v", len(held), herr, len(rows), err)
			}
			if tt.code == "" {
				if err != nil || len(rows) != 2 {
					t.Fatalf("read = %d rows, %v; want 2 rows", len(rows), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("read error = %v, want one containing %q", err, tt.reason)
			}
			if got := readCode(err); got != tt.code {
				t.Errorf("readCode = %q, want %q", got, tt.code)
			}
			if se := (*ShapeError)(nil); errors.As(err, &se) && se.Table != "t" {
				t.Errorf("ShapeError.Table = %q, want t", se.Table)
			}
		})
	}
}

// TestRowChunks: rows come back in order and complete across chunk
// boundaries.
func TestRowChunks(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 65, 191, 192, 1000, 200_000} {
		var c rowChunks[query.Row]
		for i := range n {
			c.add(query.Row{{int64(i)}})
		}
		got := c.rows()
		if len(got) != n || c.n != n {
			t.Fatalf("%d rows: got %d (n %d)", n, len(got), c.n)
		}
		for i, r := range got {
			if r[0][0] != int64(i) {
				t.Fatalf("%d rows: row %d is %v", n, i, r[0][0])
			}
		}
	}
}

// TestReadHeld reads rows of every common type (NULLs, extremes,
// infinities, NaN and -0, arrays) with read and with readHeld: each held
// row decodes to exactly the typed values read gives.
func TestReadHeld(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE h (id int8 PRIMARY KEY, i2 int2, i4 int4, f float8, n numeric, s text, v varchar(5),
		b bool, ts timestamptz, tsn timestamp, d date, u uuid, iv interval, j jsonb, by bytea, a int4[], tm time, n2 numeric(20,8));
		INSERT INTO h VALUES
		(1, -32768, 2147483647, 'NaN', 'NaN', '', 'abc', true, 'infinity', '-infinity', 'infinity', '00000000-0000-0000-0000-000000000001',
			'-1 mon 30 days -00:00:00.000001', '{"a": [1, 2.50]}', '\x00ff', '{1,NULL,3}', '24:00:00', 0),
		(2, NULL, NULL, '-0', '1.50', repeat('x', 300), NULL, false, '2024-02-29 12:34:56.789012+00', '4713-01-01 BC', '5874897-12-31', NULL,
			NULL, NULL, NULL, '{}', NULL, '-0.5'),
		(3, 7, -1, 1.5e-300, '-12345678901234567890.000001', 'ünï', 'z', NULL, NULL, '2000-01-01', '2000-01-01', NULL, '0', 'null', '\x', NULL, '00:00', 1e-5)`); err != nil {
		t.Fatal(err)
	}
	opts := query.DefaultOptions()
	opts.Catalog = query.NewPGCatalog(pool)
	plan, refusal, err := query.Compile(ctx, "SELECT * FROM h", nil, opts)
	if err != nil || refusal != nil {
		t.Fatalf("compile: %v %v", err, refusal)
	}
	args, oids, formats := plan.Args()
	req := ReadRequest{ID: 1, Plan: plan, Sources: []int{0}, SQL: plan.Render(query.RenderOptions{Columns: query.SelectNeeded}), Args: args, ArgOIDs: oids, ArgFormats: formats}
	if !heldReadable(req) {
		t.Fatal("heldReadable = false for a single-table read")
	}
	rd := &reader{pool: pool, log: newAppliedLog(), timeout: time.Minute}
	_, rows, complete, err := rd.read(ctx, req, appliedMark{})
	if err != nil {
		t.Fatal(err)
	}
	_, held, hcomplete, err := rd.readHeld(ctx, req, appliedMark{})
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != len(rows) || len(rows) != 3 || complete != hcomplete {
		t.Fatalf("readHeld = %d rows (complete %v), read = %d (complete %v), want 3 each", len(held), hcomplete, len(rows), complete)
	}
	for i, row := range rows {
		// The held encoding is exactly the encoding of the typed values
		// (what a streamed row's values encode to), byte for byte.
		if want, _ := encodeVals(nil, row[0]); held[i].enc != want.enc {
			t.Errorf("row %d: held encoding %q, want %q", i, held[i].enc, want.enc)
		}
		got := held[i].values()
		if len(got) != len(row[0]) {
			t.Fatalf("row %d: %d held values, want %d", i, len(got), len(row[0]))
		}
		for j, want := range row[0] {
			if !sameValue(got[j], want) {
				t.Errorf("row %d column %s: held %#v, read %#v", i, plan.Sources[0].Columns[j].Name, got[j], want)
			}
		}
	}
}
