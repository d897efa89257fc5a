// Package hotrestart is Legate's hot restart: a new process (epoch N) takes
// the listening sockets, the admin socket and the statistics of the running
// one (epoch N-1) so that an upgrade or a static configuration change loses
// no connection. It plays the role of Envoy's HotRestartImpl, but the
// protocol is Legate's own: Envoy's shared-memory block does not exist here.
//
// Every epoch that allows hot restart listens on a Unix stream socket named
// from --socket-path, --base-id and its epoch (SocketName); in the abstract
// namespace by default, so nothing is left on disk. A child connects to its
// parent's socket and speaks framed JSON messages (see protocol.go): a
// versioned handshake first, then requests for listening sockets by
// configured address and for the admin socket (file descriptors travel with
// SCM_RIGHTS), stats snapshots, "drain" (stop accepting and drain) and
// "terminate" (close everything, send final stats, exit). The handshake names
// the protocol version and its feature list; a mismatch is refused with a
// reason that says what differs, on both sides.
//
// Concurrency: a Parent accepts on the goroutine running Serve and serves
// each connection on a goroutine of its own, one child at a time (a second
// is refused), so its Hooks never run concurrently. A Child is a client
// whose methods are safe for concurrent use; they serialise on one mutex,
// since each is a request and its reply on one connection.
package hotrestart
