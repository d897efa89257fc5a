package originalsrc_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// noCapEnv marks the test binary re-run without CAP_NET_ADMIN and CAP_NET_RAW.
const noCapEnv = "LEGATE_ORIGINAL_SRC_NOCAP"

// TestRefusedWithoutCapNetAdmin: a process that may not set IP_TRANSPARENT (no CAP_NET_ADMIN
// nor CAP_NET_RAW) refuses a listener with original_src when it loads, saying why, instead of
// failing each upstream connection.
func TestRefusedWithoutCapNetAdmin(t *testing.T) {
	if os.Getenv(noCapEnv) == "" {
		if os.Geteuid() != 0 {
			t.Skip("the test drops CAP_NET_ADMIN and CAP_NET_RAW from root's capabilities: needs root")
		}
		if _, err := exec.LookPath("setpriv"); err != nil {
			t.Skipf("the test drops the capabilities with setpriv: %v", err)
		}
		cmd := exec.Command("setpriv", "--bounding-set=-net_admin,-net_raw", "--inh-caps=-net_admin,-net_raw", "--", os.Args[0], "-test.run=^TestRefusedWithoutCapNetAdmin$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), noCapEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestRefusedWithoutCapNetAdmin") {
			t.Fatalf("without CAP_NET_ADMIN and CAP_NET_RAW: %v\n%s", err, out)
		}
		return
	}
	err := newLegate(t, "127.0.0.1:1", "").add(t, `{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, listener_filters: [{name: envoy.filters.listener.original_src, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.original_src.v3.OriginalSrc, mark: 7}}], filter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: p, cluster: up}}]}]}`)
	const want = `listener "l": listener_filters[0]: envoy.filters.listener.original_src: the upstream sockets cannot bind to the client's address (IP_TRANSPARENT and SO_MARK need CAP_NET_ADMIN or CAP_NET_RAW): original_src: setsockopt IP_TRANSPARENT: operation not permitted`
	if err == nil || err.Error() != want {
		t.Fatalf("AddStatic = %v; want %s", err, want)
	}
}
