package extauthz

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
)

// Name and the type URLs select the filter in http_filters and typed_per_filter_config.
const (
	Name            = "envoy.filters.http.ext_authz"
	TypeURL         = "type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz"
	PerRouteTypeURL = "type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute"
)

// What Envoy's filter answers and records.
const (
	detailsDenied     = "ext_authz_denied"
	detailsError      = "ext_authz_error"
	headerFailureMode = "X-Envoy-Auth-Failure-Mode-Allowed"
)

// outcome is how a check ended.
type outcome uint8

const (
	allowed outcome = iota
	denied
	failed // the service could not be asked or answered nonsense
)

// header is one header operation of a check's result.
type header struct {
	name, value string
	append      bool // add a value rather than replace
	ifAbsent    bool // only when the header is absent
	ifPresent   bool // only when the header is present
}

// result is what a check decided.
type result struct {
	outcome outcome
	err     error // failed: why
	// denied: the reply.
	status int
	body   string
	reply  http.Header
	// allowed: changes to the upstream request and the response, and dynamic metadata.
	upstream      []header
	remove        []string
	responseAdd   []header
	metadata      *structpb.Struct
	queryToSet    [][2]string
	queryToRemove []string
}

// checker asks the authorization service about one request.
type checker interface {
	check(ctx context.Context, x *filter.Exchange, in *input) result
	close() error
}

// input is what the filter gathered for a check.
type input struct {
	body       []byte
	extensions map[string]string
}

// filterStats are Envoy's ext_authz.[<stat_prefix>.]* counters.
type filterStats struct {
	OK                 stats.Counter `stat:"ok"`
	Denied             stats.Counter `stat:"denied"`
	Error              stats.Counter `stat:"error"`
	Disabled           stats.Counter `stat:"disabled"`
	FailureModeAllowed stats.Counter `stat:"failure_mode_allowed"`
}

// Filter is one configured ext_authz filter. Immutable after New; safe for concurrent use.
type Filter struct {
	name    string // the key of its typed_per_filter_config entries
	set     settings
	checker checker
	stats   *filterStats
	release func()
}

// PerRoute is a compiled ExtAuthzPerRoute.
type PerRoute struct {
	disabled   bool
	extensions map[string]string
	noBody     bool // disable_request_body_buffering
	bodyLimit  int64
}

// Register registers the filter and its per-route configuration.
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &extauthzv3.ExtAuthz{}, filter.Extension{
		New:            func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) { return FromAny(cfg, ctx) },
		PerRoute:       func(cfg *anypb.Any) (any, error) { return PerRouteFromAny(cfg) },
		PerRouteConfig: &extauthzv3.ExtAuthzPerRoute{},
	})
}

// FromAny builds the filter from its typed_config.
func FromAny(cfg *anypb.Any, ctx *filter.Context) (*Filter, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%s: typed_config is required", Name)
	}
	var pb extauthzv3.ExtAuthz
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: typed_config: %w", Name, err)
	}
	return New(&pb, ctx)
}

// New builds the filter from its configuration.
func New(pb *extauthzv3.ExtAuthz, ctx *filter.Context) (*Filter, error) {
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	set, err := compileSettings(pb)
	if err != nil {
		return nil, err
	}
	f := &Filter{name: Name, set: set}
	if ctx != nil && ctx.Name != "" {
		f.name = ctx.Name
	}
	var pools = ctxPools(ctx)
	switch {
	case pb.GetGrpcService() != nil:
		t, err := compileGRPC(pb.GetGrpcService())
		if err != nil {
			return nil, err
		}
		if f.checker, err = newGRPCChecker(t, &f.set, pools); err != nil {
			return nil, err
		}
	case pb.GetHttpService() != nil:
		t, err := compileHTTP(pb.GetHttpService())
		if err != nil {
			return nil, err
		}
		f.checker = &httpChecker{t: t, set: &f.set, pools: pools}
	default:
		return nil, fmt.Errorf("%s: one of grpc_service and http_service is required", Name)
	}
	prefix := "ext_authz."
	if set.statPrefix != "" {
		prefix += set.statPrefix + "."
	}
	var st *filter.Stats
	var hcm string
	if ctx != nil {
		st, hcm = ctx.Stats, ctx.StatPrefix
	}
	f.stats, f.release = filter.AcquireStats[filterStats](st, hcm+prefix)
	return f, nil
}

