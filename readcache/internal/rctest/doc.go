// Package rctest is the read cache's test kit, shared by readcache/stdlib
// and readcache/pgxcache: Start runs a real `freshet serve` on a pgtest
// database through internal/servetest (which builds cmd/freshet once per
// test process and gives the server a slot of its own), WarmHit reads
// until a cache serves a read itself, and Measure runs a benchmark's reads
// from many goroutines and reports their latency percentiles.
package rctest
