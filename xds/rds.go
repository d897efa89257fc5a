package xds

import (
	"fmt"
	"sort"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
)

// rdsStats are the RDS-only stats of a route configuration subscription, next to its
// subscription stats under http.<stat_prefix>.rds.<route_config_name>.
type rdsStats struct {
	ConfigReload       stats.Counter `stat:"config_reload"`
	ConfigReloadTimeMs stats.Gauge   `stat:"config_reload_time_ms,never_import"`
	UpdateEmpty        stats.Counter `stat:"update_empty"`
}

var rdsKind = &namedKind{
	typeURL: resource.RouteType,
	short:   "RDS",
	decode: func(c *Client, a *anypb.Any) (string, any, error) {
		rc, err := resource.DecodeRouteConfig(a, c.cfg.RouteOptions)
		if err != nil {
			return resource.NamedResourceName(a), nil, err
		}
		return rc.GetName(), rc, nil
	},
	statPrefix: func(name, user string) string { return "http." + user + ".rds." + name + "." },
	initTarget: func(name string) string { return "RdsRouteConfigSubscription RDS init " + name },
	extra: func(st *stats.Store, _, prefix string) subExtra {
		s := &rdsStats{}
		return subExtra{done: st.Register(prefix, s).Unregister, changed: func(now time.Time, _ time.Duration) {
			s.ConfigReload.Inc()
			s.ConfigReloadTimeMs.Set(uint64(now.UnixMilli()))
		}}
	},
}

// WatchRoutes implements httpproxy.RouteProvider: it subscribes to the RouteConfiguration
// called name from source (one subscription per name and transport, shared by every
// connection manager using it, its stats under http.<statPrefix>.rds.<name>. of the first) and
// calls update with every accepted new version; gen grows with each. A configuration with vhds
// is delivered with the virtual hosts VHDS delivers for it ("<name>/…") added, again after
// every VHDS change. It returns the current
// configuration (nil until the first arrives) and its generation, and cancel, which ends the
// watch. update runs on an xDS goroutine with no lock held and must not block. Safe for
// concurrent use; a subscription made before Run registers an init target.
func (c *Client) WatchRoutes(name string, source *corev3.ConfigSource, statPrefix string,
	update func(gen uint64, rc *routev3.RouteConfiguration)) (*routev3.RouteConfiguration, uint64, func(), error) {
	src, err := resource.SourceFromProto(source)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("rds.config_source.%w", err)
	}
	if src.Self {
		return nil, 0, nil, fmt.Errorf("rds.config_source.self is not supported")
	}
	cur, gen, _, cancel, err := c.watchRoutesFrom(src, name, statPrefix, false, update)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("rds %q: %w", name, err)
	}
	return cur, gen, cancel, nil
}

// watchRoutesFrom is WatchRoutes on a resolved source; it also returns the watch (for its
// readiness: its RDS subscription's, and its VHDS source's). With passNil a removal or an initial fetch that ends without a
// configuration reaches update as nil (scoped routes wake their waiters on it); without, it is
// not reported.
func (c *Client) watchRoutesFrom(src resource.Source, name, statPrefix string, passNil bool,
	update func(gen uint64, rc *routev3.RouteConfiguration)) (*routev3.RouteConfiguration, uint64, *routeWatch, func(), error) {
	w := &routeWatch{c: c, update: update, prefix: statPrefix}
	w.mu.Lock() // holds back updates until the current configuration is returned
	ref, val, _, _, err := c.rds.subscribe(src, name, statPrefix, func(_ uint64, v any) {
		rc, _ := v.(*routev3.RouteConfiguration)
		if rc != nil || passNil {
			w.rdsChanged(rc)
		}
	})
	if err != nil {
		w.mu.Unlock()
		return nil, 0, nil, nil, err
	}
	w.ref = ref
	var cur *routev3.RouteConfiguration
	if rc, ok := val.(*routev3.RouteConfiguration); ok {
		cur = w.setLocked(rc)
		w.gen++
	}
	gen := w.gen
	w.mu.Unlock()
	return cur, gen, w, func() { ref.release(); w.stop() }, nil
}

// RoutesConfigDump returns the RDS part of the "routes" config dump: dynamic_route_configs
// for every subscription, with version_info, route_config, last_updated, and error_state for a
// NACKed update. The caller adds static_route_configs. match filters by route configuration
// name (nil for all). Safe for concurrent use.
func (c *Client) RoutesConfigDump(match func(string) bool) *adminv3.RoutesConfigDump {
	out := &adminv3.RoutesConfigDump{}
	for _, st := range c.rds.states() {
		if match != nil && !match(st.name) {
			continue
		}
		d := &adminv3.RoutesConfigDump_DynamicRouteConfig{VersionInfo: st.version, RouteConfig: st.raw, ErrorState: st.failure.state()}
		if st.raw != nil {
			d.LastUpdated = timestamppb.New(st.updated)
			c.mergeVHDSDump(d, st)
		}
		out.DynamicRouteConfigs = append(out.DynamicRouteConfigs, d)
	}
	return out
}

// mergeVHDSDump shows a route configuration with vhds as Envoy's route config update receiver
// holds it: the RDS virtual hosts, then those VHDS delivered for it (both in name order, as
// Envoy rebuilds the list from its name-keyed maps), with the version_info and last_updated of
// whichever of RDS and VHDS updated it last. The vhds field stays.
func (c *Client) mergeVHDSDump(d *adminv3.RoutesConfigDump_DynamicRouteConfig, st namedState) {
	rc := &routev3.RouteConfiguration{}
	if st.raw.UnmarshalTo(rc) != nil || rc.GetVhds() == nil {
		return
	}
	h := c.vhdsServing(rc.GetName())
	if h == nil {
		return
	}
	hosts := h.hostsOf(rc.GetName())
	h.mu.Lock()
	upd, ok := h.updates[rc.GetName()]
	h.mu.Unlock()
	later := ok && upd.at.After(st.updated)
	if len(hosts) == 0 && !later {
		return
	}
	sort.SliceStable(rc.VirtualHosts, func(i, j int) bool { return rc.VirtualHosts[i].GetName() < rc.VirtualHosts[j].GetName() })
	rc.VirtualHosts = append(rc.VirtualHosts, hosts...)
	a, err := anypb.New(rc)
	if err != nil {
		return
	}
	d.RouteConfig = a
	if later {
		d.VersionInfo, d.LastUpdated = upd.version, timestamppb.New(upd.at)
	}
}

// state is f as a config dump's error_state; nil for nil.
func (f *failure) state() *adminv3.UpdateFailureState {
	if f == nil {
		return nil
	}
	return &adminv3.UpdateFailureState{
		FailedConfiguration: f.resource,
		LastUpdateAttempt:   timestamppb.New(f.at),
		Details:             f.details,
		VersionInfo:         f.version,
	}
}
