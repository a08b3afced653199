package pgwal

import (
	"runtime"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/jackc/pglogrepl"
)

// The decode benchmarks measure the cost per row of turning one pgoutput
// change message into a change, ours against pglogrepl's ParseV2 on the
// same bytes. Ours runs inside an open transaction and drains Next, so the
// cost of cutting fragments is included.
//
//	go test ./pgwal -run XXX -bench 'BenchmarkDecode(Insert|Update)' -benchmem

var (
	benchSmall = &change.Relation{OID: 20000, Schema: "public", Table: "small", ReplicaIdentity: 'd', Columns: []change.Column{
		{Name: "id", TypeOID: 20, TypeMod: -1, Key: true},
		{Name: "name", TypeOID: 25, TypeMod: -1},
		{Name: "active", TypeOID: 16, TypeMod: -1},
	}}
	benchSmallRow = cols(txt("1234567"), txt("alice"), txt("t"))

	benchWide = &change.Relation{OID: 20001, Schema: "public", Table: "wide", ReplicaIdentity: 'd', Columns: []change.Column{
		{Name: "id", TypeOID: 20, TypeMod: -1, Key: true},
		{Name: "account", TypeOID: 23, TypeMod: -1},
		{Name: "email", TypeOID: 1043, TypeMod: 259},
		{Name: "name", TypeOID: 25, TypeMod: -1},
		{Name: "balance", TypeOID: 1700, TypeMod: 1310726},
		{Name: "score", TypeOID: 701, TypeMod: -1},
		{Name: "active", TypeOID: 16, TypeMod: -1},
		{Name: "created", TypeOID: 1184, TypeMod: -1},
		{Name: "ref", TypeOID: 2950, TypeMod: -1},
		{Name: "note", TypeOID: 25, TypeMod: -1},
	}}
	benchWideRow = cols(txt("1234567"), txt("42"), txt("alice@example.com"), txt("Alice Liddell"), txt("12345.67"),
		txt("0.875"), txt("t"), txt("2026-11-30 14:07:50.123456+00"), txt("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), null())
)

func benchDecode(b *testing.B, rel *change.Relation, msg []byte) {
	e := enc{}
	d := NewDecoder(DecoderOptions{})
	defer d.Close()
	feed(b, d, encBegin(0x100, ts1, 7), e.relation(rel))
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	b.ResetTimer()
	defer allocsPerRow(b)()
	for i := 0; i < b.N; i++ {
		if err := d.Decode(msg, 0x100); err != nil {
			b.Fatal(err)
		}
		for {
			ev, err := d.Next()
			if err != nil {
				b.Fatal(err)
			}
			if ev == nil {
				break
			}
		}
	}
}

func benchPglogrepl(b *testing.B, msg []byte) {
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	b.ResetTimer()
	defer allocsPerRow(b)()
	for i := 0; i < b.N; i++ {
		if _, err := pglogrepl.ParseV2(msg, false); err != nil {
			b.Fatal(err)
		}
	}
}

// allocsPerRow reports allocations per row with fractions, which allocs/op
// rounds away: call it before the loop and its result after.
func allocsPerRow(b *testing.B) func() {
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	return func() {
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N), "allocs/row")
	}
}

func BenchmarkDecodeInsert(b *testing.B) {
	e := enc{}
	for _, tc := range []struct {
		name string
		rel  *change.Relation
		row  []col
	}{
		{"small", benchSmall, benchSmallRow},
		{"10col", benchWide, benchWideRow},
	} {
		msg := e.insert(tc.rel.OID, tc.row)
		b.Run(tc.name+"/freshet", func(b *testing.B) { benchDecode(b, tc.rel, msg) })
		b.Run(tc.name+"/pglogrepl", func(b *testing.B) { benchPglogrepl(b, msg) })
	}
}

func BenchmarkDecodeUpdate(b *testing.B) {
	e := enc{}
	smallNew := cols(txt("1234567"), txt("bob"), txt("f"))
	wideNew := append(cols(), benchWideRow...)
	wideNew[4], wideNew[9] = txt("99.00"), toast()
	for _, tc := range []struct {
		name string
		rel  *change.Relation
		msg  []byte
	}{
		// REPLICA IDENTITY DEFAULT, key unchanged: the new row only.
		{"small", benchSmall, e.update(benchSmall.OID, 0, nil, smallNew)},
		{"10col", benchWide, e.update(benchWide.OID, 0, nil, wideNew)},
		// REPLICA IDENTITY FULL: old row and new row, Changed computed.
		{"10col-full", benchWide, e.update(benchWide.OID, tupleOld, benchWideRow, wideNew)},
	} {
		b.Run(tc.name+"/freshet", func(b *testing.B) { benchDecode(b, tc.rel, tc.msg) })
		b.Run(tc.name+"/pglogrepl", func(b *testing.B) { benchPglogrepl(b, tc.msg) })
	}
}

// BenchmarkDecodeStreamed measures the cost per row of a transaction
// streamed while in progress (protocol 2): each row kept in the stream
// buffer (spilled past the default 64 MiB MemoryLimit) and, after Stream
// Commit, read back fragment by fragment: decoded then (at-commit), or
// decoded as it arrived and kept encoded, as freshet tail does
// (encoded-none: --format none, encoded-json). arrive-ns/row is the time
// spent while the transaction streams, commit-ns/row the time from its
// Stream Commit to its last fragment. Run it with -benchtime 1000000x to
// stream one million-row transaction.
func BenchmarkDecodeStreamed(b *testing.B) {
	for _, bc := range []struct {
		name string
		enc  StreamEncoder
	}{{"at-commit", nil}, {"encoded-none", nothing{}}, {"encoded-json", change.JSONEncoder{}}} {
		b.Run(bc.name, func(b *testing.B) { benchDecodeStreamed(b, bc.enc) })
	}
}

func benchDecodeStreamed(b *testing.B, e StreamEncoder) {
	s := enc{stream: true, xid: 700}
	d := NewDecoder(DecoderOptions{ProtoVersion: 2, SpillDir: b.TempDir(), StreamEncoder: e})
	defer d.Close()
	msg := s.insert(benchSmall.OID, benchSmallRow)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	b.ResetTimer()
	defer allocsPerRow(b)()
	decode := func(m []byte) {
		if err := d.Decode(m, 0x100); err != nil {
			b.Fatal(err)
		}
	}
	t0 := time.Now()
	decode(encStreamStart(700, true))
	decode(s.relation(benchSmall))
	for i := 0; i < b.N; i++ {
		if i > 0 && i%10_000 == 0 {
			decode(encStreamStop())
			decode(encStreamStart(700, false))
		}
		decode(msg)
	}
	decode(encStreamStop())
	t1 := time.Now()
	decode(encStreamCommit(700, 0x300, 0x308, ts2))
	rows, encoded := 0, 0
	for {
		ev, err := d.Next()
		if err != nil {
			b.Fatal(err)
		}
		if ev == nil {
			break
		}
		rows += len(ev.(*change.Txn).Changes)
		encoded += len(ev.(*change.Txn).Encoded)
	}
	t2 := time.Now()
	if e == nil && rows < b.N {
		b.Fatalf("read back %d changes, want at least %d", rows, b.N)
	}
	if _, ok := e.(change.JSONEncoder); ok && encoded < b.N {
		b.Fatalf("read back %d encoded bytes for %d rows", encoded, b.N)
	}
	b.ReportMetric(float64(t1.Sub(t0).Nanoseconds())/float64(b.N), "arrive-ns/row")
	b.ReportMetric(float64(t2.Sub(t1).Nanoseconds())/float64(b.N), "commit-ns/row")
}
