package change

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestLSNStringParse(t *testing.T) {
	tests := []struct {
		lsn LSN
		str string
	}{
		{0, "0/0"},
		{0x16B3748, "0/16B3748"},
		{0x16_B374D848, "16/B374D848"},
		{1 << 32, "1/0"},
		{^LSN(0), "FFFFFFFF/FFFFFFFF"},
	}
	for _, tt := range tests {
		if got := tt.lsn.String(); got != tt.str {
			t.Errorf("LSN(%#x).String() = %q, want %q", uint64(tt.lsn), got, tt.str)
		}
		got, err := ParseLSN(tt.str)
		if err != nil || got != tt.lsn {
			t.Errorf("ParseLSN(%q) = %#x, %v; want %#x", tt.str, uint64(got), err, uint64(tt.lsn))
		}
		if lower, err := ParseLSN(strings.ToLower(tt.str)); err != nil || lower != tt.lsn {
			t.Errorf("ParseLSN(%q) = %#x, %v; want %#x", strings.ToLower(tt.str), uint64(lower), err, uint64(tt.lsn))
		}
	}
	if got, err := ParseLSN("00000000/0016B3748"); err == nil {
		t.Errorf("ParseLSN with 9 low digits = %v, want an error", got)
	}
}

func TestParseLSNErrors(t *testing.T) {
	for _, in := range []string{"", "/", "0/", "/0", "0", "0/0/0", "G/0", "0/xyz", "123456789/0", "0/123456789", "-1/0", " 0/0", "+1/0"} {
		if got, err := ParseLSN(in); err == nil {
			t.Errorf("ParseLSN(%q) = %v, want an error", in, got)
		} else if !strings.Contains(err.Error(), "parse LSN") {
			t.Errorf("ParseLSN(%q) error %q does not say what failed", in, err)
		}
	}
}

func TestLSNText(t *testing.T) {
	b, err := json.Marshal(struct{ L LSN }{0x16B3748})
	if err != nil || string(b) != `{"L":"0/16B3748"}` {
		t.Fatalf("json.Marshal = %s, %v", b, err)
	}
	var v struct{ L LSN }
	if err := json.Unmarshal(b, &v); err != nil || v.L != 0x16B3748 {
		t.Fatalf("json.Unmarshal = %v, %v", v.L, err)
	}
	if err := json.Unmarshal([]byte(`{"L":"nope"}`), &v); err == nil {
		t.Fatal("json.Unmarshal of a bad LSN: want an error")
	}
}
