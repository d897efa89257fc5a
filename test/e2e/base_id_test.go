package e2e

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legateproxy/legate/hotrestart"
)

// TestSecondInstanceSameBaseIDFailsClearly is issue 17's item 19: as Envoy, a
// second Legate started with the --base-id of a running one exits 1 at epoch 0,
// naming the base id, whether or not it could bind its own addresses, while
// the first keeps serving; with --disable-hot-restart it has no socket to
// share and serves.
func TestSecondInstanceSameBaseIDFailsClearly(t *testing.T) {
	baseID := strconv.Itoa(1000 + rand.IntN(50000))
	listener := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: tcp
    address: {socket_address: {address: 127.0.0.1, port_value: %v}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: tcp, cluster: backend}
  clusters:
  - name: backend
    load_assignment: {cluster_name: backend, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 1}}}}]}]}
`
	// The first instance binds a port the kernel picks; the second is given the same
	// configuration with that port, which it cannot bind either.
	first := start(t, "-c", writeConfig(t, fmt.Sprintf(listener, 0)), "--base-id", baseID)
	addr := first.boundListenerAddr("tcp")
	_, port, _ := net.SplitHostPort(addr)
	cfg := writeConfig(t, fmt.Sprintf(listener, port))
	// A configuration whose addresses are all free: only the base id is shared.
	bindable := writeConfig(t, minimalConfig)

	for _, tc := range []struct{ name, cfg string }{{"same configuration", cfg}, {"addresses free", bindable}} {
		t.Run(tc.name, func(t *testing.T) {
			second := launch(t, "-c", tc.cfg, "--base-id", baseID)
			if code := second.wait(20 * time.Second); code != 1 {
				t.Errorf("second instance exit code = %d; want 1", code)
			}
			out := second.stderr.String()
			for _, want := range []string{"legate: ", "--base-id = " + baseID, "hot restart socket in use", "another Legate (or Envoy) runs with this base id"} {
				if !strings.Contains(out, want) {
					t.Errorf("second instance's output lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "admin address:") {
				t.Errorf("second instance served its admin before exiting:\n%s", out)
			}
		})
	}
	t.Run("--disable-hot-restart", func(t *testing.T) {
		other := start(t, "-c", bindable, "--base-id", baseID, "--disable-hot-restart")
		if code, _, _ := other.get("/ready"); code != 200 {
			t.Errorf("instance with --disable-hot-restart /ready = %d; want 200", code)
		}
	})
	if code, _, _ := first.get("/ready"); code != 200 {
		t.Errorf("first instance no longer ready")
	}
	if got := first.listenerAddr("tcp"); got != addr {
		t.Errorf("first instance's listener on %s; want still %s", got, addr)
	}
}

// TestSIGTERMWhileConnectingToParent is the rest of issue 17's item 17: a
// hot restart child whose parent accepted its connection but never answers
// the handshake acts on SIGTERM at once, not after the handshake's 30 s
// timeout.
func TestSIGTERMWhileConnectingToParent(t *testing.T) {
	base := hotRestartBaseID(9)
	id, _ := strconv.ParseUint(base, 10, 32)
	ln, err := net.Listen("unix", hotrestart.SocketName("@envoy_domain_socket", uint32(id), 0))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c // held open, never answered
		}
	}()
	child := launch(t, "-c", writeConfig(t, minimalConfig), "--base-id", base, "--restart-epoch", "1")
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(20 * time.Second):
		t.Fatalf("the child did not connect to the parent's socket:\n%s", child.stderr.String())
	}
	sent := time.Now()
	child.signal(syscall.SIGTERM)
	code := child.wait(10 * time.Second)
	if took := time.Since(sent); code != 0 {
		t.Errorf("exit code %d after %v; want 0", code, took)
	}
	if out := child.stderr.String(); !strings.Contains(out, "while starting hot restart: exiting") {
		t.Errorf("log lacks the signal:\n%s", out)
	}
}
