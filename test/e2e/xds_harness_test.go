package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	alsv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/accesslog/als/alstest"
	"github.com/legateproxy/legate/xds/xdstest"
)

// This file holds what the xDS and access log tests share: the bootstrap pieces that point
// the binary at an xdstest management server, the waits that wake on its requests, resource
// builders (listeners from YAML, VHDS route configurations, virtual hosts, scopes) and a real
// AccessLogService.

// adsBootstrap is a bootstrap for node that takes each of subscriptions ("lds_config",
// "cds_config") over ADS from xds, with the static clusters (clusterYAML entries) before the
// management server's cluster xds.
func adsBootstrap(node string, xds *xdstest.Server, subscriptions []string, clusters ...string) string {
	var b strings.Builder
	b.WriteString(`
node: {id: ` + node + `, cluster: e2e}
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
dynamic_resources:
  ads_config:
    api_type: GRPC
    transport_api_version: V3
    grpc_services: [{envoy_grpc: {cluster_name: xds}}]
`)
	for _, s := range subscriptions {
		b.WriteString("  " + s + ": {ads: {}, resource_api_version: V3}\n")
	}
	b.WriteString("static_resources:\n  clusters:\n")
	for _, c := range clusters {
		b.WriteString(c)
	}
	b.WriteString(xdsCluster(xds))
	return b.String()
}

// xdsCluster is the static_resources.clusters entry xds for the management server.
func xdsCluster(xds *xdstest.Server) string { return clusterYAML("xds", xds.Addr(), true) }

// clusterYAML is a static_resources.clusters entry name with the one host addr
// ("host:port"), spoken to over HTTP/2 when h2.
func clusterYAML(name, addr string, h2 bool) string {
	host, port, _ := net.SplitHostPort(addr)
	s := "  - name: " + name + "\n    connect_timeout: 1s\n"
	if h2 {
		s += `    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
`
	}
	return s + `    load_assignment:
      cluster_name: ` + name + `
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: ` + host + `, port_value: ` + port + `}}}}]}]
`
}

// loopback is 127.0.0.1:port.
func loopback[P int | string](port P) string { return fmt.Sprintf("127.0.0.1:%v", port) }

// awaitXDS polls ok until it holds, re-checking after each request xds receives and every
// 50 ms; it reports false when 20 s pass first.
func awaitXDS(xds *xdstest.Server, ok func() bool) bool {
	deadline := time.After(20 * time.Second)
	for !ok() {
		select {
		case <-xds.Received():
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			return ok()
		}
	}
	return true
}

