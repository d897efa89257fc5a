package config

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	caresv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/network/dns_resolver/cares/v3"
	getaddrinfov3 "github.com/envoyproxy/go-control-plane/envoy/extensions/network/dns_resolver/getaddrinfo/v3"
)

// DNSResolution is how a cluster or a DNS cache resolves names: what Envoy builds from
// typed_dns_resolver_config, dns_resolution_config, use_tcp_for_dns_lookups and (clusters only)
// dns_resolvers. The zero value asks the system's resolver over UDP, as Envoy's default c-ares
// resolver does with /etc/resolv.conf.
type DNSResolution struct {
	// Servers are the name servers asked ("ip:port"); nil asks the system's resolver.
	Servers []string
	// TCP is use_tcp_for_dns_lookups: every query goes over TCP.
	TCP bool
	// NoSearchDomain is no_default_search_domain: the name is asked as it is, never with the
	// system's search domains appended.
	NoSearchDomain bool
	// Retries is getaddrinfo's num_retries: how many more times a lookup that failed
	// temporarily (a timeout, SERVFAIL) is made before it fails.
	Retries uint32
}

// DNSResolutionFromProto merges the resolver fields of a cluster or a DNS cache at path (for
// errors) as Envoy does: typed_dns_resolver_config wins; else dns_resolution_config; else
// use_tcp_for_dns_lookups with the cluster's legacy dns_resolvers (nil for a DNS cache).
func DNSResolutionFromProto(path string, typed *corev3.TypedExtensionConfig, resolution *corev3.DnsResolutionConfig, useTCP bool, legacy []*corev3.Address) (DNSResolution, error) {
	switch {
	case typed != nil:
		return typedDNSResolver(fieldPath(path, "typed_dns_resolver_config"), typed)
	case resolution != nil:
		if err := resolution.ValidateAll(); err != nil {
			return DNSResolution{}, fmt.Errorf("%s: %w", fieldPath(path, "dns_resolution_config"), err)
		}
		return caresResolution(fieldPath(path, "dns_resolution_config")+".resolvers", resolution.GetResolvers(), resolution.GetDnsResolverOptions())
	}
	out, err := caresResolution(fieldPath(path, "dns_resolvers"), legacy, nil)
	out.TCP = useTCP
	return out, err
}

// typedDNSResolver maps a typed_dns_resolver_config onto Legate's resolver: c-ares's resolvers
// and options, or getaddrinfo (the system's resolver) with its retries.
func typedDNSResolver(path string, cfg *corev3.TypedExtensionConfig) (DNSResolution, error) {
	tc := cfg.GetTypedConfig()
	switch tc.GetTypeUrl() {
	case "type.googleapis.com/envoy.extensions.network.dns_resolver.getaddrinfo.v3.GetAddrInfoDnsResolverConfig":
		var pb getaddrinfov3.GetAddrInfoDnsResolverConfig
		if err := tc.UnmarshalTo(&pb); err != nil {
			return DNSResolution{}, fmt.Errorf("%s.typed_config: %w", path, err)
		}
		// num_resolver_threads sizes Envoy's resolver thread pool; Go's lookups need none.
		return DNSResolution{Retries: pb.GetNumRetries().GetValue()}, nil
	case "type.googleapis.com/envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig":
		var pb caresv3.CaresDnsResolverConfig
		if err := tc.UnmarshalTo(&pb); err != nil {
			return DNSResolution{}, fmt.Errorf("%s.typed_config: %w", path, err)
		}
		if pb.GetUseResolversAsFallback() || pb.GetFilterUnroutableFamilies() ||
			pb.GetUdpMaxQueries() != nil || pb.GetQueryTimeoutSeconds() != nil || pb.GetQueryTries() != nil ||
			pb.GetRotateNameservers() || pb.GetEdns0MaxPayloadSize() != nil || pb.GetMaxUdpChannelDuration() != nil ||
			pb.GetReinitChannelOnTimeout() || pb.GetQcacheMaxTtl() != nil {
			return DNSResolution{}, fmt.Errorf("%s.typed_config: only resolvers and dns_resolver_options are implemented by Legate", path)
		}
		return caresResolution(path+".typed_config.resolvers", pb.GetResolvers(), pb.GetDnsResolverOptions())
	}
	return DNSResolution{}, fmt.Errorf("%s.typed_config: type %q; Legate's DNS resolver takes %s or %s", path, tc.GetTypeUrl(), CaresResolver, GetAddrInfoResolver)
}

// caresResolution is a c-ares resolver's servers (port 53 when unset) and options; path names
// the resolvers list.
func caresResolution(path string, resolvers []*corev3.Address, opts *corev3.DnsResolverOptions) (DNSResolution, error) {
	out := DNSResolution{TCP: opts.GetUseTcpForDnsLookups(), NoSearchDomain: opts.GetNoDefaultSearchDomain()}
	for i, a := range resolvers {
		addr, err := AddressFromProto(a)
		if err != nil || addr.Kind != SocketAddress || !isIP(addr.Host) {
			return DNSResolution{}, fmt.Errorf("%s[%d]: must be an IP socket address", path, i)
		}
		if addr.Port == 0 {
			addr.Port = 53
		}
		out.Servers = append(out.Servers, addr.String())
	}
	return out, nil
}

// fieldPath is path.field, or field at the top (path "").
func fieldPath(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}
