// Package wire holds the frames of Freshet's server-to-server protocol
// (docs/s2s-protocol.md): the JSON text messages a backend and `freshet
// serve` exchange over the WebSocket at {base}/s2s/v1. The server (package
// s2s) and clients (the read cache) both import it; it imports nothing of
// Freshet's own.
//
// Every frame is one JSON object with a "type" member naming it. Decode
// reads any frame into its Go type; Encode writes one. Column values are
// PostgreSQL's exact text form as JSON strings, or null.
//
//	f, err := wire.Decode(msg, wire.DefaultMaxFrameBytes)
//	switch f := f.(type) {
//	case *wire.Delta:
//		// f.Upsert, f.Remove ...
//	}
package wire
