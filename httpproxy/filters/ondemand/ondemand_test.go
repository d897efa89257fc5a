package ondemand

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ondemandv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/on_demand/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/httpproxy/route"
)

// fakeRoutes is a filter.RouteDiscovery whose route appears when answer is called.
type fakeRoutes struct {
	has       atomic.Bool
	canAsk    bool
	requests  atomic.Int32
	cancelled atomic.Int32
	done      chan struct{}
}

func (f *fakeRoutes) HasRoute(*route.Request) bool { return f.has.Load() }

func (f *fakeRoutes) RequestUpdate(*route.Request) (<-chan struct{}, func(), bool) {
	if !f.canAsk {
		return nil, nil, false
	}
	f.requests.Add(1)
	return f.done, func() { f.cancelled.Add(1) }, true
}

func (f *fakeRoutes) answer() { f.has.Store(true); close(f.done) }

func TestFromAny(t *testing.T) {
	odcds := &ondemandv3.OnDemandCds{Source: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}}
	for _, tc := range []struct {
		name    string
		cfg     *anypb.Any
		wantErr string
	}{
		{"no typed_config", nil, ""},
		{"empty", filtertest.MustAny(t, &ondemandv3.OnDemand{}), ""},
		{"odcds", filtertest.MustAny(t, &ondemandv3.OnDemand{Odcds: odcds}), "odcds: on-demand CDS is not implemented by Legate"},
		{"wrong type", filtertest.MustAny(t, &ondemandv3.PerRouteConfig{}), "want " + TypeURL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromAny(tc.cfg)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if (tc.wantErr == "") != (got == "") || !strings.Contains(got, tc.wantErr) {
				t.Errorf("FromAny error = %q; want one containing %q", got, tc.wantErr)
			}
		})
	}
	t.Run("per route", func(t *testing.T) {
		if err := PerRouteFromAny(filtertest.MustAny(t, &ondemandv3.PerRouteConfig{})); err != nil {
			t.Errorf("PerRouteFromAny(empty) = %v; want nil", err)
		}
		err := PerRouteFromAny(filtertest.MustAny(t, &ondemandv3.PerRouteConfig{Odcds: odcds}))
		if err == nil || !strings.Contains(err.Error(), "typed_per_filter_config.odcds") {
			t.Errorf("PerRouteFromAny(odcds) = %v; want an error naming typed_per_filter_config.odcds", err)
		}
	})
}

// TestOnRequest: a request with a route, or with nothing to ask for, goes on at once; one
// without waits for the answer (or the bound) and never gets a local reply.
func TestOnRequest(t *testing.T) {
	req := &route.Request{Authority: "new.example", Path: "/"}
	t.Run("has route", func(t *testing.T) {
		fr := &fakeRoutes{canAsk: true, done: make(chan struct{})}
		fr.has.Store(true)
		if r := (&Filter{}).OnRequest(&filter.Exchange{Request: req, Routes: fr}); r != nil || fr.requests.Load() != 0 {
			t.Errorf("OnRequest = %v with %d requests; want nil and none", r, fr.requests.Load())
		}
	})
	t.Run("no discovery", func(t *testing.T) {
		if r := (&Filter{}).OnRequest(&filter.Exchange{Request: req}); r != nil {
			t.Errorf("OnRequest = %v; want nil", r)
		}
		fr := &fakeRoutes{done: make(chan struct{})}
		if r := (&Filter{}).OnRequest(&filter.Exchange{Request: req, Routes: fr}); r != nil {
			t.Errorf("OnRequest = %v; want nil", r)
		}
	})
	t.Run("waits for the answer", func(t *testing.T) {
		fr := &fakeRoutes{canAsk: true, done: make(chan struct{})}
		returned := make(chan *filter.Reply, 1)
		go func() { returned <- (&Filter{Wait: time.Minute}).OnRequest(&filter.Exchange{Request: req, Routes: fr}) }()
		select {
		case r := <-returned:
			t.Fatalf("OnRequest returned %v before the answer", r)
		case <-time.After(50 * time.Millisecond): // a negative check: nothing must happen
		}
		fr.answer()
		select {
		case r := <-returned:
			if r != nil {
				t.Errorf("OnRequest = %v; want nil", r)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("OnRequest did not return after the answer")
		}
		if fr.cancelled.Load() != 1 {
			t.Errorf("cancel calls = %d; want 1", fr.cancelled.Load())
		}
	})
	t.Run("bounded", func(t *testing.T) {
		fr := &fakeRoutes{canAsk: true, done: make(chan struct{})}
		start := time.Now()
		if r := (&Filter{Wait: 20 * time.Millisecond}).OnRequest(&filter.Exchange{Request: req, Routes: fr}); r != nil {
			t.Errorf("OnRequest = %v; want nil", r)
		}
		if d := time.Since(start); d < 20*time.Millisecond {
			t.Errorf("OnRequest returned after %v; want >= the 20ms bound", d)
		}
		if fr.cancelled.Load() != 1 {
			t.Errorf("cancel calls = %d; want 1", fr.cancelled.Load())
		}
	})
}

func FuzzFromAny(f *testing.F) {
	seed, _ := proto.Marshal(&ondemandv3.OnDemand{Odcds: &ondemandv3.OnDemandCds{}})
	f.Add(seed, true)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, data []byte, perRoute bool) {
		if perRoute {
			_ = PerRouteFromAny(&anypb.Any{TypeUrl: PerRouteTypeURL, Value: data})
			return
		}
		fl, err := FromAny(&anypb.Any{TypeUrl: TypeURL, Value: data})
		if (err == nil) == (fl == nil) {
			t.Errorf("FromAny = %v, %v; want exactly one", fl, err)
		}
	})
}

