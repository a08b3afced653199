// Package clustertest holds the end-to-end test of Freshet on more than
// one engine (docs/scale-out.md): PostgreSQL, a JetStream bus embedded in
// the test process (so killing Freshet's processes leaves it running), a
// `freshet relay`, several `freshet serve --source nats://...` replicas,
// Go read caches routing between them, a steady writer, and a control
// `freshet tail` on a second slot; replicas, the relay and the bus are
// killed and restarted while it runs. The package has no code of its own.
package clustertest
