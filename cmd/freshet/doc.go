// Command freshet follows a PostgreSQL database through logical replication
// and keeps the results of SQL queries fresh for the programs that read them.
//
// The command line is Main.Run, one file per subcommand, so tests run it in
// process:
//
//	freshet serve   serve fresh query results to backends (serve.go)
//	freshet tail    print committed transactions as JSON lines (tail.go);
//	                with --output, append to a file and resume after its
//	                last line (output.go)
//	freshet demo    the ticket desk (package ticketdesk) on the read cache
//	                with the engine in process, a writer, readers, a
//	                verifier and a dashboard (demo.go: flags; demo_stack.go:
//	                PostgreSQL, engine, pools; demo_load.go: writer, readers,
//	                verifier; demo_dash.go: dashboard and /stats;
//	                demo_run.go: demo, serve, seed, verify; demo_lag.go,
//	                demo_bench.go, demo_migrate.go: the measurements and
//	                the schema changes)
//	freshet version print the version
//
// The hidden `freshet bench-tail` (benchtail.go) is the end-to-end benchmark
// of tail against pg_recvlogical that scripts/bench-tail.sh runs; its
// results are in docs/benchmarks.md.
//
// Exit status: 0 on success and on Ctrl-C or SIGTERM, 2 for a mistake in the
// command line (the usage is printed), 1 for everything else, with a message
// that says what to check.
package main
