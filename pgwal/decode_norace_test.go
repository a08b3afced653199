//go:build !race

package pgwal

const decodeRace = false
