// Package proxyprotocol is Envoy's envoy.filters.listener.proxy_protocol listener filter
// (extensions.filters.listener.proxy_protocol.v3.ProxyProtocol): it reads the HAProxy PROXY
// protocol header, version 1 (text) or 2 (binary), that a load balancer in front of Legate
// puts at the start of each connection, and gives the listener the addresses it carries. The
// listener manager then uses the header's source as the connection's remote address and its
// destination as the restored local address everywhere (filter chain matching, access logs,
// x-forwarded-for with use_remote_address, ORIGINAL_DST clusters); the socket's own peer stays
// available as the direct remote address (%DOWNSTREAM_DIRECT_REMOTE_ADDRESS%,
// direct_source_prefix_ranges).
//
// Behaviour follows Envoy's filter: a LOCAL command (v2) or an UNKNOWN protocol (v1) keeps the
// socket's addresses; v2's INET and INET6 families over STREAM or DGRAM are read, any other
// family (UNSPEC, UNIX) with the PROXY command closes the connection; a v1 line longer than
// 108 bytes, non-unicast or mismatched addresses, and malformed TLVs close it too. Every v2
// TLV is parsed and checked.
//
// Fields:
//   - allow_requests_without_proxy_protocol: implemented; a connection whose first bytes
//     cannot start a header passes untouched (proxy_proto.not_found_allowed).
//   - disallowed_versions: implemented; a header of a disallowed version closes the
//     connection (proxy_proto.versions.<v>.disallowed).
//   - stat_prefix: implemented (proxy_proto.<stat_prefix>.*).
//   - rules: implemented; a v2 TLV of a rule's tlv_type puts its value, a string (invalid
//     UTF-8 replaced by '!', as Envoy sanitizes it, or base64 with value_string_encoding
//     BASE64), under on_tlv_present's key in the connection's dynamic metadata, in its
//     metadata_namespace or envoy.filters.listener.proxy_protocol. The TCP proxy's and the
//     listener's access logs read it (%DYNAMIC_METADATA(NS:KEY)%); as in Envoy, HTTP streams
//     have metadata of their own and do not see it.
//   - pass_through_tlvs: implemented; the TLVs it selects are kept with the connection
//     (listener.Conn.ProxyProtocolTLVs) for an upstream PROXY protocol socket.
//   - tlv_location: implemented. With FILTER_STATE the rules' values go, instead of dynamic
//     metadata, into one object of the connection's filter state, under
//     envoy.network.proxy_protocol.tlv (TLVObject, not shared with upstream connections),
//     whose fields are the rules' keys (metadata_namespace is not used): access logs read
//     %FILTER_STATE(envoy.network.proxy_protocol.tlv:FIELD:KEY)%, and its typed value, a
//     JSON object of the keys, with %FILTER_STATE(envoy.network.proxy_protocol.tlv)%. It has
//     no plain serialization (Envoy's documentation names none).
//
// The upstream transport socket envoy.transport_sockets.proxy_protocol
// (ProxyProtocolUpstreamTransport) re-sends a header: tlsutil registers and checks it,
// internal/proxyproto writes it and the cluster's pools send it before any TLS. Implemented:
// config.version (V1 or V2); config.added_tlvs with value; the host-level added_tlvs of an
// endpoint's typed_filter_metadata["envoy.transport_sockets.proxy_protocol"] (a
// PerHostConfig, read at load, a value of another type refused; only values, as in Envoy);
// config.pass_through_tlvs (of the TLVs the listener filter kept). A v2 header carries the
// host's TLVs, then the socket's of a type the host does not set, then the passed-through
// ones of a type neither sets, as Envoy orders them. The header describes the downstream
// connection an upstream connection is made for, Envoy's PROXY protocol state: the TCP
// proxy's, and every HTTP connection manager's (Envoy's add_proxy_protocol_connection_state,
// whose default, true, Legate keeps: false is refused), its addresses the PROXY header's when
// there was one. The pools are keyed by it as Envoy hashes that state into its pool key: the
// addresses (so an HTTP downstream connection has upstream connections of its own), and with
// tlv_as_pool_key its TLVs too (pool/keyed.go). A connection made for no downstream (Legate's
// own requests) describes itself in v1 and is v2's LOCAL command. Addresses that are not IP
// (an internal listener's) give v1's UNKNOWN and v2's LOCAL header; with
// allow_unspecified_address, a v2 PROXY command of family AF_UNSPEC carrying the TLVs, and
// the addresses are left out of the pool key (some receivers, go-proxyproto and Envoy's
// listener filter among them, refuse that header). Refused ("not implemented by Legate"):
// added_tlvs' format_string, whose access-log commands format a stream's entry, which the
// pool does not have when it opens a connection.
//
// Stats, as Envoy's: downstream_cx_proxy_proto_error (root, every connection the filter
// closes), proxy_proto.[<stat_prefix>.]not_found_allowed, not_found_disallowed, and
// versions.v1.{found,disallowed,error}, versions.v2.{found,disallowed,error}. Listeners with
// the same stat_prefix share them, as in Envoy.
package proxyprotocol
