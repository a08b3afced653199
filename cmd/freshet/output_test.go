package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
)

func TestOpenOutput(t *testing.T) {
	big := `{"xid":7,"changes":[` + strings.Repeat(`{"op":"insert","new":{"a":"x"}},`, 20000) + `{}],"lsn":"0/30"}`
	tests := []struct {
		name     string
		content  string
		wantLSN  change.LSN
		wantFile string
		wantErr  string
	}{
		{name: "missing", content: "", wantLSN: 0, wantFile: ""},
		{name: "one line", content: `{"lsn":"0/16B3748","xid":1}` + "\n", wantLSN: 0x16B3748, wantFile: `{"lsn":"0/16B3748","xid":1}` + "\n"},
		{name: "two lines", content: "{\"lsn\":\"0/10\"}\n{\"lsn\":\"1/20\"}\n", wantLSN: 1<<32 | 0x20, wantFile: "{\"lsn\":\"0/10\"}\n{\"lsn\":\"1/20\"}\n"},
		{name: "torn last line", content: "{\"lsn\":\"0/10\"}\n{\"lsn\":\"0/20\",\"chan", wantLSN: 0x10, wantFile: "{\"lsn\":\"0/10\"}\n"},
		{name: "only a torn line", content: `{"lsn":"0/10","x`, wantLSN: 0, wantFile: ""},
		{name: "lsn after a large field", content: "{\"lsn\":\"0/10\"}\n" + big + "\n", wantLSN: 0x30, wantFile: "{\"lsn\":\"0/10\"}\n" + big + "\n"},
		{name: "not json", content: "hello\n", wantErr: "not a JSON object"},
		{name: "no lsn", content: "{\"xid\":3}\n", wantErr: `no "lsn" field`},
		{name: "bad lsn", content: "{\"lsn\":\"zz\"}\n", wantErr: "parse LSN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			if tt.content != "" {
				if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			o, lsn, err := openOutput(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("openOutput error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("openOutput: %v", err)
			}
			if lsn != tt.wantLSN {
				t.Errorf("last LSN = %v, want %v", lsn, tt.wantLSN)
			}
			// What is written next lands right after the last complete line.
			if _, err := o.Write([]byte("{\"lsn\":\"9/9\"}\n")); err != nil {
				t.Fatal(err)
			}
			if err := o.Sync(); err != nil {
				t.Fatal(err)
			}
			o.Close()
			got, _ := os.ReadFile(path)
			if want := tt.wantFile + "{\"lsn\":\"9/9\"}\n"; string(got) != want {
				t.Errorf("file = %.200q, want %.200q", got, want)
			}
		})
	}
}
