package statsd

import (
	"fmt"
	"net/netip"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
)

// ClusterDialer returns the Dialer of a TCP sink to cluster, or an error when the cluster is
// not one the sink may use.
type ClusterDialer func(cluster string) (Dialer, error)

// FromStatsd builds an envoy.stat_sinks.statsd sink; path names the config in errors.
func FromStatsd(path string, pb *metricsv3.StatsdSink, tcp ClusterDialer) (*Sink, error) {
	if pb.GetScaleHistogramUnitsToMilliseconds() {
		return nil, fmt.Errorf("%s.scale_histogram_units_to_milliseconds: not implemented by Legate", path)
	}
	opts := Options{Prefix: pb.GetPrefix()}
	switch {
	case pb.GetAddress() != nil:
		return udpSink(path+".address", pb.GetAddress(), opts)
	case pb.GetTcpClusterName() != "":
		dial, err := tcp(pb.GetTcpClusterName())
		if err != nil {
			return nil, fmt.Errorf("%s.tcp_cluster_name = %q: %w", path, pb.GetTcpClusterName(), err)
		}
		return NewTCP(dial, opts), nil
	}
	return nil, fmt.Errorf("%s: one of address or tcp_cluster_name must be set", path)
}

// FromDogStatsd builds an envoy.stat_sinks.dog_statsd sink; path names the config in errors.
func FromDogStatsd(path string, pb *metricsv3.DogStatsdSink) (*Sink, error) {
	if pb.GetScaleHistogramUnitsToMilliseconds() {
		return nil, fmt.Errorf("%s.scale_histogram_units_to_milliseconds: not implemented by Legate", path)
	}
	if pb.GetAddress() == nil {
		return nil, fmt.Errorf("%s.address: must be set", path)
	}
	opts := Options{Prefix: pb.GetPrefix(), Tags: true}
	if m := pb.GetMaxBytesPerDatagram(); m != nil {
		// A datagram's payload cannot exceed 65507 bytes over IPv4; more would fail every send.
		if m.GetValue() == 0 || m.GetValue() > 65507 {
			return nil, fmt.Errorf("%s.max_bytes_per_datagram = %d; must be in 1..65507", path, m.GetValue())
		}
		opts.MaxDatagram = int(m.GetValue())
	}
	return udpSink(path+".address", pb.GetAddress(), opts)
}

// udpSink returns a sink sending to the collector at a.
func udpSink(path string, a *corev3.Address, opts Options) (*Sink, error) {
	addr, err := udpAddress(path, a)
	if err != nil {
		return nil, err
	}
	k, err := NewUDP(addr, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// udpAddress reads a collector's socket_address: an IP literal and a port, as Envoy requires.
func udpAddress(path string, a *corev3.Address) (netip.AddrPort, error) {
	sa := a.GetSocketAddress()
	switch {
	case sa == nil:
		return netip.AddrPort{}, fmt.Errorf("%s: only socket_address is implemented; pipe and internal addresses are not implemented by Legate", path)
	case sa.GetResolverName() != "":
		return netip.AddrPort{}, fmt.Errorf("%s.socket_address.resolver_name = %q: not implemented by Legate", path, sa.GetResolverName())
	case sa.GetNamedPort() != "":
		return netip.AddrPort{}, fmt.Errorf("%s.socket_address.named_port = %q: not implemented by Legate", path, sa.GetNamedPort())
	}
	ip, err := netip.ParseAddr(sa.GetAddress())
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%s.socket_address.address = %q: must be an IP address", path, sa.GetAddress())
	}
	if sa.GetPortValue() == 0 || sa.GetPortValue() > 65535 {
		return netip.AddrPort{}, fmt.Errorf("%s.socket_address.port_value = %d; must be in 1..65535", path, sa.GetPortValue())
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(sa.GetPortValue())), nil
}
