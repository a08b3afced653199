package engine

import (
	"slices"
	"testing"
)

func TestParseSnapshot(t *testing.T) {
	tests := []struct {
		in   string
		want Snapshot
		err  bool
	}{
		{in: "10:10:", want: Snapshot{Xmin: 10, Xmax: 10}},
		{in: "10:20:15,11", want: Snapshot{Xmin: 10, Xmax: 20, Xip: []uint64{11, 15}}},
		{in: "4294967300:4294967310:4294967305", want: Snapshot{Xmin: 4294967300, Xmax: 4294967310, Xip: []uint64{4294967305}}},
		{in: "10:20", err: true},
		{in: "20:10:", err: true},
		{in: "10:20:25", err: true},
		{in: "10:20:x", err: true},
		{in: "a:20:", err: true},
		{in: "", err: true},
	}
	for _, tt := range tests {
		got, err := ParseSnapshot(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("ParseSnapshot(%q) error = %v, want error %v", tt.in, err, tt.err)
			continue
		}
		if err != nil {
			continue
		}
		if got.Xmin != tt.want.Xmin || got.Xmax != tt.want.Xmax || !slices.Equal(got.Xip, tt.want.Xip) {
			t.Errorf("ParseSnapshot(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestSnapshotVisible(t *testing.T) {
	const epoch = uint64(3) << 32
	snap := Snapshot{Xmin: epoch + 100, Xmax: epoch + 110, Xip: []uint64{epoch + 103, epoch + 107}}
	// Near the start of an epoch: xmax's low bits are small, older ids
	// carry the previous epoch.
	wrap := Snapshot{Xmin: epoch - 5, Xmax: epoch + 5, Xip: []uint64{epoch - 2, epoch + 1}}
	tests := []struct {
		name string
		snap Snapshot
		xid  uint32
		want bool
	}{
		{"below xmin", snap, 99, true},
		{"at xmin", snap, 100, true},
		{"in progress", snap, 103, false},
		{"between", snap, 105, true},
		{"in progress 2", snap, 107, false},
		{"at xmax", snap, 110, false},
		{"above xmax", snap, 200, false},
		{"far past", snap, 1<<32 + 100 - 1<<30, true},
		{"xid 0", snap, 0, false},
		{"previous epoch, visible", wrap, ^uint32(0) - 10, true},
		{"previous epoch, in progress", wrap, ^uint32(0) - 1, false},
		{"previous epoch, between", wrap, ^uint32(0), true},
		{"this epoch, visible", wrap, 0 + 3, true},
		{"this epoch, in progress", wrap, 1, false},
		{"this epoch, at xmax", wrap, 5, false},
	}
	for _, tt := range tests {
		if got := tt.snap.Visible(tt.xid); got != tt.want {
			t.Errorf("%s: %v.Visible(%d) = %v, want %v", tt.name, tt.snap, tt.xid, got, tt.want)
		}
	}
}

func TestSnapshotWidenFirstEpoch(t *testing.T) {
	snap := Snapshot{Xmin: 3, Xmax: 10}
	if got := snap.Widen(^uint32(0) - 5); got != 0 {
		t.Errorf("Widen(2^32-6) at xmax 10 = %d, want 0 (before the first epoch)", got)
	}
	if !snap.Visible(^uint32(0) - 5) {
		t.Errorf("Visible(2^32-6) at xmax 10 = false, want true")
	}
}

func FuzzParseSnapshot(f *testing.F) {
	for _, s := range []string{"10:10:", "10:20:11,15", "1:2:3", "::", "4294967300:4294967310:4294967305"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		snap, err := ParseSnapshot(s)
		if err != nil {
			return
		}
		back, err := ParseSnapshot(snap.String()[:len(snap.String())-len("@"+snap.LSN.String())])
		if err != nil {
			t.Fatalf("ParseSnapshot(%q) round trip: %v", snap.String(), err)
		}
		if back.Xmin != snap.Xmin || back.Xmax != snap.Xmax || !slices.Equal(back.Xip, snap.Xip) {
			t.Fatalf("round trip of %q = %v, want %v", s, back, snap)
		}
		for _, x := range snap.Xip {
			if snap.Visible64(x) {
				t.Fatalf("%v: in-progress %d is visible", snap, x)
			}
		}
	})
}
