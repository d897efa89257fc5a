package xds

import (
	"errors"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/legateproxy/legate/internal/clock/clocktest"
	"github.com/legateproxy/legate/xds/resource"
)

type nopHandler struct{}

func (nopHandler) apply(*mux, update) error { return nil }
func (nopHandler) failed(*mux)              {}

func testMux(t *testing.T, api resource.APISource) (*mux, *clocktest.Fake) {
	t.Helper()
	fake := clocktest.NewFake(time.Unix(1700000000, 0))
	c := &Client{clock: fake, node: &corev3.Node{Id: testNode}}
	return newMux(c, "ads", resource.Source{ADS: true}, &api, true), fake
}

func TestSotWRequests(t *testing.T) {
	node := &corev3.Node{Id: testNode}
	tests := []struct {
		name      string
		firstOnly bool
		steps     func(m *mux)
		want      []*discoveryv3.DiscoveryRequest
	}{
		{
			name: "CDS before EDS, node on every request",
			steps: func(m *mux) {
				m.addWatch(resource.EndpointType, nopHandler{}, false)
				m.addWatch(resource.ClusterType, nopHandler{}, true)
				m.setNames(resource.EndpointType, []string{"b", "a"}, nil)
			},
			want: []*discoveryv3.DiscoveryRequest{
				{TypeUrl: resource.ClusterType, Node: node},
				{TypeUrl: resource.EndpointType, ResourceNames: []string{"a", "b"}, Node: node},
			},
		},
		{
			name:      "set_node_on_first_message_only",
			firstOnly: true,
			steps: func(m *mux) {
				m.addWatch(resource.ClusterType, nopHandler{}, true)
				m.addWatch(resource.EndpointType, nopHandler{}, false)
				m.setNames(resource.EndpointType, []string{"a"}, nil)
			},
			want: []*discoveryv3.DiscoveryRequest{
				{TypeUrl: resource.ClusterType, Node: node},
				{TypeUrl: resource.EndpointType, ResourceNames: []string{"a"}},
			},
		},
		{
			name: "no EDS request without names",
			steps: func(m *mux) {
				m.addWatch(resource.EndpointType, nopHandler{}, false)
			},
		},
		{
			name: "NACK keeps the accepted version",
			steps: func(m *mux) {
				m.addWatch(resource.ClusterType, nopHandler{}, true)
				w := m.watches[resource.ClusterType]
				w.version, w.nonce, w.nack = "1", "n2", errors.New(`cluster "web": bad`)
			},
			want: []*discoveryv3.DiscoveryRequest{{
				TypeUrl: resource.ClusterType, VersionInfo: "1", ResponseNonce: "n2", Node: node,
				ErrorDetail: errorDetail(errors.New(`cluster "web": bad`)),
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := testMux(t, resource.APISource{SetNodeOnFirstMessageOnly: tc.firstOnly})
			tc.steps(m)
			m.mu.Lock()
			got := m.sotwRequestsLocked(true)
			m.mu.Unlock()
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeltaRequests(t *testing.T) {
	m, _ := testMux(t, resource.APISource{Type: resource.DeltaGRPC})
	m.addWatch(resource.EndpointType, nopHandler{}, false)
	m.setNames(resource.EndpointType, []string{"a", "b"}, nil)
	m.mu.Lock()
	m.watches[resource.EndpointType].known = map[string]string{"a": "3"}
	first := m.deltaRequestsLocked(true)
	m.mu.Unlock()
	m.setNames(resource.EndpointType, []string{"c"}, []string{"a"})
	m.mu.Lock()
	second := m.deltaRequestsLocked(false)
	m.mu.Unlock()
	node := &corev3.Node{Id: testNode}
	want := []*discoveryv3.DeltaDiscoveryRequest{
		{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{"a", "b"}, InitialResourceVersions: map[string]string{"a": "3"}, Node: node},
		{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{"c"}, ResourceNamesUnsubscribe: []string{"a"}, Node: node},
	}
	if diff := cmp.Diff(want, append(first, second...), protocmp.Transform()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		name string
		rand uint64 // the jitter source's constant output
		want []time.Duration
	}{
		{"ceilings", ^uint64(0) >> 1, nil},
		{"zero jitter floors at 1ms", 0, []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &backoff{base: 100 * time.Millisecond, max: time.Second, rand: func() uint64 { return tc.rand }}
			var got []time.Duration
			for range 3 {
				got = append(got, b.next())
			}
			if tc.want != nil {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("delays (-want +got):\n%s", diff)
				}
				return
			}
			// Each delay is below its ceiling: base·(2ⁿ−1), capped at max.
			ceil := []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 700 * time.Millisecond}
			for i, d := range got {
				if d <= 0 || d >= ceil[i] {
					t.Errorf("delay %d = %v; want in (0, %v)", i+1, d, ceil[i])
				}
			}
			for range 10 {
				if d := b.next(); d >= time.Second {
					t.Errorf("late delay = %v; want < max 1s", d)
				}
			}
			b.reset()
			if d := b.next(); d >= 100*time.Millisecond {
				t.Errorf("delay after reset = %v; want < 100ms", d)
			}
		})
	}
}

func TestRateLimit(t *testing.T) {
	m, fake := testMux(t, resource.APISource{RateLimit: &resource.RateLimit{MaxTokens: 1, FillRate: 2}})
	m.addWatch(resource.ClusterType, nopHandler{}, true)
	if got := m.limitWait(); got != 0 {
		t.Fatalf("first limitWait() = %v; want 0 (a token is available)", got)
	}
	if got := m.limitWait(); got != 500*time.Millisecond {
		t.Errorf("second limitWait() = %v; want 500ms (2 tokens per second)", got)
	}
	if got := m.c.cpStats.RateLimitEnforced.Value(); got != 1 {
		t.Errorf("control_plane.rate_limit_enforced = %d; want 1", got)
	}
	if got := m.c.cpStats.PendingRequests.Value(); got != 1 {
		t.Errorf("control_plane.pending_requests = %d; want 1", got)
	}
	fake.Advance(500 * time.Millisecond)
	if got := m.limitWait(); got != 0 {
		t.Errorf("limitWait() after 500ms = %v; want 0", got)
	}
	if got := m.c.cpStats.PendingRequests.Value(); got != 0 {
		t.Errorf("control_plane.pending_requests = %d; want 0", got)
	}
}