// waitXDS is awaitXDS failing the test on the timeout.
func waitXDS(t *testing.T, xds *xdstest.Server, what string, ok func() bool) {
	t.Helper()
	if !awaitXDS(xds, ok) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// nackOf waits for an ECDS NACK whose error_detail contains want and returns its message.
func nackOf(t *testing.T, xds *xdstest.Server, want string) string {
	t.Helper()
	var msg string
	waitXDS(t, xds, fmt.Sprintf("an ECDS NACK containing %q", want), func() bool {
		for _, r := range xds.Requests() {
			if r.GetTypeUrl() == resourcev3.ExtensionConfigType && strings.Contains(r.GetErrorDetail().GetMessage(), want) {
				msg = r.GetErrorDetail().GetMessage()
				return true
			}
		}
		return false
	})
	return msg
}

// subscriptions counts the delta requests to xds that subscribe to name.
func subscriptions(xds *xdstest.Server, name string) int {
	n := 0
	for _, r := range xds.DeltaRequests() {
		for _, s := range r.GetResourceNamesSubscribe() {
			if s == name {
				n++
			}
		}
	}
	return n
}

// fromYAMLProto decodes a YAML document into m, as the bootstrap loader does.
func fromYAMLProto(t *testing.T, y string, m proto.Message) {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(j, m); err != nil {
		t.Fatalf("%v in %s", err, j)
	}
}

// hcmListener is a listener name on 127.0.0.1:port with one HTTP connection manager
// (stat_prefix name); hcm is the rest of its typed_config, YAML indented by six spaces.
func hcmListener(t *testing.T, name string, port int, hcm string) *listenerv3.Listener {
	t.Helper()
	var l listenerv3.Listener
	fromYAMLProto(t, fmt.Sprintf(`
name: %s
address: {socket_address: {address: 127.0.0.1, port_value: %d}}
filter_chains:
- filters:
  - name: envoy.filters.network.http_connection_manager
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: %s
%s`, name, port, name, hcm), &l)
	return &l
}

// boundListenerAddr waits until /listeners reports listener name bound to a port (one the
// kernel picked for port_value 0, once the listener's warming ends) and returns its address.
func (p *proc) boundListenerAddr(name string) string {
	p.t.Helper()
	var addr, body string
	eventually(p.t, "listener "+name+" bound", func() bool {
		_, _, body = p.get("/listeners")
		for _, l := range lines(body) {
			if a, ok := strings.CutPrefix(l, name+"::"); ok {
				_, port, err := net.SplitHostPort(a)
				addr = a
				return err == nil && port != "0"
			}
		}
		return false
	})
	return addr
}

// boundListenerPort is boundListenerAddr's port.
func (p *proc) boundListenerPort(name string) int {
	p.t.Helper()
	_, port, _ := net.SplitHostPort(p.boundListenerAddr(name))
	n, err := strconv.Atoi(port)
	if err != nil {
		p.t.Fatalf("listener %s: port %q: %v", name, port, err)
	}
	return n
}

// onDemandFilters is an hcmListener http_filters list: on_demand, then the router.
const onDemandFilters = `
      http_filters:
      - name: envoy.filters.http.on_demand
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.on_demand.v3.OnDemand}
      - name: envoy.filters.http.router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}`

// vhdsRouteConfig is route configuration name with the virtual host base (base.example,
// answering "base") and the rest of its virtual hosts from VHDS (delta gRPC on cluster xds).
func vhdsRouteConfig(t *testing.T, name string) *routev3.RouteConfiguration {
	t.Helper()
	var rc routev3.RouteConfiguration
	fromYAMLProto(t, `
name: `+name+`
virtual_hosts:
- name: base
  domains: [base.example]
  routes: [{match: {prefix: /}, direct_response: {status: 200, body: {inline_string: base}}}]
vhds:
  config_source:
    resource_api_version: V3
    api_config_source:
      api_type: DELTA_GRPC
      transport_api_version: V3
      grpc_services: [{envoy_grpc: {cluster_name: xds}}]
`, &rc)
	return &rc
}

// virtualHost is virtual host name for domain taking every path to route's action.
func virtualHost(name, domain string, route *routev3.Route) *routev3.VirtualHost {
	return &routev3.VirtualHost{Name: name, Domains: []string{domain}, Routes: []*routev3.Route{{
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}, Action: route.Action,
	}}}
}

// scopedRoute is scope name, keyed by the one string key, using route configuration rc.
func scopedRoute(name, rc, key string, onDemand bool) *routev3.ScopedRouteConfiguration {
	return &routev3.ScopedRouteConfiguration{Name: name, RouteConfigurationName: rc, OnDemand: onDemand, Key: &routev3.ScopedRouteConfiguration_Key{
		Fragments: []*routev3.ScopedRouteConfiguration_Key_Fragment{{Type: &routev3.ScopedRouteConfiguration_Key_Fragment_StringKey{StringKey: key}}},
	}}
}

