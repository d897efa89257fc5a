package xds

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/cluster/cds"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy"
	"github.com/legateproxy/legate/httpproxy/rds"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/listener/lds"
	"github.com/legateproxy/legate/runtime"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tlsutil"
	xdswatch "github.com/legateproxy/legate/xds/watch"
	"github.com/legateproxy/legate/xds/xdstest"
)

const testNode = "node-1"

// controlPlane is xdstest's management server for testNode, with the dialer and the CDS/EDS
// publisher these tests use.
type controlPlane struct {
	*xdstest.Server
}

func newControlPlane(t testing.TB, ads bool) *controlPlane {
	return &controlPlane{xdstest.New(t, xdstest.Options{Node: testNode, ADS: ads})}
}

func (cp *controlPlane) dial(ctx context.Context, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", cp.Addr())
}

func (cp *controlPlane) set(version string, clusters []types.Resource, endpoints []types.Resource) {
	cp.Set(version, map[resourcev3.Type][]types.Resource{
		resourcev3.ClusterType:  clusters,
		resourcev3.EndpointType: endpoints,
	})
}

// proxy is the Legate side: a stats store, a cluster manager and the client under test.
type proxy struct {
	t     testing.TB
	store *stats.Store
	cm    *cluster.Manager
	c     *Client
	// d is the cluster side of CDS and EDS, wired as the server wires it; l the listener
	// side of LDS, when the test has one; r the route table's side of RDS, VHDS and SRDS;
	// sds and ecds the owners of SDS and ECDS.
	d *cds.Discovery
	l *lds.LDS
	r *rds.Discovery
	// vhdsAnswered is set when the route discovery is first handed a VHDS response, before
	// it applies it.
	vhdsAnswered atomic.Bool
	sds          *tlsutil.SDS
	ecds         *httpproxy.ECDS
	events       chan struct{}
	ready        chan struct{}
	// timeout bounds waitFor; 10 s when zero.
	timeout  time.Duration
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
}

type proxyOption func(*proxySetup)

type proxySetup struct {
	cfg    Config
	before func(p *proxy) // runs before the client is built
	// afterNew runs after New (and the owners') and before Run.
	afterNew func(p *proxy)
	// routeOptions are the route discovery's (rds.Config.RouteOptions).
	routeOptions route.Options
	// listeners, when set, take LDS (dynamic_resources.lds_config) as the server wires it.
	listeners lds.ListenerManager
	// rtds are layered_runtime rtds_layer entries watched into runtime (as the server does).
	rtds    []*bootstrapv3.RuntimeLayer_RtdsLayer
	runtime *fakeRuntime
	// secretsChanged is SDS's changed hook (the server reloads its TLS contexts there).
	secretsChanged func()
	// extensionCheck stands for the HTTP filter factories in ECDS's warming checks (the
	// server's httpproxy.CheckDiscoveredFilter); nil checks type_urls alone.
	extensionCheck func(tc *corev3.TypedExtensionConfig) error
}

