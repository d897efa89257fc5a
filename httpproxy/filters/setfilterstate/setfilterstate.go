package setfilterstate

import (
	"fmt"
	"net/http"

	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/set_filter_state/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/registry"
	network "github.com/legateproxy/legate/listener/filters/setfilterstate"
)

// Name and TypeURL select the filter in http_filters.
const (
	Name    = "envoy.filters.http.set_filter_state"
	TypeURL = "type.googleapis.com/envoy.extensions.filters.http.set_filter_state.v3.Config"
)

// Register registers the filter (it takes no per-route configuration).
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &httpv3.Config{}, filter.Extension{
		New: func(cfg *anypb.Any, _ *filter.Context) (filter.Filter, error) { return FromAny(cfg) },
	})
}

// Filter is one configured set_filter_state filter.
type Filter struct{ values network.Values }

// FromAny builds the filter from its typed_config (nil sets nothing).
func FromAny(cfg *anypb.Any) (*Filter, error) {
	var pb httpv3.Config
	if cfg != nil {
		if err := cfg.UnmarshalTo(&pb); err != nil {
			return nil, fmt.Errorf("%s: typed_config: %w", Name, err)
		}
	}
	v, err := network.Compile(Name+": on_request_headers", pb.GetOnRequestHeaders())
	if err != nil {
		return nil, err
	}
	return &Filter{values: v}, nil
}

// OnRequest sets the values in the stream's filter state; it never answers the request.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	if x.FilterState == nil || len(f.values) == 0 {
		return nil
	}
	r := x.Request
	e := accesslog.Entry{Method: r.Method, Path: r.Path, Authority: r.Authority, Scheme: r.Scheme,
		RequestHeaders: r.Header, DownstreamRemoteAddress: x.ClientIP, DynamicMetadata: x.Metadata,
		FilterState: x.FilterState}
	f.values.Apply(x.FilterState, &e, nil)
	return nil
}

// OnResponse does nothing.
func (f *Filter) OnResponse(*filter.Exchange, http.Header) {}
