package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/internal/sockopt"
)

// The typed_config types of the listener filters Envoy adds itself: the original destination
// filter (use_original_dst) and the PROXY protocol filter (use_proxy_proto).
const (
	originalDstTypeURL   = "type.googleapis.com/envoy.extensions.filters.listener.original_dst.v3.OriginalDst"
	proxyProtocolTypeURL = "type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol"
)

// ListenerFromProto converts l into a Listener with Envoy's defaults applied and checks the
// rules the listener manager relies on. Errors name the listener, the field path, the value
// and the rule. l is kept as Listener.Proto and must not be modified afterwards.
//
// Legate serves TCP socket, pipe and internal listeners, and UDP listeners whose one listener
// filter is the UDP proxy; QUIC and API listeners are refused rather than silently ignored.
// listener_filters are kept for the listener manager, which builds them from the extension
// registry and refuses the ones it has not. filter_chain_matcher is kept as its proto for the listener
// manager, which compiles it with the registry's matching inputs. Each network filter's
// typed_config is decoded, checked and converted here with lim.Extensions
// (NetworkFilter.Config); without a registry the filters are only listed, for tools and
// tests that do not build them.
func ListenerFromProto(l *listenerv3.Listener, lim Limits) (*Listener, error) {
	if l == nil {
		return nil, fmt.Errorf("listener: nil")
	}
	b := listenerBuilder{at: fmt.Sprintf("listener %q", l.GetName()), ext: lim.Extensions}
	out := b.build(l)
	if b.err != nil {
		return nil, b.err
	}
	return out, nil
}

type listenerBuilder struct {
	at  string
	ext *registry.Registry // the network filters' parsers
	err error
}

func (b *listenerBuilder) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("%s: %s", b.at, fmt.Sprintf(format, args...))
	}
}

func (b *listenerBuilder) build(l *listenerv3.Listener) *Listener {
	out := &Listener{
		Name:                             l.GetName(),
		StatPrefix:                       l.GetStatPrefix(),
		PerConnectionBufferLimitBytes:    u32Or(l.GetPerConnectionBufferLimitBytes(), DefaultPerConnectionBufferLimit),
		ListenerFiltersTimeout:           durationOr(l.GetListenerFiltersTimeout(), DefaultListenerFiltersTimeout),
		ContinueOnListenerFiltersTimeout: l.GetContinueOnListenerFiltersTimeout(),
		BindToPort:                       l.GetBindToPort() == nil || l.GetBindToPort().GetValue(),
		IgnoreGlobalConnLimit:            l.GetIgnoreGlobalConnLimit(),
		BypassOverloadManager:            l.GetBypassOverloadManager(),
		Proto:                            l,
	}
	if l.GetApiListener() != nil {
		b.fail("api_listener: API listeners are not supported")
	}
	out.FilterChainMatcher = l.GetFilterChainMatcher()
	out.UseOriginalDst = l.GetUseOriginalDst().GetValue()
	out.Internal = l.GetInternalListener() != nil
	if out.Internal {
		b.internal(l, out)
	} else {
		out.Address, out.IPv4Compat = b.address("address", l.GetAddress())
	}
	for i, a := range l.GetAdditionalAddresses() {
		addr, _ := b.address(fmt.Sprintf("additional_addresses[%d].address", i), a.GetAddress())
		if addr.Kind != out.Address.Kind {
			b.fail("additional_addresses[%d].address: %s; must be the same kind of address as address", i, addr)
		}
		out.AdditionalAddresses = append(out.AdditionalAddresses, addr)
	}
	b.socketOptions(l, out)
	switch l.GetTrafficDirection() {
	case corev3.TrafficDirection_INBOUND:
		out.TrafficDirection = DirectionInbound
	case corev3.TrafficDirection_OUTBOUND:
		out.TrafficDirection = DirectionOutbound
	}
	if l.GetDrainType() == listenerv3.Listener_MODIFY_ONLY {
		out.DrainType = DrainModifyOnly
	}
	if out.Address.UDP || l.GetUdpListenerConfig() != nil {
		if !out.Address.UDP {
			b.fail("udp_listener_config: set on a listener whose address is not UDP (socket_address.protocol: UDP)")
		}
		b.udp(l, out)
		out.Ignored = auditFields(l, b.fail)
		return out
	}
	b.listenerFilters(l, out)
	names := map[string]int{}
	for i, fc := range l.GetFilterChains() {
		path := fmt.Sprintf("filter_chains[%d]", i)
		c := b.chain(path, fc)
		if c.Name == "" && out.FilterChainMatcher != nil {
			b.fail("%s.name: empty; filter_chain_matcher selects filter chains by name, so each needs one", path)
		}
		if c.Name != "" {
			if j, dup := names[c.Name]; dup {
				b.fail("%s.name = %q: duplicate of filter_chains[%d]; filter chain names must be unique", path, c.Name, j)
			}
			names[c.Name] = i
		}
		for j, prev := range out.FilterChains {
			if out.FilterChainMatcher != nil {
				break // the matcher selects; filter_chain_match is ignored, as in Envoy
			}
			if c.Match.overlaps(&prev.Match) {
				b.fail("%s.filter_chain_match: the same matching rules as filter_chains[%d]; multiple filter chains with the same matching rules are not allowed", path, j)
			}
		}
		out.FilterChains = append(out.FilterChains, c)
	}
	if dc := l.GetDefaultFilterChain(); dc != nil {
		out.DefaultFilterChain = b.chain("default_filter_chain", dc)
	}
	if len(out.FilterChains) == 0 && out.DefaultFilterChain == nil {
		b.fail("filter_chains: empty and no default_filter_chain; a TCP listener needs at least one filter chain")
	}
	out.Ignored = auditFields(l, b.fail)
	b.accessLogs(l, out)
	return out
}

