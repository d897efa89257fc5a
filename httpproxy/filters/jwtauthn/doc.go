// Package jwtauthn is the envoy.filters.http.jwt_authn HTTP filter: it verifies the JSON Web
// Tokens of requests against providers and answers the requests that fail their requirement,
// with github.com/go-jose/go-jose/v4 checking signatures (RS, PS, ES, EdDSA and HS
// algorithms).
//
// Providers: issuer, audiences, subjects, require_expiration, max_lifetime,
// clock_skew_seconds (60 s by default), local_jwks (inline or file) and remote_jwks (fetched
// through http_uri's cluster with the data plane's pools within its timeout, kept for
// cache_duration, 5 min by default; one fetch at a time), from_headers (with value_prefix),
// from_params and from_cookies (by default the Authorization header's Bearer token and the
// access_token parameter), forward (false removes the token's header),
// forward_payload_header (base64url, pad_forward_payload_header for padding) and
// payload_in_metadata (the payload under envoy.filters.http.jwt_authn, which rbac's metadata
// matchers read).
//
// Requirements: provider_name, provider_and_audiences, requires_any, requires_all,
// allow_missing_or_failed and allow_missing, in rules (the first rule whose RouteMatch
// matches decides; a rule without requires requires nothing) or named in requirement_map and
// chosen per route by PerRouteConfig's requirement_name; PerRouteConfig disabled turns the
// filter off on its route. bypass_cors_preflight lets CORS preflights through;
// strip_failure_response drops the failure's body and challenge.
//
// A failed request gets 401 (403 when only its audience is wrong) with Envoy's failure
// message as body ("Jwt is missing", "Jwt is expired", "Jwt verification fails", ...), a
// WWW-Authenticate: Bearer realm="<url>" challenge (with error="invalid_token" unless the token
// is missing) and details jwt_authn_access_denied{<message>}. Stats, under
// http.<stat_prefix>.jwt_authn.<filter stat_prefix>: allowed, denied,
// cors_preflight_bypassed, jwks_fetch_success and jwks_fetch_failed.
//
// Refused at load with "not implemented by Legate": filter_state_rules,
// extract_only_without_validation, normalize_payload_in_metadata, header_in_metadata,
// failed_status_in_metadata, jwt_cache_config, claim_to_headers, remote_jwks' async_fetch and
// retry_policy. clear_route_cache is accepted: Legate routes every request after its filters.
//
// Concurrency: a Filter is immutable after New and safe for concurrent use, but for each
// remote JWKS cache, which a mutex guards (held across a fetch, so that concurrent requests
// wait for one fetch rather than each making one).
package jwtauthn
