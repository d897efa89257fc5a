package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/legateproxy/legate/config"
)

// Resolver resolves the names of STRICT_DNS and LOGICAL_DNS clusters. Implementations must be
// safe for concurrent use.
type Resolver interface {
	// Resolve returns the addresses of name for family, asking servers ("ip:port" each; empty
	// means the system resolver), and the smallest TTL of the records (0 when unknown). An IP
	// literal resolves to itself.
	Resolve(ctx context.Context, name string, family config.DNSLookupFamily, servers []string) ([]netip.Addr, time.Duration, error)
}

// DNSResolver queries the configured dns_resolvers with github.com/miekg/dns (so record TTLs are
// known for respect_dns_ttl) and falls back to Go's system resolver when a cluster configures
// none. Safe for concurrent use.
type DNSResolver struct {
	// Timeout bounds one query to one server; 0 means 5 s.
	Timeout time.Duration
	// System resolves names without configured servers; nil means net.DefaultResolver.
	System *net.Resolver
}

// NewDNSResolver returns a DNSResolver with defaults.
func NewDNSResolver() *DNSResolver { return &DNSResolver{} }

// errNoAddresses: the name exists but has no address of the requested family.
var errNoAddresses = errors.New("no addresses")

// Resolve implements Resolver with Envoy's lookup family rules: AUTO asks for IPv6 first and
// IPv4 when there is no IPv6 address; V4_PREFERRED the reverse; ALL both.
func (r *DNSResolver) Resolve(ctx context.Context, name string, family config.DNSLookupFamily, servers []string) ([]netip.Addr, time.Duration, error) {
	if ip, err := netip.ParseAddr(name); err == nil {
		return []netip.Addr{ip}, 0, nil
	}
	var order []uint16
	switch family {
	case config.V4Only:
		order = []uint16{dns.TypeA}
	case config.V6Only:
		order = []uint16{dns.TypeAAAA}
	case config.V4Preferred:
		order = []uint16{dns.TypeA, dns.TypeAAAA}
	case config.All:
		a4, t4, err4 := r.lookup(ctx, name, dns.TypeA, servers)
		a6, t6, err6 := r.lookup(ctx, name, dns.TypeAAAA, servers)
		if err4 != nil && err6 != nil {
			return nil, 0, err4
		}
		return append(a4, a6...), minTTL(t4, t6), nil
	default:
		order = []uint16{dns.TypeAAAA, dns.TypeA}
	}
	var firstErr error
	for _, qt := range order {
		addrs, ttl, err := r.lookup(ctx, name, qt, servers)
		if err == nil && len(addrs) > 0 {
			return addrs, ttl, nil
		}
		if firstErr == nil || !errors.Is(err, errNoAddresses) {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = errNoAddresses
	}
	return nil, 0, fmt.Errorf("resolving %q: %w", name, firstErr)
}

func minTTL(a, b time.Duration) time.Duration {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// lookup asks for one record type.
func (r *DNSResolver) lookup(ctx context.Context, name string, qtype uint16, servers []string) ([]netip.Addr, time.Duration, error) {
	if len(servers) == 0 {
		sys := r.System
		if sys == nil {
			sys = net.DefaultResolver
		}
		network := "ip4"
		if qtype == dns.TypeAAAA {
			network = "ip6"
		}
		addrs, err := sys.LookupNetIP(ctx, network, name)
		if err != nil {
			var de *net.DNSError
			if errors.As(err, &de) && de.IsNotFound {
				return nil, 0, errNoAddresses
			}
			return nil, 0, err
		}
		for i := range addrs {
			addrs[i] = addrs[i].Unmap()
		}
		return addrs, 0, nil
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	client := &dns.Client{Timeout: timeout}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	q.RecursionDesired = true
	var lastErr error
	for _, server := range servers {
		resp, _, err := client.ExchangeContext(ctx, q, server)
		if err != nil {
			lastErr = err
			continue
		}
		switch resp.Rcode {
		case dns.RcodeSuccess:
		case dns.RcodeNameError:
			return nil, 0, fmt.Errorf("%w (NXDOMAIN from %s)", errNoAddresses, server)
		default:
			lastErr = fmt.Errorf("server %s answered %s", server, dns.RcodeToString[resp.Rcode])
			continue
		}
		var out []netip.Addr
		var ttl time.Duration
		for _, rr := range resp.Answer {
			var ip net.IP
			switch v := rr.(type) {
			case *dns.A:
				ip = v.A
			case *dns.AAAA:
				ip = v.AAAA
			default:
				continue
			}
			a, ok := netip.AddrFromSlice(ip)
			if !ok {
				continue
			}
			if qtype == dns.TypeA {
				a = a.Unmap()
			}
			out = append(out, a)
			ttl = minTTL(ttl, time.Duration(rr.Header().Ttl)*time.Second)
		}
		if len(out) == 0 {
			return nil, 0, errNoAddresses
		}
		return out, ttl, nil
	}
	return nil, 0, lastErr
}

// resolverAddrs renders dns_resolvers as "ip:port" server addresses (port 53 when unset).
func resolverAddrs(rs []config.Address) []string {
	var out []string
	for _, a := range rs {
		if a.Kind != config.SocketAddress {
			continue
		}
		port := a.Port
		if port == 0 {
			port = 53
		}
		out = append(out, config.Address{Host: a.Host, Port: port}.String())
	}
	return out
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}
