// Package accesslog implements Envoy's access-log format strings (the substitution formatter:
// %START_TIME%, %REQ(X?Y):Z%, %RESPONSE_CODE%, …), text and JSON output, and the file sink of
// envoy.access_loggers.file. A Filter is a compiled AccessLog.filter (status code, duration,
// not health check, response flag, log type, header (matched by internal/headermatch, as the
// route table matches), gRPC status, runtime sampling, and, or). Entries carry the
// downstream TLS state (TLSInfo: %DOWNSTREAM_TLS_VERSION%, %DOWNSTREAM_PEER_SUBJECT%, …, and
// the gRPC entries' tls_properties), the connection id (%CONNECTION_ID%) and their access log
// type (TcpConnectionEnd, TcpPeriodic, …) for %ACCESS_LOG_TYPE%, log_type_filter and gRPC logs,
// and the stream's dynamic metadata for %DYNAMIC_METADATA(NS:KEY*)% (a string as it is, other
// values as JSON, which allocates) and the connection's filter state for
// %FILTER_STATE(KEY[:PLAIN|:TYPED|:FIELD:NAME]):Z% (internal/filterstate: TYPED, the default,
// prints the object's typed value as compact JSON, a string object quoted, and keeps its
// JSON type as a lone operator of a typed JSON format; PLAIN its plain string; FIELD one
// field; a missing object or serialization prints "-" or null; Z cuts the text, and PLAIN
// and FIELD in JSON, as Envoy's); package als sends entries to a gRPC access log service.
//
// A format string is parsed once into a Formatter, which is immutable and safe for concurrent
// use; Format appends one log line for an Entry to a caller-owned buffer and allocates only when
// that buffer grows. An Entry is a plain struct filled by the proxy for one request or
// connection and read, never kept, by Format; a Filter is immutable and safe for concurrent
// use. A File is a buffered, reopenable log file safe for concurrent writers; its flush
// goroutine is started by OpenFile and stopped by Close. A Manager shares one File per path and
// reopens them all (admin /reopen_logs).
package accesslog
