// Package httpproxy is Legate's HTTP connection manager (Envoy's
// envoy.filters.network.http_connection_manager) and router filter
// (envoy.filters.http.router). The route table lives in httpproxy/route, the filter contract in
// httpproxy/filter and the health check filter in httpproxy/filters/healthcheck.
//
// Wiring: Register adds the connection manager's factory to the extension registry (one line
// in extensions.registrations), and package config registers how its typed_config converts.
// Once the cluster manager and the upstream pool registry exist, the server builds the
// connection managers' shared dependencies,
//
//	svc, err := httpproxy.NewService(httpproxy.Deps{
//		Clusters: clusterManager, Pools: poolRegistry, Stats: store, Logger: httpLog,
//		HealthCheckFailed: &healthFailed, // the flag POST /healthcheck/fail sets
//		AccessLogs: accessLogManager, TLS: tlsutil.Deps{Secrets: sds, Registry: certs},
//		LocalClusterName: serviceCluster,
//	})
//
// and gives svc to the listener manager (listener.ManagerConfig.Services, under
// config.HTTPConnectionManagerFilter), whose chains reach it through listener.ChainContext.
// Each chain whose terminal filter is the connection manager gets a Handler built from its
// typed_config as the configuration path converted it (config.ListenerFromProto, with
// config.HTTPConnectionManagerFromProto; routes compiled here by route.Compile).
//
// Codecs: downstream HTTP/1.1 is served by a hand-written codec (one goroutine per
// connection, a 2 KiB read buffer kept while idle, header values sliced from one copy of the
// request head, pooled per-stream state), because net/http's server costs a bufio pair, a
// goroutine and several allocations per request. HTTP/2 (TLS ALPN "h2" and prior-knowledge
// h2c under codec_type AUTO or HTTP2) is served by Legate's own connection code on
// x/net/http2's frame layer (h2srv.go, h2stream.go): one reader goroutine per connection,
// handlers on the connection's reused worker goroutines, no writer goroutine (a handler
// encodes its frames into the connection's buffer and flushes; concurrent responses share a
// write), and a response's HEADERS and DATA go out in one write. Upstream requests go through package pool,
// which picks HTTP/1.1 or HTTP/2 per cluster. Trailers pass both ways: HTTP/2 trailing
// HEADERS, and HTTP/1.1 chunked trailer sections where http_protocol_options.enable_trailers
// allows them (the connection manager's for the client's side, the cluster's for the
// upstream's); without it Envoy's HTTP/1 codec drops them, and so does Legate.
//
// The connection manager's http_protocol_options (config.HTTP1Options) also decide which
// HTTP/1 requests are served (http1.go, refusal: accept_http_10, default_host_for_http_10,
// allow_absolute_url, allow_chunked_length) and how response header names are spelled
// (header_key_format: lower case by default, as Envoy; proper case; or, with preserve_case,
// the client's spelling for the upstream request and the upstream's for the response when
// the cluster preserves case too).
//
// Responses stream: a body is forwarded as it arrives, the HTTP/1 writer flushing whenever
// the next upstream read may wait (pool.Response.BodyReady), while a body already buffered
// goes out with its head in one write; a slow client holds the upstream back through TCP.
// The router builds the upstream request from the inbound one and never changes it; the
// access log shows the upstream request, as Envoy's shows what its router rewrote in place.
// A request body the client cannot deliver (bodyfault.go) is the client's error, charged to
// no host: a malformed one is answered 400 (DPE, http1.codec_error), a client that left is
// not answered (DC, or DR for an HTTP/2 stream reset). A body lent to an HTTP/2 upstream
// exchange is revoked before the stream moves on (bodylease.go).
//
// Upgrades (upgrade.go, extconnect.go): upgrade_configs of the connection manager and of
// routes decide WebSocket (and other Upgrade) requests, CONNECT and HTTP/2 extended CONNECT
// (RFC 8441, on listeners with http2_protocol_options.allow_connect); an accepted upgrade
// gets an upstream connection of its own and its bytes are copied both ways, and one no
// configuration enables is answered 403 (upgrade_failed).
//
// Draining: after each HTTP/1 response the connection closes with "connection: close" when
// the listener's DrainClose says so; when a drain starts, idle HTTP/1 connections are closed
// and HTTP/2 connections receive GOAWAY (in-flight streams finish).
//
// Timeouts (timeout.go): common_http_protocol_options.idle_timeout closes idle HTTP/1
// connections and HTTP/2 connections without streams (h2Lifetime); stream_idle_timeout, or the route's
// idle_timeout, bounds the gaps in a stream's traffic both ways (it restarts with every byte
// received or sent): 408 "stream timeout" (SI) while the request is incomplete, 504 "stream
// timeout" once it is complete and no response came, a reset once the response started;
// request_timeout bounds the whole request's arrival (408 "request timeout");
// request_headers_timeout bounds an HTTP/1 request head from its first byte and an HTTP/2
// header block from its first HEADERS frame (408 "request header timeout"; HTTP/1 then
// closes, HTTP/2 sends GOAWAY and closes, since the peer may send nothing else mid-block);
// common_http_protocol_options.max_connection_duration ends a connection through a drain:
// HTTP/1 responses get "connection: close" and an idle connection closes drain_timeout later,
// HTTP/2 connections get a graceful GOAWAY and are closed
// drain_timeout later if still open. The route's timeout and retry_policy.per_try_timeout
// bound upstream attempts from the end of the request (its head, or its body's last byte),
// as Envoy's do (504 "upstream request timeout"). The overload manager's reduce_timeouts
// scales the idle timeout, stream_idle_timeout, max_connection_duration and the TLS
// handshake's limit; connections waiting under the first and the third are woken, or their
// timers moved, whenever the action's state changes (Handler.timerWatcher), and the stream
// idle timer looks again every eighth of its timeout while the action is configured.
//
// Outlier detection and passive health: the router reports every upstream attempt to its
// cluster (cluster.Cluster.ReportResult: connect success and the status of each response,
// connect failures and resets as local-origin failures, timeouts as 504), and a response with
// x-envoy-immediate-health-check-fail to the cluster's health checker (ReportPassiveFailure).
//
// Filters: HTTP filters (package filter) see request and response headers; a filter that is
// also a filter.StreamFilter is fed each stream's bodies, trailers, final response headers and
// end from both codecs. Filters that are io.Closers are closed with their Handler.
//
// Concurrency: a Handler's configuration (route table, filters, access logs) is immutable and
// shared by its connections. ServeConn hands each connection to a goroutine the Handler owns
// (so that an idle connection parks on a shallow stack the runtime can shrink to 4 KiB); an
// HTTP/2 connection's streams run on its worker goroutines. Per-request state lives in a pooled
// stream owned by the goroutine serving it. Stats are atomics. The Handler's goroutines (the
// connection goroutines and one drain watcher) are stopped by connection closes and Close,
// and Close waits for them.
package httpproxy
