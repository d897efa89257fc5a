// Package extauthz is the envoy.filters.http.ext_authz HTTP filter: it asks an external
// authorization service about each request and lets the request on, changed as the service
// says, or answers it with the service's denial.
//
// Services: grpc_service with envoy_grpc (envoy.service.auth.v3.Authorization.Check over a
// gRPC channel dialled through the cluster with the data plane's dialer, authority,
// initial_metadata, timeout — 200 ms by default as in Envoy) and http_service (server_uri's
// cluster and timeout, path_prefix; the request keeps the client's method, path and Host and
// carries its Authorization header, the headers authorization_request.allowed_headers
// matches and headers_to_add; a 200 allows, any other status denies, and
// authorization_response's allowed_upstream_headers, allowed_upstream_headers_to_append,
// allowed_client_headers, allowed_client_headers_on_success and dynamic_metadata_from_headers
// pick the answer's headers).
//
// The gRPC CheckRequest carries the source and destination addresses, the request's method,
// path, query, host, scheme, size, id and headers (pseudo-headers included; allowed_headers
// and disallowed_headers filter them), the body with with_request_body (max_request_bytes,
// pack_as_bytes; a larger body is answered 413), context_extensions from the route's
// check_settings, the dynamic metadata of metadata_context_namespaces, and with
// include_tls_session and include_peer_certificate the SNI and the URL-encoded PEM client
// certificate. An OK answer's headers (append and append_action), headers_to_remove,
// query_parameters_to_set/_to_remove and dynamic_metadata (under envoy.filters.http.ext_authz,
// unless enable_dynamic_metadata_ingestion is false) change the request;
// response_headers_to_add go on the response. A denial answers with its status (403 when
// unset), headers and body, details ext_authz_denied and response flag UAEX. When the service
// cannot be reached or fails, the request is answered status_on_error (403) with details
// ext_authz_error, or goes on with failure_mode_allow (and x-envoy-auth-failure-mode-allowed:
// true on the upstream request with failure_mode_allow_header_add).
//
// Per route (ExtAuthzPerRoute): disabled, and check_settings' context_extensions,
// disable_request_body_buffering and with_request_body. clear_route_cache is accepted: Legate
// routes every request after its filters, so a changed request is always routed afresh.
//
// Stats: http.<stat_prefix>.ext_authz.[<filter stat_prefix>.]ok, denied, error, disabled and
// failure_mode_allowed. Envoy's older cluster-scoped copies (cluster.<route
// cluster>.ext_authz.*) are not kept.
//
// Refused at load with "not implemented by Legate": google_grpc, retry policies,
// path_override, filter_enabled, filter_enabled_metadata, deny_at_disable, the typed and route
// metadata context namespaces, validate_mutations, decoder_header_mutation_rules,
// bootstrap_metadata_labels_key, encode_raw_headers, filter_metadata, emit_filter_state_stats,
// max_denied_response_body_bytes, enforce_response_header_limits, shadow_mode,
// clear_route_cache_headers, charge_cluster_response_stats, allow_partial_message and a
// per-route service override.
//
// Concurrency: a Filter is immutable after New and safe for concurrent use; its gRPC channel
// is grpc-go's, shared by every stream. A check blocks only its stream's goroutine.
package extauthz
