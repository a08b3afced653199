// Package s2s serves the engine to backends over Freshet's
// server-to-server WebSocket protocol (docs/s2s-protocol.md; frames in
// package wire).
//
// A Server is an http.Handler for {base}/s2s/v1. Each connection has a read
// loop (frames from the client: subscribe, unsubscribe, ping) and a write
// loop (frames to it), in the style of nats-server. Outputs of the engine
// reach a connection through a Sink the server hands to the engine for each
// subscription; the sink never blocks: it appends the encoded frame to the
// connection's outgoing queue, which is bounded in bytes, and at the end
// of each transaction (engine.Flusher) asks for the queue to be written.
// The server's writers (a goroutine per processor) write queues to
// sockets with writes that never wait; a socket that does not take a
// write at once is left to its connection's write loop, which may wait
// (within Config.WriteTimeout). A connection whose queue passes the bound
// is closed (a slow consumer) and its subscriptions end; the engine and
// every other connection go on.
//
// The engine is consumed through the small Engine interface declared here
// (*engine.Engine is one). Its sinks are called from one goroutine in
// commit order. Lag frames come from heartbeats: give the engine a Tap on
// its stream and the server the same Tap (Config.Tap); the tap reports a
// heartbeat once the engine has acknowledged a position at or past it,
// which it does only after handing the outputs of every earlier
// transaction to the sinks.
//
//	tap := s2s.NewTap(reader) // *pgwal.Reader
//	eng, _ := engine.Open(ctx, engine.Config{Source: tap, ReadDSN: dsn})
//	cfg := s2s.DefaultConfig()
//	cfg.Engine, cfg.Tap = eng, tap
//	srv, _ := s2s.New(cfg)
//	http.Handle("/s2s/v1", srv)
package s2s
