package e2e

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestIstioAgentAdminCalls drives the binary's admin interface with the calls Istio's
// pilot-agent makes of Envoy, spelled as it spells them (host localhost, unescaped regular
// expressions in the query) and read as it reads them: the readiness poll of server.state and
// listener_manager.workers_started, the xDS update counters, the graceful inbound-only drain
// with skip_exit on shutdown, the downstream_cx_active poll that waits for connections to
// end, and /quitquitquit.
func TestIstioAgentAdminCalls(t *testing.T) {
	listener := func(name, direction string) string {
		return `
  - name: ` + name + `
    traffic_direction: ` + direction + `
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ` + name + `
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes: [{match: {prefix: "/"}, direct_response: {status: 200, body: {inline_string: ` + name + `}}}]`
	}
	cfg := `
node: {id: sidecar~10.0.0.1~app.default~default.svc.cluster.local, cluster: app.default}
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:` + listener("virtualInbound", "INBOUND") + listener("virtualOutbound", "OUTBOUND")
	p := start(t, "-c", writeConfig(t, cfg), "--drain-time-s", "1", "--drain-strategy", "immediate")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(p.admin, "http://"))
	agent := func(method, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://localhost:"+port+"/"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s /%s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// Readiness, as pilot-agent's GetReadinessStats reads it.
	code, body := agent(http.MethodGet, `stats?usedonly&filter=^(server\.state|listener_manager\.workers_started)`)
	stats := parseAgentStats(t, body, "server.state", "listener_manager.workers_started")
	if code != http.StatusOK || stats["server.state"] != 0 || stats["listener_manager.workers_started"] != 1 {
		t.Fatalf("readiness stats = %d %q; want server.state 0 (LIVE) and workers_started 1", code, body)
	}
	// The xDS update counters (absent ones read as 0).
	if code, body := agent(http.MethodGet, `stats?usedonly&filter=^(cluster_manager\.cds|listener_manager\.lds)\.(update_success|update_rejected)$`); code != http.StatusOK {
		t.Errorf("update stats = %d %q; want 200", code, body)
	}

	inbound, outbound := p.listenerAddr("virtualInbound"), p.listenerAddr("virtualOutbound")
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	expectBody(t, c, "http://"+inbound+"/", 200, "virtualInbound")

	// Shutdown: a graceful drain of inbound listeners with skip_exit, after which the
	// listeners keep running (as Envoy's skip_exit leaves them) while their connections drain:
	// with the immediate strategy every inbound HTTP/1 response asks the client to close.
	if code, body := agent(http.MethodPost, "drain_listeners?inboundonly&graceful&skip_exit"); code != http.StatusOK {
		t.Fatalf("drain_listeners = %d %q; want 200", code, body)
	}
	keepAlive := &http.Client{Timeout: 5 * time.Second}
	closes := func(addr string) bool {
		t.Helper()
		resp, err := keepAlive.Get("http://" + addr + "/")
		if err != nil {
			t.Fatalf("GET %s during the drain: %v", addr, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Close
	}
	if !closes(inbound) {
		t.Error("an inbound response during the drain did not ask the client to close")
	}
	if closes(outbound) {
		t.Error("an outbound response during an inbound-only drain asked the client to close")
	}
	// After the drain period the process is still running (skip_exit).
	time.Sleep(1500 * time.Millisecond) // --drain-time-s 1 has no event to wait on from outside
	select {
	case <-p.exited:
		t.Fatalf("legate exited after drain_listeners with skip_exit: %v", p.err)
	default:
	}
	keepAlive.CloseIdleConnections()
	// pilot-agent polls downstream_cx_active until no connection is left, then ends the proxy.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := agent(http.MethodGet, "stats?usedonly&filter=downstream_cx_active$")
		if code != http.StatusOK {
			t.Fatalf("downstream_cx_active poll = %d %q", code, body)
		}
		var active uint64
		for name, v := range parseAgentStats(t, body) {
			if strings.HasPrefix(name, "listener.") && !strings.Contains(name, ".worker_") {
				active += v
			}
		}
		if active == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("downstream_cx_active still %d 10 s after the clients closed:\n%s", active, body)
		}
		time.Sleep(50 * time.Millisecond) // pilot-agent's poll; the server's close has no event here
	}
	if code, _ := agent(http.MethodPost, "quitquitquit"); code != http.StatusOK {
		t.Errorf("quitquitquit = %d; want 200", code)
	}
	if got := p.wait(10 * time.Second); got != 0 {
		t.Errorf("exit code after quitquitquit = %d; want 0", got)
	}
}

// parseAgentStats reads "name: value" lines as pilot-agent's parseStats does, and fails unless
// each name in want is present.
func parseAgentStats(t *testing.T, body string, want ...string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		if line == "" {
			continue
		}
		parts := strings.Split(line, ":")
		if len(parts) != 2 {
			t.Fatalf("stat line %q: want exactly one ':'", line)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(parts[1]), 10, 64)
		if err != nil {
			t.Fatalf("stat line %q: %v", line, err)
		}
		out[parts[0]] = v
	}
	for _, name := range want {
		if _, ok := out[name]; !ok {
			t.Fatalf("%s missing from %q", name, body)
		}
	}
	return out
}
