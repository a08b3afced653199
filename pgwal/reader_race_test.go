//go:build race

package pgwal

// raceEnabled reports a -race build, where the long tests shrink so the
// package stays within its time budget (the full sizes run without -race).
const raceEnabled = true
