package rbac

import (
	"crypto/x509"
	"fmt"
	"net/netip"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/headermatch"
)

// matcher is one compiled permission or principal. Matchers are immutable.
type matcher interface {
	match(x *filter.Exchange, c *conn) bool
}

// conn is the stream's connection, read once per request and only when a matcher needs it.
type conn struct {
	loaded bool
	c      filter.Connection
}

func (c *conn) get(x *filter.Exchange) *filter.Connection {
	if !c.loaded {
		c.loaded = true
		c.c = x.Connection()
	}
	return &c.c
}

type anyMatcher struct{}

func (anyMatcher) match(*filter.Exchange, *conn) bool { return true }

type andMatcher []matcher

func (m andMatcher) match(x *filter.Exchange, c *conn) bool {
	for _, s := range m {
		if !s.match(x, c) {
			return false
		}
	}
	return true
}

type orMatcher []matcher

func (m orMatcher) match(x *filter.Exchange, c *conn) bool {
	for _, s := range m {
		if s.match(x, c) {
			return true
		}
	}
	return false
}

type notMatcher struct{ m matcher }

func (m notMatcher) match(x *filter.Exchange, c *conn) bool { return !m.m.match(x, c) }

type headerMatcher struct{ h headermatch.Header }

func (m *headerMatcher) match(x *filter.Exchange, _ *conn) bool {
	v, ok := x.Request.HeaderValue(m.h.Key())
	return m.h.Match(v, ok)
}

// pathMatcher is url_path: the path without its query and fragment.
type pathMatcher struct{ s headermatch.String }

func (m *pathMatcher) match(x *filter.Exchange, _ *conn) bool {
	return m.s.Match(x.Request.PathOnly())
}

// addrKind selects which address of the connection an ipMatcher reads.
type addrKind uint8

const (
	addrLocal        addrKind = iota // destination_ip
	addrDirectRemote                 // source_ip, direct_remote_ip
	addrRemote                       // remote_ip: the address x-forwarded-for trusts
)

type ipMatcher struct {
	kind   addrKind
	prefix netip.Prefix
}

func (m *ipMatcher) match(x *filter.Exchange, c *conn) bool {
	cc := c.get(x)
	var a netip.Addr
	switch m.kind {
	case addrLocal:
		a = cc.Local.Addr()
	case addrDirectRemote:
		a = cc.DirectRemote.Addr()
	default:
		a = cc.Remote.Addr()
	}
	return a.IsValid() && m.prefix.Contains(a.Unmap())
}

// portMatcher is destination_port (lo == hi) and destination_port_range [lo, hi).
type portMatcher struct{ lo, hi int64 }

func (m *portMatcher) match(x *filter.Exchange, c *conn) bool {
	cc := c.get(x)
	if !cc.Local.IsValid() {
		return false
	}
	p := int64(cc.Local.Port())
	if m.lo == m.hi {
		return p == m.lo
	}
	return p >= m.lo && p < m.hi
}

// sniMatcher is requested_server_name: the TLS SNI, "" on plain text.
type sniMatcher struct{ s headermatch.String }

func (m *sniMatcher) match(x *filter.Exchange, c *conn) bool {
	sni := ""
	if t := c.get(x).TLS; t != nil {
		sni = t.ServerName
	}
	return m.s.Match(sni)
}

// authMatcher is authenticated: a TLS connection whose peer certificate has a URI SAN, a DNS
// SAN or a subject principal_name matches (any TLS connection without principal_name), in
// that order, as Envoy's AuthenticatedMatcher.
type authMatcher struct {
	s   headermatch.String
	any bool
}

func (m *authMatcher) match(x *filter.Exchange, c *conn) bool {
	t := c.get(x).TLS
	if t == nil {
		return false
	}
	if m.any {
		return true
	}
	if len(t.PeerCertificates) == 0 {
		return m.s.Match("")
	}
	return m.matchCert(t.PeerCertificates[0])
}

