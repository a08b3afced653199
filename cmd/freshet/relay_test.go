package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/bus"
)

// Every mistake in relay's flags is a usage error that says what to fix.
func TestRelayFlags(t *testing.T) {
	ok := []string{"--dsn", "postgres://u@h/db", "--bus", "nats://127.0.0.1:4222"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--bus", "nats://127.0.0.1:4222"}, "no database given"},
		{[]string{"--dsn", "postgres://u@h/db"}, "bus URL is empty"},
		{[]string{"--dsn", "postgres://u@h/db", "--bus", "http://x:1"}, "nats://"},
		{append(ok, "--heartbeat", "0"), "needs heartbeats"},
		{append(ok, "--bus-storage", "disk"), "file or memory"},
		{append(ok, "--bus-persist", "never"), "default or async"},
		{append(ok, "--bus-duplicates", "2h"), "at most the max age"},
		{append(ok, "--bus-max-msg-size", "100"), "at least 65536"},
		{append(ok, "--max-pending", "0"), "at least 1"},
		{append(ok, "--batch-wait", "-1ms"), "from 0 to 1s"},
		{append(ok, "--batch-wait", "2s"), "from 0 to 1s"},
		{append(ok, "--slot", "Bad-Slot"), "slot name"},
		{append(ok, "extra"), "unexpected argument"},
	} {
		t.Setenv("FRESHET_DSN", "")
		t.Setenv("FRESHET_BUS", "")
		var out bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &out}
		_, err := m.parseRelayFlags(c.args)
		if _, isUsage := err.(usageError); !isUsage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("relay %v: %v, want a usage error saying %q", c.args, err, c.want)
		}
	}
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &out}
	cfg, err := m.parseRelayFlags(append(ok, "--bus-storage", "memory", "--bus-persist", "async", "--listen", "127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Relay.Settings.Memory || !cfg.Relay.Settings.AsyncPersist || cfg.Listen != "127.0.0.1:0" || cfg.Relay.Stream.HeartbeatInterval <= 0 {
		t.Fatalf("config = %+v", cfg)
	}
	if cfg.Relay.BatchWait != bus.DefaultBatchWait {
		t.Fatalf("batch wait %v, want the default %v", cfg.Relay.BatchWait, bus.DefaultBatchWait)
	}
	if cfg, err = m.parseRelayFlags(append(ok, "--batch-wait", "0")); err != nil || cfg.Relay.BatchWait >= 0 {
		t.Fatalf("--batch-wait 0: %v, batch wait %v, want none (negative)", err, cfg.Relay.BatchWait)
	}
}
