// Package tcpproxy is Legate's envoy.filters.network.tcp_proxy: an L4 proxy that joins each
// downstream connection a listener's filter chain accepts to a new upstream connection of the
// configured cluster (or one chosen among weighted_clusters), copies bytes both ways with
// half-close, and closes the pair on idle_timeout, max_downstream_connection_duration or
// failure. Upstream connections come from package pool, which applies connect_timeout,
// max_connections and close_connections_on_host_health_failure. Stats are tcp.<stat_prefix>.*.
//
// access_log entries (envoy.access_loggers.file, stdout, stderr, tcp_grpc and open_telemetry, with the filters
// package accesslog implements) get one TcpConnectionEnd entry per downstream connection when it
// closes, carrying what Envoy's stream info holds for a TCP connection: downstream addresses and
// SNI, bytes received from and sent to downstream, the duration, the upstream cluster, host and
// local address, the attempt count and the response flags (NC, UH, UO, UF, URX, DT).
// access_log_options adds TcpConnectionStart, TcpUpstreamConnected and TcpPeriodic entries.
// A filter chain with an envoy.transport_sockets.tls transport_socket (DownstreamTlsContext,
// static certificates or SDS secrets, require_client_certificate) has its TLS terminated
// here: the handshake runs first, bounded by transport_socket_connect_timeout (else the
// idle_timeout, either scaled by the overload manager's reduce_timeouts), and the plain text
// is proxied; a failed handshake closes the connection
// without an upstream one. The contexts are registered for /certs and reload with it when SDS
// secrets rotate. Entries then carry the TLS state (%DOWNSTREAM_TLS_VERSION%,
// %DOWNSTREAM_PEER_SUBJECT%, tls_properties, …). Without one, TLS passes through and is
// logged with the SNI the TLS inspector read. Upstream TLS is the pool's (the cluster's
// transport_socket). Entries carry the listener connection's id (%CONNECTION_ID%).
//
// On a listener with the original_src listener filter (listener/originalsrc), the upstream
// connection made for a downstream connection binds to that connection's source address
// (IP_TRANSPARENT, its mark); so does a tunnel's connection of its own, and the connections
// of a cluster's HTTP/2 pool that pooled tunnels ride, which the pool keys by that source
// (pool.Request.Origin): the tunnels of one client share them, never another client's.
//
// tunneling_config carries each connection in an HTTP request (tunnel.go): a CONNECT to hostname (a format string, e.g. %DOWNSTREAM_LOCAL_PORT%),
// or with use_post a POST to post_path (chunked over HTTP/1.1), with headers_to_add (format
// strings, append actions, keep_empty_value). The codec is the cluster's: HTTP/2 when its
// protocol options say so (with auto_config, what TLS ALPN negotiates), else HTTP/1.1. Any
// 2xx opens an HTTP/1.1 tunnel, only 200 an HTTP/2 one; another answer, a reset or an
// idle_timeout without an answer fails the attempt (max_connect_attempts applies) and closes
// the downstream once they are exhausted. Each tunnel counts in the cluster's
// upstream_rq_total and upstream_rq_active. On a cluster configured for HTTP/2 the request is
// a stream of the cluster's HTTP/2 pool, so tunnels share its connections (as Envoy's do):
// max_concurrent_streams, max_requests_per_connection, the circuit breakers and the pool's
// stats apply, and a refused tunnel leaves its connection in the pool. An auto_config
// cluster's tunnels are streams of its pool too while TLS ALPN chooses h2; once a host's
// connection negotiated HTTP/1.1 (the pool's RoundTrip with HTTP2Only says
// pool.ErrNegotiatedHTTP1, that connection staying in the pool), its tunnels are HTTP/1.1
// ones, as on an HTTP/1.1 cluster, each over an upstream connection of its own. propagate_response_headers puts the answer's status and headers
// (a refusal's too) in the downstream connection's filter state under
// envoy.tcp_proxy.propagate_response_headers, and propagate_response_trailers its trailers,
// once its body has ended, under envoy.tcp_proxy.propagate_response_trailers, both as
// Envoy's HeaderMap (names in lower case; net/http's answers sorted by name, the pool's in
// their order), which access logs read with %FILTER_STATE%; a later attempt's answer replaces
// an earlier one's. request_id_extension, request_id_header, request_id_metadata_key and
// formatters are refused ("not implemented by Legate").
//
// Filter state: the entries read the downstream connection's (listener.Conn.FilterState),
// and the objects it shares with the upstream connection (filterstate.SharedWithUpstream and
// SharedWithUpstreamOnce) go with the connections the proxy makes for it alone (a raw TCP
// connection, an HTTP/1.1 tunnel's), so that an internal listener's connection inherits
// them; a pooled HTTP/2 tunnel's shared connection carries none.
//
// Concurrency: a Proxy is shared by every connection of its filter chain and is safe for
// concurrent use. Each connection is served on the listener's connection goroutine plus one
// goroutine for the upstream-to-downstream direction; Serve returns after both end. An
// HTTP/2 tunnel over a connection of its own (an auto_config host whose pool learnt
// HTTP/1.1 but whose new connection negotiated h2) adds x/net/http2's client connection
// goroutines, ended when the tunnel is closed; a pooled one uses the pool's connection
// goroutines, and its stream ends once both directions' copies have returned. Idle and
// duration limits are timers that close both sockets; the access log flush interval is a timer
// that logs. A connection's entries are logged one at a time, and none after the final one.
package tcpproxy
