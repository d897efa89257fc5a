package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/internal/sockopt"
)

const optsAddr = "address: {socket_address: {address: 127.0.0.1, port_value: 1}}\nfilter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy}]}]\n"

// TestListenerSocketOptions: socket_options and tcp_keepalive become the options of each bound
// address, an additional address's own replacing them.
func TestListenerSocketOptions(t *testing.T) {
	ka := sockopt.Keepalive("tcp_keepalive", 3, 30, 0)
	own := sockopt.Keepalive("additional_addresses[1].tcp_keepalive", 0, 9, 0)
	rcvbuf := sockopt.Option{Path: "socket_options[0]", Description: "rcvbuf", Level: 1, Name: 8, Int: 65536}
	tos := sockopt.Option{Path: "socket_options[1]", Level: 0, Name: 1, Buf: []byte{32, 0, 0, 0}, IsBuf: true, State: sockopt.Listening, IPVersion: 4, Datagram: true}
	override := sockopt.Option{Path: "additional_addresses[0].socket_options.socket_options[0]", Level: 6, Name: 4, Int: 5, State: sockopt.Bound, IPVersion: 6}
	tests := []struct {
		name, yaml string
		want       [][]sockopt.Option
	}{
		{"none", "name: l\n" + optsAddr, nil},
		{"options and keepalive", "name: l\n" + optsAddr + `socket_options: [{level: 1, name: 8, int_value: 65536, description: rcvbuf},
  {level: 0, name: 1, buf_value: IAAAAA==, state: STATE_LISTENING, ip_version: SOCKET_IP_VERSION_IPV4, type: {datagram: {}}}]
tcp_keepalive: {keepalive_probes: 3, keepalive_time: 30}
additional_addresses:
- {address: {socket_address: {address: 127.0.0.2, port_value: 1}}, socket_options: {socket_options: [{level: 6, name: 4, int_value: 5, state: STATE_BOUND, ip_version: SOCKET_IP_VERSION_IPV6}]}}
- {address: {socket_address: {address: 127.0.0.3, port_value: 1}}, tcp_keepalive: {keepalive_time: 9}}
- {address: {socket_address: {address: 127.0.0.4, port_value: 1}}, socket_options: {}, tcp_keepalive: {keepalive_probes: 0}}
- {address: {socket_address: {address: 127.0.0.5, port_value: 1}}}`,
			[][]sockopt.Option{
				append([]sockopt.Option{rcvbuf, tos}, ka...),
				append([]sockopt.Option{override}, ka...),
				append([]sockopt.Option{rcvbuf, tos}, own...),
				nil,
				append([]sockopt.Option{rcvbuf, tos}, ka...),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ListenerFromProto(listenerProto(t, tt.yaml), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, l.SocketOptions); diff != "" {
				t.Errorf("SocketOptions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSocketOptionErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"no value", "name: l\n" + optsAddr + "socket_options: [{level: 1, name: 8}]", `listener "l": socket_options[0]: neither int_value nor buf_value is set`},
		{"int too large", "name: l\n" + optsAddr + "socket_options: [{level: 1, name: 8, int_value: 4294967296}]", `listener "l": socket_options[0].int_value = 4294967296; must fit a C int`},
		{"level too large", "name: l\n" + optsAddr + "socket_options: [{level: 4294967296, name: 8, int_value: 1}]", `socket_options[0].level = 4294967296; must fit a C int`},
		{"override", "name: l\n" + optsAddr + "additional_addresses: [{address: {socket_address: {address: 127.0.0.2, port_value: 1}}, socket_options: {socket_options: [{level: 1, name: -4294967297, int_value: 1}]}}]",
			`additional_addresses[0].socket_options.socket_options[0].name = -4294967297; must fit a C int`},
		{"pipe", "name: l\naddress: {pipe: {path: /tmp/x}}\nfilter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy}]}]\ntcp_keepalive: {}", "set on a pipe listener; not implemented by Legate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ListenerFromProto(listenerProto(t, tt.yaml), Limits{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ListenerFromProto() = %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestClusterSocketOptions: a cluster's upstream_bind_config.socket_options, else the
// bootstrap's; an option the kernel refuses fails the cluster's load with its path.
func TestClusterSocketOptions(t *testing.T) {
	boot := []sockopt.Option{{Path: "cluster_manager.upstream_bind_config.socket_options[0]", Level: 1, Name: 9, Int: 1}}
	tests := []struct {
		name, yaml string
		want       []sockopt.Option
	}{
		{"own", "name: a\nupstream_bind_config: {socket_options: [{level: 0, name: 1, int_value: 16}]}", []sockopt.Option{{Path: "upstream_bind_config.socket_options[0]", Level: 0, Name: 1, Int: 16}}},
		{"bootstrap's", "name: a", boot},
		{"own bind config without options", "name: a\nupstream_bind_config: {}", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc, err := clusterYAML(t, tt.yaml)
			if err != nil {
				t.Fatal(err)
			}
			c, err := ClusterFromProto(pc, Limits{UpstreamSocketOptions: boot})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.UpstreamSocketOptions); diff != "" {
				t.Errorf("UpstreamSocketOptions (-want +got):\n%s", diff)
			}
		})
	}
	pc, err := clusterYAML(t, "name: a\nupstream_bind_config: {socket_options: [{level: 1, name: 9, int_value: 1}, {level: 1, name: 9999, int_value: 1}]}")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ClusterFromProto(pc, Limits{})
	if want := `cluster "a": upstream_bind_config.socket_options[1] (level 1, name 9999): setsockopt:`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ClusterFromProto() = %v; want an error containing %q", err, want)
	}
}
