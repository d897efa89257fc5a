// Package setfilterstate is Envoy's envoy.filters.http.set_filter_state HTTP filter
// (extensions.filters.http.set_filter_state.v3.Config): it sets objects in a request's
// filter state (filter.Exchange.FilterState, whose parent is the connection's) from format
// strings evaluated on the request headers, for the access logs (%FILTER_STATE%).
//
// Fields: on_request_headers is implemented with the network filter's values
// (listener/filters/setfilterstate.Compile: object_key, factory_key envoy.string or the
// well-known envoy.tcp_proxy.cluster kept as a string, text format_string, read_only,
// shared_with_upstream, skip_if_empty; other factories and json_format are refused with "not
// implemented by Legate"). The format strings see the request (%REQ(...)%, :authority,
// :path, the protocol), the client address as the connection manager decided it, the
// stream's dynamic metadata and filter state. clear_route_cache is accepted: Legate routes
// a request after its filters, and routes do not read filter state. Objects shared with
// upstream are not carried by the HTTP pools' shared connections. It has no stats and no
// per-route configuration.
//
// Concurrency: a Filter is immutable and safe for concurrent use; it writes the stream's
// filter state on the stream's goroutine.
package setfilterstate
