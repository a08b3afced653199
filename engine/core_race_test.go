//go:build race

package engine

// raceEnabled: the race detector slows the core's long tests down and
// distorts memory measurements.
const raceEnabled = true
