package e2e

import (
	"path/filepath"
	"strconv"
	"testing"
)

// Issue 20: internal_upstream's passthrough_metadata. The cluster that reaches an internal
// listener passes a namespace of its endpoint's metadata and one of its own to the internal
// listener's connection as dynamic metadata, which that listener's TCP proxy access log prints.
func TestInternalListenerPassthroughMetadata(t *testing.T) {
	echoPort := echoServer(t)
	logPath := filepath.Join(t.TempDir(), "inner.log")
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
bootstrap_extensions:
- name: envoy.bootstrap.internal_listener
  typed_config: {"@type": type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener}
static_resources:
  listeners:
  - name: front
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: front, cluster: to_inner}
  - name: inner
    internal_listener: {}
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: inner
          cluster: echo
          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: ` + logPath + `
              log_format: {text_format: "host=%DYNAMIC_METADATA(tenant.md:name)% cluster=%DYNAMIC_METADATA(team.md:team)% absent=%DYNAMIC_METADATA(other:x)%\n"}
  clusters:
  - name: to_inner
    connect_timeout: 1s
    metadata: {filter_metadata: {team.md: {team: blue}, unpassed: {x: y}}}
    load_assignment:
      cluster_name: to_inner
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {envoy_internal_address: {server_listener_name: inner, endpoint_id: ep1}}}
          metadata: {filter_metadata: {tenant.md: {name: alpha}}}
    transport_socket:
      name: envoy.transport_sockets.internal_upstream
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport
        passthrough_metadata:
        - {kind: {host: {}}, name: tenant.md}
        - {kind: {cluster: {}}, name: team.md}
        - {kind: {cluster: {}}, name: other}
        transport_socket: {name: envoy.transport_sockets.raw_buffer, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer}}
  - name: echo
    connect_timeout: 1s
    load_assignment: {cluster_name: echo, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(echoPort) + `}}}}]}]}
`
	p := start(t, "-c", writeConfig(t, cfg))
	echoLine(t, p.listenerAddr("front"), nil, "hello\n")
	line := waitFileLine(t, logPath, "host=")
	if want := "host=alpha cluster=blue absent=-"; line != want {
		t.Fatalf("inner listener's access log %q; want %q", line, want)
	}
}
