package httpproxy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestXffNumTrustedHops follows the examples of Envoy's x-forwarded-for documentation: the
// trusted client address is the downstream remote address (%DOWNSTREAM_REMOTE_ADDRESS%, port
// 0 when it comes from XFF) and, with use_remote_address, x-envoy-external-address.
func TestXffNumTrustedHops(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-External", r.Header.Get("X-Envoy-External-Address"))
		w.Header().Set("X-Seen-Internal", r.Header.Get("X-Envoy-Internal"))
	}))
	t.Cleanup(up.Close)
	for _, tc := range []struct {
		useRemote bool
		hops      int
		xff       string
		client    string // %DOWNSTREAM_REMOTE_ADDRESS%
		external  string
		internal  string
	}{
		{false, 0, "192.0.2.10, 203.0.113.1", "203.0.113.1:0", "", ""},
		{false, 1, "192.0.2.10, 203.0.113.1", "192.0.2.10:0", "", ""},
		{false, 2, "192.0.2.10, 203.0.113.1", "127.0.0.1:", "", ""}, // too few entries: the socket's peer
		{false, 0, "not-an-ip", "127.0.0.1:", "", ""},
		{true, 0, "203.0.113.128, 203.0.113.10, 203.0.113.1", "127.0.0.1:", "", "true"},
		{true, 1, "203.0.113.128, 203.0.113.10, 203.0.113.1", "203.0.113.1:0", "203.0.113.1", ""},
		{true, 2, "203.0.113.128, 203.0.113.10, 203.0.113.1", "203.0.113.10:0", "203.0.113.10", ""},
		{true, 2, "203.0.113.128,203.0.113.10", "203.0.113.128:0", "203.0.113.128", ""},
		{true, 1, "10.1.2.3", "10.1.2.3:0", "", "true"}, // a private trusted client is internal
	} {
		t.Run(fmt.Sprintf("use_remote_address=%v/hops=%d/%s", tc.useRemote, tc.hops, tc.xff), func(t *testing.T) {
			hcm := fmt.Sprintf(`stat_prefix: xff
use_remote_address: %v
xff_num_trusted_hops: %d
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    response_headers_to_add:
    - header: {key: x-client, value: "%%DOWNSTREAM_REMOTE_ADDRESS%%"}
    routes:
    - match: {prefix: "/"}
      route: {cluster: web}
`, tc.useRemote, tc.hops)
			e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.Listener.Addr().String())}, hcm: hcm})
			resp, _ := e.get(e.client(), "/", "x-forwarded-for", tc.xff)
			got := resp.Header.Get("X-Client")
			if tc.client[len(tc.client)-1] == ':' { // the socket's peer, any port
				if len(got) <= len(tc.client) || got[:len(tc.client)] != tc.client || got == tc.client+"0" {
					t.Errorf("downstream remote address = %q; want the socket's %sPORT", got, tc.client)
				}
			} else if got != tc.client {
				t.Errorf("downstream remote address = %q; want %q", got, tc.client)
			}
			if got := resp.Header.Get("X-Seen-External"); got != tc.external {
				t.Errorf("x-envoy-external-address = %q; want %q", got, tc.external)
			}
			if got := resp.Header.Get("X-Seen-Internal"); got != tc.internal {
				t.Errorf("x-envoy-internal = %q; want %q", got, tc.internal)
			}
		})
	}
}
