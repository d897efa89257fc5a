package route

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// decision says what Compile does with a field of a route configuration message.
type decision uint8

const (
	// implemented: Compile reads the field, and refuses itself the values it cannot honour.
	implemented decision = iota
	// refused: a set field (non-default value, present message, non-empty list) stops
	// Compile with "<path>: not implemented by Legate".
	refused
	// ignored: accepted without effect, because it changes no traffic (why, beside the entry).
	ignored
)

// routeFields decides every field of the route configuration messages Compile walks, so that
// none is silently ignored: a field a newer go-control-plane adds is refused (audit) until it
// is decided here, and TestRouteFieldsDecided fails for it. hedge_policy is "implemented"
// because checkHedge refuses exactly the policies that would make Envoy hedge.
var routeFields = map[protoreflect.FullName]map[protoreflect.Name]decision{
	"envoy.config.route.v3.RouteConfiguration": {
		"name": implemented, "virtual_hosts": implemented, "vhds": implemented,
		"response_headers_to_add": implemented, "response_headers_to_remove": implemented,
		"request_headers_to_add": implemented, "request_headers_to_remove": implemented,
		"most_specific_header_mutations_wins": implemented, "validate_clusters": implemented,
		"max_direct_response_body_size_bytes": implemented, "cluster_specifier_plugins": implemented,
		"ignore_port_in_host_matching": implemented, "typed_per_filter_config": implemented,
		// Nothing in Legate reads route configuration metadata; it steers no request.
		"metadata":              ignored,
		"internal_only_headers": refused, "request_mirror_policies": refused, "vhost_header": refused,
		"ignore_path_parameters_in_path_matching": refused, "route_specifiers": refused,
	},
	"envoy.config.route.v3.VirtualHost": {
		"name": implemented, "domains": implemented, "routes": implemented, "matcher": implemented,
		"require_tls": implemented, "rate_limits": implemented, "request_headers_to_add": implemented,
		"request_headers_to_remove": implemented, "response_headers_to_add": implemented,
		"response_headers_to_remove": implemented, "cors": implemented,
		"typed_per_filter_config": implemented, "retry_policy": implemented, "hedge_policy": implemented,
		// Nothing in Legate reads virtual host metadata; it steers no request.
		"metadata":                      ignored,
		"include_request_attempt_count": implemented, "include_attempt_count_in_response": implemented,
		"virtual_clusters": refused, "retry_policy_typed_config": refused,
		"include_is_timeout_retry_header": refused, "per_request_buffer_limit_bytes": refused,
		"request_body_buffer_limit": refused, "request_mirror_policies": refused, "route_specifiers": refused,
	},
	"envoy.config.route.v3.Route": {
		"name": implemented, "match": implemented, "route": implemented, "redirect": implemented,
		"direct_response": implemented, "filter_action": implemented, "non_forwarding_action": implemented,
		"metadata": implemented, "decorator": implemented, "typed_per_filter_config": implemented,
		"request_headers_to_add": implemented, "request_headers_to_remove": implemented,
		"response_headers_to_add": implemented, "response_headers_to_remove": implemented,
		"tracing":     implemented,
		"stat_prefix": refused, "per_request_buffer_limit_bytes": refused,
		"request_body_buffer_limit": refused, "route_specifiers": refused,
	},
	"envoy.config.route.v3.RouteAction": {
		"cluster": implemented, "cluster_header": implemented, "weighted_clusters": implemented,
		"cluster_specifier_plugin": implemented, "inline_cluster_specifier_plugin": implemented,
		"metadata_match": implemented, "prefix_rewrite": implemented, "regex_rewrite": implemented,
		"path_rewrite_policy": implemented, "host_rewrite_literal": implemented,
		"auto_host_rewrite": implemented, "host_rewrite_header": implemented,
		"host_rewrite_path_regex": implemented, "timeout": implemented, "idle_timeout": implemented,
		"retry_policy": implemented, "request_mirror_policies": implemented, "priority": implemented,
		"rate_limits": implemented, "include_vh_rate_limits": implemented, "hash_policy": implemented,
		"cors": implemented, "upgrade_configs": implemented, "hedge_policy": implemented,
		// Envoy reads it only with internal_redirect_action HANDLE_INTERNAL_REDIRECT, which is
		// refused; alone it changes nothing.
		"max_internal_redirects":          ignored,
		"cluster_not_found_response_code": implemented, "max_stream_duration": implemented,
		"max_grpc_timeout": implemented, "grpc_timeout_offset": implemented,
		"path_rewrite": refused, "host_rewrite": refused,
		"append_x_forwarded_host": refused, "flush_timeout": refused, "early_data_policy": refused,
		"retry_policy_typed_config": refused, "internal_redirect_policy": refused,
		"internal_redirect_action": refused, // refused when HANDLE_INTERNAL_REDIRECT (the default passes through)
	},
	"envoy.config.route.v3.RetryPolicy": {
		"retry_on": implemented, "num_retries": implemented, "per_try_timeout": implemented,
		"per_try_idle_timeout": implemented, "retry_priority": implemented,
		"retry_host_predicate": implemented, "retry_options_predicates": implemented,
		"host_selection_retry_max_attempts": implemented, "retriable_status_codes": implemented,
		"retry_back_off": implemented, "retriable_headers": implemented,
		"retriable_request_headers":   implemented,
		"rate_limited_retry_back_off": refused, "refresh_cluster_on_retry": refused,
	},
	"envoy.config.route.v3.RedirectAction": {
		"https_redirect": implemented, "scheme_redirect": implemented, "host_redirect": implemented,
		"port_redirect": implemented, "path_redirect": implemented, "prefix_rewrite": implemented,
		"regex_rewrite": implemented, "path_rewrite": implemented, "response_code": implemented,
		"strip_query": implemented,
	},
	"envoy.config.route.v3.DirectResponseAction": {
		"status": implemented, "body": implemented, "body_format": implemented,
	},
	"envoy.config.route.v3.WeightedCluster": {
		"clusters": implemented, "total_weight": implemented, "header_name": implemented,
		"use_hash_policy":    implemented,
		"runtime_key_prefix": refused,
	},
	"envoy.config.route.v3.WeightedCluster.ClusterWeight": {
		"name": implemented, "cluster_header": implemented, "weight": implemented,
		"metadata_match": implemented, "request_headers_to_add": implemented,
		"request_headers_to_remove": implemented, "response_headers_to_add": implemented,
		"response_headers_to_remove": implemented, "typed_per_filter_config": implemented,
		"host_rewrite_literal": implemented,
	},
	"envoy.config.route.v3.RouteMatch": {
		"prefix": implemented, "path": implemented, "safe_regex": implemented,
		"connect_matcher": implemented, "path_separated_prefix": implemented,
		"path_match_policy": implemented, "case_sensitive": implemented, "runtime_fraction": implemented,
		"headers": implemented, "query_parameters": implemented, "cookies": implemented,
		"grpc": implemented, "tls_context": implemented, "dynamic_metadata": implemented,
		"filter_state": implemented,
	},
	"envoy.config.route.v3.HeaderMatcher": {
		"name": implemented, "exact_match": implemented, "safe_regex_match": implemented,
		"range_match": implemented, "present_match": implemented, "prefix_match": implemented,
		"suffix_match": implemented, "contains_match": implemented, "string_match": implemented,
		"invert_match": implemented, "treat_missing_header_as_empty": implemented,
	},
	"envoy.config.route.v3.QueryParameterMatcher": {
		"name": implemented, "string_match": implemented, "present_match": implemented,
	},
	"envoy.config.route.v3.RetryPolicy.RetryBackOff": {
		"base_interval": implemented, "max_interval": implemented,
	},
}

