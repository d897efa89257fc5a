package rds

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
	"github.com/legateproxy/legate/xds/watch"
)

// InitTarget is Envoy's name for the init target of the RDS subscription to name.
func InitTarget(name string) string { return "RdsRouteConfigSubscription RDS init " + name }

// ScopedInitTarget is the init target of the SRDS subscription of the scoped_routes called
// name.
func ScopedInitTarget(name string) string { return "SRDS " + name }

// Client is the xDS client's API the route discovery uses (xds.Client implements it): RDS
// is watched by name, SRDS and VHDS are streamed (wildcard per transport), and the routes
// dump reads the RDS subscriptions' states.
type Client interface {
	watch.Client
	watch.Streams
	watch.States
}

// Config holds a Discovery's configuration and dependencies. Client and Stats are required;
// every other field has the default stated in its comment.
type Config struct {
	Client Client
	// Stats is the store for the http.<stat_prefix>.rds.*, .scoped_rds.* and .rds.vhds.*
	// stats.
	Stats *stats.Store
	// Logger logs rejected updates and failed subscriptions; nil discards.
	Logger *logging.Logger
	// Init registers the init targets of SRDS subscriptions made before Start; nil means
	// none. (RDS subscriptions register theirs through the client.)
	Init func(name string) (ready func(), err error)
	// Clock schedules SRDS's and VHDS's initial fetch timeouts and dates config_reload_time_ms;
	// nil means the system clock. The server gives the client's.
	Clock clock.Clock
	// RouteOptions trial-compile RDS route configurations before they are accepted: the
	// server sets the HTTP filters' per-route configuration check (typed_per_filter_config)
	// and the cluster lookup, so that what the connection managers would refuse is NACKed.
	// The zero value checks the routes alone.
	RouteOptions route.Options
}

// Discovery is the route table's xDS side: RDS (route configurations watched by name, one
// subscription per name and transport shared by every connection manager), VHDS (the
// virtual hosts of route configurations with vhds, a wildcard delta stream per transport,
// with on-demand requests) and SRDS (scopes, a wildcard stream per transport, and the
// route configurations they name). It serves the connection managers
// (httpproxy.RouteProvider, VirtualHostRequester, ScopedRouteProvider,
// OnDemandScopedRouteProvider), the warming LDS listeners (WatchRouteDependency,
// WatchScopedDependency) and the routes and route_scopes config dumps.
//
// Concurrency: New, Start and Stop are called once by the server; the rest is safe for
// concurrent use. mu guards the SRDS and VHDS handlers by stream, the scoped routes watches
// and started; it is taken before a handler's or a watch's own mutex is, and before the
// client's locks (Stream). Watchers are called with no lock of the Discovery held.
type Discovery struct {
	cfg   Config
	log   *logging.Logger
	clock clock.Clock

	mu           sync.Mutex
	srds         map[watch.Stream]*srdsHandler
	vhds         map[watch.Stream]*vhdsHandler
	scoped       map[uint64]*scopedWatch
	nextScopedID uint64
	// started is set by Start: SRDS subscriptions made later register no init target.
	started bool

	// srdsApplier and vhdsApplier take the responses of every SRDS and VHDS stream; one each,
	// so that sources sharing a transport share its stream (watch.Streams).
	srdsApplier *applier[*srdsHandler]
	vhdsApplier *applier[*vhdsHandler]
}

// streamHandler is the state of one SRDS or VHDS stream.
type streamHandler interface {
	apply(r watch.Response) error
	failed()
}

// applier hands the responses of one type's streams to their handlers (watch.Applier).
type applier[H streamHandler] struct {
	d        *Discovery
	handlers map[watch.Stream]H // d.srds or d.vhds, under d.mu
}

func (a *applier[H]) handler(s watch.Stream) (H, bool) {
	a.d.mu.Lock()
	defer a.d.mu.Unlock()
	h, ok := a.handlers[s]
	return h, ok
}

func (a *applier[H]) Apply(s watch.Stream, r watch.Response) error {
	if h, ok := a.handler(s); ok {
		return h.apply(r)
	}
	return nil
}

func (a *applier[H]) Failed(s watch.Stream) {
	if h, ok := a.handler(s); ok {
		h.failed()
	}
}

