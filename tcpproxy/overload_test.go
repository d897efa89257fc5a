package tcpproxy

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/legateproxy/legate/overload"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// TestHandshakeTimeoutScaledByReduceTimeouts checks reduce_timeouts on the filter chain's
// transport_socket_connect_timeout (TRANSPORT_SOCKET_CONNECT): with the action saturated, a
// client that connects to a TLS listener and sends no ClientHello is closed after the
// 0.3 s minimum instead of the configured 30 s.
func TestHandshakeTimeoutScaledByReduceTimeouts(t *testing.T) {
	up := newUpstream(t, echo)
	e := newEnv(t, "", map[string][]string{"echo": {up.addr()}})
	ov := overload.New(&overload.Config{
		RefreshInterval: time.Second,
		Monitors:        []overload.Monitor{{Name: overload.GlobalConnections, MaxConnections: 100}},
		Actions: []overload.Action{{
			Name:     overload.ReduceTimeouts,
			Triggers: []overload.Trigger{{Monitor: overload.GlobalConnections}}, // threshold 0: always on
			Timers:   [4]overload.TimerMinimum{overload.TransportSocketConnect: {Set: true, Absolute: 300 * time.Millisecond}},
		}},
	}, e.store, nil)
	t.Cleanup(ov.Close)
	ov.Refresh()

	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "tcp ca"})
	server := ca.Issue(t, tlstest.Options{CommonName: "proxy"})
	logs := newLogFiles(t)
	yml := strings.Replace(tlsListener("common_tls_context: {tls_certificates: ["+certYAML(server)+"]}", logs.path("a.log"), tlsFormat),
		"- transport_socket:", "- transport_socket_connect_timeout: 30s\n  transport_socket:", 1)
	addr := serveListener(t, e, Deps{Pools: e.pools, AccessLogs: AccessLogDeps{Files: logs.Manager}, Overload: ov.State()}, yml)

	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	c.SetReadDeadline(start.Add(wait))
	var b [1]byte
	_, err = c.Read(b[:])
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("read = %v; want the proxy to close the connection", err)
	}
	if got := time.Since(start); got < 250*time.Millisecond || got > 5*time.Second {
		t.Errorf("closed after %v; want about the 0.3s minimum (30s unscaled)", got)
	}
}
