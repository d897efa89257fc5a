// Package filtertest is what the HTTP filters' tests share: a real proxy (a cluster manager,
// the upstream pools, the listener manager with the HTTP connection manager registered with
// the filters under test, and one listener on 127.0.0.1:0, all torn down when the test
// ends), typed_config helpers (AnyFromYAML, MustAny), and a filter.Downstream with a fixed
// route (Routed) for unit tests of a filter alone. It is imported by tests only.
package filtertest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/pool"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tlsutil"
)

// Wait bounds how long a test waits for what should happen at once.
const Wait = 10 * time.Second

// Options describe the proxy.
type Options struct {
	// Clusters are cluster YAML documents (see StaticCluster).
	Clusters []string
	// HCM is the HttpConnectionManager YAML.
	HCM string
	// Register registers the filters under test (their packages' Register functions).
	Register []func(b *registry.Builder)
	// TLS, when set, terminates TLS on the listener.
	TLS *corev3.TransportSocket
}

// Proxy is a running proxy.
type Proxy struct {
	t     testing.TB
	Store *stats.Store
	Addr  string
}

// FromYAML fills m from YAML through protojson, failing the test on an error.
func FromYAML(t testing.TB, y string, m proto.Message) {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("YAMLToJSON: %v", err)
	}
	if err := protojson.Unmarshal(j, m); err != nil {
		t.Fatalf("protojson.Unmarshal(%s): %v", j, err)
	}
}

// AnyFromYAML fills m from YAML (FromYAML) and wraps it in an Any: a filter's typed_config.
func AnyFromYAML(t testing.TB, y string, m proto.Message) *anypb.Any {
	t.Helper()
	FromYAML(t, y, m)
	return MustAny(t, m)
}

// MustAny wraps m in an Any, failing the test on an error.
func MustAny(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Start runs the proxy until the test ends.
func Start(t testing.TB, o Options) *Proxy {
	t.Helper()
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	clusters, err := cluster.NewManager(cluster.ManagerConfig{Stats: store})
	if err != nil {
		t.Fatal(err)
	}
	var cs []*config.Cluster
	for _, y := range o.Clusters {
		var pb clusterv3.Cluster
		FromYAML(t, y, &pb)
		c, err := config.ClusterFromProto(&pb, config.Limits{})
		if err != nil {
			t.Fatalf("ClusterFromProto: %v", err)
		}
		cs = append(cs, c)
	}
	if err := clusters.AddStatic(cs); err != nil {
		t.Fatalf("AddStatic: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmDone := make(chan error, 1)
	go func() { cmDone <- clusters.Run(ctx) }()
	pools, err := pool.NewRegistry(pool.RegistryConfig{Clusters: clusters, Stats: store})
	if err != nil {
		t.Fatal(err)
	}
	filters, err := filter.Of(o.Register...)
	if err != nil {
		t.Fatal(err)
	}
	// Access-log files flush every few milliseconds so tests see a line soon after its stream.
	logs := accesslog.NewManager(accesslog.FileOptions{FlushInterval: 5 * time.Millisecond})
	t.Cleanup(func() { logs.Close() })
	svc, err := httpproxy.NewService(httpproxy.Deps{Clusters: clusters, Pools: pools, Stats: store, LocalClusterName: "local",
		AccessLogs: logs, Filters: filters, TLS: tlsutil.Deps{Stats: tlsutil.NewStatsScopes(store)}})
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	ext, err := registry.Of(config.Register, httpproxy.Register)
	if err != nil {
		t.Fatal(err)
	}
	var hcm hcmv3.HttpConnectionManager
	FromYAML(t, o.HCM, &hcm)
	anyHCM, err := anypb.New(&hcm)
	if err != nil {
		t.Fatal(err)
	}
	l, err := config.ListenerFromProto(&listenerv3.Listener{
		Name: "test",
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 0},
		}}},
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{
				Name:       config.HTTPConnectionManagerFilter,
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: anyHCM},
			}},
			TransportSocket: o.TLS,
		}},
	}, config.Limits{Extensions: ext})
	if err != nil {
		t.Fatalf("ListenerFromProto: %v", err)
	}
	lm, err := listener.NewManager(listener.ManagerConfig{Stats: store, Extensions: ext,
		Services: listener.Services{config.HTTPConnectionManagerFilter: svc}})
	if err != nil {
		t.Fatal(err)
	}
	if err := lm.AddStatic([]*config.Listener{l}); err != nil {
		t.Fatalf("AddStatic(listener): %v", err)
	}
	if err := lm.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	lmDone := make(chan error, 1)
	go func() { lmDone <- lm.Run(ctx) }()
	p := &Proxy{t: t, Store: store, Addr: lm.Addrs()["test"][0].String()}
	t.Cleanup(func() {
		cancel()
		<-lmDone
		<-cmDone
		pools.Close()
	})
	return p
}

