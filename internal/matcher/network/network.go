package network

import (
	"net/netip"
	"strconv"
	"strings"

	xdsmatcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	networkv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/matcher"
	"github.com/legateproxy/legate/internal/registry"
)

// Data is what the network inputs read from a new connection.
type Data struct {
	// Local and Remote are the connection's addresses (Remote is the PROXY protocol's source
	// when one came); DirectRemote is the socket's peer. They are valid only when IP is set
	// (a pipe or internal connection has none).
	Local, Remote, DirectRemote netip.AddrPort
	IP                          bool
	// ServerName is the TLS SNI, "" when none.
	ServerName string
	// TransportProtocol is "tls" or "raw_buffer" as the TLS inspector detected it; "" when
	// nothing detected it.
	TransportProtocol string
	// ALPN is the client's ALPN list, in its order.
	ALPN []string
}

// Inputs is the kind the network inputs are registered under: their consumers (the listener's
// filter_chain_matcher) look them up by typed_config type.
var Inputs = registry.Kind[matcher.InputFactory[Data]]{Category: registry.MatchingNetworkInput}

// Register adds the network inputs of envoy.extensions.matching.common_inputs.network.v3 and
// declares the IP range custom matcher, which internal/matcher evaluates itself.
func Register(b *registry.Builder) {
	add := func(name string, cfg proto.Message, in matcher.Input[Data]) {
		registry.Add(b, Inputs, name, cfg, func(proto.Message) (matcher.Input[Data], error) { return in, nil })
	}
	add("envoy.matching.inputs.destination_ip", &networkv3.DestinationIPInput{}, ipOf(func(d *Data) netip.AddrPort { return d.Local }))
	add("envoy.matching.inputs.destination_port", &networkv3.DestinationPortInput{}, portOf(func(d *Data) netip.AddrPort { return d.Local }))
	add("envoy.matching.inputs.source_ip", &networkv3.SourceIPInput{}, ipOf(func(d *Data) netip.AddrPort { return d.Remote }))
	add("envoy.matching.inputs.source_port", &networkv3.SourcePortInput{}, portOf(func(d *Data) netip.AddrPort { return d.Remote }))
	add("envoy.matching.inputs.direct_source_ip", &networkv3.DirectSourceIPInput{}, ipOf(func(d *Data) netip.AddrPort { return d.DirectRemote }))
	add("envoy.matching.inputs.source_type", &networkv3.SourceTypeInput{}, sourceType)
	add("envoy.matching.inputs.server_name", &networkv3.ServerNameInput{}, nonEmpty(func(d *Data) string { return d.ServerName }))
	add("envoy.matching.inputs.transport_protocol", &networkv3.TransportProtocolInput{}, nonEmpty(func(d *Data) string { return d.TransportProtocol }))
	add("envoy.matching.inputs.application_protocol", &networkv3.ApplicationProtocolInput{}, applicationProtocols)
	b.Declare(registry.MatchingNetworkCustomMatcher, matcher.IPRangeMatcherName, &xdsmatcherv3.IPMatcher{})
}

func ipOf(addr func(*Data) netip.AddrPort) matcher.Input[Data] {
	return func(d *Data) (string, bool) {
		if !d.IP {
			return "", false
		}
		return addr(d).Addr().String(), true
	}
}

func portOf(addr func(*Data) netip.AddrPort) matcher.Input[Data] {
	return func(d *Data) (string, bool) {
		if !d.IP {
			return "", false
		}
		return strconv.Itoa(int(addr(d).Port())), true
	}
}

func nonEmpty(field func(*Data) string) matcher.Input[Data] {
	return func(d *Data) (string, bool) {
		v := field(d)
		return v, v != ""
	}
}

// sourceType is "local" for a connection from the listener's own address or loopback (and
// for a pipe), and no value otherwise, as Envoy's source_type input.
func sourceType(d *Data) (string, bool) {
	if !d.IP || d.Remote.Addr().IsLoopback() || d.Remote.Addr() == d.Local.Addr() {
		return "local", true
	}
	return "", false
}

// applicationProtocols is the ALPN list as Envoy gives it: each protocol quoted, joined by
// commas ('h2','http/1.1').
func applicationProtocols(d *Data) (string, bool) {
	if len(d.ALPN) == 0 {
		return "", false
	}
	return "'" + strings.Join(d.ALPN, "','") + "'", true
}