// PerRouteFromAny compiles a typed_per_filter_config entry (ExtAuthzPerRoute).
func PerRouteFromAny(cfg *anypb.Any) (*PerRoute, error) {
	var pb extauthzv3.ExtAuthzPerRoute
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	if pb.GetDisabled() {
		return &PerRoute{disabled: true}, nil
	}
	cs := pb.GetCheckSettings()
	const path = Name + ": typed_per_filter_config.check_settings"
	if cs.GetGrpcService() != nil || cs.GetHttpService() != nil {
		return nil, fmt.Errorf("%s: per-route grpc_service and http_service are not implemented by Legate", path)
	}
	if cs.GetDisableRequestBodyBuffering() && cs.GetWithRequestBody() != nil {
		return nil, fmt.Errorf("%s: only one of disable_request_body_buffering and with_request_body may be set", path)
	}
	if cs.GetWithRequestBody().GetAllowPartialMessage() {
		return nil, fmt.Errorf("%s.with_request_body.allow_partial_message: not implemented by Legate", path)
	}
	return &PerRoute{extensions: cs.GetContextExtensions(), noBody: cs.GetDisableRequestBodyBuffering(),
		bodyLimit: int64(cs.GetWithRequestBody().GetMaxRequestBytes())}, nil
}

// Close closes the channel to the service and releases the stats.
func (f *Filter) Close() error {
	f.release()
	return f.checker.close()
}

// OnRequest asks the service about the request and lets it go on, changed as the service
// says, or answers it with the service's denial or status_on_error.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	var in input
	limit := f.set.bodyLimit
	if pc, ok := x.PerFilterConfig(f.name); ok {
		if pr, ok := pc.Config.(*PerRoute); ok {
			if pr.disabled {
				f.stats.Disabled.Inc()
				return nil
			}
			in.extensions = pr.extensions
			if pr.noBody {
				limit = 0
			} else if pr.bodyLimit > 0 {
				limit = pr.bodyLimit
			}
		}
	}
	if limit > 0 && x.Downstream != nil {
		err := x.Downstream.BufferBody(limit)
		if errors.Is(err, filter.ErrBodyTooLarge) {
			return &filter.Reply{Status: http.StatusRequestEntityTooLarge, Body: "Payload Too Large", Details: "request_payload_too_large"}
		}
		if err != nil {
			return &filter.Reply{Status: http.StatusBadRequest, Details: "ext_authz_request_body_error"}
		}
		in.body = x.BufferedBody()
	}
	r := f.checker.check(context.Background(), x, &in)
	switch r.outcome {
	case allowed:
		f.stats.OK.Inc()
		f.apply(x, &r)
		return nil
	case denied:
		f.stats.Denied.Inc()
		return &filter.Reply{Status: r.status, Body: r.body, Header: r.reply, Flags: accesslog.UnauthorizedExternalService, Details: detailsDenied}
	}
	f.stats.Error.Inc()
	if f.set.failureModeAllow {
		f.stats.FailureModeAllowed.Inc()
		if f.set.failureModeAllowHeaderAdd {
			x.Request.Header.Set(headerFailureMode, "true")
		}
		return nil
	}
	return &filter.Reply{Status: f.set.statusOnError, Flags: accesslog.UnauthorizedExternalService, Details: detailsError}
}

// apply makes an allow's changes: upstream request headers, query parameters, dynamic
// metadata, and the response headers OnResponse adds.
func (f *Filter) apply(x *filter.Exchange, r *result) {
	h := x.Request.Header
	for _, name := range r.remove {
		if !strings.HasPrefix(name, ":") {
			h.Del(name)
		}
	}
	for _, op := range r.upstream {
		applyHeader(h, op)
	}
	if len(r.queryToSet) > 0 || len(r.queryToRemove) > 0 {
		x.Request.Path = editQuery(x.Request.Path, r.queryToSet, r.queryToRemove)
	}
	if r.metadata != nil && len(r.metadata.GetFields()) > 0 && f.set.ingestMetadata {
		x.SetMetadata(Name, r.metadata.GetFields())
	}
	if len(r.responseAdd) > 0 {
		x.Keep(f, r.responseAdd)
	}
}

// applyHeader performs one header operation on h; pseudo-headers are left alone.
func applyHeader(h http.Header, op header) {
	if strings.HasPrefix(op.name, ":") {
		return
	}
	key := http.CanonicalHeaderKey(op.name)
	_, present := h[key]
	switch {
	case op.ifAbsent && present, op.ifPresent && !present:
	case op.append:
		h[key] = append(h[key], op.value)
	default:
		h[key] = []string{op.value}
	}
}

// OnResponse adds the headers an allow asked for (response_headers_to_add,
// allowed_client_headers_on_success).
func (f *Filter) OnResponse(x *filter.Exchange, h http.Header) {
	ops, _ := x.Kept(f).([]header)
	for _, op := range ops {
		applyHeader(h, op)
	}
}
