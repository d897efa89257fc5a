package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/legateproxy/legate/xds/xdstest"
)

// directListener is an LDS listener name on port in direction dir whose
// connection manager answers every request 200 with body.
func directListener(t *testing.T, name string, port int, dir corev3.TrafficDirection, body string) *listenerv3.Listener {
	l := hcmListener(t, name, port, fmt.Sprintf(`      route_config:
        virtual_hosts:
        - {name: all, domains: ["*"], routes: [{match: {prefix: "/"}, direct_response: {status: 200, body: {inline_string: %q}}}]}
      http_filters:
      - name: envoy.filters.http.router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`, body))
	l.TrafficDirection = dir
	return l
}

// TestLDSSkipsStoppedDirection is issue 17's item 13: after
// /drain_listeners?inboundonly, an LDS update that adds and modifies
// listeners of both directions is accepted; the inbound ones are skipped and
// counted, the outbound ones applied.
func TestLDSSkipsStoppedDirection(t *testing.T) {
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-stop", ADS: true})
	// The listeners bind ports the kernel picks (0), read back from /listeners, except in2:
	// the test dials its port to show that nothing was bound there, so that port is picked
	// (and reserved against other e2e tests) first.
	in2 := freePort(t)
	const inbound, outbound = corev3.TrafficDirection_INBOUND, corev3.TrafficDirection_OUTBOUND
	xds.Set("v1", map[resourcev3.Type][]types.Resource{resourcev3.ListenerType: {
		directListener(t, "in", 0, inbound, "in-v1"), directListener(t, "out", 0, outbound, "out-v1"),
	}})
	p := start(t, "-c", writeConfig(t, adsBootstrap("e2e-stop", xds, []string{"lds_config"})))
	in, out := p.boundListenerAddr("in"), p.boundListenerAddr("out")
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(addr string) (string, error) { return getBody(client, "http://"+addr+"/") }
	waitXDS(t, xds, "both v1 listeners", func() bool {
		a, err1 := get(in)
		b, err2 := get(out)
		return err1 == nil && err2 == nil && a == "in-v1" && b == "out-v1"
	})
	if code, _, body := p.post("/drain_listeners?inboundonly"); code != 200 {
		t.Fatalf("POST /drain_listeners?inboundonly = %d %q", code, body)
	}
	accepted, _ := p.stat("listener_manager.lds.update_success")
	xds.Set("v2", map[resourcev3.Type][]types.Resource{resourcev3.ListenerType: {
		directListener(t, "in", 0, inbound, "in-v2"), directListener(t, "out", 0, outbound, "out-v2"),
		directListener(t, "in2", in2, inbound, "in2"), directListener(t, "out2", 0, outbound, "out2"),
	}})
	waitXDS(t, xds, "the v2 listeners accepted or rejected", func() bool {
		ok, _ := p.stat("listener_manager.lds.update_success")
		bad, _ := p.stat("listener_manager.lds.update_rejected")
		return ok > accepted || bad > 0
	})
	if v, _ := p.stat("listener_manager.lds.update_rejected"); v != 0 {
		t.Errorf("listener_manager.lds.update_rejected = %d; want 0 (the update is accepted)", v)
	}
	if v, _ := p.stat("listener_manager.listener_stopped_skipped"); v != 2 {
		t.Errorf("listener_manager.listener_stopped_skipped = %d; want 2 (in modified, in2 added)", v)
	}
	for addr, want := range map[string]string{out: "out-v2", p.boundListenerAddr("out2"): "out2"} {
		if got, err := get(addr); err != nil || got != want {
			t.Errorf("GET on outbound %s = %q, %v; want %q", addr, got, err, want)
		}
	}
	if got, err := get(loopback(in2)); err == nil {
		t.Errorf("the skipped inbound listener in2 answers %q; want it never bound", got)
	}
}
