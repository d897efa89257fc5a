package route

import (
	"fmt"
	"net/http"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// bigConfig has nHosts virtual hosts (exact domains plus one suffix wildcard each) of nRoutes
// routes, alternating prefix and regex matches; every tenth route also matches a header.
func bigConfig(nHosts, nRoutes int) *routev3.RouteConfiguration {
	rc := &routev3.RouteConfiguration{Name: "big"}
	for h := range nHosts {
		vh := &routev3.VirtualHost{
			Name:    fmt.Sprintf("vh%d", h),
			Domains: []string{fmt.Sprintf("host%d.example.com", h), fmt.Sprintf("*.wild%d.example.com", h)},
		}
		for r := range nRoutes {
			m := &routev3.RouteMatch{}
			if r%2 == 0 {
				m.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: fmt.Sprintf("/svc%d/", r)}
			} else {
				m.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: fmt.Sprintf("/api%d/[a-z]+/[0-9]+", r)}}
			}
			if r%10 == 9 {
				m.Headers = []*routev3.HeaderMatcher{{Name: "x-tenant", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "t1"}}}
			}
			vh.Routes = append(vh.Routes, &routev3.Route{
				Name:   fmt.Sprintf("r%d", r),
				Match:  m,
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: fmt.Sprintf("c%d", r)}}},
			})
		}
		rc.VirtualHosts = append(rc.VirtualHosts, vh)
	}
	return rc
}

func benchTable(b *testing.B) *Table {
	tbl, err := Compile(bigConfig(100, 100), Options{})
	if err != nil {
		b.Fatal(err)
	}
	return tbl
}

func BenchmarkRoute(b *testing.B) {
	tbl := benchTable(b)
	h := http.Header{"X-Tenant": {"t1"}, "User-Agent": {"bench"}}
	cases := []struct {
		name, host, path, want string
	}{
		{"first route", "host99.example.com", "/svc0/items", "r0"},
		{"middle prefix", "host50.example.com", "/svc50/items?id=3", "r50"},
		{"last prefix", "host99.example.com", "/svc98/items", "r98"},
		{"last regex", "host99.example.com", "/api99/users/42", "r99"},
		{"wildcard host last regex", "a.wild7.example.com", "/api99/users/42", "r99"},
		{"no route", "host99.example.com", "/nothing/here", ""},
	}
	for _, c := range cases {
		r := &Request{Authority: c.host, Path: c.path, Method: "GET", Header: h}
		if m := tbl.Route(r); (m == nil && c.want != "") || (m != nil && m.Route.Name != c.want) {
			b.Fatalf("%s: Route() = %v; want %q", c.name, m, c.want)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tbl.Route(r)
			}
		})
	}
}

func BenchmarkHashKey(b *testing.B) {
	tbl, err := Compile(parseConfig(b, actionConfig), Options{})
	if err != nil {
		b.Fatal(err)
	}
	r := req("h", "/policies", "X-User", "alice")
	rt := tbl.Route(r).Route
	b.ReportAllocs()
	for b.Loop() {
		rt.HashKey(r, "10.0.0.1")
	}
}

func TestRouteAllocations(t *testing.T) {
	tbl, err := Compile(bigConfig(10, 20), Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"X-Tenant": {"t1"}}
	for _, r := range []*Request{
		{Authority: "host9.example.com", Path: "/svc18/x?y=1", Header: h},
		{Authority: "x.wild3.example.com", Path: "/api19/abc/12", Header: h},
		{Authority: "host1.example.com", Path: "/none", Header: h},
	} {
		if n := testing.AllocsPerRun(100, func() { tbl.Route(r) }); n != 0 {
			t.Errorf("Route(%s%s) allocations = %v; want 0", r.Authority, r.Path, n)
		}
	}
	act := mustCompile(t, actionConfig, Options{})
	r := req("h", "/policies?never=1", "X-User", "alice")
	rt := act.Route(r).Route
	if n := testing.AllocsPerRun(100, func() { rt.HashKey(r, "10.0.0.1") }); n != 0 {
		t.Errorf("HashKey allocations = %v; want 0", n)
	}
	w := req("h", "/weighted")
	if n := testing.AllocsPerRun(100, func() { w.Random++; act.Route(w) }); n != 0 {
		t.Errorf("weighted Route allocations = %v; want 0", n)
	}
}
