// Package rctest starts a real `freshet serve` for the read cache's tests:
// the binary is built once per test process and run against a pgtest
// database.
package rctest
