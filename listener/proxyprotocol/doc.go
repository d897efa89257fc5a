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
//   - rules, pass_through_tlvs, tlv_location: refused with "not implemented by Legate":
//     they feed dynamic metadata and filter state, which nothing in Legate reads yet.
//
// Stats, as Envoy's: downstream_cx_proxy_proto_error (root, every connection the filter
// closes), proxy_proto.[<stat_prefix>.]not_found_allowed, not_found_disallowed, and
// versions.v1.{found,disallowed,error}, versions.v2.{found,disallowed,error}. Listeners with
// the same stat_prefix share them, as in Envoy.
package proxyprotocol
