package rds

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/xds/watch"
)

// namesStream is a VHDS stream that records the names subscribed on it.
type namesStream struct{ added []string }

func (s *namesStream) SetNames(add, _ []string) { s.added = append(s.added, add...) }

// newTestVHDS is a ready VHDS handler on stream s serving route configuration r1, with no
// virtual host yet.
func newTestVHDS(s *namesStream) *vhdsHandler {
	return &vhdsHandler{d: &Discovery{clock: clock.Real()}, s: s, hosts: map[string]*routev3.VirtualHost{}, raw: map[string]*anypb.Any{}, ready: true,
		routes: map[string]int{"r1": 1}, pending: map[string]map[uint64]func(){}, answered: map[string]bool{}, stats: map[string]*vhdsStatsRef{},
		updates: map[string]vhdsUpdate{}}
}

// TestVHDSAnswerWithoutHost: a delta response naming the requested alias without a virtual
// host (a server's "no such host") answers the request, and the route configuration is
// unchanged.
func TestVHDSAnswerWithoutHost(t *testing.T) {
	s := &namesStream{}
	h := newTestVHDS(s)
	var calls int
	h.requestHost("r1/gone.example", func() { calls++ })
	h.requestHost("r1/gone.example", func() { calls++ })
	if len(s.added) != 1 || s.added[0] != "r1/gone.example" {
		t.Errorf("names subscribed = %q; want r1/gone.example once", s.added)
	}
	if err := h.apply(watch.Response{Resources: []*anypb.Any{nil}, Names: []string{"r1/vh-x"}, Aliases: [][]string{{"r1/gone.example"}}}); err != nil {
		t.Fatalf("apply = %v; want nil", err)
	}
	if calls != 2 {
		t.Errorf("callbacks = %d; want 2", calls)
	}
	if len(h.hosts) != 0 {
		t.Errorf("virtual hosts = %v; want none", h.hosts)
	}
}

// TestVHDSAnsweredAfterWatchers: a request that asks for its host while the watchers are still
// publishing the response that answers it is let go only once they have (it looked for the
// host in a table that lacked it; going on at once would find it missing again, a 404).
func TestVHDSAnsweredAfterWatchers(t *testing.T) {
	h := newTestVHDS(&namesStream{})
	published := false
	var lateCalled, lateCalledEarly bool
	h.watch(func() {
		// A request arrives while the route tables are being rebuilt.
		h.requestHost("r1/new.example", func() {
			lateCalled = true
			if !published {
				lateCalledEarly = true
			}
		})
		published = true
	})
	vh, err := anypb.New(&routev3.VirtualHost{Name: "r1/new.example", Domains: []string{"new.example"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.apply(watch.Response{Resources: []*anypb.Any{vh}, Names: []string{"r1/new.example"}, Aliases: [][]string{{"r1/new.example"}}}); err != nil {
		t.Fatalf("apply = %v; want nil", err)
	}
	if lateCalledEarly {
		t.Error("a request that asked while the watchers ran was let go before they had published")
	}
	if !published || !lateCalled {
		t.Fatalf("watcher ran %v, request asked meanwhile let go %v; want both", published, lateCalled)
	}
	called := false
	h.requestHost("r1/new.example", func() { called = true })
	if !called {
		t.Error("a request after the answer was not let go at once")
	}
}