// socketOptions converts socket_options and tcp_keepalive into the options of each bound
// address: an additional address's socket_options, when set, replace the listener's, and its
// tcp_keepalive replaces the listener's (a zero field turning keep-alive off).
func (b *listenerBuilder) socketOptions(l *listenerv3.Listener, out *Listener) {
	if out.Internal {
		if len(l.GetSocketOptions()) > 0 || l.GetTcpKeepalive() != nil {
			b.fail("socket_options, tcp_keepalive: set on an internal listener, which has no socket")
		}
		return
	}
	if out.Address.Kind == PipeAddress && (len(l.GetSocketOptions()) > 0 || l.GetTcpKeepalive() != nil) {
		b.fail("socket_options, tcp_keepalive: set on a pipe listener; not implemented by Legate (socket options are set on TCP sockets)")
		return
	}
	base, err := socketOptions("socket_options", l.GetSocketOptions())
	if err != nil {
		b.fail("%v", err)
	}
	var keepalive []sockopt.Option
	if ka := l.GetTcpKeepalive(); ka != nil {
		keepalive = keepaliveOptions("tcp_keepalive", ka)
	}
	out.SocketOptions = [][]sockopt.Option{append(base, keepalive...)}
	for i, a := range l.GetAdditionalAddresses() {
		at := fmt.Sprintf("additional_addresses[%d]", i)
		opts := base
		if so := a.GetSocketOptions(); so != nil {
			if opts, err = socketOptions(at+".socket_options.socket_options", so.GetSocketOptions()); err != nil {
				b.fail("%v", err)
			}
		}
		ka := keepalive
		switch own := a.GetTcpKeepalive(); {
		case own != nil && keepaliveDisabled(own):
			ka = nil
		case own != nil:
			ka = keepaliveOptions(at+".tcp_keepalive", own)
		}
		out.SocketOptions = append(out.SocketOptions, append(slices.Clip(opts), ka...))
	}
	if !slices.ContainsFunc(out.SocketOptions, func(o []sockopt.Option) bool { return len(o) > 0 }) {
		out.SocketOptions = nil
	}
}

// accessLogs compiles access_log's filters; the loggers' typed_config is checked by the server,
// which builds them.
func (b *listenerBuilder) accessLogs(l *listenerv3.Listener, out *Listener) {
	for i, al := range l.GetAccessLog() {
		filter, err := accesslog.FilterFromProto(fmt.Sprintf("access_log[%d].filter", i), al.GetFilter(), accesslog.FilterOptions{})
		if err != nil {
			b.fail("%v", err)
			return
		}
		out.AccessLogs = append(out.AccessLogs, AccessLog{Name: al.GetName(), TypedConfig: al.GetTypedConfig(), Filter: filter})
	}
}

// internal checks an internal listener: it is found by its name, has no socket, and its
// address, if set, is an internal one.
func (b *listenerBuilder) internal(l *listenerv3.Listener, out *Listener) {
	if l.GetName() == "" {
		b.fail("name: empty; an internal listener is found by its name (envoy_internal_address.server_listener_name)")
	}
	if a := l.GetAddress(); a != nil {
		if a.GetEnvoyInternalAddress() == nil {
			b.fail("address: a %s on an internal listener; it can only be an envoy_internal_address", addressKind(a))
		} else if n := a.GetEnvoyInternalAddress().GetServerListenerName(); n != l.GetName() {
			b.fail("address.envoy_internal_address.server_listener_name = %q; an internal listener's address names the listener itself (%q)", n, l.GetName())
		}
	}
	out.Address = Address{Kind: InternalAddress, Path: l.GetName()}
	if len(l.GetAdditionalAddresses()) > 0 {
		b.fail("additional_addresses: set on an internal listener, which has no socket")
	}
	if l.GetUseOriginalDst().GetValue() {
		b.fail("use_original_dst: set on an internal listener, which has no socket to read an original destination from")
	}
}

