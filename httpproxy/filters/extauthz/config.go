package extauthz

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/legateproxy/legate/internal/headermatch"
)

// defaultTimeout is Envoy's ext_authz timeout when the gRPC service sets none.
const defaultTimeout = 200 * time.Millisecond

// settings is the checked configuration shared by both services.
type settings struct {
	failureModeAllow, failureModeAllowHeaderAdd bool
	statusOnError                               int
	statPrefix                                  string
	bodyLimit                                   int64 // with_request_body.max_request_bytes; 0: no body
	packAsBytes                                 bool
	includePeerCert, includeTLSSession          bool
	metadataNamespaces                          []string
	allowed, disallowed                         *nameList // request headers sent to the service; nil: every one / none
	ingestMetadata                              bool
}

// nameList is a compiled ListStringMatcher over lower-case header names.
type nameList []headermatch.String

func (l nameList) match(name string) bool {
	for i := range l {
		if l[i].Match(name) {
			return true
		}
	}
	return false
}

func compileList(m *matcherv3.ListStringMatcher, path string) (*nameList, error) {
	if m == nil {
		return nil, nil
	}
	l := make(nameList, 0, len(m.GetPatterns()))
	for i, p := range m.GetPatterns() {
		s, err := headermatch.CompileString(p, fmt.Sprintf("%s.patterns[%d]", path, i))
		if err != nil {
			return nil, err
		}
		l = append(l, s)
	}
	return &l, nil
}

// refusals are fields Legate does not implement, with whether each is set.
func refusals(pb *extauthzv3.ExtAuthz) []struct {
	field string
	set   bool
} {
	return []struct {
		field string
		set   bool
	}{
		{"filter_enabled", pb.GetFilterEnabled() != nil},
		{"filter_enabled_metadata", pb.GetFilterEnabledMetadata() != nil},
		{"deny_at_disable", pb.GetDenyAtDisable() != nil},
		{"typed_metadata_context_namespaces", len(pb.GetTypedMetadataContextNamespaces()) > 0},
		{"route_metadata_context_namespaces", len(pb.GetRouteMetadataContextNamespaces()) > 0},
		{"route_typed_metadata_context_namespaces", len(pb.GetRouteTypedMetadataContextNamespaces()) > 0},
		{"validate_mutations", pb.GetValidateMutations()},
		{"decoder_header_mutation_rules", pb.GetDecoderHeaderMutationRules() != nil},
		{"bootstrap_metadata_labels_key", pb.GetBootstrapMetadataLabelsKey() != ""},
		{"encode_raw_headers", pb.GetEncodeRawHeaders()},
		{"filter_metadata", pb.GetFilterMetadata() != nil},
		{"emit_filter_state_stats", pb.GetEmitFilterStateStats()},
		{"max_denied_response_body_bytes", pb.GetMaxDeniedResponseBodyBytes() != 0},
		{"enforce_response_header_limits", pb.GetEnforceResponseHeaderLimits()},
		{"shadow_mode", pb.GetShadowMode()},
		{"clear_route_cache_headers", len(pb.GetClearRouteCacheHeaders()) > 0},
		{"charge_cluster_response_stats", pb.GetChargeClusterResponseStats().GetValue()},
		{"with_request_body.allow_partial_message", pb.GetWithRequestBody().GetAllowPartialMessage()},
	}
}

func compileSettings(pb *extauthzv3.ExtAuthz) (settings, error) {
	for _, r := range refusals(pb) {
		if r.set {
			return settings{}, fmt.Errorf("%s: %s: not implemented by Legate", Name, r.field)
		}
	}
	switch pb.GetTransportApiVersion() {
	case corev3.ApiVersion_AUTO, corev3.ApiVersion_V3:
	default:
		return settings{}, fmt.Errorf("%s: transport_api_version = %s: only V3 is supported", Name, pb.GetTransportApiVersion())
	}
	s := settings{
		failureModeAllow:          pb.GetFailureModeAllow(),
		failureModeAllowHeaderAdd: pb.GetFailureModeAllowHeaderAdd(),
		statusOnError:             403,
		statPrefix:                pb.GetStatPrefix(),
		packAsBytes:               pb.GetWithRequestBody().GetPackAsBytes(),
		includePeerCert:           pb.GetIncludePeerCertificate(),
		includeTLSSession:         pb.GetIncludeTlsSession(),
		metadataNamespaces:        pb.GetMetadataContextNamespaces(),
		ingestMetadata:            pb.GetEnableDynamicMetadataIngestion() == nil || pb.GetEnableDynamicMetadataIngestion().GetValue(),
	}
	if c := int(pb.GetStatusOnError().GetCode()); c != 0 {
		// Envoy's toErrorCode: a code outside 100..511 becomes 403.
		if c >= 100 && c <= 511 {
			s.statusOnError = c
		}
	}
	if b := pb.GetWithRequestBody(); b != nil {
		s.bodyLimit = int64(b.GetMaxRequestBytes()) // validated > 0
	}
	var err error
	if s.allowed, err = compileList(pb.GetAllowedHeaders(), Name+": allowed_headers"); err != nil {
		return settings{}, err
	}
	if s.disallowed, err = compileList(pb.GetDisallowedHeaders(), Name+": disallowed_headers"); err != nil {
		return settings{}, err
	}
	return s, nil
}

