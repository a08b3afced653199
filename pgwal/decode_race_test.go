//go:build race

package pgwal

// decodeRace is set when the race detector is on: it makes the
// million-row test take minutes, and the plain run already covers it.
const decodeRace = true
