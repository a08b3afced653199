package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"unicode/utf8"
)

// TestFramesRoundTrip decodes every example frame (the same examples as
// docs/s2s-protocol.md) and encodes it back byte for byte.
func TestFramesRoundTrip(t *testing.T) {
	f, err := os.Open("testdata/frames.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Bytes()
		n++
		fr, err := Decode(line, DefaultMaxFrameBytes)
		if err != nil {
			t.Fatalf("line %d: Decode: %v", n, err)
		}
		got, err := Encode(fr)
		if err != nil {
			t.Fatalf("line %d: Encode: %v", n, err)
		}
		if !bytes.Equal(got, line) {
			t.Errorf("line %d: Encode(Decode(x)) =\n%s\nwant\n%s", n, got, line)
		}
	}
	if n < 12 {
		t.Fatalf("read %d example frames, want one of every type", n)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, in string
		max      int
		code, id string
	}{
		{"not json", `xyz`, 0, CodeBadFrame, ""},
		{"array", `[1,2]`, 0, CodeBadFrame, ""},
		{"no type", `{"id":"a"}`, 0, CodeBadFrame, "a"},
		{"type not a string", `{"type":5}`, 0, CodeBadFrame, ""},
		{"unknown type", `{"type":"subscribe2","id":"q"}`, 0, CodeUnknownType, "q"},
		{"wrong member type", `{"type":"subscribe","id":"q","sql":7}`, 0, CodeBadFrame, "q"},
		{"bad params", `{"type":"subscribe","id":"q","params":{}}`, 0, CodeBadFrame, "q"},
		{"too large", `{"type":"ping","data":"0123456789"}`, 20, CodeFrameTooLarge, ""},
		{"truncated", `{"type":"ping"`, 0, CodeBadFrame, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.in), tt.max)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode(%s) error = %v, want a *DecodeError", tt.in, err)
			}
			if de.Code != tt.code || de.ID != tt.id {
				t.Errorf("Decode(%s) code, id = %q, %q, want %q, %q", tt.in, de.Code, de.ID, tt.code, tt.id)
			}
			if tt.code == CodeFrameTooLarge && !errors.Is(err, ErrTooLarge) {
				t.Errorf("error %v does not wrap ErrTooLarge", err)
			}
		})
	}
}

func TestDecodeIgnoresUnknownMembers(t *testing.T) {
	f, err := Decode([]byte(`{"type":"ping","data":"x","future":[1,{"a":2}]}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := f.(*Ping); !ok || p.Data != "x" {
		t.Fatalf("Decode = %#v, want Ping{Data: x}", f)
	}
}

func TestAppendString(t *testing.T) {
	tests := []string{
		"", "plain", `"q" \ /`, "tab\there\nline\r", "\x00\x01\x1f\x7f",
		"ünïcödé 日本", "\u2028\u2029", "bad \xff\xfe utf8", "{\"a\": [1, 2]}",
	}
	for _, s := range tests {
		b := AppendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("AppendString(%q) = %s: not JSON: %v", s, b, err)
		}
		want := string([]rune(s)) // each invalid byte becomes U+FFFD
		if got != want {
			t.Errorf("AppendString(%q) reads back as %q, want %q", s, got, want)
		}
	}
}

// FuzzDecode: Decode never panics, and what it reads encodes to JSON that
// decodes to the same frame.
func FuzzDecode(f *testing.F) {
	if b, err := os.ReadFile("testdata/frames.jsonl"); err == nil {
		for _, line := range bytes.Split(b, []byte("\n")) {
			f.Add(line)
		}
	}
	f.Add([]byte(`{"type":"subscribe","id":"\u0000","params":[{"value":null}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := Decode(b, 4096)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode error %v is not a *DecodeError", err)
			}
			return
		}
		enc, err := Encode(fr)
		if err != nil {
			t.Fatalf("Encode(Decode(%q)): %v", b, err)
		}
		fr2, err := Decode(enc, 0)
		if err != nil {
			t.Fatalf("Decode(Encode(Decode(%q))) = %v", b, err)
		}
		enc2, _ := Encode(fr2)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("re-encoding changed the frame:\n%s\n%s", enc, enc2)
		}
	})
}

func FuzzAppendString(f *testing.F) {
	f.Add("a\"b\\c\n\x00\xff\u2028")
	f.Fuzz(func(t *testing.T, s string) {
		var got string
		if err := json.Unmarshal(AppendString(nil, s), &got); err != nil {
			t.Fatalf("AppendString(%q) is not JSON: %v", s, err)
		}
		if utf8.ValidString(s) && got != s {
			t.Fatalf("AppendString(%q) reads back as %q", s, got)
		}
	})
}