// StaticCluster is the YAML of a STATIC cluster with endpoints at addrs and extra fields.
func StaticCluster(name, extra string, addrs ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\ntype: STATIC\nconnect_timeout: 1s\n%s\nload_assignment:\n  cluster_name: %s\n  endpoints:\n  - lb_endpoints:\n", name, extra, name)
	for _, a := range addrs {
		h, p, _ := net.SplitHostPort(a)
		fmt.Fprintf(&b, "    - endpoint: {address: {socket_address: {address: %s, port_value: %s}}}\n", h, p)
	}
	return b.String()
}

// Client returns an HTTP/1.1 client with its own keep-alive pool, closed when the test ends.
func (p *Proxy) Client() *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}
	p.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: Wait}
}

// Do sends req through c and returns the response with its body read.
func (p *Proxy) Do(c *http.Client, req *http.Request) (*http.Response, string) {
	p.t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatalf("%s %s: reading body: %v", req.Method, req.URL, err)
	}
	return resp, string(b)
}

// Get sends a GET for path with headers given as name, value pairs ("host" sets Host).
func (p *Proxy) Get(c *http.Client, path string, hdr ...string) (*http.Response, string) {
	p.t.Helper()
	return p.Send(c, http.MethodGet, path, nil, hdr...)
}

// Send sends a request for path with body (nil for none) and headers given as name, value
// pairs ("host" sets Host), and returns the response with its body read.
func (p *Proxy) Send(c *http.Client, method, path string, body io.Reader, hdr ...string) (*http.Response, string) {
	p.t.Helper()
	req, err := http.NewRequest(method, "http://"+p.Addr+path, body)
	if err != nil {
		p.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Add(hdr[i], hdr[i+1])
	}
	return p.Do(c, req)
}

// Stat returns the value of the counter or gauge of that full name (0 when absent).
func (p *Proxy) Stat(name string) uint64 {
	var v uint64
	p.Store.Each(stats.KindSet(stats.KindCounter, stats.KindGauge), func(st *stats.Stat) bool {
		if st.Name() == name {
			v += st.Value()
		}
		return true
	})
	return v
}

// HCM is an HttpConnectionManager YAML with stat_prefix ingress, one virtual host routing
// every request to cluster web (with route-level extra fields, e.g. typed_per_filter_config
// on a second route for prefix /other), and the given http_filters entries (YAML list items)
// before the router.
func HCM(filters, routeExtra string) string {
	return Routes(`    - match: {prefix: "/other"}
      route: {cluster: web}
`+routeExtra+`
    - match: {prefix: "/"}
      route: {cluster: web}
`, filters)
}

// StartPolicy serves upstream as cluster web and runs a proxy with the filters register
// registers and the connection manager Routes(routes, filters): the setup of a filter's
// end-to-end test.
func StartPolicy(t testing.TB, upstream http.HandlerFunc, register func(*registry.Builder), routes, filters string) *Proxy {
	t.Helper()
	return Start(t, Options{
		Clusters: []string{StaticCluster("web", "", ServeHandler(t, upstream))},
		Register: []func(*registry.Builder){register},
		HCM:      Routes(routes, filters),
	})
}

// Routes is an HttpConnectionManager YAML with stat_prefix ingress, one virtual host with
// routes (YAML list items indented by four spaces), and the given http_filters entries
// before the router: the policy a filter's end-to-end test runs.
func Routes(routes, filters string) string {
	return fmt.Sprintf(`stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
%s
http_filters:
%s
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`, routes, filters)
}

// Upstream starts a net/http server on 127.0.0.1 that answers 200 with body "upstream" and
// echoes the request headers it got as response headers prefixed "Echo-" (for the headers
// named in echo). It returns its address.
func Upstream(t testing.TB, echo ...string) string {
	t.Helper()
	return ServeHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range echo {
			if vs, ok := r.Header[http.CanonicalHeaderKey(h)]; ok {
				w.Header()["Echo-"+http.CanonicalHeaderKey(h)] = vs
			}
		}
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "upstream")
	}))
}

// ServeHandler serves h with net/http on 127.0.0.1, over HTTP/1.1 and prior-knowledge HTTP/2
// (h2c), until the test ends, and returns its address.
func ServeHandler(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// WaitLog waits until the access log at path holds the lines want: a stream's line is
// written when it ends, which the client may see first.
func WaitLog(t testing.TB, path string, want []string) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for {
		b, _ := os.ReadFile(path)
		got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if strings.Join(got, "\n") == strings.Join(want, "\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("access log = %q; want %q", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
