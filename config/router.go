package config

import (
	"fmt"

	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	upstreamcodecv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/upstream_codec/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// Router is the router filter's typed_config (envoy.extensions.filters.http.router.v3.Router),
// every field decided: read here, or refused when set to what Legate does not do.
type Router struct {
	// StartChildSpan gives each upstream attempt a span (as spawn_upstream_span does).
	StartChildSpan bool
	// SuppressEnvoyHeaders keeps the router from adding its x-envoy-* headers
	// (x-envoy-expected-rq-timeout, x-envoy-upstream-service-time, x-envoy-overloaded).
	SuppressEnvoyHeaders bool
	// UpstreamFilters are upstream_http_filters but the terminal upstream_codec: the filters
	// each upstream attempt runs, after the host is picked (see UpstreamFilters).
	UpstreamFilters []HTTPFilter
}

// upstreamFilterTypes are the HTTP filters Legate runs in an upstream filter chain: those
// Envoy builds upstream (a dual factory) that Legate has and whose work an attempt can do.
var upstreamFilterTypes = map[string]bool{
	"type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation": true,
	"type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer":                  true,
}

// UpstreamFilters reads an upstream HTTP filter chain (the router's upstream_http_filters, a
// cluster's HttpProtocolOptions.http_filters): it must end with upstream_codec, which is the
// codec Legate's pools are, and the filters before it must be ones Legate runs upstream
// (header_mutation, buffer); path names the field in errors. It returns the filters before
// the codec.
func UpstreamFilters(path string, fs []*hcmv3.HttpFilter) ([]HTTPFilter, error) {
	var out []HTTPFilter
	for i, f := range fs {
		at := fmt.Sprintf("%s[%d]", path, i)
		url := f.GetTypedConfig().GetTypeUrl()
		last := i == len(fs)-1
		switch {
		case url == upstreamCodecTypeURL && last:
			return out, nil
		case url == upstreamCodecTypeURL || last:
			return nil, fmt.Errorf("%s = %q: the last upstream filter must be envoy.filters.http.upstream_codec, and only the last", at, f.GetName())
		case f.GetIsOptional() || f.GetDisabled() || f.GetConfigDiscovery() != nil:
			return nil, fmt.Errorf("%s = %q: is_optional, disabled and config_discovery not implemented by Legate for upstream filters", at, f.GetName())
		case !upstreamFilterTypes[url]:
			return nil, fmt.Errorf("%s = %q (%s): not implemented by Legate as an upstream filter (only header_mutation and buffer are)", at, f.GetName(), url)
		}
		out = append(out, HTTPFilter{Name: f.GetName(), TypedConfig: f.GetTypedConfig()})
	}
	return out, nil
}

// upstreamCodecTypeURL is the terminal upstream HTTP filter, the codec Legate's pools are.
const upstreamCodecTypeURL = "type.googleapis.com/envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec"

var _ = upstreamcodecv3.UpstreamCodec{} // links the type, which upstream_http_filters name

// routerFromProto decodes the router's typed_config (nil: defaults); path names it in errors.
func routerFromProto(path string, tc *anypb.Any) (Router, error) {
	var r Router
	if tc == nil {
		return r, nil
	}
	var pb routerv3.Router
	if err := tc.UnmarshalTo(&pb); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	if err := pb.ValidateAll(); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	refuse := func(field string) error {
		return fmt.Errorf("%s.%s: not implemented by Legate", path, field)
	}
	switch {
	case pb.GetDynamicStats() != nil && !pb.GetDynamicStats().GetValue():
		return r, refuse("dynamic_stats = false (Legate always keeps the per-code upstream stats)")
	case len(pb.GetUpstreamLog()) > 0:
		return r, refuse("upstream_log")
	case pb.GetUpstreamLogOptions() != nil:
		return r, refuse("upstream_log_options")
	case len(pb.GetStrictCheckHeaders()) > 0:
		return r, refuse("strict_check_headers")
	case pb.GetRespectExpectedRqTimeout():
		return r, refuse("respect_expected_rq_timeout")
	case pb.GetSuppressGrpcRequestFailureCodeStats():
		return r, refuse("suppress_grpc_request_failure_code_stats")
	}
	var err error
	if r.UpstreamFilters, err = UpstreamFilters(path+".upstream_http_filters", pb.GetUpstreamHttpFilters()); err != nil {
		return r, err
	}
	r.StartChildSpan = pb.GetStartChildSpan()
	r.SuppressEnvoyHeaders = pb.GetSuppressEnvoyHeaders()
	return r, nil
}
