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
// Concurrency: a ClientContext or ServerContext keeps its loaded state (a
// material) in an atomic.Pointer; Reload builds a new one and swaps it in,
// serialised by a mutex. Each material is immutable and owns the
// *tls.Config its handshakes use, with callbacks (GetClientCertificate,
// VerifyConnection) and client session cache or server ticket keys bound
// to it. A handshake uses the material current when it starts, for its
// whole life: a TLS 1.3 session ticket arriving after a Reload is still
// filed with the load that made the connection. ClientContext.Config and
// ConfigForHost return the current load's configuration, so callers ask
// for each connection; ServerContext.Config never changes and picks the
// current load per handshake in GetConfigForClient. A Registry is safe for
// concurrent use; it guards its list of contexts with a mutex and reads
// each context's state through the pointer.
//
// Handshakes are counted in Envoy's ssl.* stats of the context's scope
// (Deps.Stats and Deps.StatPrefix: listener.<address>.ssl.*,
// cluster.<name>.ssl.*). The caller runs the handshake, so it counts it
// (ServerContext.Accept does both; clients use Stats.Handshake). A
// StatsScopes shares one Stats per scope among its contexts under a mutex;
// counting is atomic and takes no lock once a cipher, version or curve has
// its counter. CipherName, VersionName and CurveName give BoringSSL's names
// of what crypto/tls negotiated.
package tlsutil
