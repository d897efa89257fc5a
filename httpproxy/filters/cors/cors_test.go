package cors

import (
	"net/http"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/httpproxy/route"
)

func exact(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

func TestPolicyFromAny(t *testing.T) {
	badRegex := &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "("}}}
	tests := []struct {
		name    string
		cfg     proto.Message
		wantErr string
		check   func(t *testing.T, p *Policy)
	}{
		{name: "defaults", cfg: &corsv3.CorsPolicy{}, check: func(t *testing.T, p *Policy) {
			if p.enabled != filter.Always || p.shadowSet || p.credentials != unset || p.forwardNM != unset || len(p.origins) != 0 {
				t.Errorf("policy = %+v; want enabled always, no shadow, credentials and forwarding unset, no origins", p)
			}
		}},
		{name: "every field", cfg: &corsv3.CorsPolicy{
			AllowOriginStringMatch: []*matcherv3.StringMatcher{exact("https://a")},
			AllowMethods:           "GET", AllowHeaders: "h", ExposeHeaders: "e", MaxAge: "5",
			AllowCredentials: wrapperspb.Bool(false), AllowPrivateNetworkAccess: wrapperspb.Bool(true),
			ForwardNotMatchingPreflights: wrapperspb.Bool(false),
			FilterEnabled: &corev3.RuntimeFractionalPercent{RuntimeKey: "cors.on",
				DefaultValue: &typev3.FractionalPercent{Numerator: 5, Denominator: typev3.FractionalPercent_TEN_THOUSAND}},
			ShadowEnabled: &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 1}},
		}, check: func(t *testing.T, p *Policy) {
			want := filter.Fraction{Key: "cors.on", Numerator: 5, Denominator: 10_000}
			if p.enabled != want || !p.shadowSet || p.shadow.Numerator != 1 || p.credentials != isFalse || p.privateNet != isTrue ||
				p.forwardNM != isFalse || p.allowMethods != "GET" || p.allowHeaders != "h" || p.exposeHeaders != "e" || p.maxAge != "5" {
				t.Errorf("policy = %+v; want every field read", p)
			}
		}},
		{name: "route's own message", cfg: &routev3.CorsPolicy{AllowMethods: "POST"}, wantErr: "want " + PolicyTypeURL},
		{name: "bad regex", cfg: &corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{exact("x"), badRegex}},
			wantErr: "allow_origin_string_match[1]"},
		{name: "empty matcher", cfg: &corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{{}}},
			wantErr: "AllowOriginStringMatch"},
		{name: "bad denominator", cfg: &corsv3.CorsPolicy{FilterEnabled: &corev3.RuntimeFractionalPercent{
			DefaultValue: &typev3.FractionalPercent{Denominator: 7}}}, wantErr: "FilterEnabled"},
		{name: "wrong type", cfg: &corsv3.Cors{}, wantErr: "want " + PolicyTypeURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PolicyFromAny(filtertest.MustAny(t, tt.cfg))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("PolicyFromAny error = %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, p)
		})
	}
}

func TestFromAny(t *testing.T) {
	if _, err := FromAny(nil, nil); err != nil {
		t.Errorf("FromAny(nil) = %v; want nil", err)
	}
	if _, err := FromAny(filtertest.MustAny(t, &corsv3.Cors{}), &filter.Context{}); err != nil {
		t.Errorf("FromAny(Cors{}) = %v; want nil", err)
	}
	if _, err := FromAny(filtertest.MustAny(t, &corsv3.CorsPolicy{}), &filter.Context{}); err == nil || !strings.Contains(err.Error(), "want "+TypeURL) {
		t.Errorf("FromAny(CorsPolicy) = %v; want a type error", err)
	}
}

// BenchmarkCORS is the filter's cost for a simple cross-origin request with a virtual host
// policy: the request and the response headers.
func BenchmarkCORS(b *testing.B) {
	reg, err := filter.Of(Register)
	if err != nil {
		b.Fatal(err)
	}
	rc := &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{
		Name: "vh", Domains: []string{"*"},
		TypedPerFilterConfig: map[string]*anypb.Any{Name: filtertest.MustAny(b, &corsv3.CorsPolicy{
			AllowOriginStringMatch: []*matcherv3.StringMatcher{exact("https://good.example")}, ExposeHeaders: "x-e"})},
		Routes: []*routev3.Route{{
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"}}},
		}},
	}}}
	table, err := route.Compile(rc, route.Options{PerFilterConfig: reg.PerRouteConfig})
	if err != nil {
		b.Fatal(err)
	}
	req := &route.Request{Authority: "a", Path: "/", Method: "GET", Header: http.Header{"Origin": {"https://good.example"}}}
	m := table.Route(req)
	f := New(&filter.Context{})
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		x := filter.Exchange{Request: req, Downstream: filtertest.Routed{Match: m}}
		if f.OnRequest(&x) != nil {
			b.Fatal("local reply")
		}
		f.OnResponse(&x, h)
	}
	if h.Get(hdrAllowOrigin) != "https://good.example" {
		b.Fatalf("allow origin = %q", h.Get(hdrAllowOrigin))
	}
}
