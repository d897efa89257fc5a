package healthcheck

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/route"
)

func pathIs(p string) []*routev3.HeaderMatcher {
	return []*routev3.HeaderMatcher{{Name: ":path", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: p}},
	}}}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		pb   *hcv3.HealthCheck
		want string
	}{
		{name: "pass_through_mode unset", pb: &hcv3.HealthCheck{}, want: "pass_through_mode: unset"},
		{name: "cache_time with pass through", pb: &hcv3.HealthCheck{PassThroughMode: wrapperspb.Bool(true), CacheTime: durationpb.New(1)}, want: "cache_time"},
		{name: "percentage above 100", pb: &hcv3.HealthCheck{PassThroughMode: wrapperspb.Bool(false),
			ClusterMinHealthyPercentages: map[string]*typev3.Percent{"web": {Value: 101}}}, want: `cluster_min_healthy_percentages["web"] = 101`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.pb, &filter.Context{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %v; want one containing %q", err, tt.want)
			}
		})
	}
}

func TestOnRequest(t *testing.T) {
	var failed atomic.Bool
	tests := []struct {
		name        string
		passThrough bool
		failed      bool
		path        string
		want        int // 0: no local reply
		hc          bool
	}{
		{name: "health check answered", path: "/healthz", want: 200, hc: true},
		{name: "other request", path: "/x", want: 0},
		{name: "failed", failed: true, path: "/healthz", want: 503, hc: true},
		{name: "pass through", passThrough: true, path: "/healthz", want: 0, hc: true},
		{name: "pass through but failed", passThrough: true, failed: true, path: "/healthz", want: 503, hc: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := New(&hcv3.HealthCheck{PassThroughMode: wrapperspb.Bool(tt.passThrough), Headers: pathIs("/healthz")},
				&filter.Context{HealthCheckFailed: &failed, LocalClusterName: "local"})
			if err != nil {
				t.Fatal(err)
			}
			failed.Store(tt.failed)
			x := &filter.Exchange{Request: &route.Request{Authority: "a", Path: tt.path, Method: "GET", Header: http.Header{}}}
			r := f.OnRequest(x)
			got := 0
			if r != nil {
				got = r.Status
			}
			if got != tt.want {
				t.Errorf("OnRequest() status = %d; want %d", got, tt.want)
			}
			if x.HealthCheck != tt.hc {
				t.Errorf("HealthCheck = %v; want %v", x.HealthCheck, tt.hc)
			}
			h := http.Header{}
			f.OnResponse(x, h)
			switch {
			case tt.hc && h.Get(headerCheckedCluster) != "local":
				t.Errorf("%s = %q; want local", headerCheckedCluster, h.Get(headerCheckedCluster))
			case !tt.hc && tt.failed && h.Get(headerImmediateFail) != "true":
				t.Errorf("%s = %q; want true", headerImmediateFail, h.Get(headerImmediateFail))
			}
		})
	}
}