// grpcTarget is a checked envoy_grpc service.
type grpcTarget struct {
	cluster, authority string
	timeout            time.Duration
	metadata           [][2]string // initial_metadata
}

func compileGRPC(g *corev3.GrpcService) (grpcTarget, error) {
	const path = Name + ": grpc_service"
	if g.GetGoogleGrpc() != nil {
		return grpcTarget{}, fmt.Errorf("%s.google_grpc: not implemented by Legate (use envoy_grpc)", path)
	}
	if g.GetRetryPolicy() != nil {
		return grpcTarget{}, fmt.Errorf("%s.retry_policy: not implemented by Legate", path)
	}
	eg := g.GetEnvoyGrpc()
	if eg.GetClusterName() == "" {
		return grpcTarget{}, fmt.Errorf("%s.envoy_grpc.cluster_name: unset; it is required", path)
	}
	if eg.GetRetryPolicy() != nil || eg.GetMaxReceiveMessageLength() != nil || eg.GetSkipEnvoyHeaders() {
		return grpcTarget{}, fmt.Errorf("%s.envoy_grpc: retry_policy, max_receive_message_length and skip_envoy_headers are not implemented by Legate", path)
	}
	t := grpcTarget{cluster: eg.GetClusterName(), authority: eg.GetAuthority(), timeout: defaultTimeout}
	if t.authority == "" {
		t.authority = t.cluster
	}
	if g.GetTimeout() != nil {
		t.timeout = g.GetTimeout().AsDuration()
	}
	for i, h := range g.GetInitialMetadata() {
		v := h.GetValue()
		if v == "" {
			v = string(h.GetRawValue())
		}
		if h.GetKey() == "" {
			return grpcTarget{}, fmt.Errorf("%s.initial_metadata[%d].key: empty", path, i)
		}
		t.metadata = append(t.metadata, [2]string{strings.ToLower(h.GetKey()), v})
	}
	return t, nil
}

// httpTarget is a checked http_service.
type httpTarget struct {
	cluster    string
	timeout    time.Duration
	pathPrefix string
	// The authorization request: headers of the client's request sent along (beyond Envoy's
	// defaults) and headers added.
	allowedRequest *nameList
	addRequest     [][2]string
	// The authorization response: headers set or appended on the upstream request after an
	// allow, headers sent to the client after a denial or an allow, and headers turned into
	// dynamic metadata.
	upstream, upstreamAppend, client, clientOnSuccess, toMetadata *nameList
}

func compileHTTP(h *extauthzv3.HttpService) (httpTarget, error) {
	const path = Name + ": http_service"
	if h.GetPathOverride() != "" {
		return httpTarget{}, fmt.Errorf("%s.path_override: not implemented by Legate", path)
	}
	if h.GetRetryPolicy() != nil {
		return httpTarget{}, fmt.Errorf("%s.retry_policy: not implemented by Legate", path)
	}
	su := h.GetServerUri()
	if su.GetCluster() == "" {
		return httpTarget{}, fmt.Errorf("%s.server_uri.cluster: unset; it is required", path)
	}
	if _, err := url.Parse(su.GetUri()); err != nil || su.GetUri() == "" {
		return httpTarget{}, fmt.Errorf("%s.server_uri.uri = %q: not a URI", path, su.GetUri())
	}
	if su.GetTimeout() == nil {
		return httpTarget{}, fmt.Errorf("%s.server_uri.timeout: unset; it is required", path)
	}
	if p := h.GetPathPrefix(); p != "" && !strings.HasPrefix(p, "/") {
		return httpTarget{}, fmt.Errorf("%s.path_prefix = %q: must start with /", path, p)
	}
	t := httpTarget{cluster: su.GetCluster(), timeout: su.GetTimeout().AsDuration(), pathPrefix: h.GetPathPrefix()}
	var err error
	req, resp := h.GetAuthorizationRequest(), h.GetAuthorizationResponse()
	if t.allowedRequest, err = compileList(req.GetAllowedHeaders(), path+".authorization_request.allowed_headers"); err != nil {
		return httpTarget{}, err
	}
	for i, hv := range req.GetHeadersToAdd() {
		if hv.GetKey() == "" {
			return httpTarget{}, fmt.Errorf("%s.authorization_request.headers_to_add[%d].key: empty", path, i)
		}
		t.addRequest = append(t.addRequest, [2]string{hv.GetKey(), hv.GetValue()})
	}
	lists := []struct {
		dst   **nameList
		m     *matcherv3.ListStringMatcher
		field string
	}{
		{&t.upstream, resp.GetAllowedUpstreamHeaders(), "allowed_upstream_headers"},
		{&t.upstreamAppend, resp.GetAllowedUpstreamHeadersToAppend(), "allowed_upstream_headers_to_append"},
		{&t.client, resp.GetAllowedClientHeaders(), "allowed_client_headers"},
		{&t.clientOnSuccess, resp.GetAllowedClientHeadersOnSuccess(), "allowed_client_headers_on_success"},
		{&t.toMetadata, resp.GetDynamicMetadataFromHeaders(), "dynamic_metadata_from_headers"},
	}
	for _, l := range lists {
		if *l.dst, err = compileList(l.m, path+".authorization_response."+l.field); err != nil {
			return httpTarget{}, err
		}
	}
	return t, nil
}
