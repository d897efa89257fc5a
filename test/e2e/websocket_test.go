package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/gorilla/websocket"
	"golang.org/x/net/http2"

	"github.com/legateproxy/legate/xds/xdstest"
)

// websocketConfig is a bootstrap in the shape of Envoy's websocket example: a listener whose
// connection manager lets WebSocket upgrades through (upgrade_configs) to a cluster of
// WebSocket servers, and a CONNECT route terminating tunnels to the same hosts.
const websocketConfig = `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: listener_ws
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress_ws_to_ws
          http2_protocol_options: {allow_connect: true}
          upgrade_configs:
          - upgrade_type: websocket
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
          route_config:
            name: local_route
            virtual_hosts:
            - name: app
              domains: ["*"]
              routes:
              - match: {connect_matcher: {}}
                route:
                  cluster: service_ws
                  upgrade_configs:
                  - upgrade_type: CONNECT
                    connect_config: {}
              - match: {prefix: "/"}
                route: {cluster: service_ws}
  clusters:
  - name: service_ws
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: service_ws
      endpoints:
      - lb_endpoints:
        - endpoint:
            address:
              socket_address: {address: 127.0.0.1, port_value: %d}
`

// TestWebSocketExample runs the binary on a websocket configuration: a real WebSocket
// client talks through it to a real WebSocket server (messages both ways, close handshake),
// and /stats shows the upgrade and the tunnel's upstream connection. A CONNECT is
// terminated: through its tunnel an HTTP/1.1 request reaches the server as raw bytes.
func TestWebSocketExample(t *testing.T) {
	backend := wsBackend(t)
	port := backend.Listener.Addr().(*net.TCPAddr).Port
	p := start(t, "-c", writeConfig(t, fmt.Sprintf(websocketConfig, port)))
	addr := p.listenerAddr("listener_ws")

	c := wsSession(t, addr, "hi", strings.Repeat("z", 70000))
	if err := c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Fatalf("ReadMessage() after close = %v; want the server's close frame", err)
	}
	c.Close()

	deadline := time.Now().Add(10 * time.Second)
	for {
		active, _ := p.stat("http.ingress_ws_to_ws.downstream_cx_upgrades_active")
		if active == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("downstream_cx_upgrades_active = %d after the session; want 0", active)
		}
		<-time.After(10 * time.Millisecond) // polling a stat, not synchronising
	}
	connectThrough(t, addr)
	checkConnectSetting(t, addr)
	for name, want := range map[string]uint64{
		"http.ingress_ws_to_ws.downstream_cx_upgrades_total": 2,
		"cluster.service_ws.upstream_cx_total":               2,
		"cluster.service_ws.upstream_rq_101":                 1,
	} {
		if got, _ := p.stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
}

// wsBackend is a WebSocket server that answers each message with "echo: " and the message.
func wsBackend(t *testing.T) *httptest.Server {
	upgrader := websocket.Upgrader{}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			typ, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			if c.WriteMessage(typ, append([]byte("echo: "), msg...)) != nil {
				return
			}
		}
	}))
	t.Cleanup(backend.Close)
	return backend
}

// wsSession opens a WebSocket through addr (closed when the test ends) and checks the echo
// of each message.
func wsSession(t *testing.T, addr string, messages ...string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	c, resp, err := d.Dial("ws://"+addr+"/ws", nil)
	if err != nil {
		t.Fatalf("Dial through legate: %v (response %v)", err, resp)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for _, m := range messages {
		if err := c.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.ReadMessage()
		if err != nil || string(got) != "echo: "+m {
			t.Fatalf("ReadMessage() = %.40q, %v; want %.40q", got, err, "echo: "+m)
		}
	}
	return c
}

// TestWebSocketOverLDS delivers a listener whose route enables WebSocket upgrades over LDS
// (go-control-plane's server): it is accepted, not NACKed, and carries a WebSocket session.
func TestWebSocketOverLDS(t *testing.T) {
	backend := wsBackend(t)
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-ws", ADS: true})
	cfg := adsBootstrap("e2e-ws", xds, []string{"lds_config"}, clusterYAML("backend", backend.Listener.Addr().String(), false))
	xds.Set("v1", map[resourcev3.Type][]types.Resource{resourcev3.ListenerType: {hcmListener(t, "ws", 0, `      route_config:
        virtual_hosts:
        - name: all
          domains: ["*"]
          routes:
          - match: {prefix: "/"}
            route: {cluster: backend, upgrade_configs: [{upgrade_type: websocket}]}
`)}})
	p := start(t, "-c", writeConfig(t, cfg))
	p.waitStatAtLeast("listener_manager.lds.update_success", 1)
	p.waitStatAtLeast("listener_manager.total_listeners_active", 1)
	wsSession(t, p.boundListenerAddr("ws"), "over lds")
	if got, _ := p.stat("listener_manager.lds.update_rejected"); got != 0 {
		t.Errorf("listener_manager.lds.update_rejected = %d; want 0", got)
	}
	if got, _ := p.stat("http.ws.downstream_cx_upgrades_total"); got != 1 {
		t.Errorf("http.ws.downstream_cx_upgrades_total = %d; want 1", got)
	}
}

// connectThrough opens a CONNECT tunnel through addr and sends a plain request through it,
// which the WebSocket server refuses with 400.
func connectThrough(t *testing.T, addr string) {
	t.Helper()
	nc := dialListener(t, addr)
	br := bufio.NewReader(nc)
	fmt.Fprintf(nc, "CONNECT service.example:80 HTTP/1.1\r\nHost: service.example:80\r\n\r\n")
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT = %v, %v; want 200", resp, err)
	}
	fmt.Fprintf(nc, "GET /plain HTTP/1.1\r\nHost: service.example\r\nConnection: close\r\n\r\n")
	inner, err := http.ReadResponse(br, nil)
	if err != nil || inner.StatusCode != http.StatusBadRequest {
		t.Fatalf("request through the tunnel = %v, %v; want the WebSocket server's 400", inner, err)
	}
}

// checkConnectSetting checks that the binary's listener with allow_connect offers extended
// CONNECT in its HTTP/2 SETTINGS (golang.org/x/net/http2 only does with http2xconnect=1,
// which Legate turns on before that package initialises).
func checkConnectSetting(t *testing.T, addr string) {
	t.Helper()
	nc := dialListener(t, addr)
	fmt.Fprint(nc, http2.ClientPreface)
	fr := http2.NewFramer(nc, nc)
	fr.WriteSettings()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading legate's SETTINGS: %v", err)
		}
		sf, ok := f.(*http2.SettingsFrame)
		if !ok || sf.IsAck() {
			continue
		}
		if v, ok := sf.Value(http2.SettingEnableConnectProtocol); !ok || v != 1 {
			t.Errorf("SETTINGS_ENABLE_CONNECT_PROTOCOL = %d (present %v); want 1 with allow_connect", v, ok)
		}
		return
	}
}

// dialListener connects to a listener of the binary; the connection closes when the test
// ends and fails its reads and writes after 10 s.
func dialListener(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return nc
}
