package shape

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// oldFrames is how serveSSE framed a snapshot chunk before it streamed
// one: the whole chunk parsed as a JSON array, each message trimmed and
// written as an event.
func oldFrames(t *testing.T, chunk []byte) []byte {
	t.Helper()
	var msgs []json.RawMessage
	if err := json.Unmarshal(append(append([]byte{'['}, chunk...), ']'), &msgs); err != nil {
		t.Fatalf("chunk %q: %v", chunk, err)
	}
	var out []byte
	for _, m := range msgs {
		out = append(out, "data: "...)
		out = append(out, bytes.TrimSpace(m)...)
		out = append(out, "\n\n"...)
	}
	return out
}

// TestSSEFramer: a chunk framed as its bytes go by, in pieces of every
// size, gives exactly the events of the chunk parsed whole: strings
// holding commas, braces, brackets, quotes, backslashes (an escaped
// backslash before a closing quote), "data: " and multibyte text, nested
// objects and arrays, whitespace around and between messages.
func TestSSEFramer(t *testing.T) {
	atoms := []string{`,`, `}`, `{`, `]`, `[`, `\"`, `\\`, `\\\"`, `data: `, "\\n\\n", `é`, `😀`, `\u00e9`, `a`, ` `, `:`}
	rng := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		var b strings.Builder
		b.WriteByte('"')
		for n := rng.IntN(8); n > 0; n-- {
			b.WriteString(atoms[rng.IntN(len(atoms))])
		}
		b.WriteByte('"')
		return b.String()
	}
	var value func(depth int) string
	value = func(depth int) string {
		switch k := rng.IntN(6); {
		case k == 0 || depth > 3:
			return str()
		case k == 1:
			return []string{"1", "-2.5e3", "true", "false", "null"}[rng.IntN(5)]
		case k == 2:
			var parts []string
			for n := rng.IntN(4); n > 0; n-- {
				parts = append(parts, value(depth+1))
			}
			return "[" + strings.Join(parts, ",") + "]"
		default:
			var parts []string
			for n := rng.IntN(4); n > 0; n-- {
				parts = append(parts, str()+":"+value(depth+1))
			}
			return "{" + strings.Join(parts, ",") + "}"
		}
	}
	ws := func() string { return []string{"", "", " ", "\n", " \t\r\n"}[rng.IntN(5)] }
	for i := 0; i < 3000; i++ {
		var msgs []string
		for n := rng.IntN(6); n > 0; n-- {
			m := `{"key":` + str() + `,"value":` + value(0) + `,"headers":{"operation":"insert"}}`
			if i%7 == 0 {
				m = ws() + m + ws()
			}
			msgs = append(msgs, m)
		}
		chunk := []byte(strings.Join(msgs, ","))
		want := oldFrames(t, chunk)
		for _, piece := range []int{1, 2, 3, 7, 64, len(chunk) + 1} {
			var got bytes.Buffer
			out := bufio.NewWriterSize(&got, 16)
			f := sseFramer{out: out}
			for rest := chunk; len(rest) > 0; {
				n := min(piece, len(rest))
				f.Write(rest[:n])
				rest = rest[n:]
			}
			f.finish()
			out.Flush()
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("chunk %q in pieces of %d:\n got %q\nwant %q", chunk, piece, got.Bytes(), want)
			}
			if f.events != len(msgs) {
				t.Fatalf("chunk %q: %d events, want %d", chunk, f.events, len(msgs))
			}
		}
	}
}
