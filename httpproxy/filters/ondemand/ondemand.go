package ondemand

import (
	"fmt"
	"net/http"
	"time"

	ondemandv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/on_demand/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/registry"
)

// Name and the type URLs select the filter in http_filters (TypeURL) and in
// typed_per_filter_config (PerRouteTypeURL).
const (
	Name            = "envoy.filters.http.on_demand"
	TypeURL         = "type.googleapis.com/envoy.extensions.filters.http.on_demand.v3.OnDemand"
	PerRouteTypeURL = "type.googleapis.com/envoy.extensions.filters.http.on_demand.v3.PerRouteConfig"
)

// DefaultWait bounds how long a request waits for its on-demand update.
const DefaultWait = 5 * time.Second

// Filter is one configured on_demand filter (Envoy's OnDemandRouteUpdate with the RDS-only
// behaviour). Immutable; safe for concurrent use.
type Filter struct {
	// Wait bounds a request's wait for its update; DefaultWait when zero.
	Wait time.Duration
}

// Register registers the filter and its per-route configuration (PerRouteConfig).
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &ondemandv3.OnDemand{}, filter.Extension{
		New: func(cfg *anypb.Any, _ *filter.Context) (filter.Filter, error) { return FromAny(cfg) },
		PerRoute: func(cfg *anypb.Any) (any, error) {
			if err := PerRouteFromAny(cfg); err != nil {
				return nil, err
			}
			return &PerRoute{}, nil
		},
		PerRouteConfig: &ondemandv3.PerRouteConfig{},
	})
}

// PerRoute is a checked PerRouteConfig (typed_per_filter_config). Its only field, odcds,
// is refused, so it changes nothing: Envoy reads it only for a request that already has a
// route, to fetch the route's cluster on demand.
type PerRoute struct{}

// FromAny builds the filter from its typed_config (nil is the empty OnDemand).
func FromAny(cfg *anypb.Any) (*Filter, error) {
	var pb ondemandv3.OnDemand
	if cfg != nil {
		if cfg.GetTypeUrl() != TypeURL {
			return nil, fmt.Errorf("%s: typed_config: type %q; want %s", Name, cfg.GetTypeUrl(), TypeURL)
		}
		if err := cfg.UnmarshalTo(&pb); err != nil {
			return nil, fmt.Errorf("%s: typed_config: %w", Name, err)
		}
	}
	return New(&pb)
}

// New builds the filter from its configuration.
func New(pb *ondemandv3.OnDemand) (*Filter, error) {
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if pb.GetOdcds() != nil {
		return nil, fmt.Errorf("%s: odcds: on-demand CDS is not implemented by Legate", Name)
	}
	return &Filter{}, nil
}

// PerRouteFromAny checks a typed_per_filter_config entry of the filter (PerRouteConfig). Its
// only field is odcds, which Legate refuses; an empty one changes nothing.
func PerRouteFromAny(cfg *anypb.Any) error {
	if cfg.GetTypeUrl() != PerRouteTypeURL {
		return fmt.Errorf("%s: typed_per_filter_config: type %q; want %s", Name, cfg.GetTypeUrl(), PerRouteTypeURL)
	}
	var pb ondemandv3.PerRouteConfig
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	if err := pb.ValidateAll(); err != nil {
		return fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	if pb.GetOdcds() != nil {
		return fmt.Errorf("%s: typed_per_filter_config.odcds: on-demand CDS is not implemented by Legate", Name)
	}
	return nil
}

// OnRequest pauses a request that has no route while the connection manager fetches what it
// lacks, then lets it go on to the router (which resolves the route again). While it waits
// the connection manager buffers the request body (filter.Downstream.Pause); a client that
// goes away ends the wait at once and withdraws the request's interest in the update. It
// never answers the request itself.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	if x.Routes == nil || x.Routes.HasRoute(x.Request) {
		return nil
	}
	done, cancel, ok := x.Routes.RequestUpdate(x.Request)
	if !ok {
		return nil
	}
	defer cancel()
	wait := f.Wait
	if wait <= 0 {
		wait = DefaultWait
	}
	if x.Downstream != nil {
		x.Downstream.Pause(done, wait)
		return nil
	}
	// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	return nil
}

// OnResponse does nothing: the filter only acts on requests.
func (f *Filter) OnResponse(*filter.Exchange, http.Header) {}
