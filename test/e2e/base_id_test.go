package e2e

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSecondInstanceSameBaseIDFailsClearly is issue 17's item 19: a second
// Legate started from the same configuration and --base-id cannot bind the
// first one's addresses; it must exit 1 saying which address and why,
// while the first keeps serving.
func TestSecondInstanceSameBaseIDFailsClearly(t *testing.T) {
	baseID := strconv.Itoa(1000 + rand.IntN(50000))
	port := freePort(t)
	cfg := writeConfig(t, fmt.Sprintf(`
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: tcp
    address: {socket_address: {address: 127.0.0.1, port_value: %d}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: tcp, cluster: backend}
  clusters:
  - name: backend
    load_assignment: {cluster_name: backend, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 1}}}}]}]}
`, port))
	first := start(t, "-c", cfg, "--base-id", baseID)

	second := launch(t, "-c", cfg, "--base-id", baseID)
	if code := second.wait(20 * time.Second); code != 1 {
		t.Errorf("second instance exit code = %d; want 1", code)
	}
	out := second.stderr.String()
	for _, want := range []string{
		fmt.Sprintf("listener 'tcp': cannot bind 127.0.0.1:%d", port),
		"another Legate runs with --base-id " + baseID,
	} {
		if !strings.Contains(out, "legate: ") || !strings.Contains(out, want) {
			t.Errorf("second instance's output lacks %q:\n%s", want, out)
		}
	}
	if code, _, _ := first.get("/ready"); code != 200 {
		t.Errorf("first instance no longer ready")
	}
	if !strings.Contains(first.listenerAddr("tcp"), strconv.Itoa(port)) {
		t.Errorf("first instance lost its listener")
	}
}
