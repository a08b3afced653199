// Package change defines Freshet's change format: the contract between the
// WAL reader (package pgwal) and every consumer.
//
// A stream is a sequence of events in commit order. Each event is either a
// *Txn (one fragment of a committed transaction) or a *Heartbeat (a lag probe
// that went through the WAL). A transaction too large to hold in memory
// arrives as several fragments sharing the same header: Fragment counts from
// 0 and Last marks the one that ends it. A consumer that applies fragments as
// they come never needs the whole transaction at once; a consumer that wants
// whole transactions gathers fragments until Last.
//
// Positions are LSNs. A transaction's position is its commit LSN; a consumer
// acknowledges a position once it has durably handled every transaction up
// to and including it, and after a restart the stream resumes after the
// acknowledged position.
//
// Values keep PostgreSQL's exact text form (or binary form when the reader
// runs in binary mode). Typed decodings (ints, exact numerics, timestamps
// with infinities and BC dates, intervals, arrays...) are derived from that
// form on demand by Decode, so nothing is ever rounded on the way through.
//
// The full specification, including the JSON form printed by `freshet tail`,
// is docs/change-format.md.
package change
