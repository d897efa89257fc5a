// Package route compiles an Envoy RouteConfiguration (envoy.config.route.v3) into an immutable
// route table and matches requests against it: virtual hosts by domain, routes by path, headers,
// query parameters and runtime fraction, and the resulting action (cluster, weighted clusters,
// cluster header, redirect, direct response) with its rewrites, timeouts, retry and hash
// policies, subset metadata, header mutations and upgrade_configs (Route.UpgradeEnabled,
// Route.Connect).
//
// Concurrency: Compile converts the proto once; the Table and everything reachable from it are
// never modified afterwards and are safe for concurrent use without locks. A new route
// configuration (RDS update) is a new Table, swapped in by the owner. Route and HashKey do not
// allocate in the common case.
//
// Not implemented (Compile rejects them with an error rather than routing wrongly):
// path_match_policy, tls_context, dynamic_metadata, filter_state and cookies matches,
// cluster_specifier_plugin, host_rewrite_path_regex, filter_state hash policies, vhds,
// retry_priority, and retry host predicates other than previous_hosts and omit_canary_hosts.
// typed_per_filter_config (at every level) is compiled through Options.PerFilterConfig and
// found with Match.PerFilterConfig; FilterConfig.disabled takes the filter out of the chain
// for requests on that route (Match.FilterDisabled, Table.DisablesFilters).
// request_mirror_policies compile into Route.Mirrors (request_headers_mutations refused).
// The deprecated cors fields of virtual hosts and routes go through Options.PerFilterConfig as
// entries of the CORS filter's CorsPolicy type (Match.LegacyCors).
// decorator and tracing compile into Route.Decorator and Route.Tracing (the connection
// manager names and samples spans with them).
// The rate_limits of virtual hosts and routes (and include_vh_rate_limits) compile into
// RateLimit descriptors' actions (CompileRateLimits) for the rate limit filters; the actions
// and options Legate does not implement are refused.
// A virtual host's matcher (the unified matcher API, internal/matcher) replaces its routes:
// its actions are envoy.config.route.v3.Route or RouteList, compiled as routes are, and the
// first route of the matched action whose own match matches serves; its inputs come from
// Options.Extensions (Register adds envoy.matching.inputs.request_headers, whose
// header_name may be a pseudo-header). Other inputs and actions are refused with their path.
// Ignored, as they belong to other filters or to stats:
// virtual_clusters, hedge_policy, internal redirects and buffer limits.
package route
