package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// overloadConfig is a TCP proxy listener "tcp" to the echo server on port under an overload
// manager with a global limit of one downstream connection, refreshed every 50 ms.
func overloadConfig(port int, action string, adminIgnores bool) string {
	return `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}, ignore_global_conn_limit: ` + strconv.FormatBool(adminIgnores) + `}
overload_manager:
  refresh_interval: 0.05s
  resource_monitors:
  - name: envoy.resource_monitors.global_downstream_max_connections
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig
      max_active_downstream_connections: 1
  actions:
  - name: ` + action + `
    triggers: [{name: envoy.resource_monitors.global_downstream_max_connections, threshold: {value: 0.99}}]
static_resources:
  listeners:
  - name: tcp
    stat_prefix: tcp
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: echo
          cluster: echo
  clusters:
  - name: echo
    connect_timeout: 1s
    load_assignment:
      cluster_name: echo
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(port) + `}}}}]}]
`
}

// TestOverloadGlobalConnectionLimit runs the binary with a global limit of one connection: the
// first connection is proxied, the second is closed at accept and counted, and the monitor's
// pressure and the action's state show in /stats.
func TestOverloadGlobalConnectionLimit(t *testing.T) {
	p := start(t, "-c", writeConfig(t, overloadConfig(echoServer(t), "envoy.overload_actions.disable_http_keepalive", true)))
	addr := p.listenerAddr("tcp")
	first, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	first.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(first, "hello\n")
	if got, err := bufio.NewReader(first).ReadString('\n'); err != nil || got != "hello\n" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	second, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	second.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(second, "hello\n")
	if n, err := second.Read(make([]byte, 16)); err == nil {
		t.Fatalf("the connection over the limit was proxied (%d bytes)", n)
	}
	if _, _, body := p.get("/stats?filter=^listener.tcp.downstream_global_cx_overflow$"); body != "listener.tcp.downstream_global_cx_overflow: 1\n" {
		t.Errorf("overflow stat = %q", body)
	}
	want := "overload.envoy.overload_actions.disable_http_keepalive.active: 1\n" +
		"overload.envoy.overload_actions.disable_http_keepalive.scale_percent: 100\n" +
		"overload.envoy.resource_monitors.global_downstream_max_connections.failed_updates: 0\n" +
		"overload.envoy.resource_monitors.global_downstream_max_connections.pressure: 100\n" +
		"overload.envoy.resource_monitors.global_downstream_max_connections.skipped_updates: 0\n"
	var body string
	// The next refresh (every 50 ms) publishes the pressure.
	eventually(t, "overload stats", func() bool {
		_, _, body = p.get("/stats?filter=^overload\\.envoy\\.")
		return body == want
	})
}

// TestOverloadRefusesUnimplemented checks that an overload action Legate does not implement,
// and a timer of reduce_timeouts it has no timeout for, fail validation with their field
// paths.
func TestOverloadRefusesUnimplemented(t *testing.T) {
	code, _, stderr := runOnce(t, "--mode", "validate", "-c", writeConfig(t, overloadConfig(1, "envoy.overload_actions.reset_high_memory_stream", true)))
	if code == 0 || !strings.Contains(stderr, `overload_manager.actions[0].name: overload action "envoy.overload_actions.reset_high_memory_stream": not implemented by Legate`) {
		t.Errorf("validate: exit %d, stderr:\n%s", code, stderr)
	}
	code, _, stderr = runOnce(t, "--mode", "validate", "-c", writeConfig(t, reduceTimeoutsConfig(1, "HTTP_DOWNSTREAM_STREAM_FLUSH")))
	if code == 0 || !strings.Contains(stderr, `overload_manager.actions[0].typed_config.timer_scale_factors[0].timer: HTTP_DOWNSTREAM_STREAM_FLUSH: not implemented by Legate`) {
		t.Errorf("validate: exit %d, stderr:\n%s", code, stderr)
	}
}

// reduceTimeoutsConfig is overloadConfig with reduce_timeouts scaling timer to 0.1 s.
func reduceTimeoutsConfig(port int, timer string) string {
	return strings.Replace(overloadConfig(port, "envoy.overload_actions.reduce_timeouts", true), "    triggers:",
		`    typed_config: {"@type": type.googleapis.com/envoy.config.overload.v3.ScaleTimersOverloadActionConfig, timer_scale_factors: [{timer: `+timer+`, min_timeout: 0.1s}]}
    triggers:`, 1)
}

// TestOverloadReduceTimeouts runs the binary with reduce_timeouts on the global connection
// limit: the configuration loads, and while one connection holds the only place the action's
// scale_percent is 100 in /stats.
func TestOverloadReduceTimeouts(t *testing.T) {
	p := start(t, "-c", writeConfig(t, reduceTimeoutsConfig(echoServer(t), "TRANSPORT_SOCKET_CONNECT")))
	c, err := net.DialTimeout("tcp", p.listenerAddr("tcp"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "hello\n")
	if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != "hello\n" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	const want = "overload.envoy.overload_actions.reduce_timeouts.scale_percent: 100\n"
	var body string
	eventually(t, "reduce_timeouts stats", func() bool { // the next refresh publishes it
		_, _, body = p.get("/stats?filter=^overload\\.envoy\\.overload_actions\\.reduce_timeouts\\.scale_percent$")
		return body == want
	})
}

// TestOverloadAdminCountsAgainstGlobalLimit checks that without ignore_global_conn_limit the
// admin's connections count against the global limit: while the test's one admin connection
// holds the only place, a TCP proxy connection is closed at accept.
func TestOverloadAdminCountsAgainstGlobalLimit(t *testing.T) {
	p := launch(t, "-c", writeConfig(t, overloadConfig(echoServer(t), "envoy.overload_actions.disable_http_keepalive", false)))
	p.waitAdminAddr()
	admin, err := net.DialTimeout("tcp", strings.TrimPrefix(p.admin, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	admin.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(admin)
	get := func(path string) (int, string) {
		io.WriteString(admin, "GET "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("GET %s on the admin connection: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	eventually(t, "LIVE", func() bool { code, _ := get("/ready"); return code == http.StatusOK })
	_, listeners := get("/listeners")
	addr := ""
	for _, l := range lines(listeners) {
		if a, ok := strings.CutPrefix(l, "tcp::"); ok {
			addr = a
		}
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "hello\n")
	if n, err := c.Read(make([]byte, 16)); err == nil {
		t.Fatalf("proxied a connection over the limit the admin's connection took (%d bytes)", n)
	}
	if _, body := get("/stats?filter=^listener.tcp.downstream_global_cx_overflow$"); body != "listener.tcp.downstream_global_cx_overflow: 1\n" {
		t.Errorf("overflow stat = %q", body)
	}
}
