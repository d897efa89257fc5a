package httpproxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"github.com/legateproxy/legate/tracing"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	tapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/tap/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/accesslog/als"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/tap"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/overload"
	"github.com/legateproxy/legate/pool"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tlsutil"
)

// wait bounds how long a test waits for something that should happen at once.
const wait = 10 * time.Second

// env is a running proxy: cluster manager, pools, listener manager with the connection
// manager registered, and one listener "test" on 127.0.0.1:0.
type env struct {
	t        testing.TB
	store    *stats.Store
	clusters *cluster.Manager
	pools    *pool.Registry
	lm       *listener.Manager
	failed   atomic.Bool
	addr     string
	hcm      string
	logs     *accesslog.Manager
	label    string // the pprof label of its goroutines (envleak_test.go)
}

// testExtensions is the registry of the connection manager's tests: the connection manager
// (config's parser and this package's factory).
func testExtensions(t testing.TB) *registry.Registry {
	t.Helper()
	r, err := registry.Of(config.Register, Register)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// envOptions tune newEnv.
type envOptions struct {
	clusters  []string // cluster YAML documents
	hcm       string   // HttpConnectionManager YAML
	tls       *corev3.TransportSocket
	upTLS     func(c *config.Cluster, h *host.Host) *tls.Config
	drainTime time.Duration
	drainNow  bool // DrainImmediate strategy
	als       *als.Manager
	ecds      ExtensionConfigProvider
	filters   *filter.Registry // nil: the health check filter only
	srds      ScopedRouteProvider
	runtime   func(key string, def uint64) uint64 // Deps.Runtime
	overload  *overload.State                     // Deps.Overload and the listener manager's
	bypass    bool                                // the listener's bypass_overload_manager
	tracing   tracing.Deps                        // Deps.Tracing
	direction corev3.TrafficDirection             // the listener's traffic_direction
	now       func() time.Time                    // Deps.Now; nil: the system clock
}

func fromYAML(t testing.TB, y string, m proto.Message) {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("YAMLToJSON: %v", err)
	}
	if err := protojson.Unmarshal(j, m); err != nil {
		t.Fatalf("protojson.Unmarshal(%s): %v", j, err)
	}
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: store, hcm: o.hcm}
	e.clusters, err = cluster.NewManager(cluster.ManagerConfig{Stats: store})
	if err != nil {
		t.Fatal(err)
	}
	var cs []*config.Cluster
	for _, y := range o.clusters {
		var pb clusterv3.Cluster
		fromYAML(t, y, &pb)
		c, err := config.ClusterFromProto(&pb, config.Limits{})
		if err != nil {
			t.Fatalf("ClusterFromProto: %v", err)
		}
		cs = append(cs, c)
	}
	if err := e.clusters.AddStatic(cs); err != nil {
		t.Fatalf("AddStatic: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmDone := make(chan error, 1)
	go func() { cmDone <- e.clusters.Run(ctx) }()
	e.pools, err = pool.NewRegistry(pool.RegistryConfig{Clusters: e.clusters, Stats: store, TLS: o.upTLS})
	if err != nil {
		t.Fatal(err)
	}
	e.logs = accesslog.NewManager(accesslog.FileOptions{})
	t.Cleanup(func() { e.logs.Close() })
	svc, err := NewService(Deps{Clusters: e.clusters, Pools: e.pools, Stats: store, HealthCheckFailed: &e.failed, LocalClusterName: "local", AccessLogs: e.logs, GRPCAccessLogs: o.als, ExtensionConfigs: o.ecds, ScopedRoutes: o.srds, Filters: o.filters, Runtime: o.runtime, Overload: o.overload, Tracing: o.tracing, Now: o.now,
		TLS: tlsutil.Deps{Stats: tlsutil.NewStatsScopes(store)}})
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	ext := testExtensions(t)
	var hcm hcmv3.HttpConnectionManager
	fromYAML(t, o.hcm, &hcm)
	anyHCM, err := anypb.New(&hcm)
	if err != nil {
		t.Fatal(err)
	}
	lpb := &listenerv3.Listener{
		Name: "test",
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 0},
		}}},
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{
				Name:       config.HTTPConnectionManagerFilter,
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: anyHCM},
			}},
			TransportSocket: o.tls,
		}},
		BypassOverloadManager: o.bypass,
		TrafficDirection:      o.direction,
	}
	l, err := config.ListenerFromProto(lpb, config.Limits{Extensions: ext})
	if err != nil {
		t.Fatalf("ListenerFromProto: %v", err)
	}
	strategy := listener.DrainGradual
	if o.drainNow {
		strategy = listener.DrainImmediate
	}
	e.lm, err = listener.NewManager(listener.ManagerConfig{
		Stats: store, Extensions: ext, Services: listener.Services{config.HTTPConnectionManagerFilter: svc}, HealthCheckFailed: e.failed.Load,
		DrainTime: o.drainTime, DrainStrategy: strategy, Overload: o.overload,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.lm.AddStatic([]*config.Listener{l}); err != nil {
		t.Fatalf("AddStatic(listener): %v", err)
	}
	if err := e.lm.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	lmDone := make(chan error, 1)
	e.label = labelEnv(t, func() { go func() { lmDone <- e.lm.Run(ctx) }() })
	e.addr = e.lm.Addrs()["test"][0].String()
	t.Cleanup(func() {
		cancel()
		<-lmDone
		<-cmDone
		e.pools.Close()
		awaitEnvGoroutines(t, e.label)
	})
	return e
}

// staticCluster is the YAML of a STATIC cluster with endpoints at addrs and extra fields.
func staticCluster(name, extra string, addrs ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\ntype: STATIC\nconnect_timeout: 1s\n%s\nload_assignment:\n  cluster_name: %s\n  endpoints:\n  - lb_endpoints:\n", name, extra, name)
	for _, a := range addrs {
		h, p, _ := net.SplitHostPort(a)
		fmt.Fprintf(&b, "    - endpoint: {address: {socket_address: {address: %s, port_value: %s}}}\n", h, p)
	}
	return b.String()
}

// webHCM begins an HttpConnectionManager YAML: stat_prefix ingress and one virtual host
// routing every request to cluster web. Tests append access_log, http_filters and so on.
const webHCM = `stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/"}
      route: {cluster: web}
`

// simpleHCM is an HttpConnectionManager YAML routing every request to cluster, with extra
// route action fields.
func simpleHCM(cluster, action string) string {
	return fmt.Sprintf(`stat_prefix: ingress
route_config:
  name: local
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/"}
      route: {cluster: %s %s}
http_filters:
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`, cluster, action)
}

// client returns an HTTP/1.1 client with its own keep-alive pool.
func (e *env) client() *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	e.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: wait}
}