// audit refuses the first set field of m (depth first, in field order) that routeFields
// refuses or does not decide, naming its path. It descends into the messages routeFields
// decides, so a refused field is found wherever it sits.
func audit(m protoreflect.Message, path string) error {
	table := routeFields[m.Descriptor().FullName()]
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		fpath := path + string(fd.Name())
		if d, ok := table[fd.Name()]; !ok || d == refused {
			err = fmt.Errorf("%s: not implemented by Legate", fpath)
			return false
		}
		if fd.Kind() != protoreflect.MessageKind || fd.IsMap() || routeFields[fd.Message().FullName()] == nil {
			return true
		}
		if fd.IsList() {
			l := v.List()
			for i := range l.Len() {
				if err = audit(l.Get(i).Message(), fmt.Sprintf("%s[%d].", fpath, i)); err != nil {
					return false
				}
			}
			return true
		}
		err = audit(v.Message(), fpath+".")
		return err == nil
	})
	return err
}

// checkHedge refuses a hedge policy that would hedge: Envoy sends more than one request
// only with initial_requests > 1, a non-zero additional_request_chance or
// hedge_on_per_try_timeout; the default policy is what Legate does.
func checkHedge(p *routev3.HedgePolicy, path string) error {
	switch {
	case p == nil:
		return nil
	case p.GetInitialRequests().GetValue() > 1:
		return fmt.Errorf("%s.initial_requests = %d: not implemented by Legate", path, p.GetInitialRequests().GetValue())
	case p.GetAdditionalRequestChance().GetNumerator() > 0:
		return fmt.Errorf("%s.additional_request_chance: not implemented by Legate", path)
	case p.GetHedgeOnPerTryTimeout():
		return fmt.Errorf("%s.hedge_on_per_try_timeout: not implemented by Legate", path)
	}
	return nil
}