func (m *authMatcher) matchCert(cert *x509.Certificate) bool {
	for _, u := range cert.URIs {
		if m.s.Match(u.String()) {
			return true
		}
	}
	for _, d := range cert.DNSNames {
		if m.s.Match(d) {
			return true
		}
	}
	return m.s.Match(cert.Subject.String())
}

// compilePermission compiles one Permission; path names it in errors.
func compilePermission(p *rbacv3.Permission, path string) (matcher, error) {
	switch r := p.GetRule().(type) {
	case *rbacv3.Permission_AndRules:
		return compilePermissions(r.AndRules.GetRules(), path+".and_rules.rules", true)
	case *rbacv3.Permission_OrRules:
		return compilePermissions(r.OrRules.GetRules(), path+".or_rules.rules", false)
	case *rbacv3.Permission_Any:
		if !r.Any {
			return nil, fmt.Errorf("%s.any = false: must be true", path)
		}
		return anyMatcher{}, nil
	case *rbacv3.Permission_Header:
		h, err := headermatch.CompileHeader(r.Header, path+".header")
		return &headerMatcher{h}, err
	case *rbacv3.Permission_UrlPath:
		return compilePath(r.UrlPath.GetPath(), path+".url_path")
	case *rbacv3.Permission_DestinationIp:
		return compileCIDR(r.DestinationIp, addrLocal, path+".destination_ip")
	case *rbacv3.Permission_DestinationPort:
		if r.DestinationPort > 65535 {
			return nil, fmt.Errorf("%s.destination_port = %d: must be at most 65535", path, r.DestinationPort)
		}
		return &portMatcher{lo: int64(r.DestinationPort), hi: int64(r.DestinationPort)}, nil
	case *rbacv3.Permission_DestinationPortRange:
		lo, hi := int64(r.DestinationPortRange.GetStart()), int64(r.DestinationPortRange.GetEnd())
		if lo < 0 || hi > 65536 || lo >= hi {
			return nil, fmt.Errorf("%s.destination_port_range = [%d, %d): want 0 <= start < end <= 65536", path, lo, hi)
		}
		return &portMatcher{lo: lo, hi: hi}, nil
	case *rbacv3.Permission_Metadata:
		return compileMetadata(r.Metadata, path+".metadata")
	case *rbacv3.Permission_SourcedMetadata:
		return compileSourced(r.SourcedMetadata, path+".sourced_metadata")
	case *rbacv3.Permission_NotRule:
		m, err := compilePermission(r.NotRule, path+".not_rule")
		return notMatcher{m}, err
	case *rbacv3.Permission_RequestedServerName:
		s, err := headermatch.CompileString(r.RequestedServerName, path+".requested_server_name")
		return &sniMatcher{s}, err
	case *rbacv3.Permission_Matcher:
		return nil, fmt.Errorf("%s.matcher: extension matchers are not implemented by Legate", path)
	case *rbacv3.Permission_UriTemplate:
		return nil, fmt.Errorf("%s.uri_template: not implemented by Legate", path)
	case nil:
		return nil, fmt.Errorf("%s: no rule set; one is required", path)
	default:
		return nil, fmt.Errorf("%s: rule %T: not implemented by Legate", path, r)
	}
}

func compilePermissions(ps []*rbacv3.Permission, path string, and bool) (matcher, error) {
	return compileSet(ps, path, and, compilePermission)
}

// compileSet compiles a list of permissions or principals into one matcher that needs all
// of them (and) or any.
func compileSet[T any](items []T, path string, and bool, one func(T, string) (matcher, error)) (matcher, error) {
	if len(items) == 0 {
		return nil, fmt.Errorf("%s: empty; at least one is required", path)
	}
	ms := make([]matcher, len(items))
	for i, it := range items {
		m, err := one(it, fmt.Sprintf("%s[%d]", path, i))
		if err != nil {
			return nil, err
		}
		ms[i] = m
	}
	if and {
		return andMatcher(ms), nil
	}
	return orMatcher(ms), nil
}

