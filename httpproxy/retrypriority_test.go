package httpproxy

import (
	"fmt"
	"net"
	"testing"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
)

// twoLevels is the YAML of a STATIC cluster with one endpoint at priority 0 and one at 1.
func twoLevels(name, p0, p1 string) string {
	var eps string
	for prio, a := range []string{p0, p1} {
		h, p, _ := net.SplitHostPort(a)
		eps += fmt.Sprintf("  - priority: %d\n    lb_endpoints:\n    - endpoint: {address: {socket_address: {address: %s, port_value: %s}}}\n", prio, h, p)
	}
	return fmt.Sprintf("name: %s\ntype: STATIC\nconnect_timeout: 1s\nload_assignment:\n  cluster_name: %s\n  endpoints:\n%s", name, name, eps)
}

// TestPreviousPrioritiesRetry: a retry after a 503 from the priority 0 host goes to priority 1
// only with the previous_priorities retry priority; without it the healthy priority 0 takes
// every attempt.
func TestPreviousPrioritiesRetry(t *testing.T) {
	const priority = `, retry_priority: {name: envoy.retry_priorities.previous_priorities,
              typed_config: {"@type": type.googleapis.com/envoy.extensions.retry.priority.previous_priorities.v3.PreviousPrioritiesConfig, update_frequency: 1}}`
	for _, tc := range []struct {
		name       string
		extra      string
		wantStatus int
		p0, p1     int64 // requests each level's host received
	}{
		{"previous_priorities", priority, 200, 1, 1},
		{"without", "", 503, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p0, p1 := newFlaky(t, 1<<30, 503), newFlaky(t, 0, 0)
			e := newEnv(t, envOptions{
				clusters: []string{twoLevels("web", p0.srv.Listener.Addr().String(), p1.srv.Listener.Addr().String())},
				hcm:      simpleHCM("web", `, retry_policy: {retry_on: 5xx, num_retries: 1, retry_back_off: {base_interval: 0.001s}`+tc.extra+`}`),
			})
			resp, body := e.get(e.client(), "/")
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("status %d %q; want %d", resp.StatusCode, body, tc.wantStatus)
			}
			if got0, got1 := p0.n.Load(), p1.n.Load(); got0 != tc.p0 || got1 != tc.p1 {
				t.Errorf("requests at priority 0, 1 = %d, %d; want %d, %d", got0, got1, tc.p0, tc.p1)
			}
		})
	}
}