func startProxy(t testing.TB, dr *bootstrapv3.Bootstrap_DynamicResources, opts ...proxyOption) *proxy {
	t.Helper()
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cluster.NewManager(cluster.ManagerConfig{Stats: store})
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, store: store, cm: cm, events: make(chan struct{}, 1), ready: make(chan struct{})}
	var once sync.Once
	ps := &proxySetup{cfg: Config{
		DynamicResources: dr,
		Node:             &corev3.Node{Id: testNode, Cluster: "legate"},
		Clusters:         cm,
		Stats:            store,
		Init: func(string) (func(), error) {
			return func() { once.Do(func() { close(p.ready) }) }, nil
		},
		BackoffBase:      5 * time.Millisecond,
		BackoffMax:       50 * time.Millisecond,
		FilePollInterval: 5 * time.Millisecond,
	}}
	for _, o := range opts {
		o(ps)
	}
	if ps.before != nil {
		ps.before(p)
	}
	sds := tlsutil.NewSDS(nil, ps.secretsChanged)
	ecds := httpproxy.NewECDS(store, ps.extensionCheck, nil)
	p.sds, p.ecds = sds, ecds
	p.c, err = New(ps.cfg)
	if err != nil {
		t.Fatal(err)
	}
	sds.SetClient(p.c)
	ecds.SetClient(p.c)
	p.r, err = rds.New(rds.Config{Client: vhdsSpy{p.c, &p.vhdsAnswered}, Stats: store, Init: ps.cfg.Init, Clock: ps.cfg.Clock, RouteOptions: ps.routeOptions})
	if err != nil {
		t.Fatal(err)
	}
	p.d, err = cds.New(cds.Config{Client: p.c, DynamicResources: ps.cfg.DynamicResources, Clusters: cm, Stats: store, Init: ps.cfg.Init, Clock: ps.cfg.Clock, Secrets: sds})
	if err != nil {
		t.Fatal(err)
	}
	p.d.Start()
	if ps.runtime != nil {
		if err := runtime.WatchRTDS(p.c, ps.rtds, ps.runtime.SetRTDSLayer, nil); err != nil {
			t.Fatal(err)
		}
	}
	if ps.listeners != nil {
		deps := lds.Owners{
			Routes:       lds.Watcher(p.r.WatchRouteDependency),
			ScopedRoutes: lds.Watcher(p.r.WatchScopedDependency),
			Extensions:   ecds,
			Secrets:      sds,
		}
		p.l, err = lds.New(lds.Config{Client: p.c, Deps: deps.Watch, DynamicResources: ps.cfg.DynamicResources, Listeners: ps.listeners, Stats: store, Init: ps.cfg.Init, Clock: ps.cfg.Clock})
		if err != nil {
			t.Fatal(err)
		}
		p.l.Start()
	}
	if ps.afterNew != nil {
		ps.afterNew(p)
	}
	p.r.Start()
	p.c.testHook = func(string, string, error) {
		select {
		case p.events <- struct{}{}:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan error, 1)
	go func() { p.done <- p.c.Run(ctx) }()
	t.Cleanup(p.stop)
	return p
}

// vhdsSpy is the client as the harness gives it to the route discovery: it notes when a VHDS
// response reaches the discovery.
type vhdsSpy struct {
	*Client
	answered *atomic.Bool
}

func (s vhdsSpy) Stream(typeURL string, cs *corev3.ConfigSource, wildcard bool, a xdswatch.Applier) (xdswatch.Stream, error) {
	if typeURL == xdswatch.VirtualHostType {
		a = answerSpy{a, s.answered}
	}
	return s.Client.Stream(typeURL, cs, wildcard, a)
}

// answerSpy is a VHDS applier that notes each response before applying it.
type answerSpy struct {
	xdswatch.Applier
	answered *atomic.Bool
}

func (a answerSpy) Apply(s xdswatch.Stream, r xdswatch.Response) error {
	a.answered.Store(true)
	return a.Applier.Apply(s, r)
}

func (p *proxy) stop() { p.stopOnce.Do(p.stopNow) }

func (p *proxy) stopNow() {
	p.cancel()
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Errorf("Run: %v", err)
		}
		p.d.Stop()
		p.r.Stop()
		if p.l != nil {
			p.l.Stop()
		}
	case <-time.After(10 * time.Second):
		p.t.Fatal("Run did not return within 10s of cancel")
	}
}

// waitFor waits until cond holds, re-checking after every client event (and every 20 ms, for
// changes such as timers that raise no event), for at most p.timeout.
func (p *proxy) waitFor(what string, cond func() bool) {
	p.t.Helper()
	timeout := p.timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	deadline := time.After(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-p.events:
		case <-tick.C:
		case <-deadline:
			p.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// hosts returns the addresses of an active cluster's hosts, or nil when it is not active.
func (p *proxy) hosts(name string) []string {
	cl := p.cm.Get(name)
	if cl == nil || cl.Snapshot() == nil {
		return nil
	}
	var out []string
	for _, s := range cl.Snapshot().PrioritySet.Sets() {
		for _, h := range s.Hosts() {
			out = append(out, h.Address())
		}
	}
	return out
}

func (p *proxy) hasHosts(name string, want ...string) func() bool {
	return func() bool {
		got := p.hosts(name)
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if got[i] != want[i] {
				return false
			}
		}
		return true
	}
}

// counter returns a stat's value by name (0 when absent).
func (p *proxy) stat(name string) uint64 {
	var v uint64
	p.store.Each(stats.KindSet(stats.KindCounter, stats.KindGauge), func(st *stats.Stat) bool {
		if st.Name() == name {
			v = st.Value()
			return false
		}
		return true
	})
	return v
}

func (p *proxy) text(name string) string {
	var v string
	p.store.Each(stats.KindSet(stats.KindTextReadout), func(st *stats.Stat) bool {
		if st.Name() == name {
			v = st.Text()
			return false
		}
		return true
	})
	return v
}

// Resource builders.

func grpcSource(api corev3.ApiConfigSource_ApiType) *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion: corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{ApiConfigSource: &corev3.ApiConfigSource{
			ApiType:             api,
			TransportApiVersion: corev3.ApiVersion_V3,
			GrpcServices: []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
				EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "xds"},
			}}},
		}},
	}
}

