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

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestFromAny(t *testing.T) {
	odcds := &ondemandv3.OnDemandCds{Source: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}}
	for _, tc := range []struct {
		name    string
		cfg     *anypb.Any
		wantErr string
	}{
		{"no typed_config", nil, ""},
		{"empty", mustAny(t, &ondemandv3.OnDemand{}), ""},
		{"odcds", mustAny(t, &ondemandv3.OnDemand{Odcds: odcds}), "odcds: on-demand CDS is not implemented by Legate"},
		{"wrong type", mustAny(t, &ondemandv3.PerRouteConfig{}), "want " + TypeURL},
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
		if err := PerRouteFromAny(mustAny(t, &ondemandv3.PerRouteConfig{})); err != nil {
			t.Errorf("PerRouteFromAny(empty) = %v; want nil", err)
		}
		err := PerRouteFromAny(mustAny(t, &ondemandv3.PerRouteConfig{Odcds: odcds}))
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
