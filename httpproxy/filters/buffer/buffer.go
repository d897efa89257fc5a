package buffer

import (
	"errors"
	"fmt"
	"net/http"

	bufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/buffer/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/registry"
)

// Name and the type URLs select the filter in http_filters (TypeURL) and in
// typed_per_filter_config (PerRouteTypeURL).
const (
	Name            = "envoy.filters.http.buffer"
	TypeURL         = "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer"
	PerRouteTypeURL = "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.BufferPerRoute"
)

// The answer to a body over the limit, as Envoy's.
const (
	tooLargeBody    = "Payload Too Large"
	tooLargeDetails = "request_payload_too_large"
)

// Register registers the filter and its per-route configuration (BufferPerRoute).
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &bufferv3.Buffer{}, filter.Extension{
		New:            func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) { return FromAny(cfg, ctx) },
		PerRoute:       func(cfg *anypb.Any) (any, error) { return PerRouteFromAny(cfg) },
		PerRouteConfig: &bufferv3.BufferPerRoute{},
	})
}

// Filter is one configured buffer filter. Immutable; safe for concurrent use.
type Filter struct {
	name     string
	maxBytes int64
}

// PerRoute is a compiled BufferPerRoute: the filter off, or its own limit.
type PerRoute struct {
	Disabled bool
	MaxBytes int64
}

// FromAny builds the filter from its typed_config, which is required (max_request_bytes is).
func FromAny(cfg *anypb.Any, ctx *filter.Context) (*Filter, error) {
	if cfg.GetTypeUrl() != TypeURL {
		return nil, fmt.Errorf("%s: typed_config: type %q; want %s", Name, cfg.GetTypeUrl(), TypeURL)
	}
	var pb bufferv3.Buffer
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: typed_config: %w", Name, err)
	}
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	f := &Filter{name: Name, maxBytes: int64(pb.GetMaxRequestBytes().GetValue())}
	if ctx != nil && ctx.Name != "" {
		f.name = ctx.Name
	}
	return f, nil
}

// PerRouteFromAny compiles a typed_per_filter_config entry (BufferPerRoute).
func PerRouteFromAny(cfg *anypb.Any) (*PerRoute, error) {
	if cfg.GetTypeUrl() != PerRouteTypeURL {
		return nil, fmt.Errorf("%s: typed_per_filter_config: type %q; want %s", Name, cfg.GetTypeUrl(), PerRouteTypeURL)
	}
	var pb bufferv3.BufferPerRoute
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	if pb.GetDisabled() {
		return &PerRoute{Disabled: true}, nil
	}
	return &PerRoute{MaxBytes: int64(pb.GetBuffer().GetMaxRequestBytes().GetValue())}, nil
}

// OnRequest reads the whole request body, within the route's limit.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	limit := f.maxBytes
	if pc, ok := x.PerFilterConfig(f.name); ok {
		if p, ok := pc.Config.(*PerRoute); ok {
			if p.Disabled {
				return nil
			}
			limit = p.MaxBytes
		}
	}
	if x.Downstream == nil {
		return nil
	}
	// Another error is the client's (gone, or a malformed body): the router meets it again
	// when it sends the body on, and answers it as it answers any broken request body.
	if err := x.Downstream.BufferBody(limit); errors.Is(err, filter.ErrBodyTooLarge) {
		return &filter.Reply{Status: http.StatusRequestEntityTooLarge, Body: tooLargeBody, Details: tooLargeDetails}
	}
	return nil
}

// OnResponse does nothing: the filter acts on requests only.
func (f *Filter) OnResponse(*filter.Exchange, http.Header) {}
