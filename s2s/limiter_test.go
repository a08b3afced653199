package s2s

import (
	"testing"
	"time"
)

func TestLogLimiter(t *testing.T) {
	l := newLogLimiter(time.Minute)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		kind     string
		at       time.Duration
		wantOK   bool
		wantHeld int
	}{
		{"unauthorized", 0, true, 0},
		{"unauthorized", time.Second, false, 0},
		{"too_many_connections", 2 * time.Second, true, 0},
		{"unauthorized", 30 * time.Second, false, 0},
		{"unauthorized", 61 * time.Second, true, 2},
		{"unauthorized", 62 * time.Second, false, 0},
		{"unauthorized", 200 * time.Second, true, 1},
	}
	for i, s := range steps {
		held, ok := l.allowAt(s.kind, t0.Add(s.at))
		if ok != s.wantOK || held != s.wantHeld {
			t.Errorf("step %d (%s at %v): allow = %d, %v, want %d, %v", i, s.kind, s.at, held, ok, s.wantHeld, s.wantOK)
		}
	}
}
