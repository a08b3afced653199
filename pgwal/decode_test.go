package pgwal

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
)

var (
	ts1 = time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	ts2 = time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)

	// relT has a primary key (REPLICA IDENTITY DEFAULT).
	relT = &change.Relation{OID: 16384, Schema: "public", Table: "t", ReplicaIdentity: 'd', Columns: []change.Column{
		{Name: "id", TypeOID: 23, TypeMod: -1, Key: true},
		{Name: "v", TypeOID: 25, TypeMod: -1},
		{Name: "big", TypeOID: 25, TypeMod: -1},
	}}
	// relT2 is relT after ALTER TABLE t ADD COLUMN n numeric(10,2).
	relT2 = &change.Relation{OID: 16384, Schema: "public", Table: "t", ReplicaIdentity: 'd', Columns: []change.Column{
		{Name: "id", TypeOID: 23, TypeMod: -1, Key: true},
		{Name: "v", TypeOID: 25, TypeMod: -1},
		{Name: "big", TypeOID: 25, TypeMod: -1},
		{Name: "n", TypeOID: 1700, TypeMod: 655366},
	}}
	// relF is REPLICA IDENTITY FULL: every column is flagged key.
	relF = &change.Relation{OID: 16390, Schema: "s", Table: "f", ReplicaIdentity: 'f', Columns: []change.Column{
		{Name: "id", TypeOID: 23, TypeMod: -1, Key: true},
		{Name: "v", TypeOID: 25, TypeMod: -1, Key: true},
		{Name: "big", TypeOID: 25, TypeMod: -1, Key: true},
	}}
)

const (
	relTLine  = "  relation 16384 public.t ident=d (id 23 key, v 25, big 25)\n"
	relT2Line = "  relation 16384 public.t ident=d (id 23 key, v 25, big 25, n 1700(655366))\n"
	relFLine  = "  relation 16390 s.f ident=f (id 23 key, v 25 key, big 25 key)\n"
	txnLine   = "txn xid=7 commit=0/100 end=0/108 time=2026-01-02T03:04:05.123456Z frag=0 last\n"
)

