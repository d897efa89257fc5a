// Package headermutation is the envoy.filters.http.header_mutation HTTP filter (typed_config
// envoy.extensions.filters.http.header_mutation.v3.HeaderMutation): it adds, overwrites and
// removes request headers before routing and response headers before they are sent.
//
// Implemented: mutations.request_mutations and mutations.response_mutations, each an ordered
// list of append (a HeaderValueOption with its append_action and keep_empty_value), remove
// and remove_on_match (every header whose lower-case name the matcher matches);
// most_specific_header_mutations_wins; the per-route HeaderMutationPerRoute of every
// typed_per_filter_config level. By default the most specific level's mutations go first and
// the filter's last (they win); with most_specific_header_mutations_wins the filter's go
// first and the most specific level's last.
//
// As an upstream filter (the router's upstream_http_filters) it runs once per upstream
// attempt, after the host is picked: its request mutations go to that attempt only, and
// value formatters see the attempt's %UPSTREAM_HOST% and %UPSTREAM_CLUSTER%; its response
// mutations apply to the attempt that answered, before the connection manager's filters.
//
// Refused with "not implemented by Legate": query_parameter_mutations,
// request_trailers_mutations, response_trailers_mutations, formatters, and mutations of
// pseudo-headers and host.
//
// Concurrency: a Filter and its mutations are immutable and safe for concurrent use.
package headermutation