// New returns the route discovery of cfg.Client; nothing is subscribed until a connection
// manager or a listener asks.
func New(cfg Config) (*Discovery, error) {
	if cfg.Client == nil || cfg.Stats == nil {
		return nil, errors.New("rds: Client and Stats are required")
	}
	d := &Discovery{cfg: cfg, log: cfg.Logger, clock: cfg.Clock,
		srds: map[watch.Stream]*srdsHandler{}, vhds: map[watch.Stream]*vhdsHandler{}, scoped: map[uint64]*scopedWatch{}}
	if d.clock == nil {
		d.clock = clock.Real()
	}
	d.srdsApplier = &applier[*srdsHandler]{d: d, handlers: d.srds}
	d.vhdsApplier = &applier[*vhdsHandler]{d: d, handlers: d.vhds}
	return d, nil
}

// Start is called before the client runs: the SRDS subscriptions made until then (static
// listeners') hold the server's initialization, later ones (LDS listeners', which warm on
// them instead) do not.
func (d *Discovery) Start() {
	d.mu.Lock()
	d.started = true
	d.mu.Unlock()
}

// Stop stops the SRDS and VHDS initial fetch timers, once the client has returned.
func (d *Discovery) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, h := range d.srds {
		h.stopTimer()
	}
	for _, h := range d.vhds {
		h.stopTimer()
	}
}

// rdsStats are the RDS-only stats of a route configuration subscription, next to its
// subscription stats under http.<stat_prefix>.rds.<route_config_name>.
type rdsStats struct {
	ConfigReload       stats.Counter `stat:"config_reload"`
	ConfigReloadTimeMs stats.Gauge   `stat:"config_reload_time_ms,never_import"`
	UpdateEmpty        stats.Counter `stat:"update_empty"`
}

// rdsObserver keeps one subscription's rdsStats (watch.Observer).
type rdsObserver struct {
	clock clock.Clock
	stats rdsStats
	reg   *stats.Registration
}

func (o *rdsObserver) Changed() {
	o.stats.ConfigReload.Inc()
	o.stats.ConfigReloadTimeMs.Set(uint64(o.clock.Now().UnixMilli()))
}
func (o *rdsObserver) Failed() {}
func (o *rdsObserver) Done()   { o.reg.Unregister() }

// rdsType is RDS's resource type for the client's watch API, as one connection manager
// watches it: the subscriptions it makes keep their stats under its stat_prefix
// (http.<prefix>.rds.<name>.), as Envoy's are named by the first connection manager.
type rdsType struct {
	d      *Discovery
	prefix string
}

func (rdsType) TypeURL() string { return watch.RouteType }
func (rdsType) Short() string   { return "RDS" }

func (t rdsType) Decode(a *anypb.Any) (string, any, error) {
	rc, err := DecodeRouteConfig(a, t.d.cfg.RouteOptions)
	if err != nil {
		return resource.NamedResourceName(a), nil, err
	}
	return rc.GetName(), rc, nil
}

func (t rdsType) StatPrefix(name string) string { return "http." + t.prefix + ".rds." + name + "." }
func (rdsType) InitTarget(name string) string   { return InitTarget(name) }

func (t rdsType) Observe(name string) watch.Observer {
	o := &rdsObserver{clock: t.d.clock}
	o.reg = t.d.cfg.Stats.Register(t.StatPrefix(name), &o.stats)
	return o
}

// WatchRoutes implements httpproxy.RouteProvider: it subscribes to the RouteConfiguration
// called name from source (one subscription per name and transport, shared by every
// connection manager using it, its stats under http.<statPrefix>.rds.<name>. of the first) and
// calls update with every accepted new version; gen grows with each. A configuration with vhds
// is delivered with the virtual hosts VHDS delivers for it ("<name>/…") added, again after
// every VHDS change. It returns the current configuration (nil until the first arrives) and
// its generation, and cancel, which ends the watch. update runs on an xDS goroutine with no
// lock held and must not block. Safe for concurrent use; a subscription made before the
// client runs registers an init target.
func (d *Discovery) WatchRoutes(name string, source *corev3.ConfigSource, statPrefix string,
	update func(gen uint64, rc *routev3.RouteConfiguration)) (*routev3.RouteConfiguration, uint64, func(), error) {
	src, err := resource.SourceFromProto(source)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("rds.config_source.%w", err)
	}
	if src.Self {
		return nil, 0, nil, errors.New("rds.config_source.self is not supported")
	}
	cur, gen, _, cancel, err := d.watchRoutesFrom(source, name, statPrefix, false, update)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("rds %q: %w", name, err)
	}
	return cur, gen, cancel, nil
}

