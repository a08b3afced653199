package pgwal

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
)

// xlogDataMessage builds an XLogData CopyData payload.
func xlogDataMessage(walStart, walEnd change.LSN, payload string) []byte {
	w := []byte{'w'}
	w = binary.BigEndian.AppendUint64(w, uint64(walStart))
	w = binary.BigEndian.AppendUint64(w, uint64(walEnd))
	w = binary.BigEndian.AppendUint64(w, 12345)
	return append(w, payload...)
}

func TestParseCopyData(t *testing.T) {
	w := xlogDataMessage(0x1_00000010, 0x1_00000020, "Bpayload")
	k := []byte{'k'}
	k = binary.BigEndian.AppendUint64(k, 0x2_00000000)
	k = binary.BigEndian.AppendUint64(k, 1)
	kReply := append(bytes.Clone(k), 1)
	k = append(k, 0)
	tests := []struct {
		name    string
		in      []byte
		wantX   *xlogData
		wantK   *keepalive
		wantErr bool
	}{
		{"xlogdata", w, &xlogData{WALStart: 0x1_00000010, ServerWALEnd: 0x1_00000020, Data: []byte("Bpayload")}, nil, false},
		{"keepalive", k, nil, &keepalive{ServerWALEnd: 0x2_00000000}, false},
		{"keepalive asking for a reply", kReply, nil, &keepalive{ServerWALEnd: 0x2_00000000, ReplyRequested: true}, false},
		{"empty", nil, nil, nil, true},
		{"short xlogdata", w[:24], nil, nil, true},
		{"short keepalive", k[:17], nil, nil, true},
		{"unknown", []byte{'z', 1}, nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, ka, err := parseCopyData(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			var gotX *xlogData
			if ka == nil && err == nil {
				gotX = &x
			}
			if !reflect.DeepEqual(gotX, tt.wantX) {
				t.Errorf("xlogData = %+v, want %+v", gotX, tt.wantX)
			}
			if !reflect.DeepEqual(ka, tt.wantK) {
				t.Errorf("keepalive = %+v, want %+v", ka, tt.wantK)
			}
		})
	}
}

// TestParseCopyDataAllocs pins what the receiver pays per XLogData: no
// allocation (the result was a pointer once, one heap object per message
// of every stream).
func TestParseCopyDataAllocs(t *testing.T) {
	w := xlogDataMessage(0x10, 0x20, "Ipayload")
	var n int
	allocs := testing.AllocsPerRun(100, func() {
		x, _, err := parseCopyData(w)
		if err == nil {
			n += len(x.Data) + int(x.WALStart)
		}
	})
	if allocs != 0 {
		t.Errorf("parseCopyData(XLogData): %v allocations, want 0", allocs)
	}
	if n == 0 {
		t.Fatal("parseCopyData(XLogData) returned no payload")
	}
}

func FuzzParseCopyData(f *testing.F) {
	f.Add([]byte{'w', 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 'B'})
	f.Add([]byte{'k', 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		x, ka, err := parseCopyData(b)
		if ka != nil && err != nil {
			t.Fatalf("parseCopyData(%x) = %v, %v, %v: want one result", b, x, ka, err)
		}
		if (ka != nil || err != nil) && x.Data != nil {
			t.Fatalf("parseCopyData(%x) = %v, %v, %v: XLogData with another result", b, x, ka, err)
		}
		if ka == nil && err == nil && len(x.Data) != len(b)-25 {
			t.Fatalf("payload of %d bytes from %d, want %d", len(x.Data), len(b), len(b)-25)
		}
	})
}

func TestAppendStatusUpdate(t *testing.T) {
	now := pgEpoch.Add(3 * time.Second)
	got := appendStatusUpdate(nil, 0x10, 0x8, 0x8, now, false)
	want := []byte{'d', 0, 0, 0, 38, 'r'}
	want = binary.BigEndian.AppendUint64(want, 0x10)
	want = binary.BigEndian.AppendUint64(want, 0x8)
	want = binary.BigEndian.AppendUint64(want, 0x8)
	want = binary.BigEndian.AppendUint64(want, 3_000_000)
	want = append(want, 0)
	if !bytes.Equal(got, want) {
		t.Fatalf("status update = %x, want %x", got, want)
	}
	if n := binary.BigEndian.Uint32(got[1:]); int(n) != len(got)-1 {
		t.Fatalf("CopyData length %d, want %d", n, len(got)-1)
	}
}

func TestPluginOptions(t *testing.T) {
	tests := []struct {
		proto  int
		pub    string
		binary bool
		want   []string
	}{
		{1, "freshet", false, []string{"proto_version '1'", "publication_names 'freshet'", "messages 'true'"}},
		{2, "freshet", true, []string{"proto_version '2'", "publication_names 'freshet'", "messages 'true'", "binary 'true'", "streaming 'on'"}},
		{1, `My "Pub"'s`, false, []string{"proto_version '1'", `publication_names '"My ""Pub""''s"'`, "messages 'true'"}},
	}
	for _, tt := range tests {
		if got := pluginOptions(tt.proto, tt.pub, tt.binary); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("pluginOptions(%d, %q, %v) = %q, want %q", tt.proto, tt.pub, tt.binary, got, tt.want)
		}
	}
}

func TestParseIdentifySystem(t *testing.T) {
	id, err := parseIdentifySystem([][]byte{[]byte("7312345678901234567"), []byte("1"), []byte("0/16B3748"), []byte("app")})
	if err != nil {
		t.Fatal(err)
	}
	want := systemIdentity{SystemID: "7312345678901234567", Timeline: 1, XLogPos: change.LSN(0x16B3748), DBName: "app"}
	if id != want {
		t.Fatalf("identity = %+v, want %+v", id, want)
	}
	if _, err := parseIdentifySystem([][]byte{[]byte("1"), []byte("x"), []byte("0/1"), nil}); err == nil {
		t.Fatal("bad timeline parsed, want an error")
	}
}
