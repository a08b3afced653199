//go:build !race

package pgwal

const raceEnabled = false
