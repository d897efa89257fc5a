package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/legateproxy/legate/xds/xdstest"
)

// TestControlPlaneBootstrapsReachXDS runs the binary on each control-plane-shaped bootstrap of
// testdata/controlplanes with its xDS cluster pointed at go-control-plane's server standing in
// for that control plane (the file's own transport: ADS state of the world, ADS delta, or
// per-type streams). Each must send its node to the server and bring up the listener the
// server then publishes, serving traffic: loading is not enough.
func TestControlPlaneBootstrapsReachXDS(t *testing.T) {
	for _, tc := range []struct {
		file, node, endpoint string // endpoint: the file's xDS endpoint, replaced by the server's
		ads                  bool
	}{
		{"consul_sidecar.json", "web-sidecar-proxy", `"port_value": 8502`, true},
		{"istio_sidecar.json", "sidecar~10.1.2.3~productpage-v1-abc.default~default.svc.cluster.local", `{"pipe": {"path": "./etc/istio/proxy/XDS"}}`, true},
		{"kuma_dataplane.yaml", "default.backend-01", `portValue: 5678`, true},
		{"go_control_plane_xds.yaml", "test-id", `port_value: 18000`, false},
		{"go_control_plane_delta.yaml", "test-id", `port_value: 18000`, false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "controlplanes", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			cp := xdstest.New(t, xdstest.Options{Node: tc.node, ADS: tc.ads})
			port := cp.Addr()[strings.LastIndexByte(cp.Addr(), ':')+1:]
			var repl string
			switch {
			case strings.HasPrefix(tc.endpoint, `{"pipe"`):
				repl = `{"socket_address": {"address": "127.0.0.1", "port_value": ` + port + `}}`
			default:
				repl = tc.endpoint[:strings.LastIndexByte(tc.endpoint, ' ')+1] + port
			}
			if !strings.Contains(string(data), tc.endpoint) {
				t.Fatalf("%s has no %s to point at the server", tc.file, tc.endpoint)
			}
			cfg := strings.ReplaceAll(string(data), tc.endpoint, repl)
			path := filepath.Join(t.TempDir(), tc.file)
			if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			p := launch(t, "-c", path)
			deadline := time.After(20 * time.Second)
			for !sentNode(cp, tc.node) {
				select {
				case <-cp.Received():
				case <-deadline:
					t.Fatalf("no discovery request with node %q within 20 s", tc.node)
				}
			}
			// Clusters are published too, empty: a bootstrap waiting for its first CDS answer
			// (Istio's initial_fetch_timeout 0s) is not LIVE before it.
			cp.Set("1", map[resourcev3.Type][]types.Resource{resourcev3.ClusterType: {}, resourcev3.ListenerType: {hcmListener(t, "from_control_plane", 0, `      route_config:
        virtual_hosts:
        - name: all
          domains: ["*"]
          routes: [{match: {prefix: "/"}, direct_response: {status: 200, body: {inline_string: "served"}}}]
      http_filters:
      - name: envoy.filters.http.router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}`)}})
			t.Cleanup(func() {
				if t.Failed() {
					for _, r := range cp.Requests() {
						t.Logf("request %s version %q names %v nack %v", r.GetTypeUrl(), r.GetVersionInfo(), r.GetResourceNames(), r.GetErrorDetail())
					}
				}
			})
			p.waitAdmin() // LIVE once the server's answers end the initial fetches
			url := "http://" + p.boundListenerAddr("from_control_plane") + "/"
			for {
				if code, _, body := tryGet(url); code == 200 && body == "served" {
					break
				}
				select {
				case <-deadline:
					_, _, l := p.get("/listeners")
					t.Fatalf("the published listener did not serve within 20 s; /listeners:\n%s", l)
				case <-time.After(50 * time.Millisecond): // the listener's bind has no event here
				}
			}
		})
	}
}

// tryGet is one GET that reports failure as status 0.
func tryGet(url string) (int, http.Header, string) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, nil, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// sentNode reports whether the server received a request (either protocol) naming node.
func sentNode(cp *xdstest.Server, node string) bool {
	for _, r := range cp.Requests() {
		if r.GetNode().GetId() == node {
			return true
		}
	}
	for _, r := range cp.DeltaRequests() {
		if r.GetNode().GetId() == node {
			return true
		}
	}
	return false
}
