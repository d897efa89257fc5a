// Package server owns Legate's lifecycle: it builds the components from the
// options and the bootstrap in order (stats, runtime, logging, cluster
// manager, listeners, admin), moves through Envoy's states
// PRE_INITIALIZING → INITIALIZING → LIVE (and DRAINING while health checks
// are failed or a drain runs), and shuts down on SIGTERM, SIGINT or
// /quitquitquit.
//
// Concurrency: Run owns the server's goroutines (admin serving, stats
// flushing, signal handling) and returns only after they have ended. State is
// read lock-free by the admin endpoints; the init manager guards its targets
// with one mutex.
package server
