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
	// Resolve returns the addresses of name for family, resolved as res says (its servers,
	// or the system resolver without any), and the smallest TTL of the records (0 when
	// unknown). An IP literal resolves to itself.
	Resolve(ctx context.Context, name string, family config.DNSLookupFamily, res *config.DNSResolution) ([]netip.Addr, time.Duration, error)
}

// DNSResolver queries the configured name servers with github.com/miekg/dns (so record TTLs
// are known for respect_dns_ttl) and falls back to Go's system resolver when a cluster or cache
// configures none; over TCP when use_tcp_for_dns_lookups is set. Safe for concurrent use.
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
func (r *DNSResolver) Resolve(ctx context.Context, name string, family config.DNSLookupFamily, res *config.DNSResolution) ([]netip.Addr, time.Duration, error) {
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
		a4, t4, err4 := r.lookupRetrying(ctx, name, dns.TypeA, res)
		a6, t6, err6 := r.lookupRetrying(ctx, name, dns.TypeAAAA, res)
		if err4 != nil && err6 != nil {
			return nil, 0, err4
		}
		return append(a4, a6...), minTTL(t4, t6), nil
	default:
		order = []uint16{dns.TypeAAAA, dns.TypeA}
	}
	var firstErr error
	for _, qt := range order {
		addrs, ttl, err := r.lookupRetrying(ctx, name, qt, res)
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

// lookupRetrying is lookup made again, up to res.Retries more times, while it fails
// temporarily (getaddrinfo's num_retries on EAI_AGAIN).
func (r *DNSResolver) lookupRetrying(ctx context.Context, name string, qtype uint16, res *config.DNSResolution) ([]netip.Addr, time.Duration, error) {
	for tries := uint32(0); ; tries++ {
		addrs, ttl, err := r.lookup(ctx, name, qtype, res)
		if err == nil || tries >= res.Retries || ctx.Err() != nil || !isTemporary(err) {
			return addrs, ttl, err
		}
	}
}

// isTemporary reports whether a lookup failed for a cause that may pass: a timeout, or a
// server that failed to answer (SERVFAIL, REFUSED).
func isTemporary(err error) bool {
	var de *net.DNSError
	if errors.As(err, &de) {
		return de.IsTemporary || de.IsTimeout
	}
	var ne net.Error
	return errors.Is(err, errServerFailed) || (errors.As(err, &ne) && ne.Timeout())
}

// errServerFailed: a name server answered with an error other than NXDOMAIN.
var errServerFailed = errors.New("name server failed")

// lookup asks for one record type.
func (r *DNSResolver) lookup(ctx context.Context, name string, qtype uint16, res *config.DNSResolution) ([]netip.Addr, time.Duration, error) {
	if len(res.Servers) == 0 {
		return r.lookupSystem(ctx, name, qtype, res)
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	client := &dns.Client{Timeout: timeout}
	if res.TCP {
		client.Net = "tcp"
	}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	q.RecursionDesired = true
	var lastErr error
	for _, server := range res.Servers {
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
			lastErr = fmt.Errorf("%w: %s answered %s", errServerFailed, server, dns.RcodeToString[resp.Rcode])
			continue
		}
		return answerAddrs(resp, qtype)
	}
	return nil, 0, lastErr
}

// answerAddrs are the addresses of a response's A or AAAA records and their smallest TTL.
func answerAddrs(resp *dns.Msg, qtype uint16) ([]netip.Addr, time.Duration, error) {
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

// lookupSystem asks the system's resolver (resolv.conf's name servers and search domains).
// no_default_search_domain roots the name so that no search domain is appended;
// use_tcp_for_dns_lookups makes Go's resolver query over TCP.
func (r *DNSResolver) lookupSystem(ctx context.Context, name string, qtype uint16, res *config.DNSResolution) ([]netip.Addr, time.Duration, error) {
	sys := r.System
	if sys == nil {
		sys = net.DefaultResolver
	}
	if res.TCP {
		sys = tcpResolver(sys)
	}
	if res.NoSearchDomain {
		name = dns.Fqdn(name)
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

// tcpResolver is base's Go resolver dialling its name servers over TCP: Go's resolver frames
// its queries for a stream when the connection is not a packet connection.
func tcpResolver(base *net.Resolver) *net.Resolver {
	return &net.Resolver{PreferGo: true, StrictErrors: base.StrictErrors, Dial: func(ctx context.Context, _, addr string) (net.Conn, error) {
		if base.Dial != nil {
			return base.Dial(ctx, "tcp", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}}
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}
