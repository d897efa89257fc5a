package config

import (
	"fmt"

	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	upstreamcodecv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/upstream_codec/v3"
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
	// upstream_http_filters: the chain must end with the codec; filters before it would run
	// on each upstream request, which Legate does not do.
	for i, f := range pb.GetUpstreamHttpFilters() {
		if f.GetTypedConfig().GetTypeUrl() != upstreamCodecTypeURL || i != len(pb.GetUpstreamHttpFilters())-1 {
			return r, fmt.Errorf("%s.upstream_http_filters[%d] = %q: only envoy.filters.http.upstream_codec, alone, is implemented; upstream HTTP filters are not implemented by Legate", path, i, f.GetName())
		}
	}
	r.StartChildSpan = pb.GetStartChildSpan()
	r.SuppressEnvoyHeaders = pb.GetSuppressEnvoyHeaders()
	return r, nil
}
