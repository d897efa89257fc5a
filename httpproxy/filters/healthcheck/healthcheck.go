package healthcheck

import (
	"fmt"
	"net/http"
	"sort"
	"sync/atomic"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/registry"
)

// Name and TypeURL select the filter in http_filters.
const (
	Name    = "envoy.filters.http.health_check"
	TypeURL = "type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck"
)

// Response headers Envoy's filter sets.
const (
	headerImmediateFail   = "X-Envoy-Immediate-Health-Check-Fail"
	headerCheckedCluster  = "X-Envoy-Upstream-Healthchecked-Cluster"
	detailsFailed         = "health_check_failed"
	detailsOK             = "health_check_ok"
	detailsClusterUnready = "health_check_failed_cluster_unhealthy"
)

// minHealthy is one cluster_min_healthy_percentages entry.
type minHealthy struct {
	cluster string
	percent float64
}

// Filter is one configured health check filter. Immutable; safe for concurrent use.
type Filter struct {
	passThrough bool
	matcher     *route.Table // matches a request when all headers match
	minHealthy  []minHealthy // sorted by cluster name
	clusters    *cluster.Manager
	failed      *atomic.Bool
	localName   string
}

// Register registers the filter.
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &hcv3.HealthCheck{}, filter.Extension{
		New: func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) { return FromAny(cfg, ctx) },
	})
}

// FromAny builds the filter from its typed_config.
func FromAny(cfg *anypb.Any, ctx *filter.Context) (*Filter, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%s: typed_config is required (pass_through_mode)", Name)
	}
	var pb hcv3.HealthCheck
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: typed_config: %w", Name, err)
	}
	return New(&pb, ctx)
}

// New builds the filter from its configuration.
func New(pb *hcv3.HealthCheck, ctx *filter.Context) (*Filter, error) {
	if pb.GetPassThroughMode() == nil {
		return nil, fmt.Errorf("%s: pass_through_mode: unset; it is required", Name)
	}
	if pb.GetCacheTime() != nil && pb.GetPassThroughMode().GetValue() {
		return nil, fmt.Errorf("%s: cache_time: not implemented by Legate", Name)
	}
	// The header matchers are compiled by the route package: a one-route table whose route
	// matches any path with these headers.
	rc := &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{
		Name: "health_check", Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Match: &routev3.RouteMatch{
				PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
				Headers:       pb.GetHeaders(),
			},
			Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 200}},
		}},
	}}}
	table, err := route.Compile(rc, route.Options{})
	if err != nil {
		return nil, fmt.Errorf("%s: headers: %w", Name, err)
	}
	f := &Filter{
		passThrough: pb.GetPassThroughMode().GetValue(),
		matcher:     table,
		failed:      ctx.HealthCheckFailed,
		clusters:    ctx.Clusters,
		localName:   ctx.LocalClusterName,
	}
	for name, p := range pb.GetClusterMinHealthyPercentages() {
		v := p.GetValue()
		if v < 0 || v > 100 {
			return nil, fmt.Errorf("%s: cluster_min_healthy_percentages[%q] = %v; must be in [0, 100]", Name, name, v)
		}
		f.minHealthy = append(f.minHealthy, minHealthy{cluster: name, percent: v})
	}
	sort.Slice(f.minHealthy, func(i, j int) bool { return f.minHealthy[i].cluster < f.minHealthy[j].cluster })
	return f, nil
}

func (f *Filter) serverFailed() bool { return f.failed != nil && f.failed.Load() }

// OnRequest answers health-check requests: 503 once the server has failed its health checks
// (whatever pass_through_mode says); otherwise, without pass-through, 200 or 503 from the
// cluster minimums; with pass-through the request goes on to the router.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	if f.matcher.Route(x.Request) == nil {
		return nil
	}
	x.HealthCheck = true
	if f.serverFailed() {
		return &filter.Reply{Status: http.StatusServiceUnavailable, Flags: accesslog.FailedLocalHealthCheck, Details: detailsFailed}
	}
	if f.passThrough {
		return nil
	}
	if !f.clustersHealthy() {
		return &filter.Reply{Status: http.StatusServiceUnavailable, Details: detailsClusterUnready}
	}
	return &filter.Reply{Status: http.StatusOK, Details: detailsOK}
}

// clustersHealthy checks cluster_min_healthy_percentages as Envoy does: a missing cluster is
// unhealthy; an empty one is unhealthy unless its minimum is 0.
func (f *Filter) clustersHealthy() bool {
	for _, m := range f.minHealthy {
		var c *cluster.Cluster
		if f.clusters != nil {
			c = f.clusters.Get(m.cluster)
		}
		if c == nil {
			return false
		}
		total, healthy := 0, 0
		if snap := c.Snapshot(); snap != nil && snap.PrioritySet != nil {
			for _, s := range snap.PrioritySet.Sets() {
				total += len(s.Hosts())
				healthy += len(s.HealthyHosts())
			}
		}
		if total == 0 {
			if m.percent > 0 {
				return false
			}
			continue
		}
		if 100*float64(healthy) < m.percent*float64(total) {
			return false
		}
	}
	return true
}

// OnResponse marks health-check responses with the local cluster name and, while the server
// is failed, every other response with x-envoy-immediate-health-check-fail.
func (f *Filter) OnResponse(x *filter.Exchange, h http.Header) {
	if x.HealthCheck {
		if f.localName != "" {
			h.Set(headerCheckedCluster, f.localName)
		}
		return
	}
	if f.serverFailed() {
		h.Set(headerImmediateFail, "true")
	}
}
