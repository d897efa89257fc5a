package statsd

import (
	"errors"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func socketAddr(sa *corev3.SocketAddress) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: sa}}
}

func udpAt(port uint32) *corev3.Address {
	return socketAddr(&corev3.SocketAddress{Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}})
}

func noCluster(string) (Dialer, error) { return nil, errors.New("unknown cluster") }

// TestConfigErrors checks that each invalid or unimplemented option is refused with its path.
func TestConfigErrors(t *testing.T) {
	statsd := func(pb *metricsv3.StatsdSink) error {
		k, err := FromStatsd("stats_sinks[0].typed_config", pb, noCluster)
		if k != nil {
			k.Close()
		}
		return err
	}
	dog := func(pb *metricsv3.DogStatsdSink) error {
		k, err := FromDogStatsd("stats_sinks[0].typed_config", pb)
		if k != nil {
			k.Close()
		}
		return err
	}
	pipe := &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: "/tmp/statsd"}}}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"nothing", statsd(&metricsv3.StatsdSink{}), "stats_sinks[0].typed_config: one of address or tcp_cluster_name must be set"},
		{"pipe", statsd(&metricsv3.StatsdSink{StatsdSpecifier: &metricsv3.StatsdSink_Address{Address: pipe}}), "stats_sinks[0].typed_config.address: only socket_address is implemented; pipe and internal addresses are not implemented by Legate"},
		{"hostname", statsd(&metricsv3.StatsdSink{StatsdSpecifier: &metricsv3.StatsdSink_Address{Address: socketAddr(&corev3.SocketAddress{Address: "statsd.local", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8125}})}}), `stats_sinks[0].typed_config.address.socket_address.address = "statsd.local": must be an IP address`},
		{"port 0", statsd(&metricsv3.StatsdSink{StatsdSpecifier: &metricsv3.StatsdSink_Address{Address: udpAt(0)}}), "stats_sinks[0].typed_config.address.socket_address.port_value = 0; must be in 1..65535"},
		{"named port", statsd(&metricsv3.StatsdSink{StatsdSpecifier: &metricsv3.StatsdSink_Address{Address: socketAddr(&corev3.SocketAddress{Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_NamedPort{NamedPort: "statsd"}})}}), `stats_sinks[0].typed_config.address.socket_address.named_port = "statsd": not implemented by Legate`},
		{"unknown cluster", statsd(&metricsv3.StatsdSink{StatsdSpecifier: &metricsv3.StatsdSink_TcpClusterName{TcpClusterName: "nope"}}), `stats_sinks[0].typed_config.tcp_cluster_name = "nope": unknown cluster`},
		{"scale", statsd(&metricsv3.StatsdSink{StatsdSpecifier: &metricsv3.StatsdSink_Address{Address: udpAt(8125)}, ScaleHistogramUnitsToMilliseconds: true}), "stats_sinks[0].typed_config.scale_histogram_units_to_milliseconds: not implemented by Legate"},
		{"dog without address", dog(&metricsv3.DogStatsdSink{}), "stats_sinks[0].typed_config.address: must be set"},
		{"dog max 0", dog(&metricsv3.DogStatsdSink{DogStatsdSpecifier: &metricsv3.DogStatsdSink_Address{Address: udpAt(8125)}, MaxBytesPerDatagram: wrapperspb.UInt64(0)}), "stats_sinks[0].typed_config.max_bytes_per_datagram = 0; must be in 1..65507"},
		{"dog scale", dog(&metricsv3.DogStatsdSink{DogStatsdSpecifier: &metricsv3.DogStatsdSink_Address{Address: udpAt(8125)}, ScaleHistogramUnitsToMilliseconds: true}), "not implemented by Legate"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v; want %q", c.name, c.err, c.want)
		}
	}
	if err := dog(&metricsv3.DogStatsdSink{DogStatsdSpecifier: &metricsv3.DogStatsdSink_Address{Address: udpAt(8125)}, MaxBytesPerDatagram: wrapperspb.UInt64(512)}); err != nil {
		t.Errorf("valid dog_statsd: %v", err)
	}
}
