// Package pool holds Legate's upstream connection pools: per cluster a Manager, per host of
// the cluster a pool created on first use, with HTTP/1.1 keep-alive connections (a lean
// codec of its own: one buffered write per request head, the response head parsed into a
// reusable Response, bodies streamed from the connection's buffer), HTTP/2 connections
// (prior knowledge or TLS with ALPN, through Legate's internal/h2client) and raw TCP
// connections for the TCP proxy. The pools apply the cluster's connect_timeout,
// max_requests_per_connection, upstream_bind_config (source address and socket_options,
// internal/sockopt), tcp_keepalive, circuit breakers and
// common_http_protocol_options (idle_timeout and max_connection_duration on HTTP/1.1 and
// HTTP/2 connections alike, max_headers_count and max_response_headers_kb on response heads,
// max_stream_duration on exchanges), choose the protocol as the typed upstream
// HttpProtocolOptions say (explicit, the downstream's, or auto_config: what TLS ALPN
// negotiates, per connection), bound what an HTTP/2 response may buffer by
// per_connection_buffer_limit_bytes (the stream's receive window), write and read HTTP/1.1
// as the cluster's Http1ProtocolOptions say (config.HTTP1Options: header names in lower
// case unless header_key_format, or as the downstream spelled them under its preserve_case;
// trailers only with enable_trailers; allow_chunked_length; send_fully_qualified_url), and
// keep a host's connections per authority name when upstream_http_protocol_options sets
// auto_sni or auto_san_validation, per downstream source for the requests of a
// connection with the original_src listener filter, and per downstream when the host's
// transport socket sends a PROXY protocol header (keyed.go: each key its own bounded child
// pool, its connections opened with the key's name as SNI and required SAN, bound to the
// key's source and starting with a header describing the key's downstream, so two clients
// never share an upstream connection), and count the cluster's
// upstream_cx_*/upstream_rq_* stats and the per-host stats /clusters prints. A Registry owns
// one Manager per active cluster.
//
// Concurrency: Manager and Registry are safe for concurrent use. The request path takes no
// lock except the short mutex of one P's idle list of a host (h1idle.go) to take or return an
// idle connection; breakers and stats are atomics. An HTTP/1.1 connection belongs either to
// an idle list or to the one
// exchange using it, and is reused only when nothing followed its last response (checked
// when it is taken from the idle list, idle.go); an exchange whose Request.Downstream ends
// first is abandoned by a context.AfterFunc callback that closes its socket. The only
// goroutine the pools start reads an HTTP/1.1 response head while the request body is sent
// (so that an early answer stops the upload); it ends before RoundTrip returns. h2client
// runs one read loop per HTTP/2 connection, ended by closing it, and a body sender per HTTP/2
// request with a body, stopped by Response.Close; idle timeouts, connection lifetimes and
// stream durations are timers.
// Registry.Run reconciles the pools with cluster snapshots until its context ends.
package pool
