package config

import (
	internallistenerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/bootstrap/internal_listener/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	dfpclusterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/dynamic_forward_proxy/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	preservecasev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/header_formatters/preserve_case/v3"
	clusterprovidedv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/cluster_provided/v3"
	leastrequestv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	maglevv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/maglev/v3"
	randomv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/random/v3"
	ringhashv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	caresv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/network/dns_resolver/cares/v3"
	getaddrinfov3 "github.com/envoyproxy/go-control-plane/envoy/extensions/network/dns_resolver/getaddrinfo/v3"
	googlere2v3 "github.com/envoyproxy/go-control-plane/envoy/extensions/regex_engines/v3"
	httpoptionsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/internal/matcher/transportsocket"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/tlsutil"
)

// ClusterTypeDecoders is the kind of cluster_type extensions as package config reads them.
// The cluster manager builds the same extensions with a kind of its own (their hosts and
// balancer), registered under the same names.
var ClusterTypeDecoders = registry.Kind[ClusterTypeDecoder]{Category: registry.ClusterType, Facet: "config"}

// ClusterTypeDecoder checks the typed_config of one cluster_type extension for the cluster
// named cluster and returns its settings (CustomClusterType.Settings). Error texts name the
// field path below cluster_type.
type ClusterTypeDecoder func(cluster string, typedConfig *anypb.Any) (settings any, err error)

// lbPolicies is the kind of load_balancing_policies extensions: each converts its
// typed_config into one of Legate's policies and its settings.
var lbPolicies = registry.Kind[lbPolicyDecoder]{Category: registry.LBPolicy}

// Register registers the extensions package config reads: the load balancing policies and the
// aggregate and dynamic forward proxy cluster types' typed_config (whose hosts package cluster
// builds), the connection manager's and the TCP proxy's typed_config (whose handlers
// httpproxy and tcpproxy build), the DNS resolvers a DNS cache names, and declares the
// ones it converts for their packages to run: the router, the RE2 regex engine,
// the upstream HTTP protocol options, internal listeners and the preserve_case header
// formatter.
func Register(b *registry.Builder) {
	registry.Add(b, NetworkFilterConfigs, HTTPConnectionManagerFilter, &hcmv3.HttpConnectionManager{}, parseHTTPConnectionManager)
	registry.Add(b, NetworkFilterConfigs, TCPProxyFilter, &tcpproxyv3.TcpProxy{}, parseTCPProxy)
	b.Declare(registry.HTTPFilter, "envoy.filters.http.router", &routerv3.Router{})
	b.Declare(registry.RegexEngine, "envoy.regex_engines.google_re2", &googlere2v3.GoogleRE2{})
	b.Declare(registry.UpstreamOptions, "envoy.upstreams.http.http_protocol_options", &httpoptionsv3.HttpProtocolOptions{})
	b.Declare(registry.Bootstrap, "envoy.bootstrap.internal_listener", &internallistenerv3.InternalListener{})
	b.Declare(registry.HeaderFormatter, PreserveCaseName, &preservecasev3.PreserveCaseFormatterConfig{})
	registry.Add(b, ClusterTypeDecoders, AggregateClusterType, &aggregatev3.ClusterConfig{}, decodeAggregate)
	registry.Add(b, ClusterTypeDecoders, DynamicForwardProxyClusterType, &dfpclusterv3.ClusterConfig{}, decodeDynamicForwardProxy)
	b.Declare(registry.DNSResolver, CaresResolver, &caresv3.CaresDnsResolverConfig{})
	b.Declare(registry.DNSResolver, GetAddrInfoResolver, &getaddrinfov3.GetAddrInfoDnsResolverConfig{})
	registry.Add(b, lbPolicies, "envoy.load_balancing_policies.round_robin", &roundrobinv3.RoundRobin{}, decodeRoundRobin)
	registry.Add(b, lbPolicies, "envoy.load_balancing_policies.least_request", &leastrequestv3.LeastRequest{}, decodeLeastRequest)
	registry.Add(b, lbPolicies, "envoy.load_balancing_policies.random", &randomv3.Random{}, decodeRandom)
	registry.Add(b, lbPolicies, "envoy.load_balancing_policies.ring_hash", &ringhashv3.RingHash{}, decodeRingHash)
	registry.Add(b, lbPolicies, "envoy.load_balancing_policies.maglev", &maglevv3.Maglev{}, decodeMaglev)
	registry.Add(b, lbPolicies, "envoy.load_balancing_policies.cluster_provided", &clusterprovidedv3.ClusterProvided{}, decodeClusterProvided)
	registry.Add(b, lbPolicies, "envoy.load_balancing_policies.wrr_locality", &wrrlocalityv3.WrrLocality{}, decodeWrrLocality)
}

// extensions is l.Extensions, or, without one (tests and tools that convert without the
// server), a registry of config's own extensions: Register's, which TestRegisterBuilds holds
// free of conflicts.
func (l Limits) extensions() *registry.Registry {
	if l.Extensions != nil {
		return l.Extensions
	}
	b := registry.NewBuilder()
	Register(b)
	tlsutil.Register(b)         // the transport sockets clusters are checked with
	transportsocket.Register(b) // and transport_socket_matcher's inputs
	r, _ := b.Build()
	return r
}

// ClusterTypes returns the names of the cluster_type extensions of r that config reads,
// sorted (Entries' order). Cluster.cluster_type.name must be one of them.
func ClusterTypes(r *registry.Registry) []string {
	var names []string
	for e := range registry.All(r, ClusterTypeDecoders) {
		names = append(names, e.Name)
	}
	return names
}
