package readcache

import (
	"strings"
	"testing"
	"time"
)

func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		bad  string
		want func(Config) bool
	}{
		{"defaults", nil, "", func(c Config) bool {
			return c.URL == "" && c.Sockets == 2 && c.VerdictTimeout == 0 && c.MaxLag == 2*time.Second &&
				c.ReadYourWrites == time.Second && c.MaxBytes == 64<<20
		}},
		{"set", map[string]string{"FRESHET_URL": "ws://h:7070", "FRESHET_TOKEN": "t", "FRESHET_SOCKETS": "4",
			"FRESHET_READ_YOUR_WRITES_MS": "0", "FRESHET_MAX_LAG_MS": "750", "FRESHET_CACHE_BYTES": "1000"}, "",
			func(c Config) bool {
				return c.URL == "ws://h:7070" && c.Token == "t" && c.Sockets == 4 && c.ReadYourWrites == 0 &&
					c.MaxLag == 750*time.Millisecond && c.MaxBytes == 1000
			}},
		{"bad number", map[string]string{"FRESHET_READ_YOUR_WRITES_MS": "soon"}, "FRESHET_READ_YOUR_WRITES_MS", nil},
		{"bad url", map[string]string{"FRESHET_URL": "localhost:7070"}, "ws://", nil},
		{"no sockets", map[string]string{"FRESHET_SOCKETS": "0"}, "Sockets", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"FRESHET_URL", "FRESHET_TOKEN", "FRESHET_SOCKETS", "FRESHET_VERDICT_TIMEOUT_MS",
				"FRESHET_MAX_LAG_MS", "FRESHET_READ_YOUR_WRITES_MS", "FRESHET_CACHE_BYTES"} {
				t.Setenv(k, tt.env[k])
			}
			c, err := ConfigFromEnv()
			if tt.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tt.bad) {
					t.Fatalf("error = %v, want one mentioning %q", err, tt.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want(c) {
				t.Fatalf("config = %+v", c)
			}
		})
	}
}

func TestEndpoint(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ws://h:7070", "ws://h:7070/s2s/v1"},
		{"http://h:7070/", "ws://h:7070/s2s/v1"},
		{"https://h/fr/s2s/v1", "wss://h/fr/s2s/v1"},
		{"wss://h:1/x", "wss://h:1/x"},
	}
	for _, tt := range tests {
		got, err := endpoint(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("endpoint(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"h:7070", "ftp://h", "ws://", "://x"} {
		if _, err := endpoint(bad); err == nil {
			t.Errorf("endpoint(%q): no error", bad)
		}
	}
}
