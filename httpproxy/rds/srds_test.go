package rds

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// TestScopeLoadedAfterPublication: an on-demand request for a scope's route configuration
// that asks while the connection manager is being given the tables that bring it is let go
// only once it has them (it found no route in the tables it had; going on at once would find
// none again).
func TestScopeLoadedAfterPublication(t *testing.T) {
	scope := &routev3.ScopedRouteConfiguration{Name: "s", RouteConfigurationName: "rc",
		Key: &routev3.ScopedRouteConfiguration_Key{Fragments: []*routev3.ScopedRouteConfiguration_Key_Fragment{
			{Type: &routev3.ScopedRouteConfiguration_Key_Fragment_StringKey{StringKey: "k"}}}}}
	key, err := ScopeKey("", scope)
	if err != nil {
		t.Fatal(err)
	}
	h := &srdsHandler{scopes: map[string]*srdsScope{"s": {pb: scope, key: key}}, demanded: map[string]bool{}}
	w := &scopedWatch{h: h, refs: map[string]*routeWatch{"rc": {}}, stops: map[string]func(){},
		routes: map[string]*routev3.RouteConfiguration{}, setAt: map[string]uint64{}, waiters: map[string]map[uint64]func(){}}
	var given map[string]*routev3.RouteConfiguration
	var lateCalled, lateCalledEarly bool
	w.update = func(_ uint64, _ []*routev3.ScopedRouteConfiguration, routes map[string]*routev3.RouteConfiguration) {
		if routes["rc"] != nil && given == nil {
			// A request arrives while the tables with rc are being handed over.
			if _, ok := w.load(key, func() {
				lateCalled = true
				if given == nil {
					lateCalledEarly = true
				}
			}); !ok {
				t.Error("load of an existing scope: ok = false")
			}
		}
		given = routes
	}
	w.routeChanged("rc", &routev3.RouteConfiguration{Name: "rc"})
	if lateCalledEarly {
		t.Error("a request that asked during the publication was let go before the tables had its route configuration")
	}
	if !lateCalled {
		t.Error("a request that asked during the publication was never let go")
	}
	called := false
	w.load(key, func() { called = true })
	if !called {
		t.Error("a request after the publication was not let go at once")
	}
}
