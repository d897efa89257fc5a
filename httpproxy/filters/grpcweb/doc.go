// Package grpcweb is the envoy.filters.http.grpc_web HTTP filter (typed_config
// envoy.extensions.filters.http.grpc_web.v3.GrpcWeb, which has no fields): it lets gRPC-Web
// clients (browsers) call gRPC services over HTTP/2 upstreams.
//
// A request whose content-type is exactly application/grpc-web, application/grpc-web+proto,
// application/grpc-web-text or application/grpc-web-text+proto becomes a gRPC request:
// content-type application/grpc, te: trailers, grpc-accept-encoding identity,deflate,gzip when
// absent, no content-length; a grpc-web-text body is decoded from base64 four characters at a
// time as it streams (a body that is not base64 fails the request: 400, as a malformed body;
// Envoy answers "Bad gRPC-web request, invalid base64 data." with details
// grpc_base_64_decode_failed, which Legate does not reproduce).
//
// Its response becomes gRPC-Web: content-type application/grpc-web+proto
// (application/grpc-web-text+proto when the request's accept asked for text), no
// content-length, the body passed through as it streams (for text, each whole gRPC frame
// base64-encoded on its own) and the gRPC trailers sent as the body's last frame (flag 0x80,
// "name:value\r\n" lines) instead of HTTP trailers. A trailers-only response keeps its
// grpc-status in the headers. A response that is not gRPC (an HTTP error from the upstream, a
// local reply) gets grpc-status from its HTTP status (gRPC's mapping) and grpc-message from
// its body's first 16 KiB, percent-encoded, and an empty body; its head waits for the body
// (filter.Exchange.HoldResponseHeaders).
//
// CORS, which browsers need for gRPC-Web, is the cors filter's: put it before grpc_web and
// expose grpc-status and grpc-message (see the e2e test's configuration).
//
// Not done: Envoy's per-method cluster stats (cluster.<name>.grpc-web.<service>.<method>.*).
//
// Concurrency: a Filter has no state; what a request needs for its response is kept in its
// filter.Exchange.
package grpcweb
