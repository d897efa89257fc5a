// Package tlsutil turns Envoy's TLS transport-socket configuration
// (envoy.extensions.transport_sockets.tls.v3 UpstreamTlsContext,
// DownstreamTlsContext and Secret) into plain Go configuration and live
// *tls.Config values, and keeps the registry of loaded certificates behind
// /certs and server.days_until_first_cert_expiring.
//
// Config flows one way: UpstreamFromProto, DownstreamFromProto and
// SecretFromProto convert and validate protos without touching the file
// system; NewClientContext and NewServerContext read the data sources,
// resolve sds_secret_config names through a SecretProvider and build the
// TLS state.
//
// Concurrency: a ClientContext or ServerContext keeps its loaded state in an
// atomic.Pointer. Its *tls.Config is built once and never changes; its
// callbacks (GetConfigForClient, GetClientCertificate, VerifyConnection and
// the client session cache) read the pointer at handshake time, so Reload
// swaps certificates for new handshakes while established connections keep
// what they negotiated. Reload calls on one context are serialised by a
// mutex. A Registry is safe for concurrent use; it guards its list of
// contexts with a mutex and reads each context's state through the pointer.
package tlsutil