// get sends a GET through the proxy and returns the response with its body read.
func (e *env) get(c *http.Client, path string, hdr ...string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+e.addr+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("GET %s: reading body: %v", path, err)
	}
	return resp, string(b)
}

// stat returns the value of a counter or gauge by full name (0 when absent; several stats
// of one name add up).
func (e *env) stat(name string) uint64 {
	var v uint64
	e.store.Each(stats.KindSet(stats.KindCounter, stats.KindGauge), func(st *stats.Stat) bool {
		if st.Name() == name {
			v += st.Value()
		}
		return true
	})
	return v
}

// hostStats returns the per-host stats of the host at addr in cluster name.
func (e *env) hostStats(name, addr string) *cluster.HostStats {
	e.t.Helper()
	c := e.clusters.Get(name)
	if c == nil {
		e.t.Fatalf("no cluster %q", name)
	}
	snap := c.Snapshot()
	for _, s := range snap.PrioritySet.Sets() {
		for _, h := range s.Hosts() {
			if h.Address() == addr {
				return snap.HostStats(h)
			}
		}
	}
	e.t.Fatalf("cluster %q has no host %s", name, addr)
	return nil
}

// filtersOf returns the HTTP filters that register registers, and the tap filter when taps is
// not nil: its filters join taps, as the server's join its /tap endpoint.
func filtersOf(t testing.TB, taps *tap.Manager, register ...func(*registry.Builder)) *filter.Registry {
	t.Helper()
	if taps != nil {
		register = append(register, func(b *registry.Builder) {
			registry.Add(b, filter.HTTPFilters, tap.Name, &tapv3.Tap{}, filter.Extension{
				New: func(cfg *anypb.Any, _ *filter.Context) (filter.Filter, error) { return tap.FromAny(cfg, taps) },
			})
		})
	}
	filters, err := filter.Of(register...)
	if err != nil {
		t.Fatal(err)
	}
	return filters
}
