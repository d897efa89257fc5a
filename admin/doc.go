// Package admin is Legate's local administration server: Envoy's admin
// interface on the bootstrap's admin address.
//
// The package owns the HTTP server, the endpoint registry and the rules every
// endpoint shares: Envoy's query-string parsing, exact path matching, the
// spec's method rule (a mutation requested with anything but POST gets 400 and
// has no effect), the 404 help body and the default response headers. Endpoint
// families live one per file (server_info.go, stats.go, …); each is a
// constructor that takes the small interface it reads from and returns
// Endpoints, so admin stays a client of the core and never reaches into it.
//
// Concurrency: Register is called while the server is being built and is
// safe for concurrent use; every request is served on its own goroutine, so
// a slow handler never delays /ready or /server_info.
package admin
