// Package tap is the HTTP tap filter envoy.filters.http.tap: it matches streams against a
// tap configuration's predicate tree (envoy.config.common.matcher.v3.MatchPredicate) and
// writes the matching ones as envoy.data.tap.v3.TraceWrapper messages — one buffered trace
// per stream or, with output_config.streaming, one segment per part — to a file per trace
// (file_per_tap) or to the admin's POST /tap stream (streaming_admin). A Manager, shared by
// every tap filter of the server and by the admin endpoint, connects admin-configured
// filters (common_config.admin_config.config_id) to the attached /tap session. The filter is
// a filter.StreamFilter: the connection manager feeds each tapped stream's bodies, trailers,
// final status and headers and end to its Tapper.
//
// Concurrency: a Filter is shared by every stream of its connection manager; its tap
// configuration is an atomic pointer swapped by the Manager when a session attaches or
// detaches, so the request path takes no lock while nothing is tapped. A Tapper belongs to
// one stream's goroutine. The Manager guards its filter set and session with one mutex;
// a Session hands traces to the admin goroutine over a bounded channel and drops them
// rather than block a stream when the admin client falls behind.
package tap
