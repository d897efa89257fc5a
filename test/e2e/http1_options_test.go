package e2e

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// headEcho is an HTTP/1.1 upstream that answers each request with its head, as received, in
// the body, under a response header spelled X-ReSp_name.
func headEcho(t *testing.T) int {
	return tcpServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			var head strings.Builder
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				head.WriteString(line)
				if line == "\r\n" {
					break
				}
			}
			body := head.String()
			resp := "HTTP/1.1 200 OK\r\nX-ReSp_name: r\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
			if _, err := io.WriteString(c, resp); err != nil {
				return
			}
		}
	})
}

// rawExchange sends req to addr and returns the proxy's response, read until the connection
// closes or the deadline passes.
func rawExchange(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(c)
	return string(out)
}

// TestHTTP1ProtocolOptionsOnTheBinary is issue 17 item 4 on the binary: a bootstrap with
// http_protocol_options on the connection manager and on a cluster (the preserve_case
// formatter by its type URL, as Envoy configurations name it) loads; the upstream gets the
// client's header spelling and the client the upstream's; HTTP/1.0 needs accept_http_10
// (426 on a listener without it); and a cluster without options gets lower-case names.
func TestHTTP1ProtocolOptionsOnTheBinary(t *testing.T) {
	port := strconv.Itoa(headEcho(t))
	const formatter = `{stateful_formatter: {name: preserve_case, typed_config: {"@type": type.googleapis.com/envoy.extensions.http.header_formatters.preserve_case.v3.PreserveCaseFormatterConfig}}}`
	listener := func(name, cluster, options string) string {
		return `
  - name: ` + name + `
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ` + name + `
          ` + options + `
          route_config: {virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: "/"}, route: {cluster: ` + cluster + `}}]}]}
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}`
	}
	cluster := func(name, options string) string {
		return `
  - name: ` + name + `
    connect_timeout: 1s
    load_assignment: {cluster_name: ` + name + `, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + port + `}}}}]}]}
    ` + options
	}
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:` +
		listener("preserving", "preserving", "http_protocol_options: {accept_http_10: true, header_key_format: "+formatter+"}") +
		listener("plain", "plain", "") + `
  clusters:` +
		cluster("preserving", `typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http_protocol_options: {header_key_format: `+formatter+`}}`) +
		cluster("plain", "") + "\n"
	p := start(t, "-c", writeConfig(t, cfg))

	const req = "GET /p HTTP/1.1\r\nHost: x\r\nX-CuStOm_name: c\r\nConnection: close\r\n\r\n"
	got := rawExchange(t, p.listenerAddr("preserving"), req)
	for _, want := range []string{"HTTP/1.1 200 OK\r\n", "\r\nX-ReSp_name: r\r\n", "\r\nX-CuStOm_name: c\r\n", "\r\nx-forwarded-proto: http\r\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("preserve_case: response (with the upstream's request head as body) lacks %q:\n%s", want, got)
		}
	}
	got = rawExchange(t, p.listenerAddr("plain"), req)
	for _, want := range []string{"HTTP/1.1 200 OK\r\n", "\r\nx-resp_name: r\r\n", "\r\nhost: x\r\n", "\r\nx-custom_name: c\r\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("defaults: response lacks %q:\n%s", want, got)
		}
	}
	if got := rawExchange(t, p.listenerAddr("plain"), "GET /p HTTP/1.0\r\nHost: x\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 426 Upgrade Required\r\n") {
		t.Errorf("HTTP/1.0 without accept_http_10: response = %q; want 426", got)
	}
	if got := rawExchange(t, p.listenerAddr("preserving"), "GET /p HTTP/1.0\r\nHost: x\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.0 200 OK\r\n") {
		t.Errorf("HTTP/1.0 with accept_http_10: response = %q; want 200", got)
	}
}