// fakeDownstream is a filter.Downstream whose Pause reports what it was given and returns
// gone without waiting when the client left.
type fakeDownstream struct {
	gone    bool
	paused  int
	bound   time.Duration
	readyOK bool
}

func (d *fakeDownstream) Pause(ready <-chan struct{}, bound time.Duration) bool {
	d.paused++
	d.bound = bound
	d.readyOK = ready != nil
	return d.gone
}

func (d *fakeDownstream) Route() *route.Match { return nil }

func (d *fakeDownstream) BufferBody(int64) error { return nil }

// TestOnRequestPauses: with a Downstream the filter holds the request through Pause (which
// buffers the body and sees the client leave) with its bound, and withdraws its interest
// once Pause returns, whether the answer came or the client left.
func TestOnRequestPauses(t *testing.T) {
	req := &route.Request{Authority: "new.example", Path: "/"}
	for _, tc := range []struct {
		name string
		gone bool
	}{{"answered", false}, {"client gone", true}} {
		t.Run(tc.name, func(t *testing.T) {
			fr := &fakeRoutes{canAsk: true, done: make(chan struct{})}
			d := &fakeDownstream{gone: tc.gone}
			if r := (&Filter{Wait: time.Minute}).OnRequest(&filter.Exchange{Request: req, Routes: fr, Downstream: d}); r != nil {
				t.Errorf("OnRequest = %v; want nil", r)
			}
			if d.paused != 1 || d.bound != time.Minute || !d.readyOK {
				t.Errorf("Pause calls = %d with bound %v (ready given: %v); want 1 with 1m0s", d.paused, d.bound, d.readyOK)
			}
			if fr.cancelled.Load() != 1 {
				t.Errorf("cancel calls = %d; want 1", fr.cancelled.Load())
			}
		})
	}
}

// TestRegistryPerRoute: through the filter registry, the on_demand PerRouteConfig is made
// and checked; a filter type that takes no per-route configuration is refused unless
// optional; types no Legate filter knows are accepted and unused.
func TestRegistryPerRoute(t *testing.T) {
	reg, err := filter.Of(Register)
	if err != nil {
		t.Fatal(err)
	}
	odcds := &ondemandv3.OnDemandCds{Source: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}}
	router := &anypb.Any{TypeUrl: "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}
	for _, tc := range []struct {
		name     string
		cfg      *anypb.Any
		optional bool
		want     any
		wantErr  string
	}{
		{"per route config", filtertest.MustAny(t, &ondemandv3.PerRouteConfig{}), false, &PerRoute{}, ""},
		{"per route odcds", filtertest.MustAny(t, &ondemandv3.PerRouteConfig{Odcds: odcds}), true, nil, "typed_per_filter_config.odcds"},
		{"filter type", filtertest.MustAny(t, &ondemandv3.OnDemand{}), false, nil, "does not support virtual host or route specific configurations"},
		{"filter type optional", filtertest.MustAny(t, &ondemandv3.OnDemand{}), true, nil, ""},
		{"router", router, false, nil, "does not support virtual host or route specific configurations"},
		{"unknown to Legate", &anypb.Any{TypeUrl: "type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy"}, false, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reg.PerRouteConfig("od", tc.cfg, tc.optional)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if (tc.wantErr == "") != (gotErr == "") || !strings.Contains(gotErr, tc.wantErr) {
				t.Fatalf("PerRouteConfig error = %q; want one containing %q", gotErr, tc.wantErr)
			}
			if (got == nil) != (tc.want == nil) {
				t.Errorf("PerRouteConfig = %#v; want %#v", got, tc.want)
			}
		})
	}
}
