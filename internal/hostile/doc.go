// Package hostile holds the end-to-end hostile-input suite (issue 10):
// every input that once crashed, stalled or fooled `freshet serve` is sent
// to a real `freshet serve` process (built and run by internal/servetest)
// following a real PostgreSQL, each case on a connection of its own, and
// must be refused with its exact code (or served correctly) while a canary
// subscription on another connection keeps receiving the changes of
// writes made during and after the case. The package has no code of its
// own outside its tests.
package hostile