func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3, ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
}

func edsCluster(name, service string, src *corev3.ConfigSource) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: src, ServiceName: service},
	}
}

func staticCluster(name string, addrs ...string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment:       assignment(name, addrs...),
	}
}

// assignment builds a ClusterLoadAssignment with one locality holding addrs ("ip:port").
func assignment(service string, addrs ...string) *endpointv3.ClusterLoadAssignment {
	var eps []*endpointv3.LbEndpoint
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		var pn uint32
		for _, ch := range port {
			pn = pn*10 + uint32(ch-'0')
		}
		eps = append(eps, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: pn},
				}}},
			}},
			LoadBalancingWeight: wrapperspb.UInt32(1),
		})
	}
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: service,
		Endpoints:   []*endpointv3.LocalityLbEndpoints{{Locality: &corev3.Locality{Zone: "z1"}, LbEndpoints: eps}},
	}
}

// addStatic adds a bootstrap cluster to the proxy's manager (before Run matters only for EDS).
func addStatic(t *testing.T, cm *cluster.Manager, cs ...*clusterv3.Cluster) {
	t.Helper()
	var cfgs []*config.Cluster
	for _, c := range cs {
		cfg, err := config.ClusterFromProto(c, config.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, cfg)
	}
	if err := cm.AddStatic(cfgs); err != nil {
		t.Fatal(err)
	}
}

func withDial(cp *controlPlane) proxyOption { return func(s *proxySetup) { s.cfg.Dial = cp.dial } }

// startLDSProxy starts a client taking LDS over ADS (api: its variant) from a new control
// plane, its listeners going to a fake listener manager; opts apply after those settings.
func startLDSProxy(t *testing.T, api corev3.ApiConfigSource_ApiType, opts ...proxyOption) (*controlPlane, *fakeListeners, *proxy) {
	cp := newControlPlane(t, true)
	lm := newFakeListeners()
	dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(api).GetApiConfigSource(), LdsConfig: adsSource()}
	p := startProxy(t, dr, append([]proxyOption{withDial(cp), func(s *proxySetup) { s.listeners = lm }}, opts...)...)
	return cp, lm, p
}

// startProxyWith is startProxy with a setup step (adding bootstrap clusters) before Run.
func startProxyWith(t *testing.T, dr *bootstrapv3.Bootstrap_DynamicResources, setup func(p *proxy), opts ...proxyOption) *proxy {
	return startProxy(t, dr, append(opts, func(s *proxySetup) { s.before = setup })...)
}

// newTestClient builds a client over an empty manager, and its CDS side, for configuration
// errors.
func newTestClient(dr *bootstrapv3.Bootstrap_DynamicResources) (*Client, error) {
	store, err := stats.New(stats.Config{})
	if err != nil {
		return nil, err
	}
	cm, err := cluster.NewManager(cluster.ManagerConfig{Stats: store})
	if err != nil {
		return nil, err
	}
	c, err := New(Config{DynamicResources: dr, Clusters: cm, Stats: store})
	if err != nil {
		return nil, err
	}
	if _, err := cds.New(cds.Config{Client: c, DynamicResources: dr, Clusters: cm, Stats: store}); err != nil {
		return nil, err
	}
	return c, nil
}