// scopedRequest sends method url with body, the Host header host (url's when empty) and
// x-scope scope (none when empty); it returns the status and body, or 0 and the error.
func scopedRequest(client *http.Client, method, url, host, scope, body string) (int, string) {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if host != "" {
		req.Host = host
	}
	if scope != "" {
		req.Header.Set("x-scope", scope)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// alsCollector is a real AccessLogService on 127.0.0.1 keeping the log name of the streams'
// identifier and the entries (HTTP or TCP) that entriesOf takes from each message.
type alsCollector[E any] struct {
	entriesOf func(*alsv3.StreamAccessLogsMessage) []E
	addr      string

	mu      sync.Mutex // guards the fields below
	logName string
	entries []E
}

// startALS serves an alsCollector until the test ends.
func startALS[E any](t *testing.T, entriesOf func(*alsv3.StreamAccessLogsMessage) []E) *alsCollector[E] {
	t.Helper()
	c := &alsCollector[E]{entriesOf: entriesOf}
	c.addr = alstest.Handle(t, c.receive)
	return c
}

// receive keeps the log name of m's identifier, if it has one, and its entries.
func (c *alsCollector[E]) receive(m *alsv3.StreamAccessLogsMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id := m.GetIdentifier(); id != nil {
		c.logName = id.GetLogName()
	}
	c.entries = append(c.entries, c.entriesOf(m)...)
}

// seen returns the last log name and a copy of the entries received so far.
func (c *alsCollector[E]) seen() (string, []E) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logName, append([]E(nil), c.entries...)
}

// logLines waits until the file at path holds at least n lines and returns them.
func logLines(t *testing.T, path string, n int) []string {
	t.Helper()
	var got []string
	eventually(t, fmt.Sprintf("%d lines in %s", n, path), func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		got = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		return len(got) >= n
	})
	return got
}

// response is an HTTP answer's status and body, for requests sent in the background.
type response struct {
	status int
	body   string
}

// waitSubscription waits until a delta request to xds subscribes to name, failing the test
// when a response arrives on answered first: the request it stands for was not held for the
// management server's answer.
func waitSubscription(t *testing.T, xds *xdstest.Server, name string, answered <-chan response) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for subscriptions(xds, name) == 0 {
		select {
		case r := <-answered:
			t.Fatalf("a request for %s answered %d %.40q before the management server did", name, r.status, r.body)
		case <-xds.Received():
		case <-timeout:
			t.Fatalf("no VHDS subscription to %s", name)
		}
	}
}

// routerFilter is an hcmListener http_filters list holding only the router.
const routerFilter = `
      http_filters:
      - name: envoy.filters.http.router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}`

// srdsScopes is hcmListener YAML for the scoped routes "scopes", keyed by the x-scope
// header, the scopes from SRDS and their route configurations from RDS, both over ADS.
const srdsScopes = `      scoped_routes:
        name: scopes
        scope_key_builder: {fragments: [{header_value_extractor: {name: x-scope, index: 0}}]}
        rds_config_source: {ads: {}, resource_api_version: V3}
        scoped_rds: {scoped_rds_config_source: {ads: {}, resource_api_version: V3}}`

// inlineScope is hcmListener YAML for the scoped routes name, keyed by the x-scope header,
// whose one inline scope si (key i) has route configuration ri answering 200 body for
// domains (a YAML list); filters is the http_filters list.
func inlineScope(name, domains, body, filters string) string {
	return `      scoped_routes:
        name: ` + name + `
        scope_key_builder: {fragments: [{header_value_extractor: {name: x-scope, index: 0}}]}
        rds_config_source: {ads: {}, resource_api_version: V3}
        scoped_route_configurations_list:
          scoped_route_configurations:
          - name: si
            key: {fragments: [{string_key: i}]}
            route_configuration:
              name: ri
              virtual_hosts:
              - name: all
                domains: ` + domains + `
                routes:
                - match: {prefix: /}
                  direct_response: {status: 200, body: {inline_string: ` + body + `}}` + filters
}

// rdsOverADS is hcmListener YAML loading route configuration route over ADS.
func rdsOverADS(route string) string {
	return `      rds: {route_config_name: ` + route + `, config_source: {ads: {}, resource_api_version: V3}}`
}
