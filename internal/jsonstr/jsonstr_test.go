package jsonstr

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestAppend(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"", `""`},
		{"plain", `"plain"`},
		{"q\"b\\", `"q\"b\\"`},
		{"a\nb\rc\td\x01", `"a\nb\rc\td\u0001"`},
		{"é ✓ 🦆", `"é ✓ 🦆"`},
		{"\u2028\u2029", `"\u2028\u2029"`},
		{"bad\xffbyte", `"bad\ufffdbyte"`},
	} {
		got, ok := Append(nil, tc.in, true)
		if !ok || string(got) != tc.want {
			t.Errorf("Append(%q, replace) = %s, %v; want %s, true", tc.in, got, ok, tc.want)
		}
		gotB, _ := Append(nil, []byte(tc.in), true)
		if string(gotB) != tc.want {
			t.Errorf("Append([]byte(%q), replace) = %s, want %s", tc.in, gotB, tc.want)
		}
		_, ok = Append(nil, tc.in, false)
		if ok != utf8.ValidString(tc.in) {
			t.Errorf("Append(%q, no replace) ok = %v, want %v", tc.in, ok, utf8.ValidString(tc.in))
		}
	}
}

func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\x00\x1f", "\xff\xfe", "\u2028", "ünï"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, ok := Append([]byte("x"), s, true)
		if !ok {
			t.Fatalf("Append with replace reported false for %q", s)
		}
		var back string
		if err := json.Unmarshal(out[1:], &back); err != nil {
			t.Fatalf("Append(%q) = %s, not valid JSON: %v", s, out, err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("Append(%q) reads back as %q", s, back)
		}
		if _, ok := Append(nil, []byte(s), false); ok != utf8.ValidString(s) {
			t.Fatalf("Append(%q, no replace) ok = %v, want %v", s, ok, utf8.ValidString(s))
		}
	})
}

func BenchmarkAppend(b *testing.B) {
	s := []byte(`a typical text value with "quotes", ünïcode and a tab	end`)
	b.ReportAllocs()
	var dst []byte
	for b.Loop() {
		dst, _ = Append(dst[:0], s, false)
	}
}