// listenerFilters converts listener_filters, adding the filters Envoy adds itself: the
// original destination filter first when use_original_dst is set, and the PROXY protocol
// filter, with its defaults, when a filter chain sets the deprecated use_proxy_proto and
// listener_filters has none.
func (b *listenerBuilder) listenerFilters(l *listenerv3.Listener, out *Listener) {
	restores, proxyProto := out.UseOriginalDst, false
	if restores {
		out.ListenerFilters = append(out.ListenerFilters, ListenerFilter{Name: OriginalDstFilter, Path: "use_original_dst"})
	}
	for i, f := range l.GetListenerFilters() {
		path := fmt.Sprintf("listener_filters[%d]", i)
		if f.GetConfigDiscovery() != nil {
			b.fail("%s.config_discovery: set for %q; not implemented by Legate (extension config discovery serves HTTP filters only)", path, f.GetName())
			continue
		}
		if f.GetFilterDisabled() != nil {
			b.fail("%s.filter_disabled: set for %q; not implemented by Legate", path, f.GetName())
			continue
		}
		restores = restores || isListenerFilter(f, originalDstTypeURL, OriginalDstFilter, "envoy.listener.original_dst")
		proxyProto = proxyProto || isListenerFilter(f, proxyProtocolTypeURL, ProxyProtocolFilter, "envoy.listener.proxy_protocol")
		out.ListenerFilters = append(out.ListenerFilters, ListenerFilter{Name: f.GetName(), TypedConfig: f.GetTypedConfig(), Path: path})
	}
	if !proxyProto && slices.ContainsFunc(l.GetFilterChains(), func(fc *listenerv3.FilterChain) bool { return fc.GetUseProxyProto().GetValue() }) {
		// After the original destination, whose address a PROXY header's overrides.
		at := 0
		if out.UseOriginalDst {
			at = 1
		}
		out.ListenerFilters = slices.Insert(out.ListenerFilters, at, ListenerFilter{Name: ProxyProtocolFilter, Path: "filter_chains.use_proxy_proto"})
	}
	if restores && out.Address.Kind != SocketAddress {
		b.fail("address: %s: the original destination needs a TCP address; a pipe or an internal listener has none", out.Address)
	}
}

// isListenerFilter reports whether a listener filter is the one of typeURL: by its
// typed_config's type when it has one, as Envoy finds every extension (the name is then free
// text), else by its name or its older v2 name.
func isListenerFilter(f *listenerv3.ListenerFilter, typeURL, name, v2Name string) bool {
	if u := f.GetTypedConfig().GetTypeUrl(); u != "" {
		return u == typeURL
	}
	return f.GetName() == name || f.GetName() == v2Name
}

// address converts a listener address: a socket address with an IP literal, or a pipe.
func (b *listenerBuilder) address(path string, a *corev3.Address) (Address, bool) {
	out, err := AddressFromProto(a)
	if err != nil {
		b.fail("%s: %v", path, err)
		return out, false
	}
	switch out.Kind {
	case InternalAddress:
		b.fail("%s.envoy_internal_address: set on a listener without internal_listener; an internal address is for internal listeners", path)
	case SocketAddress:
		if !isIP(out.Host) {
			b.fail("%s.socket_address.address = %q: malformed IP address; listeners bind IP literals", path, out.Host)
		}
	}
	return out, a.GetSocketAddress().GetIpv4Compat()
}

