package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/on_demand/v3" // the filter's typed_config in the listeners
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	routesvc "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
)

// onDemandServer runs go-control-plane's ADS and VHDS services on 127.0.0.1 and reports the
// resource names delta streams subscribe to.
func onDemandServer(t *testing.T) (cachev3.SnapshotCache, string, chan string) {
	t.Helper()
	// Not in ADS mode: that mode answers a route request only when it names every route
	// configuration of the snapshot, and the on-demand scope's is not asked for at first.
	snapshots := cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil)
	subscribed := make(chan string, 256)
	ctx, cancel := context.WithCancel(context.Background())
	srv := serverv3.NewServer(ctx, snapshots, serverv3.CallbackFuncs{
		StreamDeltaRequestFunc: func(_ int64, r *discoveryv3.DeltaDiscoveryRequest) error {
			for _, n := range r.GetResourceNamesSubscribe() {
				select {
				case subscribed <- n:
				default:
				}
			}
			return nil
		},
	})
	gs := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, srv)
	routesvc.RegisterVirtualHostDiscoveryServiceServer(gs, srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	t.Cleanup(func() {
		gs.Stop()
		cancel()
	})
	return snapshots, lis.Addr().String(), subscribed
}

// TestXDSOnDemand runs the binary against go-control-plane's server with three LDS
// listeners whose connection managers have the on_demand filter: a request for a host the
// VHDS route configuration lacks gets 200 once the management server answers the
// "<route_config>/<host>" subscription it causes; a request for an on_demand SRDS scope loads
// that scope's route configuration (absent from /config_dump before) and gets 200; a scope of
// scoped_route_configurations_list routes with its inline route_configuration.
func TestXDSOnDemand(t *testing.T) {
	snapshots, addr, subscribed := onDemandServer(t)
	host, port, _ := net.SplitHostPort(addr)
	cfg := adsHeader("e2e-ondemand", "lds_config") + "static_resources:\n  clusters:\n" + xdsCluster(host, port)
	vport, sport, iport := freePort(t), freePort(t), freePort(t)
	const onDemandFilters = `
      http_filters:
      - name: envoy.filters.http.on_demand
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.on_demand.v3.OnDemand}
      - name: envoy.filters.http.router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}`
	listener := func(name string, port int, hcm string) *listenerv3.Listener {
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
	vhdsListener := listener("vhds", vport, `      rds: {route_config_name: r1, config_source: {ads: {}, resource_api_version: V3}}`+onDemandFilters)
	scopedListener := listener("scoped", sport, `      scoped_routes:
        name: scopes
        scope_key_builder: {fragments: [{header_value_extractor: {name: x-scope, index: 0}}]}
        rds_config_source: {ads: {}, resource_api_version: V3}
        scoped_rds: {scoped_rds_config_source: {ads: {}, resource_api_version: V3}}`+onDemandFilters)
	inlineListener := listener("inline", iport, `      scoped_routes:
        name: inline
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
                domains: ["*"]
                routes:
                - match: {prefix: /}
                  direct_response: {status: 200, body: {inline_string: inline}}
      http_filters:
      - name: envoy.filters.http.router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}`)

	var r1 routev3.RouteConfiguration
	fromYAMLProto(t, `
name: r1
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
`, &r1)
	vhost := func(name, domain, body string) *routev3.VirtualHost {
		return &routev3.VirtualHost{Name: name, Domains: []string{domain}, Routes: []*routev3.Route{{
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}, Action: directRoute(body).Action,
		}}}
	}
	scope := func(name, rc, key string, onDemand bool) *routev3.ScopedRouteConfiguration {
		return &routev3.ScopedRouteConfiguration{Name: name, RouteConfigurationName: rc, OnDemand: onDemand, Key: &routev3.ScopedRouteConfiguration_Key{
			Fragments: []*routev3.ScopedRouteConfiguration_Key_Fragment{{Type: &routev3.ScopedRouteConfiguration_Key_Fragment_StringKey{StringKey: key}}},
		}}
	}
	set := func(version string, vhosts ...types.Resource) {
		t.Helper()
		snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{
			resourcev3.ListenerType:    {vhdsListener, scopedListener, inlineListener},
			resourcev3.RouteType:       {&r1, routeTo("re", directRoute("eager")), routeTo("rl", directRoute("lazy"))},
			resourcev3.ScopedRouteType: {scope("se", "re", "e", false), scope("sl", "rl", "l", true)},
			resourcev3.VirtualHostType: vhosts,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := snapshots.SetSnapshot(context.Background(), "e2e-ondemand", snap); err != nil {
			t.Fatal(err)
		}
	}
	set("v1", vhost("r1/other", "other.example", "other"))
	p := start(t, "-c", writeConfig(t, cfg))

	client := &http.Client{Timeout: 10 * time.Second}
	get := func(port int, hostHeader, scopeHeader string) (int, string) {
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/", port), nil)
		req.Host = hostHeader
		if scopeHeader != "" {
			req.Header.Set("x-scope", scopeHeader)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		s1, _ := get(vport, "base.example", "")
		s2, _ := get(sport, "x", "e")
		s3, _ := get(iport, "x", "i")
		if s1 == 200 && s2 == 200 && s3 == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listeners not serving: vhds %d, scoped %d, inline %d", s1, s2, s3)
		}
		<-time.After(50 * time.Millisecond) // polling the binary's listeners
	}

	t.Run("vhds", func(t *testing.T) {
		type result struct {
			status int
			body   string
		}
		const n = 5
		results := make(chan result, n)
		for i := 0; i < n; i++ {
			go func() {
				s, b := get(vport, "New.Example", "")
				results <- result{s, b}
			}()
		}
		timeout := time.After(20 * time.Second)
	wait:
		for {
			select {
			case name := <-subscribed:
				if name == "r1/new.example" {
					break wait
				}
			case r := <-results:
				t.Fatalf("a request for new.example answered %d %q before the management server did", r.status, r.body)
			case <-timeout:
				t.Fatal("no VHDS subscription to r1/new.example")
			}
		}
		set("v2", vhost("r1/other", "other.example", "other"), vhost("r1/new.example", "new.example", "on demand"))
		for i := 0; i < n; i++ {
			select {
			case r := <-results:
				if r.status != 200 || r.body != "on demand" {
					t.Errorf("GET new.example = %d %q; want 200 %q", r.status, r.body, "on demand")
				}
			case <-timeout:
				t.Fatalf("%d of %d requests answered", i, n)
			}
		}
		for {
			select {
			case name := <-subscribed:
				if name == "r1/new.example" {
					t.Errorf("r1/new.example subscribed twice; want one subscription for concurrent requests")
				}
				continue
			default:
			}
			break
		}
		if s, b := get(vport, "missing.example", ""); s != 404 {
			// No answer comes for this host: the request goes on after the filter's bound.
			t.Errorf("GET missing.example = %d %q; want 404", s, b)
		}
	})

	t.Run("scoped", func(t *testing.T) {
		_, _, dump := p.get("/config_dump?resource=dynamic_route_configs")
		if strings.Contains(dump, `"name": "rl"`) {
			t.Errorf("/config_dump shows rl before a request for scope sl")
		}
		if s, b := get(sport, "x", "l"); s != 200 || b != "lazy" {
			t.Errorf("GET x-scope l = %d %q; want 200 lazy", s, b)
		}
		_, _, dump = p.get("/config_dump?resource=dynamic_route_configs")
		if !strings.Contains(dump, `"name": "rl"`) {
			t.Errorf("/config_dump lacks rl after the request for scope sl:\n%s", dump)
		}
	})

	t.Run("inline", func(t *testing.T) {
		if s, b := get(iport, "x", "i"); s != 200 || b != "inline" {
			t.Errorf("GET x-scope i = %d %q; want 200 inline", s, b)
		}
		if s, _ := get(iport, "x", "z"); s != 404 {
			t.Errorf("GET x-scope z = %d; want 404", s)
		}
	})

	_, _, st := p.get("/stats?filter=(rds.vhds|scoped_rds.scopes.(on_demand|active|all)_scopes)")
	for _, want := range []string{"http.vhds.rds.vhds.r1.config_reload: 2", "http.scoped.scoped_rds.scopes.active_scopes: 2", "http.scoped.scoped_rds.scopes.all_scopes: 2", "http.scoped.scoped_rds.scopes.on_demand_scopes: 1"} {
		if !strings.Contains(st, want+"\n") {
			t.Errorf("/stats lacks %q in:\n%s", want, st)
		}
	}
}