// compilePrincipal compiles one Principal; path names it in errors.
func compilePrincipal(p *rbacv3.Principal, path string) (matcher, error) {
	switch r := p.GetIdentifier().(type) {
	case *rbacv3.Principal_AndIds:
		return compilePrincipals(r.AndIds.GetIds(), path+".and_ids.ids", true)
	case *rbacv3.Principal_OrIds:
		return compilePrincipals(r.OrIds.GetIds(), path+".or_ids.ids", false)
	case *rbacv3.Principal_Any:
		if !r.Any {
			return nil, fmt.Errorf("%s.any = false: must be true", path)
		}
		return anyMatcher{}, nil
	case *rbacv3.Principal_Authenticated_:
		if r.Authenticated.GetPrincipalName() == nil {
			return &authMatcher{any: true}, nil
		}
		s, err := headermatch.CompileString(r.Authenticated.GetPrincipalName(), path+".authenticated.principal_name")
		return &authMatcher{s: s}, err
	case *rbacv3.Principal_SourceIp:
		return compileCIDR(r.SourceIp, addrDirectRemote, path+".source_ip")
	case *rbacv3.Principal_DirectRemoteIp:
		return compileCIDR(r.DirectRemoteIp, addrDirectRemote, path+".direct_remote_ip")
	case *rbacv3.Principal_RemoteIp:
		return compileCIDR(r.RemoteIp, addrRemote, path+".remote_ip")
	case *rbacv3.Principal_Header:
		h, err := headermatch.CompileHeader(r.Header, path+".header")
		return &headerMatcher{h}, err
	case *rbacv3.Principal_UrlPath:
		return compilePath(r.UrlPath.GetPath(), path+".url_path")
	case *rbacv3.Principal_Metadata:
		return compileMetadata(r.Metadata, path+".metadata")
	case *rbacv3.Principal_SourcedMetadata:
		return compileSourced(r.SourcedMetadata, path+".sourced_metadata")
	case *rbacv3.Principal_NotId:
		m, err := compilePrincipal(r.NotId, path+".not_id")
		return notMatcher{m}, err
	case *rbacv3.Principal_FilterState:
		return nil, fmt.Errorf("%s.filter_state: Legate keeps no filter state; not implemented by Legate", path)
	case *rbacv3.Principal_Custom:
		return nil, fmt.Errorf("%s.custom: custom principal extensions are not implemented by Legate", path)
	case nil:
		return nil, fmt.Errorf("%s: no identifier set; one is required", path)
	default:
		return nil, fmt.Errorf("%s: identifier %T: not implemented by Legate", path, r)
	}
}

func compilePrincipals(ps []*rbacv3.Principal, path string, and bool) (matcher, error) {
	return compileSet(ps, path, and, compilePrincipal)
}

func compilePath(sm *matcherv3.StringMatcher, path string) (matcher, error) {
	if sm == nil {
		return nil, fmt.Errorf("%s.path: unset; it is required", path)
	}
	s, err := headermatch.CompileString(sm, path+".path")
	return &pathMatcher{s}, err
}

// compileCIDR compiles a CidrRange; an unset prefix_len is 0 (every address), as in Envoy.
func compileCIDR(r *corev3.CidrRange, kind addrKind, path string) (matcher, error) {
	a, err := netip.ParseAddr(r.GetAddressPrefix())
	if err != nil {
		return nil, fmt.Errorf("%s.address_prefix = %q: not an IP address", path, r.GetAddressPrefix())
	}
	a = a.Unmap()
	bits := int(r.GetPrefixLen().GetValue())
	if bits > a.BitLen() {
		return nil, fmt.Errorf("%s.prefix_len = %d: more than the address's %d bits", path, bits, a.BitLen())
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &ipMatcher{kind: kind, prefix: p}, nil
}