func (b *listenerBuilder) chain(path string, fc *listenerv3.FilterChain) *FilterChain {
	out := &FilterChain{Name: fc.GetName(), Proto: fc}
	if ts := fc.GetTransportSocket(); ts != nil {
		out.TransportSocket = ts.GetName()
		out.TransportSocketConfig = ts.GetTypedConfig()
	}
	for i, f := range fc.GetFilters() {
		if f.GetConfigDiscovery() != nil {
			b.fail("%s.filters[%d].config_discovery: set for %q; not implemented by Legate (extension config discovery serves HTTP filters only)", path, i, f.GetName())
			continue
		}
		if f.GetName() == "" && f.GetTypedConfig() == nil {
			b.fail("%s.filters[%d]: neither name nor typed_config is set", path, i)
		}
		nf := NetworkFilter{Name: f.GetName(), TypeURL: f.GetTypedConfig().GetTypeUrl()}
		var err error
		if nf.Config, err = decodeNetworkFilter(b.ext, nf.Name, f.GetTypedConfig()); err != nil {
			b.fail("%s.filters[%d]: %v", path, i, err)
		}
		out.Filters = append(out.Filters, nf)
	}
	out.Match = b.match(path+".filter_chain_match", fc.GetFilterChainMatch())
	return out
}

func (b *listenerBuilder) match(path string, m *listenerv3.FilterChainMatch) FilterChainMatch {
	out := FilterChainMatch{
		TransportProtocol:    m.GetTransportProtocol(),
		ApplicationProtocols: m.GetApplicationProtocols(),
		SourcePorts:          m.GetSourcePorts(),
	}
	if dp := m.GetDestinationPort(); dp != nil {
		out.DestinationPort = dp.GetValue()
		if out.DestinationPort < 1 || out.DestinationPort > 65535 {
			b.fail("%s.destination_port = %d; must be in [1, 65535]", path, out.DestinationPort)
		}
	}
	for i, p := range m.GetSourcePorts() {
		if p < 1 || p > 65535 {
			b.fail("%s.source_ports[%d] = %d; must be in [1, 65535]", path, i, p)
		}
	}
	out.PrefixRanges = b.cidrs(path+".prefix_ranges", m.GetPrefixRanges())
	out.DirectSourcePrefixRanges = b.cidrs(path+".direct_source_prefix_ranges", m.GetDirectSourcePrefixRanges())
	out.SourcePrefixRanges = b.cidrs(path+".source_prefix_ranges", m.GetSourcePrefixRanges())
	switch m.GetSourceType() {
	case listenerv3.FilterChainMatch_SAME_IP_OR_LOOPBACK:
		out.SourceType = SourceSameIPOrLoopback
	case listenerv3.FilterChainMatch_EXTERNAL:
		out.SourceType = SourceExternal
	}
	for i, name := range m.GetServerNames() {
		name = strings.ToLower(name)
		if strings.Contains(name, "*") && (!strings.HasPrefix(name, "*.") || strings.Contains(name[1:], "*")) {
			b.fail("%s.server_names[%d] = %q: partial wildcards are not supported; a wildcard is \"*.\" followed by a suffix", path, i, name)
		}
		out.ServerNames = append(out.ServerNames, name)
	}
	return out
}

func (b *listenerBuilder) cidrs(path string, rs []*corev3.CidrRange) []netip.Prefix {
	out, err := cidrPrefixes(path, rs)
	if err != nil {
		b.fail("%v", err)
	}
	return out
}

// cidrPrefixes converts CidrRanges at path (for errors) into prefixes.
func cidrPrefixes(path string, rs []*corev3.CidrRange) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, r := range rs {
		ip, err := netip.ParseAddr(r.GetAddressPrefix())
		if err != nil {
			return nil, fmt.Errorf("%s[%d].address_prefix = %q: malformed IP address", path, i, r.GetAddressPrefix())
		}
		ip = ip.Unmap()
		bits := int(r.GetPrefixLen().GetValue())
		if bits > ip.BitLen() {
			return nil, fmt.Errorf("%s[%d].prefix_len = %d; must be <= %d for %s", path, i, bits, ip.BitLen(), ip)
		}
		p, _ := ip.Prefix(bits)
		out = append(out, p)
	}
	return out, nil
}

// overlaps reports whether a connection could match both m and o equally well: every
// criterion shares a value, an empty criterion being its own "any" value. Envoy refuses such
// listeners ("multiple filter chains with the same matching rules").
func (m *FilterChainMatch) overlaps(o *FilterChainMatch) bool {
	return m.DestinationPort == o.DestinationPort &&
		shareValue(m.PrefixRanges, o.PrefixRanges) &&
		shareValue(m.ServerNames, o.ServerNames) &&
		m.TransportProtocol == o.TransportProtocol &&
		shareValue(m.ApplicationProtocols, o.ApplicationProtocols) &&
		shareValue(m.DirectSourcePrefixRanges, o.DirectSourcePrefixRanges) &&
		m.SourceType == o.SourceType &&
		shareValue(m.SourcePrefixRanges, o.SourcePrefixRanges) &&
		shareValue(m.SourcePorts, o.SourcePorts)
}

func shareValue[T comparable](a, b []T) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}
