// Package cors is the envoy.filters.http.cors HTTP filter (typed_config
// envoy.extensions.filters.http.cors.v3.Cors, which has no fields): it answers CORS preflight
// requests itself and adds the access-control headers to the responses of cross-origin
// requests, from the CORS policies of the request's route.
//
// The policies come, most specific first, from the typed_per_filter_config entries named
// after the filter (envoy.extensions.filters.http.cors.v3.CorsPolicy) at the weighted cluster,
// route, virtual host and route configuration levels; when no level has one, from the
// deprecated cors fields of the route's action and of its virtual host
// (envoy.config.route.v3.CorsPolicy), as Envoy. Each setting is taken from the first policy
// that sets it; filter_enabled and shadow_enabled from the first policy alone.
//
// Every CorsPolicy field is implemented: allow_origin_string_match (every StringMatcher;
// a matcher that matches "*" allows every origin), allow_methods and allow_headers ("*"
// echoes the request's Access-Control-Request-Method / -Headers), expose_headers, max_age,
// allow_credentials, allow_private_network_access, forward_not_matching_preflights (default
// true), filter_enabled (default 100%) and shadow_enabled (default off) with their runtime
// keys. A request without a route is left alone.
//
// Stats, under the connection manager's prefix: http.<stat_prefix>.cors.origin_valid and
// origin_invalid. A preflight answered by the filter has response code details cors_response.
//
// Concurrency: a Filter and its compiled policies are immutable and safe for concurrent use;
// what a request needs between its request and its response is kept in its filter.Exchange.
package cors
