package config

import (
	"fmt"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/legateproxy/legate/internal/registry"
)

// The UDP proxy, the one listener filter of a UDP listener.
const (
	UDPProxyFilter  = "envoy.filters.udp_listener.udp_proxy"
	UDPProxyTypeURL = "type.googleapis.com/envoy.extensions.filters.udp.udp_proxy.v3.UdpProxyConfig"
)

// UDPListenerFilterConfigs is the kind of UDP listener filter extensions as package config
// reads them: how the filter's typed_config becomes the value its factory builds from
// (UDPListener.Config), with the same parser shape as network filters'. The listener manager
// builds the filter with its own kind (listener.UDPFilters), registered under the same name.
var UDPListenerFilterConfigs = registry.Kind[NetworkFilterParser]{Category: registry.UDPListenerFilter, Facet: "config"}

// DefaultMaxRxDatagramSize is UdpSocketConfig.max_rx_datagram_size when unset.
const DefaultMaxRxDatagramSize = 1500

// UDPListener is what a listener on a UDP socket address serves: its datagrams go to one
// UDP listener filter, the UDP proxy.
type UDPListener struct {
	// MaxRxDatagramSize is udp_listener_config.downstream_socket_config.max_rx_datagram_size
	// (default 1500): longer datagrams are dropped.
	MaxRxDatagramSize uint32
	// FilterName and FilterTypeURL are the UDP proxy listener filter's name and typed_config
	// type URL, which select its factory.
	FilterName    string
	FilterTypeURL string
	// Config is the filter's typed_config decoded, checked and converted by its
	// UDPListenerFilterConfigs parser (the UDP proxy's own type); its factory builds from it.
	// Nil when the registry ListenerFromProto was given has no extension for the filter: the
	// listener manager then refuses it.
	Config any
}

// udp converts a UDP listener (a socket address whose protocol is UDP): udp_listener_config
// without QUIC, and listener_filters holding the UDP proxy alone. Filter chains belong to
// QUIC listeners, which Legate does not serve.
func (b *listenerBuilder) udp(l *listenerv3.Listener, out *Listener) {
	u := &UDPListener{MaxRxDatagramSize: DefaultMaxRxDatagramSize}
	out.UDP = u
	c := l.GetUdpListenerConfig()
	if c.GetQuicOptions() != nil {
		b.fail("udp_listener_config.quic_options: HTTP/3 (QUIC) listeners are not implemented by Legate")
	}
	if c.GetUdpPacketPacketWriterConfig() != nil {
		b.fail("udp_listener_config.udp_packet_packet_writer_config: not implemented by Legate")
	}
	if sc := c.GetDownstreamSocketConfig(); sc != nil {
		if sc.GetPreferGro().GetValue() {
			b.fail("udp_listener_config.downstream_socket_config.prefer_gro: not implemented by Legate")
		}
		if v := sc.GetMaxRxDatagramSize(); v != nil {
			u.MaxRxDatagramSize = uint32(v.GetValue())
		}
	}
	if len(l.GetFilterChains()) > 0 || l.GetDefaultFilterChain() != nil {
		b.fail("filter_chains: set on a UDP listener; filter chains serve QUIC listeners, which are not implemented by Legate (use the %s listener filter)", UDPProxyFilter)
	}
	if len(l.GetAdditionalAddresses()) > 0 {
		b.fail("additional_addresses: set on a UDP listener; not implemented by Legate")
	}
	if len(l.GetAccessLog()) > 0 {
		b.fail("access_log: set on a UDP listener; not implemented by Legate (the UDP proxy's access_log logs its sessions)")
	}
	if len(l.GetSocketOptions()) > 0 || l.GetTcpKeepalive() != nil {
		b.fail("socket_options, tcp_keepalive: set on a UDP listener; not implemented by Legate")
	}
	if l.GetUseOriginalDst().GetValue() {
		b.fail("use_original_dst: set on a UDP listener; not implemented by Legate")
	}
	fs := l.GetListenerFilters()
	if len(fs) != 1 {
		b.fail("listener_filters: %d filters on a UDP listener; it needs exactly one, %s", len(fs), UDPProxyFilter)
		return
	}
	f := fs[0]
	if !isListenerFilter(f, UDPProxyTypeURL, UDPProxyFilter, "envoy.filters.udp_listener.udp_proxy") || f.GetTypedConfig() == nil {
		b.fail("listener_filters[0] = %q (%s): a UDP listener's filter must be %s with a typed_config", f.GetName(), f.GetTypedConfig().GetTypeUrl(), UDPProxyFilter)
		return
	}
	if f.GetConfigDiscovery() != nil || f.GetFilterDisabled() != nil {
		b.fail("listener_filters[0]: config_discovery and filter_disabled are not implemented by Legate for UDP listeners")
	}
	u.FilterName, u.FilterTypeURL = f.GetName(), f.GetTypedConfig().GetTypeUrl()
	var err error
	if u.Config, err = decodeFilter(b.ext, UDPListenerFilterConfigs, u.FilterName, f.GetTypedConfig()); err != nil {
		b.fail("listener_filters[0]: %v", err)
	}
}

func (u *UDPListener) String() string {
	return fmt.Sprintf("udp(%s, max_rx_datagram_size %d)", u.FilterName, u.MaxRxDatagramSize)
}
