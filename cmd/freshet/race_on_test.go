//go:build race

package main

// raceEnabled: under the race detector every goroutine runs several times
// slower, so the scenario tests run a lighter load (what they check is the
// same: concurrency, not volume) and wait longer.
const raceEnabled = true
