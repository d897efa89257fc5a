package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// udpEchoServer answers each datagram with "echo:" and the datagram; it returns its port.
func udpEchoServer(t *testing.T) int {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte("echo:"), buf[:n]...), from)
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).Port
}

const udpProxyConfig = `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: udp
    address: {socket_address: {protocol: UDP, address: 127.0.0.1, port_value: 0}}
    udp_listener_config: {downstream_socket_config: {max_rx_datagram_size: 9000}}
    listener_filters:
    - name: envoy.filters.udp_listener.udp_proxy
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.udp.udp_proxy.v3.UdpProxyConfig
        stat_prefix: service
        upstream_socket_config: {max_rx_datagram_size: 9000}
        matcher:
          on_no_match:
            action:
              name: route
              typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.udp.udp_proxy.v3.Route, cluster: service_udp}
  clusters:
  - name: service_udp
    type: STATIC
    load_assignment:
      cluster_name: service_udp
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}}]}]
`

// TestUDPProxy runs the binary on a configuration in the shape of Envoy's UDP example: a
// datagram through the UDP listener reaches the echo and its answer comes back; the stats
// count the session.
func TestUDPProxy(t *testing.T) {
	p := start(t, "-c", writeConfig(t, fmt.Sprintf(udpProxyConfig, udpEchoServer(t))))
	addr := strings.TrimPrefix(p.listenerAddr("udp"), "udp://")
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 9000)
	for _, msg := range []string{"ping", strings.Repeat("z", 4000)} {
		c.Write([]byte(msg))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != "echo:"+msg {
			t.Fatalf("answer = %.20q (%v); want echo:%.15q", buf[:n], err, msg)
		}
	}
	for name, want := range map[string]uint64{
		"udp.service.downstream_sess_total":         1,
		"udp.service.downstream_sess_rx_datagrams":  2,
		"cluster.service_udp.udp.sess_tx_datagrams": 2,
	} {
		if got, _ := p.stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
}

// TestQUICListenerRefused checks that an HTTP/3 listener is refused with a clear message.
func TestQUICListenerRefused(t *testing.T) {
	cfg := strings.Replace(fmt.Sprintf(udpProxyConfig, 9), "udp_listener_config: {", "udp_listener_config: {quic_options: {}, ", 1)
	code, _, stderr := runOnce(t, "-c", writeConfig(t, cfg))
	if code == 0 || !strings.Contains(stderr, "udp_listener_config.quic_options: HTTP/3 (QUIC) listeners are not implemented by Legate") {
		t.Errorf("exit %d, stderr:\n%s\nwant a failure naming quic_options", code, stderr)
	}
}
