package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

func listenerProto(t testing.TB, y string) *listenerv3.Listener {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	l := &listenerv3.Listener{}
	if err := protojson.Unmarshal(j, l); err != nil {
		t.Fatalf("decoding %s: %v", y, err)
	}
	return l
}

var ignoreListenerProtos = cmpopts.IgnoreFields(Listener{}, "Proto")
var ignoreChainProtos = cmp.Options{cmpopts.IgnoreFields(FilterChain{}, "Proto", "TransportSocketConfig"), cmpopts.EquateComparable(netip.Prefix{})}

func TestListenerDefaults(t *testing.T) {
	l, err := ListenerFromProto(listenerProto(t, `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 10000}}, filter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy}]}]}`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := &Listener{
		Name:                          "l",
		Address:                       Address{Kind: SocketAddress, Host: "0.0.0.0", Port: 10000},
		FilterChains:                  []*FilterChain{{Filters: []NetworkFilter{{Name: TCPProxyFilter}}}},
		PerConnectionBufferLimitBytes: 1 << 20,
		ListenerFiltersTimeout:        15 * time.Second,
		BindToPort:                    true,
	}
	if diff := cmp.Diff(want, l, ignoreListenerProtos, ignoreChainProtos); diff != "" {
		t.Errorf("ListenerFromProto() (-want +got):\n%s", diff)
	}
}

func TestListenerFields(t *testing.T) {
	l, err := ListenerFromProto(listenerProto(t, `
name: full
stat_prefix: public
traffic_direction: INBOUND
drain_type: MODIFY_ONLY
per_connection_buffer_limit_bytes: 32768
listener_filters_timeout: 0s
continue_on_listener_filters_timeout: true
bind_to_port: false
address: {socket_address: {address: "::", port_value: 443, ipv4_compat: true}}
additional_addresses: [{address: {socket_address: {address: "0.0.0.0", port_value: 443}}}]
listener_filters:
- name: tls
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector}
filter_chains:
- name: sni
  filter_chain_match:
    destination_port: 443
    prefix_ranges: [{address_prefix: 10.1.2.3, prefix_len: 8}]
    direct_source_prefix_ranges: [{address_prefix: "2001:db8::1", prefix_len: 32}]
    source_type: EXTERNAL
    source_prefix_ranges: [{address_prefix: 192.168.0.0, prefix_len: 16}]
    source_ports: [1000, 2000]
    server_names: [WWW.Example.com, "*.example.org"]
    transport_protocol: tls
    application_protocols: [h2, http/1.1]
  filters: [{name: envoy.filters.network.http_connection_manager}]
  transport_socket: {name: envoy.transport_sockets.tls}
default_filter_chain: {name: fallback, filters: [{name: envoy.filters.network.tcp_proxy}]}
`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := &Listener{
		Name:                "full",
		Address:             Address{Kind: SocketAddress, Host: "::", Port: 443},
		AdditionalAddresses: []Address{{Kind: SocketAddress, Host: "0.0.0.0", Port: 443}},
		StatPrefix:          "public",
		TrafficDirection:    DirectionInbound,
		DrainType:           DrainModifyOnly,
		FilterChains: []*FilterChain{{
			Name: "sni",
			Match: FilterChainMatch{
				DestinationPort:          443,
				PrefixRanges:             []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
				DirectSourcePrefixRanges: []netip.Prefix{netip.MustParsePrefix("2001:db8::/32")},
				SourceType:               SourceExternal,
				SourcePrefixRanges:       []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")},
				SourcePorts:              []uint32{1000, 2000},
				ServerNames:              []string{"www.example.com", "*.example.org"},
				TransportProtocol:        "tls",
				ApplicationProtocols:     []string{"h2", "http/1.1"},
			},
			Filters:         []NetworkFilter{{Name: HTTPConnectionManagerFilter}},
			TransportSocket: "envoy.transport_sockets.tls",
		}},
		DefaultFilterChain:               &FilterChain{Name: "fallback", Filters: []NetworkFilter{{Name: TCPProxyFilter}}},
		PerConnectionBufferLimitBytes:    32768,
		ListenerFiltersTimeout:           0,
		ContinueOnListenerFiltersTimeout: true,
		ListenerFilters:                  []ListenerFilter{{Name: "tls", Path: "listener_filters[0]"}},
		BindToPort:                       false,
		IPv4Compat:                       true,
	}
	if diff := cmp.Diff(want, l, ignoreListenerProtos, ignoreChainProtos, cmpopts.IgnoreFields(ListenerFilter{}, "TypedConfig")); diff != "" {
		t.Errorf("ListenerFromProto() (-want +got):\n%s", diff)
	}
	if got := l.ListenerFilters[0].TypedConfig.GetTypeUrl(); got != "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector" {
		t.Errorf("ListenerFilters[0].TypedConfig type = %q; want the TLS inspector's", got)
	}
	if got := DirectionOutbound.String(); got != "OUTBOUND" {
		t.Errorf("DirectionOutbound.String() = %q", got)
	}
}

func TestListenerOriginalDst(t *testing.T) {
	const base = "name: l\naddress: {socket_address: {address: 127.0.0.1, port_value: 1}}\nfilter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy}]}]\n"
	tests := []struct {
		name             string
		yaml             string
		restore, handOff bool
	}{
		{"neither", base, false, false},
		{"use_original_dst", base + "use_original_dst: true", true, true},
		{"filter by name", base + "listener_filters: [{name: envoy.filters.listener.original_dst}]", true, false},
		{"filter by v2 name", base + "listener_filters: [{name: envoy.listener.original_dst}]", true, false},
		{"filter by type", base + "listener_filters: [{name: x, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.listener.original_dst.v3.OriginalDst}}]", true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := ListenerFromProto(listenerProto(t, tc.yaml), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			restore := slices.ContainsFunc(l.ListenerFilters, func(f ListenerFilter) bool {
				return f.Name == OriginalDstFilter || f.TypedConfig.GetTypeUrl() == originalDstTypeURL ||
					f.Name == "envoy.listener.original_dst"
			})
			if restore != tc.restore || l.UseOriginalDst != tc.handOff {
				t.Errorf("original_dst filter, UseOriginalDst = %v, %v; want %v, %v", restore, l.UseOriginalDst, tc.restore, tc.handOff)
			}
		})
	}
}

const (
	udpAddr        = "address: {socket_address: {protocol: UDP, address: 127.0.0.1, port_value: 1}}\n"
	udpProxyFilter = "listener_filters: [{name: envoy.filters.udp_listener.udp_proxy, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.udp.udp_proxy.v3.UdpProxyConfig, stat_prefix: u, cluster: c}}]\n"
)

func TestUDPListener(t *testing.T) {
	l, err := ListenerFromProto(listenerProto(t, "name: l\n"+udpAddr+udpProxyFilter+"udp_listener_config: {downstream_socket_config: {max_rx_datagram_size: 9000}}"), Limits{})
	if err != nil {
		t.Fatalf("ListenerFromProto = %v; want nil", err)
	}
	if u := l.UDP; u == nil || u.MaxRxDatagramSize != 9000 || u.FilterTypeURL != UDPProxyTypeURL || !l.Address.UDP {
		t.Errorf("UDP = %v; want the UDP proxy's config with max_rx_datagram_size 9000", u)
	}
	l, err = ListenerFromProto(listenerProto(t, "name: l\n"+udpAddr+udpProxyFilter), Limits{})
	if err != nil || l.UDP.MaxRxDatagramSize != DefaultMaxRxDatagramSize {
		t.Errorf("without udp_listener_config: %v, %v; want max_rx_datagram_size 1500", l, err)
	}
}

func TestListenerErrors(t *testing.T) {
	const addr = "address: {socket_address: {address: 127.0.0.1, port_value: 1}}\n"
	const chain = "filter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy}]}]\n"
	tests := []struct{ name, yaml, want string }{
		{"no filter chains", "name: l\n" + addr, `listener "l": filter_chains: empty and no default_filter_chain`},
		{"access log filter", "name: l\n" + addr + chain + "access_log: [{name: envoy.access_loggers.stdout, filter: {traceable_filter: {}}}]", `listener "l": access_log[0].filter.traceable_filter: not implemented by Legate`},
		{"no address", "name: l\n" + chain, `listener "l": address: address is missing`},
		{"hostname", "name: l\naddress: {socket_address: {address: example.com, port_value: 1}}\n" + chain, `address.socket_address.address = "example.com": malformed IP address`},
		{"udp with filter chains", "name: l\n" + udpAddr + udpProxyFilter + chain, "filter_chains: set on a UDP listener"},
		{"udp without the proxy", "name: l\n" + udpAddr, "listener_filters: 0 filters on a UDP listener; it needs exactly one, envoy.filters.udp_listener.udp_proxy"},
		{"udp with another filter", "name: l\n" + udpAddr + "listener_filters: [{name: envoy.filters.listener.tls_inspector}]", "a UDP listener's filter must be envoy.filters.udp_listener.udp_proxy"},
		{"quic", "name: l\n" + udpAddr + udpProxyFilter + "udp_listener_config: {quic_options: {}}", "udp_listener_config.quic_options: HTTP/3 (QUIC) listeners are not implemented by Legate"},
		{"udp config on tcp", "name: l\n" + addr + udpProxyFilter + "udp_listener_config: {}", "udp_listener_config: set on a listener whose address is not UDP"},
		{"gro", "name: l\n" + udpAddr + udpProxyFilter + "udp_listener_config: {downstream_socket_config: {prefer_gro: true}}", "prefer_gro: not implemented by Legate"},
		{"partial wildcard", "name: l\n" + addr + "filter_chains: [{filter_chain_match: {server_names: [\"www.*.com\"]}}]", `filter_chains[0].filter_chain_match.server_names[0] = "www.*.com": partial wildcards are not supported`},
		{"bare wildcard", "name: l\n" + addr + "filter_chains: [{filter_chain_match: {server_names: [\"*\"]}}]", `server_names[0] = "*": partial wildcards`},
		{"same matching rules", "name: l\n" + addr + "filter_chains: [{filter_chain_match: {server_names: [a.com, b.com]}}, {filter_chain_match: {server_names: [b.com]}}]",
			`filter_chains[1].filter_chain_match: the same matching rules as filter_chains[0]`},
		{"two empty matches", "name: l\n" + addr + "filter_chains: [{}, {}]", `filter_chains[1].filter_chain_match: the same matching rules as filter_chains[0]`},
		{"duplicate chain names", "name: l\n" + addr + "filter_chains: [{name: x, filter_chain_match: {destination_port: 1}}, {name: x}]", `filter_chains[1].name = "x": duplicate of filter_chains[0]`},
		{"bad prefix", "name: l\n" + addr + "filter_chains: [{filter_chain_match: {source_prefix_ranges: [{address_prefix: 10.0.0.0, prefix_len: 33}]}}]", `source_prefix_ranges[0].prefix_len = 33; must be <= 32`},
		{"bad prefix address", "name: l\n" + addr + "filter_chains: [{filter_chain_match: {prefix_ranges: [{address_prefix: ten}]}}]", `prefix_ranges[0].address_prefix = "ten": malformed IP address`},
		{"source port", "name: l\n" + addr + "filter_chains: [{filter_chain_match: {source_ports: [70000]}}]", `source_ports[0] = 70000; must be in [1, 65535]`},
		{"original dst on a pipe", "name: l\naddress: {pipe: {path: /tmp/x}}\n" + chain + "use_original_dst: true", "original destination needs a TCP address"},
		{"listener filter config_discovery", "name: l\n" + addr + chain + "listener_filters: [{name: envoy.filters.listener.tls_inspector, config_discovery: {config_source: {ads: {}}, type_urls: [type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector]}}]",
			`listener "l": listener_filters[0].config_discovery: set for "envoy.filters.listener.tls_inspector"; not implemented by Legate (extension config discovery serves HTTP filters only)`},
		{"network filter config_discovery", "name: l\n" + addr + "filter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy, config_discovery: {config_source: {ads: {}}, type_urls: [type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy]}}]}]",
			`listener "l": filter_chains[0].filters[0].config_discovery: set for "envoy.filters.network.tcp_proxy"; not implemented by Legate (extension config discovery serves HTTP filters only)`},
		{"default chain network filter config_discovery", "name: l\n" + addr + "default_filter_chain: {filters: [{name: envoy.filters.network.http_connection_manager, config_discovery: {config_source: {ads: {}}}}]}",
			`listener "l": default_filter_chain.filters[0].config_discovery: set for "envoy.filters.network.http_connection_manager"; not implemented by Legate`},
		{"matcher API with an unnamed chain", "name: l\n" + addr + chain + "filter_chain_matcher: {on_no_match: {action: {name: x, typed_config: {\"@type\": type.googleapis.com/google.protobuf.StringValue, value: a}}}}", "filter_chains[0].name: empty; filter_chain_matcher selects filter chains by name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ListenerFromProto(listenerProto(t, tc.yaml), Limits{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ListenerFromProto() error = %v; want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := ListenerFromProto(nil, Limits{}); err == nil {
		t.Errorf("ListenerFromProto(nil) error = nil")
	}
}

func FuzzListenerFromProto(f *testing.F) {
	for _, y := range []string{
		`{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 1}}, filter_chains: [{filter_chain_match: {server_names: ["*.a.com"], source_prefix_ranges: [{address_prefix: "::1", prefix_len: 128}]}}]}`,
		`{name: l, address: {pipe: {path: /tmp/x}}, default_filter_chain: {}}`,
	} {
		b, err := proto.Marshal(listenerProto(f, y))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		pb := &listenerv3.Listener{}
		if proto.Unmarshal(b, pb) != nil {
			return
		}
		l, err := ListenerFromProto(pb, Limits{})
		if err != nil {
			return
		}
		if len(l.FilterChains) == 0 && l.DefaultFilterChain == nil {
			t.Errorf("accepted a listener without filter chains")
		}
		for _, c := range l.FilterChains {
			for _, n := range c.Match.ServerNames {
				if strings.Contains(n[min(1, len(n)):], "*") {
					t.Errorf("accepted server name %q", n)
				}
			}
		}
	})
}

func TestListenerAccessLogs(t *testing.T) {
	l, err := ListenerFromProto(listenerProto(t, `{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 10000}}, filter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy}]}],
access_log: [{name: envoy.access_loggers.stdout, typed_config: {"@type": type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog}, filter: {not_health_check_filter: {}}}, {name: plain}]}`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.AccessLogs) != 2 {
		t.Fatalf("AccessLogs = %+v; want 2 entries", l.AccessLogs)
	}
	if a := l.AccessLogs[0]; a.Name != "envoy.access_loggers.stdout" || a.TypedConfig == nil || a.Filter == nil {
		t.Errorf("AccessLogs[0] = %+v; want the stdout logger with its compiled filter", a)
	}
	if a := l.AccessLogs[1]; a.Name != "plain" || a.Filter != nil {
		t.Errorf("AccessLogs[1] = %+v; want %q without a filter", a, "plain")
	}
}

// TestListenerFilterChainMatcher checks that with filter_chain_matcher the chains' identical
// (here empty) filter_chain_match are accepted, since the matcher selects by name, and that
// the matcher is kept for the listener manager.
func TestListenerFilterChainMatcher(t *testing.T) {
	l, err := ListenerFromProto(listenerProto(t, `name: l
address: {socket_address: {address: 127.0.0.1, port_value: 1}}
filter_chains: [{name: a, filters: [{name: envoy.filters.network.tcp_proxy}]}, {name: b, filters: [{name: envoy.filters.network.tcp_proxy}]}]
filter_chain_matcher: {on_no_match: {action: {name: x, typed_config: {"@type": type.googleapis.com/google.protobuf.StringValue, value: b}}}}
`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if l.FilterChainMatcher.GetOnNoMatch().GetAction().GetName() != "x" || len(l.FilterChains) != 2 {
		t.Errorf("FilterChainMatcher = %v with %d chains; want the configured matcher and 2 chains", l.FilterChainMatcher, len(l.FilterChains))
	}
}

// TestListenerNetworkFiltersDecode: with a registry, each network filter's typed_config is
// decoded, checked and converted once, into the value its factory builds from; a config its
// parser refuses (its own checks, or the protoc-gen-validate rules it runs) refuses the
// listener with the filter's path; a filter no extension takes is left for the listener
// manager to refuse.
func TestListenerNetworkFiltersDecode(t *testing.T) {
	lim := Limits{Extensions: Limits{}.extensions()}
	const head = `{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 1}}, filter_chains: [{filters: [`
	l, err := ListenerFromProto(listenerProto(t, head+`{name: x, typed_config: {"@type": `+TCPProxyTypeURL+`, stat_prefix: t, cluster: c}}]}]}`), lim)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := l.FilterChains[0].Filters[0].Config.(*TCPProxy); !ok || p.Cluster != "c" {
		t.Errorf("Config = %#v; want the *TCPProxy of cluster c", l.FilterChains[0].Filters[0].Config)
	}
	l, err = ListenerFromProto(listenerProto(t, head+`{name: test.unknown}]}]}`), lim)
	if err != nil || l.FilterChains[0].Filters[0].Config != nil {
		t.Errorf("an unknown filter: %v, Config %v; want it listed undecoded", err, l.FilterChains[0].Filters[0].Config)
	}
	for _, tc := range []struct{ filter, want string }{
		{`{name: x, typed_config: {"@type": ` + TCPProxyTypeURL + `, stat_prefix: t, cluster: c, on_demand: {}}}`,
			`listener "l": filter_chains[0].filters[0]: tcp_proxy "t": on_demand is set`},
		{`{name: ` + TCPProxyFilter + `}`,
			`listener "l": filter_chains[0].filters[0]: tcp_proxy: stat_prefix = ""; must not be empty`},
		{`{name: ` + HTTPConnectionManagerFilter + `}`,
			`listener "l": filter_chains[0].filters[0]: envoy.filters.network.http_connection_manager: invalid HttpConnectionManager.StatPrefix`},
		{`{name: x, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager, stat_prefix: h, route_config: {}, add_user_agent: true}}`,
			`listener "l": filter_chains[0].filters[0]: invalid http_connection_manager: add_user_agent`},
	} {
		if _, err := ListenerFromProto(listenerProto(t, head+tc.filter+`]}]}`), lim); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error starting %q", tc.filter, err, tc.want)
		}
	}
}
