// Package rbac is the envoy.filters.http.rbac HTTP filter: it allows or denies each request by
// role-based access control policies, as Envoy's RBAC filter does.
//
// Implemented: rules and shadow_rules (envoy.config.rbac.v3.RBAC) with the ALLOW, DENY and LOG
// actions; policies are tried in name order and the first that matches decides. A policy
// matches when one of its permissions and one of its principals match. Permissions: and_rules,
// or_rules, not_rule, any, header, url_path, destination_ip, destination_port,
// destination_port_range, metadata, sourced_metadata (DYNAMIC) and requested_server_name.
// Principals: and_ids, or_ids, not_id, any, authenticated (the peer certificate's URI SANs,
// DNS SANs, then subject), source_ip and direct_remote_ip (the socket's peer), remote_ip (the
// address x-forwarded-for trusts), header, url_path, metadata and sourced_metadata (DYNAMIC).
// Metadata matchers read the stream's dynamic metadata, which earlier filters write (jwt_authn's
// payload_in_metadata). rules_stat_prefix and shadow_rules_stat_prefix prefix the stats and the
// dynamic metadata keys as in Envoy. RBACPerRoute in typed_per_filter_config replaces the
// filter's rules and shadow rules on its route; an empty one (no rbac) disables the filter
// there.
//
// A denied request gets 403 "RBAC: access denied" with response code details
// rbac_access_denied_matched_policy[<policy>] ("none" when no policy matched). Stats, under the
// connection manager's http.<stat_prefix>.: rbac.<rules_stat_prefix>allowed and denied,
// rbac.<shadow_rules_stat_prefix>shadow_allowed and shadow_denied. Dynamic metadata under
// envoy.filters.http.rbac: enforced_engine_result, enforced_effective_policy_id,
// shadow_engine_result and shadow_effective_policy_id ("allowed"/"denied" and the deciding
// policy); the LOG action sets envoy.common access_log_hint.
//
// Refused at load with "not implemented by Legate": CEL conditions (condition,
// checked_condition, cel_config: Legate has no CEL evaluator), the matcher API forms (matcher,
// shadow_matcher, permission matcher, uri_template, principal custom), filter_state
// principals (Legate keeps no filter state), ROUTE sourced metadata, track_per_rule_stats and
// audit_logging_options.
//
// Concurrency: a Filter and its per-route configurations are immutable after they are built
// and safe for concurrent use; per-request state lives on the stream's goroutine.
package rbac