// watchRoutesFrom is WatchRoutes; it also returns the watch (for its readiness: its RDS
// subscription's, and its VHDS source's). With passNil a removal or an initial fetch that
// ends without a configuration reaches update as nil (scoped routes wake their waiters on
// it); without, it is not reported. source is valid and not self.
func (d *Discovery) watchRoutesFrom(source *corev3.ConfigSource, name, statPrefix string, passNil bool,
	update func(gen uint64, rc *routev3.RouteConfiguration)) (*routev3.RouteConfiguration, uint64, *routeWatch, func(), error) {
	w := &routeWatch{d: d, update: update, prefix: statPrefix}
	w.mu.Lock() // holds back updates until the current configuration is returned
	sub, err := d.cfg.Client.Watch(rdsType{d: d, prefix: statPrefix}, source, name, watch.Func(func(v any) {
		rc, _ := v.(*routev3.RouteConfiguration)
		if rc != nil || passNil {
			w.rdsChanged(rc)
		}
	}))
	if err != nil {
		w.mu.Unlock()
		return nil, 0, nil, nil, err
	}
	w.sub = sub
	var cur *routev3.RouteConfiguration
	if rc, ok := sub.Value().(*routev3.RouteConfiguration); ok {
		cur = w.setLocked(rc)
		w.gen++
	}
	gen := w.gen
	w.mu.Unlock()
	return cur, gen, w, func() { sub.Cancel(); w.stop() }, nil
}

// RoutesConfigDump returns the RDS part of the "routes" config dump: dynamic_route_configs
// for every subscription, with version_info, route_config, last_updated, and error_state for a
// NACKed update. The caller adds static_route_configs. match filters by route configuration
// name (nil for all). Safe for concurrent use.
func (d *Discovery) RoutesConfigDump(match func(string) bool) *adminv3.RoutesConfigDump {
	out := &adminv3.RoutesConfigDump{}
	for _, st := range d.cfg.Client.States(watch.RouteType) {
		if match != nil && !match(st.Name) {
			continue
		}
		dc := &adminv3.RoutesConfigDump_DynamicRouteConfig{VersionInfo: st.Version, RouteConfig: st.Resource, ErrorState: st.ErrorState}
		if st.Resource != nil {
			dc.LastUpdated = timestamppb.New(st.Updated)
			d.mergeVHDSDump(dc, st)
		}
		out.DynamicRouteConfigs = append(out.DynamicRouteConfigs, dc)
	}
	return out
}

// mergeVHDSDump shows a route configuration with vhds as Envoy's route config update receiver
// holds it: the RDS virtual hosts, then those VHDS delivered for it (both in name order, as
// Envoy rebuilds the list from its name-keyed maps), with the version_info and last_updated of
// whichever of RDS and VHDS updated it last. The vhds field stays.
func (d *Discovery) mergeVHDSDump(dc *adminv3.RoutesConfigDump_DynamicRouteConfig, st watch.State) {
	rc := &routev3.RouteConfiguration{}
	if st.Resource.UnmarshalTo(rc) != nil || rc.GetVhds() == nil {
		return
	}
	h := d.vhdsServing(rc.GetName())
	if h == nil {
		return
	}
	hosts := h.hostsOf(rc.GetName())
	h.mu.Lock()
	upd, ok := h.updates[rc.GetName()]
	h.mu.Unlock()
	later := ok && upd.at.After(st.Updated)
	if len(hosts) == 0 && !later {
		return
	}
	sort.SliceStable(rc.VirtualHosts, func(i, j int) bool { return rc.VirtualHosts[i].GetName() < rc.VirtualHosts[j].GetName() })
	rc.VirtualHosts = append(rc.VirtualHosts, hosts...)
	a, err := anypb.New(rc)
	if err != nil {
		return
	}
	dc.RouteConfig = a
	if later {
		dc.VersionInfo, dc.LastUpdated = upd.version, timestamppb.New(upd.at)
	}
}
