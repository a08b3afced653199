package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/freshetdb/freshet/ticketdesk"
)

// parseMix reads --mix: kind=weight pairs separated by commas, kinds named
// as ticketdesk.Kinds names them. A kind left out is never drawn; an empty
// string is nil (the writer's default mix).
func parseMix(s string) (map[ticketdesk.Kind]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	mix := map[ticketdesk.Kind]int{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("%q: want kind=weight", part)
		}
		kind := ticketdesk.Kind(strings.TrimSpace(k))
		if !slices.Contains(ticketdesk.Kinds, kind) {
			return nil, fmt.Errorf("unknown kind %q (kinds: %s)", kind, kindNames())
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s=%s: want a whole number >= 0", kind, v)
		}
		mix[kind] = n
	}
	return mix, nil
}

func kindNames() string {
	var names []string
	for _, k := range ticketdesk.Kinds {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// writerConfig is the desk writer's configuration for the demo's flags.
func writerConfig(cfg *demoConfig, mix map[ticketdesk.Kind]int) ticketdesk.WriterConfig {
	return ticketdesk.WriterConfig{Rate: cfg.Rate, Mix: mix, Workers: cfg.Writers, Seed: int64(cfg.Seed), Hot: cfg.Hot}
}

// writerLine summarizes the writer's counters for a person.
func writerLine(s ticketdesk.WriterStats) string {
	line := fmt.Sprintf("%s committed, %s rolled back on purpose, %s failed", commas(s.Committed), commas(s.RolledBack), commas(s.Errors))
	if s.LastError != "" {
		line += " (last: " + s.LastError + ")"
	}
	return line
}
