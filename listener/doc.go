// Package listener is Legate's listener manager: it binds the listeners of the bootstrap (and
// later of LDS), accepts downstream connections, runs the TLS inspector, selects each
// connection's filter chain by Envoy's filter_chain_match rules and hands the connection to
// the FilterChainHandler built for that chain (the HTTP connection manager or the TCP proxy,
// built by the factory the extension registry has for the chain's last network filter, with
// the server's Services), after the chain's non-terminal network filters
// (ConnFilter) have admitted it. It also owns draining: the server DrainManager
// (--drain-time-s, --drain-strategy, /drain_listeners, SIGTERM) and the per-listener drains
// of updated and removed listeners, and it keeps the listener.<address>.* and
// listener_manager.* stats.
//
// Filter state: each Conn has one (Conn.FilterState, internal/filterstate), empty and free
// until an object is set. Listener filters set objects in their listenerfilter.Conn's (the
// PROXY protocol filter's TLVs); the Conn adopts them when it is built, and network filters
// and the terminal filter set theirs on the Conn. An internal listener's connection starts
// with the objects its dialler shared with the upstream connection (DialInternal reads them
// from the dial's context, filterstate.Upstream), those shared once no longer shared.
//
// Workers: Envoy runs --concurrency worker threads, each accepting on its own copy of the
// socket. Legate runs --concurrency accept loops on each listening socket; loop N counts what
// it accepts in listener.<address>.worker_N.*, and every connection is then served on its own
// goroutine, so the Go scheduler, not the accepting loop, spreads connections over cores.
//
// Concurrency: control operations (add, update, remove, stop, drain, Start, Close) serialise
// on the Manager's mutex. Accept loops read a listener's current version through an atomic
// pointer; the per-connection path (chain selection, stats, DrainClose) takes no manager
// lock, only the chain's small mutex to link and unlink the connection. Every goroutine
// (accept loops, connection goroutines, drain-end callbacks) is awaited by Manager.Close,
// which the end of Manager.Run calls.
package listener
