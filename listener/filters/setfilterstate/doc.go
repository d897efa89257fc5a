// Package setfilterstate is Envoy's envoy.filters.network.set_filter_state network filter
// (extensions.filters.network.set_filter_state.v3.Config): a non-terminal filter that sets
// objects in a new connection's filter state (internal/filterstate) from format strings, for
// the access logs (%FILTER_STATE%), the transport socket matcher and the internal listeners
// the connection reaches. Values (with Compile) is the part it shares with the HTTP filter of
// the same name (httpproxy/filters/setfilterstate), which sets a stream's.
//
// Fields: on_new_connection is implemented; each FilterStateValue's object_key, factory_key,
// format_string (text_format and text_format_source, evaluated against the connection:
// addresses, SNI, connection id, dynamic metadata, filter state set before it),
// read_only, shared_with_upstream (NONE, ONCE, TRANSITIVE: filterstate's NotShared,
// SharedWithUpstreamOnce, SharedWithUpstream) and skip_if_empty are implemented. The
// factories are envoy.string (a string object, filterstate.String) and the well-known key
// envoy.tcp_proxy.cluster (the TCP proxy's cluster, as sni_cluster sets it, also kept as a
// string object); any other factory, a json_format value, on_downstream_tls_handshake and
// on_downstream_data are refused with "not implemented by Legate". A value whose object is
// read-only already is not set (Envoy logs it and goes on). It has no stats.
//
// Concurrency: a Filter is immutable and shared by every connection of its chain; it sets
// the objects on the connection's goroutine before the terminal filter has it.
package setfilterstate
