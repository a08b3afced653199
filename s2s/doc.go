// Package s2s serves the engine to backends over Freshet's
// server-to-server WebSocket protocol (docs/s2s-protocol.md; frames in
// package wire).
//
// A Server is an http.Handler for {base}/s2s/v1. Each connection has a read
// loop (frames from the client: subscribe, unsubscribe, ping) and a write
// loop (frames to it), in the style of nats-server. Outputs of the engine
// reach a connection through a Sink the server hands to the engine for each
// subscription; the sink never blocks: it appends the encoded frame to the
// connection's outgoing queue, which is bounded in bytes. A connection whose
// queue passes the bound is closed (a slow consumer) and its subscriptions
// end; the engine and every other connection go on.
//
// The engine is consumed through the small Engine interface declared here,
// so the protocol layer does not depend on how the engine runtime is
// built. The runtime must call Sinks from one goroutine in commit order and
// call Server.Heartbeat after the outputs of every transaction that
// committed before the heartbeat: that is what makes the lag frames honest.
package s2s
