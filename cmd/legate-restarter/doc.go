// Command legate-restarter runs Legate and hot restarts it on SIGHUP, in the
// role of Envoy's hot-restarter.py:
//
//	legate-restarter [-term-timeout 30s] -- /usr/bin/legate -c envoy.yaml --base-id 3
//
// It starts the command with "--restart-epoch 0" appended (and RESTART_EPOCH=0
// in the environment, for wrapper scripts written for hot-restarter.py).
// SIGHUP starts the next epoch with the same arguments and --restart-epoch
// N+1; the new process takes over from the running one, which exits on its
// own. SIGTERM and SIGINT are passed to every running child; children still
// running -term-timeout later are killed. When the newest child exits, the
// remaining ones are sent SIGTERM and the restarter exits with the newest
// child's exit code (128+signal when a signal ended it); an older child
// exiting is only logged. The children's standard output and error are the
// restarter's.
//
// Concurrency: one goroutine (main) owns the child list and reacts to
// signals and exits; one goroutine per child waits for it and reports.
package main
