// Package als is Envoy's gRPC access log service client, shared by the HTTP connection manager
// (envoy.access_loggers.http_grpc: one HTTPAccessLogEntry per request) and the TCP proxy
// (envoy.access_loggers.tcp_grpc: one TCPAccessLogEntry per connection, plus intermediate ones
// for access_log_flush_interval and flush_access_log_on_connected). Entries are buffered per
// logger and streamed to envoy.service.accesslog.v3.AccessLogService/StreamAccessLogs on a
// cluster of the bootstrap (common_config.grpc_service.envoy_grpc.cluster_name).
//
// A Manager shares one logger per distinct configuration and kind, as Envoy's logger cache
// does. A logger buffers entries until buffer_size_bytes (default 16384) is reached or every
// buffer_flush_interval (default 1 s); the first message of each stream carries the node and
// log_name identifier. While the stream is down the buffer is kept until it is full; entries
// past it are dropped and counted in access_logs.grpc_access_log.logs_dropped (the accepted
// ones in logs_written). A flush that finds no stream asks for one, so a restarted service is
// reconnected by the next flush. custom_tags of kinds literal, environment and request_header
// are logged (a TCP entry has no request headers, so its request_header tags take their
// default); metadata tags are refused. filter_state_objects_to_log puts the named objects of
// the entry's filter state (internal/filterstate) in filter_state_objects, each its typed
// form in an Any (a string object's StringValue, a header map's HeaderMap, another's JSON
// value). grpc_stream_retry_policy is not used: a failed stream is retried by
// the next flush.
//
// The same Manager makes envoy.access_loggers.open_telemetry loggers (OTelLogger): each entry
// becomes an OTLP LogRecord (body and attributes formatted by the substitution formatter, the
// request's start as its time), buffered under the same common_config rules (or the
// config's own grpc_service, log_name and buffer fields) and exported by unary
// LogsService/Export calls, or with http_service as OTLP/HTTP protobuf POSTs to its http_uri
// through the cluster (internal/httpservice), under a Resource with Envoy's built-in labels,
// then the resource detectors' attributes (environment, static_config: internal/otelres),
// then resource_attributes; counted in access_logs.open_telemetry_access_log[.<stat_prefix>].*.
// formatters are refused.
//
// Concurrency: HTTPLogger.Log and TCPLogger.Log are called by connection goroutines; they
// convert the entry before returning (the caller reuses it) and take the logger's mutex
// briefly, never waiting on the network. Each logger has one goroutine that owns its gRPC
// stream, started by Manager.Run (or at creation when Run is running) and awaited by Run
// before it returns.
package als