func TestDecode(t *testing.T) {
	e := enc{}
	begin := encBegin(0x100, ts1, 7)
	commit := encCommit(0x100, 0x108, ts1)
	tests := []struct {
		name string
		opts DecoderOptions
		msgs [][]byte
		want string
	}{
		{
			name: "insert",
			msgs: [][]byte{begin, e.relation(relT), e.insert(16384, cols(txt("1"), txt("a"), null())), commit},
			want: txnLine + relTLine + `  insert public.t new=("1","a",NULL)` + "\n",
		},
		{
			name: "binary values",
			msgs: [][]byte{begin, e.relation(relT), e.insert(16384, cols(bin("\x00\x00\x00\x01"), bin("a"), null())), commit},
			want: txnLine + relTLine + `  insert public.t new=(x00000001,x61,NULL)` + "\n",
		},
		{
			name: "update without old tuple, unchanged TOAST stays unchanged",
			msgs: [][]byte{begin, e.relation(relT), e.update(16384, 0, nil, cols(txt("1"), txt("b"), toast())), commit},
			want: txnLine + relTLine + `  update public.t new=("1","b",UNCHANGED)` + "\n",
		},
		{
			name: "update of the key: key tuple, non-key columns absent",
			msgs: [][]byte{begin, e.relation(relT), e.update(16384, tupleKey, cols(txt("1"), null(), null()), cols(txt("2"), txt("b"), toast())), commit},
			want: txnLine + relTLine + `  update public.t key=("1",ABSENT,ABSENT) new=("2","b",UNCHANGED)` + "\n",
		},
		{
			name: "replica identity full: old row, TOAST filled from it, changed columns",
			msgs: [][]byte{begin, e.relation(relF), e.update(16390, tupleOld, cols(txt("1"), txt("a"), txt("long")), cols(txt("1"), txt("b"), toast())), commit},
			want: txnLine + relFLine + `  update s.f old=("1","a","long") new=("1","b","long") changed=010` + "\n",
		},
		{
			name: "replica identity full: null to value is a change, unchanged TOAST never is",
			msgs: [][]byte{begin, e.relation(relF), e.update(16390, tupleOld, cols(txt("1"), null(), toast()), cols(txt("1"), txt(""), toast())), commit},
			want: txnLine + relFLine + `  update s.f old=("1",NULL,UNCHANGED) new=("1","",UNCHANGED) changed=010` + "\n",
		},
		{
			name: "delete by key",
			msgs: [][]byte{begin, e.relation(relT), e.delete(16384, tupleKey, cols(txt("1"), null(), null())), commit},
			want: txnLine + relTLine + `  delete public.t key=("1",ABSENT,ABSENT)` + "\n",
		},
		{
			name: "delete whole row",
			msgs: [][]byte{begin, e.relation(relF), e.delete(16390, tupleOld, cols(txt("1"), null(), txt("x"))), commit},
			want: txnLine + relFLine + `  delete s.f old=("1",NULL,"x")` + "\n",
		},
		{
			name: "truncate flags",
			msgs: [][]byte{begin, e.relation(relT), e.relation(relF),
				e.truncate(0, 16384), e.truncate(truncateCascade, 16390), e.truncate(truncateRestartIdentity, 16384),
				e.truncate(truncateCascade|truncateRestartIdentity, 16384, 16390), commit},
			want: txnLine + relTLine + "  truncate public.t\n" + relFLine + "  truncate s.f cascade\n  truncate public.t restart\n  truncate public.t,s.f cascade restart\n",
		},
		{
			name: "transactional and non-transactional messages",
			msgs: [][]byte{
				e.message(false, 0x90, "app", "hello"),
				begin, e.message(true, 0xa0, "app", "in txn\x00bytes"), commit},
			want: "txn xid=0 commit=0/90 end=0/0 time=- frag=0 last\n" +
				`  message lsn=0/90 transactional=false prefix="app" content="hello"` + "\n" +
				txnLine + `  message lsn=0/A0 transactional=true prefix="app" content="in txn\x00bytes"` + "\n",
		},
		{
			name: "heartbeats are never user changes",
			opts: DecoderOptions{HeartbeatPrefix: "freshet_hb"},
			msgs: [][]byte{
				e.message(false, 0x90, "freshet_hb", "1 1767323045123456"),
				begin, e.message(true, 0xa0, "freshet_hb", "2 1767323046000000"), commit,
				begin, e.relation(relT), e.message(true, 0xa0, "freshet_hb", "3 1767323046000000"), e.insert(16384, cols(txt("1"), null(), null())), commit,
				e.message(false, 0x200, "freshet_hb", "not a heartbeat"),
				e.message(false, 0x210, "freshet_hb_other", "4 0"),
			},
			want: "heartbeat lsn=0/90 seq=1 written=2026-01-02T03:04:05.123456Z\n" +
				"heartbeat lsn=0/100 seq=2 written=2026-01-02T03:04:06Z\n" +
				txnLine + relTLine + `  insert public.t new=("1",NULL,NULL)` + "\n" +
				"heartbeat lsn=0/100 seq=3 written=2026-01-02T03:04:06Z\n" +
				"txn xid=0 commit=0/210 end=0/0 time=- frag=0 last\n" +
				`  message lsn=0/210 transactional=false prefix="freshet_hb_other" content="4 0"` + "\n",
		},
		{
			name: "origin",
			msgs: [][]byte{begin, encOrigin(0x5000, "node_a"), e.relation(relT), e.insert(16384, cols(txt("1"), null(), null())), commit},
			want: "txn xid=7 commit=0/100 end=0/108 time=2026-01-02T03:04:05.123456Z frag=0 last origin=\"node_a\"@0/5000\n" + relTLine + `  insert public.t new=("1",NULL,NULL)` + "\n",
		},
		{
			name: "empty transaction",
			msgs: [][]byte{begin, commit},
			want: txnLine,
		},
		{
			name: "relation emitted once, again when it changes",
			msgs: [][]byte{
				begin, e.relation(relT), e.insert(16384, cols(txt("1"), null(), null())), commit,
				begin, e.relation(relT), e.insert(16384, cols(txt("2"), null(), null())),
				e.relation(relT2), e.insert(16384, cols(txt("3"), null(), null(), txt("1.50"))), commit,
			},
			want: txnLine + relTLine + `  insert public.t new=("1",NULL,NULL)` + "\n" +
				txnLine + `  insert public.t new=("2",NULL,NULL)` + "\n" + relT2Line + `  insert public.t new=("3",NULL,NULL,"1.50")` + "\n",
		},
		{
			name: "fragments by change count",
			opts: DecoderOptions{FragmentChanges: 2},
			msgs: [][]byte{begin, e.relation(relT),
				e.insert(16384, cols(txt("1"), null(), null())), e.insert(16384, cols(txt("2"), null(), null())),
				e.insert(16384, cols(txt("3"), null(), null())), commit},
			want: "txn xid=7 commit=0/100 end=0/0 time=2026-01-02T03:04:05.123456Z frag=0\n" + relTLine + `  insert public.t new=("1",NULL,NULL)` + "\n" +
				"txn xid=7 commit=0/100 end=0/108 time=2026-01-02T03:04:05.123456Z frag=1 last\n" + `  insert public.t new=("2",NULL,NULL)` + "\n" + `  insert public.t new=("3",NULL,NULL)` + "\n",
		},
		{
			name: "fragments by bytes",
			opts: DecoderOptions{FragmentBytes: 10},
			msgs: [][]byte{begin, e.relation(relT),
				e.insert(16384, cols(txt("1"), null(), null())), e.insert(16384, cols(txt("2"), null(), null())), commit},
			want: "txn xid=7 commit=0/100 end=0/0 time=2026-01-02T03:04:05.123456Z frag=0\n" + relTLine + `  insert public.t new=("1",NULL,NULL)` + "\n" +
				"txn xid=7 commit=0/100 end=0/108 time=2026-01-02T03:04:05.123456Z frag=1 last\n" + `  insert public.t new=("2",NULL,NULL)` + "\n",
		},
		{
			name: "type messages are recorded, not emitted",
			msgs: [][]byte{begin, e.typ(70000, "public", "mood"), commit},
			want: txnLine,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(tt.opts)
			defer d.Close()
			got := render(feed(t, d, tt.msgs...))
			if got != tt.want {
				t.Errorf("events:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// streamedCase is a protocol 2 stream and its decoding.
type streamedCase struct {
	name string
	opts DecoderOptions
	msgs [][]byte
	want string
}

func streamedCases() []streamedCase {
	s7 := enc{stream: true, xid: 700}
	s7sub := enc{stream: true, xid: 701}
	s8 := enc{stream: true, xid: 800}
	e := enc{}
	ins := func(e enc, id string) []byte { return e.insert(16384, cols(txt(id), null(), null())) }
	return []streamedCase{
		{
			name: "chunks interleaved with a normal transaction",
			msgs: [][]byte{
				encStreamStart(700, true), s7.relation(relT), ins(s7, "1"), encStreamStop(),
				encBegin(0x200, ts1, 9), e.relation(relT), e.insert(16384, cols(txt("9"), null(), null())), encCommit(0x200, 0x208, ts1),
				encStreamStart(700, false), ins(s7, "2"), encStreamStop(),
				encStreamCommit(700, 0x300, 0x308, ts2),
			},
			want: "txn xid=9 commit=0/200 end=0/208 time=2026-01-02T03:04:05.123456Z frag=0 last\n" + relTLine + `  insert public.t new=("9",NULL,NULL)` + "\n" +
				"txn xid=700 commit=0/300 end=0/308 time=2026-01-02T03:04:06Z frag=0 last\n" +
				`  insert public.t new=("1",NULL,NULL)` + "\n" + `  insert public.t new=("2",NULL,NULL)` + "\n",
		},
		{
			name: "subtransaction abort drops only its changes",
			msgs: [][]byte{
				encStreamStart(700, true), s7.relation(relT), ins(s7, "1"), ins(s7sub, "2"), encStreamStop(),
				encStreamStart(700, false), ins(s7sub, "3"), encStreamStop(),
				encStreamAbort(700, 701),
				encStreamStart(700, false), ins(s7, "4"), encStreamStop(),
				encStreamCommit(700, 0x300, 0x308, ts2),
			},
			want: "txn xid=700 commit=0/300 end=0/308 time=2026-01-02T03:04:06Z frag=0 last\n" + relTLine +
				`  insert public.t new=("1",NULL,NULL)` + "\n" + `  insert public.t new=("4",NULL,NULL)` + "\n",
		},
		{
			name: "top-level abort drops everything",
			msgs: [][]byte{
				encStreamStart(700, true), s7.relation(relT), ins(s7, "1"), encStreamStop(),
				encStreamStart(800, true), s8.relation(relT), ins(s8, "8"), encStreamStop(),
				encStreamAbort(700, 700),
				encStreamCommit(800, 0x300, 0x308, ts2),
			},
			want: "txn xid=800 commit=0/300 end=0/308 time=2026-01-02T03:04:06Z frag=0 last\n" + relTLine +
				`  insert public.t new=("8",NULL,NULL)` + "\n",
		},
		{
			name: "relation change at its point in the stream",
			msgs: [][]byte{
				encStreamStart(700, true), s7.relation(relT), ins(s7, "1"), s7.relation(relT2), encStreamStop(),
				encStreamStart(700, false), s7.insert(16384, cols(txt("2"), null(), null(), txt("1.50"))), encStreamStop(),
				encStreamCommit(700, 0x300, 0x308, ts2),
				encBegin(0x400, ts2, 9), e.insert(16384, cols(txt("3"), null(), null(), txt("2.00"))), encCommit(0x400, 0x408, ts2),
			},
			want: "txn xid=700 commit=0/300 end=0/308 time=2026-01-02T03:04:06Z frag=0 last\n" + relTLine +
				`  insert public.t new=("1",NULL,NULL)` + "\n" + relT2Line + `  insert public.t new=("2",NULL,NULL,"1.50")` + "\n" +
				"txn xid=9 commit=0/400 end=0/408 time=2026-01-02T03:04:06Z frag=0 last\n" + `  insert public.t new=("3",NULL,NULL,"2.00")` + "\n",
		},
		{
			name: "spilled to disk, fragments, subtransaction abort across the spill",
			opts: DecoderOptions{MemoryLimit: 64, FragmentChanges: 2},
			msgs: [][]byte{
				encStreamStart(700, true), s7.relation(relT), ins(s7, "1"), ins(s7sub, "2"), encStreamStop(),
				encStreamAbort(700, 701),
				encStreamStart(700, false), ins(s7, "3"), ins(s7, "4"), encStreamStop(),
				encStreamCommit(700, 0x300, 0x308, ts2),
			},
			want: "txn xid=700 commit=0/300 end=0/308 time=2026-01-02T03:04:06Z frag=0\n" + relTLine + `  insert public.t new=("1",NULL,NULL)` + "\n" +
				"txn xid=700 commit=0/300 end=0/308 time=2026-01-02T03:04:06Z frag=1 last\n" + `  insert public.t new=("3",NULL,NULL)` + "\n" + `  insert public.t new=("4",NULL,NULL)` + "\n",
		},
		{
			name: "a first segment again restarts the transaction",
			opts: DecoderOptions{MemoryLimit: 16},
			msgs: [][]byte{
				encStreamStart(700, true), s7.relation(relT), ins(s7, "1"), encStreamStop(),
				encStreamStart(700, true), encOrigin(0, "node_b"), s7.relation(relT), ins(s7, "2"), encStreamStop(),
				encStreamCommit(700, 0x300, 0x308, ts2),
			},
			want: "txn xid=700 commit=0/300 end=0/308 time=2026-01-02T03:04:06Z frag=0 last origin=\"node_b\"@0/0\n" + relTLine +
				`  insert public.t new=("2",NULL,NULL)` + "\n",
		},
		{
			name: "streamed heartbeats and a non-transactional message",
			opts: DecoderOptions{HeartbeatPrefix: "hb"},
			msgs: [][]byte{
				encStreamStart(700, true), s7.message(true, 0x250, "hb", "5 1767323046000000"), s7.message(false, 0x260, "app", "now"), encStreamStop(),
				encStreamCommit(700, 0x300, 0x308, ts2),
			},
			want: "txn xid=0 commit=0/260 end=0/0 time=- frag=0 last\n" + `  message lsn=0/260 transactional=false prefix="app" content="now"` + "\n" +
				"heartbeat lsn=0/300 seq=5 written=2026-01-02T03:04:06Z\n",
		},
	}
}

func TestDecodeStreamed(t *testing.T) {
	for _, tt := range streamedCases() {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.ProtoVersion = 2
			tt.opts.SpillDir = t.TempDir()
			d := NewDecoder(tt.opts)
			defer d.Close()
			got := render(feed(t, d, tt.msgs...))
			if got != tt.want {
				t.Errorf("events:\n%s\nwant:\n%s", got, tt.want)
			}
			if left := spillFiles(t, tt.opts.SpillDir); len(left) != 0 {
				t.Errorf("spill files left after commit: %v", left)
			}
		})
	}
}

func spillFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDecodeSpillFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	s := enc{stream: true, xid: 700}
	d := NewDecoder(DecoderOptions{ProtoVersion: 2, MemoryLimit: 16, SpillDir: dir})
	feed(t, d, encStreamStart(700, true), s.relation(relT), s.insert(16384, cols(txt("1"), null(), null())), encStreamStop())
	if n := len(spillFiles(t, dir)); n != 1 {
		t.Fatalf("spill files while streaming = %d, want 1", n)
	}
	feed(t, d, encStreamAbort(700, 700))
	if n := len(spillFiles(t, dir)); n != 0 {
		t.Fatalf("spill files after abort = %d, want 0", n)
	}
	feed(t, d, encStreamStart(701, true), s.relation(relT), encStreamStop())
	if n := len(spillFiles(t, dir)); n != 1 {
		t.Fatalf("spill files while streaming = %d, want 1", n)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(spillFiles(t, dir)); n != 0 {
		t.Fatalf("spill files after Close = %d, want 0", n)
	}
}

func TestDecodeCopiesMessage(t *testing.T) {
	d := NewDecoder(DecoderOptions{})
	e := enc{}
	msg := e.insert(16384, cols(txt("1"), txt("abc"), null()))
	feed(t, d, encBegin(0x100, ts1, 7), e.relation(relT))
	if err := d.Decode(msg, 0x100); err != nil {
		t.Fatal(err)
	}
	for i := range msg {
		msg[i] = 'X'
	}
	evs := feed(t, d, encCommit(0x100, 0x108, ts1))
	want := txnLine + relTLine + `  insert public.t new=("1","abc",NULL)` + "\n"
	if got := render(evs); got != want {
		t.Errorf("after the caller reused its buffer, events:\n%s\nwant:\n%s", got, want)
	}
}

func TestDecodeRelationAndType(t *testing.T) {
	d := NewDecoder(DecoderOptions{})
	e := enc{}
	feed(t, d, encBegin(0x100, ts1, 7), e.relation(relT), e.typ(70000, "public", "mood"), e.relation(relT2), encCommit(0x100, 0x108, ts1))
	r, ok := d.Relation(16384)
	if !ok {
		t.Fatal("Relation(16384) not found")
	}
	if !sameRelation(r, relT2) {
		t.Errorf("Relation(16384) = %+v, want %+v", r, relT2)
	}
	if _, ok := d.Relation(1); ok {
		t.Error("Relation(1) found, want not found")
	}
	typ, ok := d.Type(70000)
	if !ok || typ.Schema != "public" || typ.Name != "mood" || typ.OID != 70000 {
		t.Errorf("Type(70000) = %+v, %v; want public.mood", typ, ok)
	}
}

func TestDecodeErrors(t *testing.T) {
	e := enc{}
	begin := encBegin(0x100, ts1, 7)
	tests := []struct {
		name     string
		proto    int
		setup    [][]byte
		msg      []byte
		typ      byte
		offset   int
		contains string
	}{
		{name: "empty", msg: []byte{}, contains: "empty message"},
		{name: "unknown type", msg: []byte{'Z', 1, 2}, typ: 'Z', contains: `'Z' (0x5a)`},
		{name: "short begin", msg: encBegin(1, ts1, 7)[:10], typ: 'B', offset: 9, contains: "commit time"},
		{name: "trailing bytes", msg: append(encCommit(1, 2, ts1), 0), typ: 'C', offset: 26, contains: "1 unexpected bytes"},
		{name: "commit outside transaction", msg: encCommit(1, 2, ts1), typ: 'C', contains: "Commit outside a transaction"},
		{name: "begin inside transaction", setup: [][]byte{begin}, msg: begin, typ: 'B', contains: "inside transaction 7"},
		{name: "insert outside transaction", setup: [][]byte{e.relation(relT)}, msg: e.insert(16384, cols(txt("1"), null(), null())), typ: 'I', contains: "outside a transaction"},
		{name: "unknown relation", setup: [][]byte{begin}, msg: e.insert(99, cols(txt("1"))), typ: 'I', offset: 5, contains: "relation OID 99 used before"},
		{name: "column count mismatch", setup: [][]byte{begin, e.relation(relT)}, msg: e.insert(16384, cols(txt("1"))), typ: 'I', offset: 6, contains: "tuple has 1 columns"},
		{name: "unknown column kind", setup: [][]byte{begin, e.relation(relT)}, msg: e.insert(16384, cols(col{kind: 'x'}, null(), null())), typ: 'I', offset: 8, contains: "unknown tuple column kind 0x78"},
		{name: "value longer than message", setup: [][]byte{begin, e.relation(relT)}, msg: buf{msgInsert}.u32(16384).u8('N').u16(3).u8('t').u32(1000).append("ab"), typ: 'I', offset: 9, contains: "exceeds the message"},
		{name: "key tuple too wide", setup: [][]byte{begin, e.relation(relT)}, msg: e.update(16384, tupleKey, cols(txt("1"), null(), null(), null(), null()), cols(txt("1"), null(), null())), typ: 'U', offset: 6, contains: "tuple has 5 columns"},
		{name: "deleted key tuple too wide", setup: [][]byte{begin, e.relation(relT)}, msg: e.delete(16384, tupleKey, cols(txt("1"), null(), null(), null(), null())), typ: 'D', offset: 6, contains: "tuple has 5 columns"},
		{name: "bad insert marker", setup: [][]byte{begin, e.relation(relT)}, msg: buf{msgInsert}.u32(16384).u8('K').tuple(cols(txt("1"), null(), null())), typ: 'I', offset: 5, contains: "want 'N'"},
		{name: "bad update marker", setup: [][]byte{begin, e.relation(relT)}, msg: buf{msgUpdate}.u32(16384).u8('Q').tuple(cols(txt("1"), null(), null())), typ: 'U', offset: 5, contains: "want 'K', 'O' or 'N'"},
		{name: "relation string not terminated", msg: buf{msgRelation}.u32(1).append("public"), typ: 'R', offset: 5, contains: "namespace is not NUL-terminated"},
		{name: "relation column count too large", msg: buf{msgRelation}.u32(1).str("s").str("t").u8('d').u16(5000), typ: 'R', contains: "column count 5000 exceeds"},
		{name: "truncate count too large", setup: [][]byte{begin}, msg: buf{msgTruncate}.u32(1 << 30).u8(0), typ: 'T', contains: "relation count 1073741824 exceeds"},
		{name: "stream under protocol 1", proto: 1, msg: encStreamStart(700, true), typ: 'S', contains: "needs version 2"},
		{name: "stream stop outside block", proto: 2, msg: encStreamStop(), typ: 'E', contains: "outside a stream block"},
		{name: "begin in stream block", proto: 2, setup: [][]byte{encStreamStart(700, true)}, msg: begin, typ: 'B', contains: "not allowed inside the stream block of transaction 700"},
		{name: "segment without first", proto: 2, msg: encStreamStart(700, false), typ: 'S', contains: "first segment was not seen"},
		{name: "stream commit unknown", proto: 2, msg: encStreamCommit(700, 1, 2, ts1), typ: 'c', contains: "never streamed"},
		{name: "bad streamed delete marker", proto: 2, setup: [][]byte{encStreamStart(700, true)}, msg: buf{msgDelete}.u32(700).u32(16384).u8('N').tuple(cols(txt("1"))), typ: 'D', offset: 9, contains: "Delete tuple marker 'N'"},
		{name: "malformed streamed insert", proto: 2, setup: [][]byte{encStreamStart(700, true)}, msg: buf{msgInsert}.u32(700).u32(16384).u8('N').u16(3).u8('t').u32(1000).append("ab"), typ: 'I', offset: 13, contains: "exceeds the message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(DecoderOptions{ProtoVersion: tt.proto, SpillDir: t.TempDir()})
			defer d.Close()
			feed(t, d, tt.setup...)
			err := d.Decode(tt.msg, 0x4242)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode error = %v, want a *DecodeError", err)
			}
			if de.Type != tt.typ {
				t.Errorf("Type = %q, want %q", de.Type, tt.typ)
			}
			if tt.offset != 0 && de.Offset != tt.offset {
				t.Errorf("Offset = %d, want %d (%v)", de.Offset, tt.offset, err)
			}
			if de.LSN != 0x4242 {
				t.Errorf("LSN = %v, want 0/4242", de.LSN)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("error %q does not contain %q", err, tt.contains)
			}
		})
	}
}

// A caller that does not drain Next before the next Decode still gets
// every event, in order.
func TestDecodeUndrained(t *testing.T) {
	s := enc{stream: true, xid: 700}
	e := enc{}
	d := NewDecoder(DecoderOptions{ProtoVersion: 2, FragmentChanges: 1, SpillDir: t.TempDir()})
	defer d.Close()
	msgs := [][]byte{
		e.message(false, 0x90, "app", "first"),
		encStreamStart(700, true), s.relation(relT), s.insert(16384, cols(txt("1"), null(), null())), s.insert(16384, cols(txt("2"), null(), null())), encStreamStop(),
		encStreamCommit(700, 0x300, 0x308, ts2),
		e.message(false, 0x400, "app", "last"),
	}
	for i, m := range msgs {
		if err := d.Decode(m, change.LSN(i)); err != nil {
			t.Fatal(err)
		}
	}
	var evs []change.Event
	for {
		ev, err := d.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev == nil {
			break
		}
		evs = append(evs, ev)
	}
	want := "txn xid=0 commit=0/90 end=0/0 time=- frag=0 last\n" + `  message lsn=0/90 transactional=false prefix="app" content="first"` + "\n" +
		"txn xid=700 commit=0/300 end=0/308 time=2026-01-02T03:04:06Z frag=0\n" + relTLine +
		"txn xid=700 commit=0/300 end=0/308 time=2026-01-02T03:04:06Z frag=1\n" + `  insert public.t new=("1",NULL,NULL)` + "\n" +
		"txn xid=700 commit=0/300 end=0/308 time=2026-01-02T03:04:06Z frag=2 last\n" + `  insert public.t new=("2",NULL,NULL)` + "\n" +
		"txn xid=0 commit=0/400 end=0/0 time=- frag=0 last\n" + `  message lsn=0/400 transactional=false prefix="app" content="last"` + "\n"
	if got := render(evs); got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
}

// A streamed transaction of a million rows, spilled past a 4 MiB memory
// limit, is read back one fragment at a time: the heap never holds it
// whole.
func TestDecodeStreamedMillionRowsBoundedMemory(t *testing.T) {
	if testing.Short() || decodeRace {
		t.Skip("a million rows: not in -short or -race runs")
	}
	// Decoded at the commit, or encoded as it arrives and kept in that
	// form (freshet tail's JSON): the same bound either way.
	for _, e := range []StreamEncoder{nil, change.JSONEncoder{}} {
		t.Run(fmt.Sprintf("encoder %T", e), func(t *testing.T) { streamedMillionRows(t, e) })
	}
}

func streamedMillionRows(t *testing.T, e StreamEncoder) {
	const rows = 1_000_000
	dir := t.TempDir()
	d := NewDecoder(DecoderOptions{ProtoVersion: 2, MemoryLimit: 4 << 20, SpillDir: dir, StreamEncoder: e})
	defer d.Close()
	sample, peak := liveHeap()
	streamRows(t, d, dir, rows, sample)
	var out bytes.Buffer
	jw := change.NewTxnJSONWriter(&out)
	var got, frags int
	row := func(id []byte) {
		if want := strconv.Itoa(got); string(id) != want {
			t.Fatalf("row %d has id %s, want %s", got, id, want)
		}
		got++
	}
	for {
		ev, err := d.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev == nil {
			break
		}
		tx := ev.(*change.Txn)
		if e != nil && len(tx.Changes) > 0 {
			t.Fatalf("fragment %d carries %d decoded changes, want encoded bytes only", tx.Fragment, len(tx.Changes))
		}
		for _, c := range tx.Changes {
			if c.Op == change.OpInsert {
				row(c.New[0].Data)
			}
		}
		if e != nil {
			// Check the printed rows' order as they go, holding none.
			out.Reset()
			if err := jw.Write(tx); err != nil {
				t.Fatal(err)
			}
			const key = `"new":{"id":"`
			for b := out.Bytes(); bytes.Contains(b, []byte(key)); {
				b = b[bytes.Index(b, []byte(key))+len(key):]
				row(b[:bytes.IndexByte(b, '"')])
			}
		}
		if frags++; frags%20 == 0 {
			sample()
		}
	}
	if got != rows {
		t.Fatalf("rows read back = %d, want %d", got, rows)
	}
	if n := len(spillFiles(t, dir)); n != 0 {
		t.Errorf("spill files after commit = %d, want 0", n)
	}
	// Held whole, the transaction would take over 200 MiB of heap; its
	// buffered records alone, unspilled, over 50 MiB.
	const bound = 24 << 20
	t.Logf("peak live heap %.1f MiB over %d fragments", float64(*peak)/(1<<20), frags)
	if *peak > bound {
		t.Errorf("peak live heap %d bytes, want at most %d", *peak, bound)
	}
}

// liveHeap returns a function that samples the live heap (after a GC)
// and the peak it has seen.
func liveHeap() (sample func(), peak *uint64) {
	peak = new(uint64)
	return func() {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		*peak = max(*peak, ms.HeapAlloc)
	}, peak
}

// streamRows streams one transaction of rows inserts into d (xid 700, in
// blocks of 50,000, sampling after each) and commits it, checking that
// nothing is delivered before the commit and that it spilled.
func streamRows(t *testing.T, d *Decoder, dir string, rows int, sample func()) {
	t.Helper()
	s := enc{stream: true, xid: 700}
	decode := func(m []byte) {
		t.Helper()
		if err := d.Decode(m, 1); err != nil {
			t.Fatal(err)
		}
		if ev, err := d.Next(); ev != nil || err != nil {
			t.Fatalf("Next while streaming = %v, %v; want nothing", ev, err)
		}
	}
	msg := make([]byte, 0, 64)
	for i := 0; i < rows; i++ {
		if i%50_000 == 0 {
			if i > 0 {
				decode(encStreamStop())
				sample()
			}
			decode(encStreamStart(700, i == 0))
			if i == 0 {
				decode(s.relation(relT))
			}
		}
		msg = append(msg[:0], s.insert(16384, cols(txt(strconv.Itoa(i)), txt("some text value"), null()))...)
		decode(msg)
	}
	decode(encStreamStop())
	if n := len(spillFiles(t, dir)); n != 1 {
		t.Fatalf("spill files before commit = %d, want 1", n)
	}
	if err := d.Decode(encStreamCommit(700, 0x300, 0x308, ts2), 2); err != nil {
		t.Fatal(err)
	}
}

// A million-row transaction sent whole at its commit (protocol 1) is
// emitted fragment by fragment as its messages arrive: memory is bounded
// by the fragment size.
func TestDecodeMillionRowsBoundedMemory(t *testing.T) {
	if testing.Short() || decodeRace {
		t.Skip("a million rows: not in -short or -race runs")
	}
	const rows = 1_000_000
	d := NewDecoder(DecoderOptions{})
	defer d.Close()
	e := enc{}
	feed(t, d, encBegin(0x100, ts1, 7), e.relation(relT))
	var peak uint64
	var got, frags int
	drain := func() {
		t.Helper()
		for {
			ev, err := d.Next()
			if err != nil {
				t.Fatal(err)
			}
			if ev == nil {
				return
			}
			tx := ev.(*change.Txn)
			if tx.Fragment != frags {
				t.Fatalf("fragment %d, want %d", tx.Fragment, frags)
			}
			for _, c := range tx.Changes {
				if c.Op == change.OpInsert {
					got++
				}
			}
			if frags++; frags%20 == 0 {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
			}
		}
	}
	msg := make([]byte, 0, 64)
	for i := 0; i < rows; i++ {
		msg = append(msg[:0], e.insert(16384, cols(txt(strconv.Itoa(i)), txt("some text value"), null()))...)
		if err := d.Decode(msg, 0x100); err != nil {
			t.Fatal(err)
		}
		drain()
	}
	if frags == 0 {
		t.Fatal("no fragment before Commit")
	}
	if err := d.Decode(encCommit(0x100, 0x108, ts1), 0x108); err != nil {
		t.Fatal(err)
	}
	drain()
	if got != rows {
		t.Fatalf("rows = %d, want %d", got, rows)
	}
	const bound = 24 << 20
	t.Logf("peak live heap %.1f MiB over %d fragments", float64(peak)/(1<<20), frags)
	if peak > bound {
		t.Errorf("peak live heap %d bytes, want at most %d", peak, bound)
	}
}

// Reset drops what was not committed, as after a reconnect, and the
// resent stream decodes as if from the start.
func TestDecodeReset(t *testing.T) {
	dir := t.TempDir()
	e, s := enc{}, enc{stream: true, xid: 700}
	d := NewDecoder(DecoderOptions{ProtoVersion: 2, MemoryLimit: 16, SpillDir: dir})
	defer d.Close()
	feed(t, d, encStreamStart(700, true), s.relation(relT), s.insert(16384, cols(txt("1"), null(), null())), encStreamStop(),
		encBegin(0x100, ts1, 7), e.relation(relT), e.insert(16384, cols(txt("2"), null(), null())))
	if err := d.Reset(); err != nil {
		t.Fatal(err)
	}
	if left := spillFiles(t, dir); len(left) != 0 {
		t.Errorf("spill files after Reset: %v", left)
	}
	got := render(feed(t, d, encBegin(0x100, ts1, 7), e.insert(16384, cols(txt("2"), null(), null())), encCommit(0x100, 0x108, ts1)))
	want := txnLine + relTLine + `  insert public.t new=("2",NULL,NULL)` + "\n"
	if got != want {
		t.Errorf("after Reset, events:\n%s\nwant:\n%s", got, want)
	}
	if _, err := feedErr(d, encStreamCommit(700, 0x300, 0x308, ts2)); err == nil || !strings.Contains(err.Error(), "never streamed") {
		t.Errorf("Stream Commit of a transaction dropped by Reset: error %v, want \"never streamed\"", err)
	}
}

type fakeTypes map[uint32]change.Type

func (f fakeTypes) Type(oid uint32) (change.Type, bool) { t, ok := f[oid]; return t, ok }

// Type prefers the resolver's full knowledge and falls back to Type
// messages.
func TestDecodeTypeResolver(t *testing.T) {
	dom := change.Type{OID: 70001, Schema: "public", Name: "posint", Kind: change.KindDomain, Base: 23}
	d := NewDecoder(DecoderOptions{Types: fakeTypes{70001: dom}})
	feed(t, d, enc{}.typ(70000, "public", "mood"), enc{}.typ(70001, "public", "posint"))
	if got, ok := d.Type(70001); !ok || got != dom {
		t.Errorf("Type(70001) = %+v, %v; want the resolver's %+v", got, ok, dom)
	}
	want := change.Type{OID: 70000, Schema: "public", Name: "mood", Kind: change.KindOther}
	if got, ok := d.Type(70000); !ok || got != want {
		t.Errorf("Type(70000) = %+v, %v; want %+v from the Type message", got, ok, want)
	}
	if _, ok := d.Type(1); ok {
		t.Error("Type(1) found, want not found")
	}
}

// TestDecodeStreamedChunkBoundaries streams records of many sizes, so that
// they cross chunk boundaries and some are larger than a chunk, with a
// subtransaction aborted in between, kept in memory or spilled part way.
// Every kept row must come back whole and in order, and the decoder must
// hold no chunk once the transaction is gone.
func TestDecodeStreamedChunkBoundaries(t *testing.T) {
	tests := []struct {
		name  string
		limit int64
		spill bool
	}{
		{name: "in memory", limit: 8 << 20},
		{name: "spilled part way", limit: 256 << 10, spill: true},
		{name: "limit below one chunk", limit: 1000, spill: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			d := NewDecoder(DecoderOptions{ProtoVersion: 2, MemoryLimit: tt.limit, SpillDir: dir, FragmentChanges: 50})
			defer d.Close()
			d.chunk = minStreamChunk // small chunks, so records cross them
			s7 := enc{stream: true, xid: 700}
			s7sub := enc{stream: true, xid: 701}
			msgs := [][]byte{encStreamStart(700, true), s7.relation(relT)}
			var want []string
			for i := 0; i < 300; i++ {
				v := strings.Repeat(string(rune('a'+i%26)), (i*997)%(3*d.chunk+7))
				e := s7
				if i%3 == 1 {
					e = s7sub
				} else {
					want = append(want, strconv.Itoa(i)+"="+v)
				}
				msgs = append(msgs, e.insert(16384, cols(txt(strconv.Itoa(i)), txt(v), null())))
				if i == 150 {
					msgs = append(msgs, encStreamStop(), encStreamAbort(700, 701), encStreamStart(700, false))
				}
			}
			msgs = append(msgs, encStreamStop())
			feed(t, d, msgs...)
			if got := len(spillFiles(t, dir)) == 1; got != tt.spill {
				t.Errorf("spilled = %v, want %v", got, tt.spill)
			}
			evs := feed(t, d, encStreamCommit(700, 0x300, 0x308, ts2))
			var got []string
			for _, ev := range evs {
				for _, c := range ev.(*change.Txn).Changes {
					if c.Op == change.OpInsert {
						got = append(got, string(c.New[0].Data)+"="+string(c.New[1].Data))
					}
				}
			}
			if len(got) != len(want) {
				t.Fatalf("got %d rows, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("row %d: got %.40q (%d bytes), want %.40q (%d bytes)", i, got[i], len(got[i]), want[i], len(want[i]))
				}
			}
			if d.memUsed != 0 || len(d.free) != 0 {
				t.Errorf("after commit: memUsed %d, %d free chunks; want 0, 0", d.memUsed, len(d.free))
			}
		})
	}
}
