package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/on_demand/v3" // the filter's typed_config in the listeners
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/legateproxy/legate/xds/xdstest"
)

// TestXDSOnDemand runs the binary against go-control-plane's server with three LDS
// listeners whose connection managers have the on_demand filter: a request for a host the
// VHDS route configuration lacks gets 200 once the management server answers the
// "<route_config>/<host>" subscription it causes; a request for an on_demand SRDS scope loads
// that scope's route configuration (absent from /config_dump before) and gets 200; a scope of
// scoped_route_configurations_list routes with its inline route_configuration.
func TestXDSOnDemand(t *testing.T) {
	// Not in ADS mode: that mode answers a route request only when it names every route
	// configuration of the snapshot, and the on-demand scope's is not asked for at first.
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-ondemand"})
	cfg := adsBootstrap("e2e-ondemand", xds, []string{"lds_config"})
	// The listeners bind ports the kernel picks, read back from /listeners.
	vhdsListener := hcmListener(t, "vhds", 0, rdsOverADS("r1")+onDemandFilters)
	scopedListener := hcmListener(t, "scoped", 0, srdsScopes+onDemandFilters)
	inlineListener := hcmListener(t, "inline", 0, inlineScope("inline", `["*"]`, "inline", routerFilter))

	r1 := vhdsRouteConfig(t, "r1")
	set := func(version string, vhosts ...types.Resource) {
		t.Helper()
		xds.Set(version, map[resourcev3.Type][]types.Resource{
			resourcev3.ListenerType:    {vhdsListener, scopedListener, inlineListener},
			resourcev3.RouteType:       {r1, routeTo("re", directRoute("eager")), routeTo("rl", directRoute("lazy"))},
			resourcev3.ScopedRouteType: {scopedRoute("se", "re", "e", false), scopedRoute("sl", "rl", "l", true)},
			resourcev3.VirtualHostType: vhosts,
		})
	}
	set("v1", virtualHost("r1/other", "other.example", directRoute("other")))
	p := start(t, "-c", writeConfig(t, cfg))
	vport, sport, iport := p.boundListenerPort("vhds"), p.boundListenerPort("scoped"), p.boundListenerPort("inline")

	client := &http.Client{Timeout: 10 * time.Second}
	get := func(port int, hostHeader, scopeHeader string) (int, string) {
		return scopedRequest(client, "GET", fmt.Sprintf("http://127.0.0.1:%d/", port), hostHeader, scopeHeader, "")
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
		const n = 5
		results := make(chan response, n)
		for i := 0; i < n; i++ {
			go func() {
				s, b := get(vport, "New.Example", "")
				results <- response{s, b}
			}()
		}
		waitSubscription(t, xds, "r1/new.example", results)
		timeout := time.After(20 * time.Second)
		set("v2", virtualHost("r1/other", "other.example", directRoute("other")), virtualHost("r1/new.example", "new.example", directRoute("on demand")))
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
		if n := subscriptions(xds, "r1/new.example"); n != 1 {
			t.Errorf("r1/new.example subscribed %d times; want one subscription for concurrent requests", n)
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
