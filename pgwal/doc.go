// Package pgwal reads PostgreSQL's write-ahead log through logical
// replication (the pgoutput plugin) and turns it into Freshet's change
// format (package change): committed transactions in commit order, cut into
// bounded fragments, and heartbeats. It holds the replication protocol and
// nothing else: no query logic lives here.
//
// The package has two halves. The Decoder is pure: it takes pgoutput
// messages one at a time and yields events, doing no I/O except to its
// spill directory. The Reader owns the replication connection (slot,
// publication, keepalives, acknowledgements, heartbeats) and feeds a
// Decoder.
//
// # Decoding
//
// A Decoder is driven by one goroutine:
//
//	d := pgwal.NewDecoder(pgwal.DecoderOptions{ProtoVersion: 2, HeartbeatPrefix: pgwal.HeartbeatPrefix(slot)})
//	defer d.Close()
//	for each XLogData x {
//		if err := d.Decode(x.WALData, x.WALStart); err != nil { ... }
//		for {
//			ev, err := d.Next()
//			if err != nil { ... }
//			if ev == nil { break }
//			// ev is a *change.Txn fragment or a *change.Heartbeat
//		}
//	}
//
// It understands pgoutput protocol versions 1 and 2: Begin, Commit, Origin,
// Relation, Type, Insert, Update, Delete, Truncate and Message, and the
// streaming messages of version 2 (Stream Start, Stop, Commit, Abort).
//
// Memory is bounded. A transaction PostgreSQL sends whole at its commit
// (protocol 1, or a small one in protocol 2) is emitted as fragments of at
// most FragmentChanges changes or FragmentBytes bytes while its messages
// arrive; the fragment that Commit ends has Last set. Earlier fragments
// carry the transaction's XID, commit LSN and commit time from Begin, but
// EndLSN 0, since only Commit says it. A transaction PostgreSQL streams
// while it is in progress (protocol 2) is buffered per top-level xid, each
// message kept as sent, in fixed-size chunks (MemoryLimit/64, 4 to 256
// KiB) counted by their capacity; past MemoryLimit bytes of chunks across
// all open transactions the largest transaction is appended to a file in
// SpillDir and its chunks are reused, so the buffer never grows by copying
// and never holds more than MemoryLimit plus one chunk per transaction. A Stream
// Abort of a subtransaction drops that subtransaction's messages, one of the
// top-level xid drops everything. At Stream Commit the messages are read
// back in order and decoded one fragment per Next call, so a transaction of
// a million rows never sits in memory whole; being read after its commit,
// its every fragment carries the whole header, EndLSN included. Relation messages inside a
// streamed transaction take effect at their point in it.
//
// With DecoderOptions.StreamEncoder set, a streamed change is decoded when
// it arrives (so a malformed one fails there) and passed to the encoder,
// and the chunks hold its encoding instead of the message: the fragments
// read back at Stream Commit carry Encoded bytes and no Changes, so the
// commit costs copying bytes, not decoding the transaction. freshet tail
// encodes into its JSON lines (change.JSONEncoder), or into nothing with
// --format none, where a streamed transaction keeps no buffer at all.
//
// Decode copies each message it keeps once, into memory the Decoder owns
// and hands out in 16 KiB chunks; values slice into it, so decoding a row
// costs a small fraction of an allocation. The caller may reuse its buffer
// at once. A value keeps its whole chunk alive: a consumer that keeps a few
// values for long (a cache of rows) should copy them (bytes.Clone) rather
// than pin chunks mostly holding rows it dropped.
//
// # What the events hold
//
// A relation's shape is emitted as an OpRelation change before the first
// change that uses it, and again before the next use after a Relation
// message changed it (columns added, dropped, retyped or renamed, replica
// identity changed). Identical Relation messages, which PostgreSQL resends
// freely, emit nothing.
//
// In a key tuple ('K'), PostgreSQL sends the columns outside the replica
// identity as nulls; they become Absent. A TOASTed value an update did not
// change ('u') is filled from the old tuple when it holds that column (a
// key column, or any column under REPLICA IDENTITY FULL), and otherwise
// stays Kind Unchanged: never Null, never missing. Changed is computed when
// the old tuple is a whole row ('O') and is never true for an Unchanged
// value.
//
// Logical messages whose prefix equals HeartbeatPrefix are heartbeats:
// their content is "<seq> <unix-micros written>" and they become
// *change.Heartbeat events, never user changes. A non-transactional
// heartbeat is emitted where it arrives, with its message LSN as position.
// A transactional one is emitted right after its transaction with the
// transaction's commit LSN as position (it became visible there, and
// positions never go backwards); a transaction holding nothing but
// heartbeats yields no *change.Txn. A message with the heartbeat prefix
// whose content does not parse is dropped. Other non-transactional messages
// become a one-change *change.Txn with XID 0 and the message LSN as commit
// LSN. A transaction with no changes at all still yields one empty
// fragment, a position the consumer may acknowledge.
//
// Type messages are recorded: Decoder.Type resolves them (preferring the
// DecoderOptions.Types resolver when it knows the OID).
//
// Malformed input yields a *DecodeError naming the message type byte, the
// message's WAL position and the byte offset; the Decoder never panics on
// any bytes (FuzzDecode checks that). After an error, or after a reconnect,
// call Reset before decoding a resent stream.
package pgwal
