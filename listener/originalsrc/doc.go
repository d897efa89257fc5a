// Package originalsrc is Envoy's envoy.filters.listener.original_src listener filter
// (extensions.filters.listener.original_src.v3.OriginalSrc): the upstream connection made for
// a downstream connection binds to the downstream's source address, so that the upstream host
// sees the client's address as its peer instead of Legate's. The source is the connection's
// remote address after the listener filters before it (a PROXY protocol header's source when
// proxy_protocol runs first); a connection whose remote address is not IP (an internal
// listener's) is left alone, as in Envoy.
//
// Implemented fields:
//   - bind_port: bind the client's port too; otherwise port 0, which the kernel picks.
//   - mark: the SO_MARK of the upstream socket when not zero.
//
// The upstream socket gets IP_TRANSPARENT (IPV6_TRANSPARENT), which needs CAP_NET_ADMIN or
// CAP_NET_RAW: a process that may not set it and SO_MARK refuses the listener at load, saying
// so. A connection that cannot bind (an address family the host lacks) fails as a connect
// failure of its cluster. The operator routes
// the replies, addressed to the client, back to Legate: typically
// "ip rule add fwmark MARK lookup T" and "ip route add local 0.0.0.0/0 dev lo table T" with the
// mark restored on the replies (CONNMARK), as Envoy's documentation describes.
//
// What uses it: the TCP proxy (envoy.filters.network.tcp_proxy), whose upstream connection,
// or tunnel connection when tunneling_config opens one of its own, is the downstream's alone;
// the HTTP connection manager, whose requests' upstream connections (and upgrades' raw
// ones) bind to the client's address; and the TCP proxy's tunnels over a cluster's pooled
// HTTP/2 connections. Pooled connections are kept per source, as Envoy hashes the socket
// options into its connection pool key: the pool of a host has a child pool per source
// address and mark (pool/keyed.go), so a client's requests reuse its own connections and two
// clients never share one. Requests of Legate's own (mirrors, health checks, gRPC services)
// keep Legate's address.
package originalsrc
