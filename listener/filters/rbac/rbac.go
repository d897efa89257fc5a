// Package rbac is Envoy's envoy.filters.network.rbac network filter
// (extensions.filters.network.rbac.v3.RBAC): a non-terminal filter that allows or denies each
// new connection of its filter chain by role-based access control policies over what is
// known of the connection before its first byte: its addresses and the SNI the TLS inspector
// read.
//
// Fields: rules (action ALLOW, DENY or LOG, policies), stat_prefix and enforcement_type are
// implemented; the decision is taken once per connection, which is what both enforcement
// types amount to for these connection-level properties. Permissions: any, and_rules,
// or_rules, not_rule, destination_ip, destination_port, destination_port_range,
// requested_server_name. Principals: any, and_ids, or_ids, not_id, source_ip,
// direct_remote_ip, remote_ip. Every other permission or principal (they read TLS identities,
// metadata, filter state or HTTP), policy conditions, matcher, shadow_rules, shadow_matcher
// and delay_deny are refused with "not implemented by Legate".
//
// Stats, as Envoy's: <stat_prefix>.rbac.allowed and <stat_prefix>.rbac.denied.
package rbac

import (
	"fmt"
	"net"
	"net/netip"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	netrbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/headermatch"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/stats"
)

// Name is the filter's Envoy name.
const Name = "envoy.filters.network.rbac"

// parse is the filter's config.NetworkFilterParser: the compiled rules, a *rules.
func parse(m proto.Message) (any, error) {
	pb := m.(*netrbacv3.RBAC)
	for field, set := range map[string]bool{
		"matcher": pb.GetMatcher() != nil, "shadow_rules": pb.GetShadowRules() != nil,
		"shadow_matcher": pb.GetShadowMatcher() != nil, "delay_deny": pb.GetDelayDeny() != nil,
	} {
		if set {
			return nil, fmt.Errorf("%s: %s: not implemented by Legate", Name, field)
		}
	}
	if pb.GetStatPrefix() == "" {
		return nil, fmt.Errorf("%s: stat_prefix: empty; it is required", Name)
	}
	f := &rules{statPrefix: pb.GetStatPrefix()}
	rules := pb.GetRules()
	if rules == nil {
		f.allowAll = true // no rules: the filter enforces nothing
		return f, nil
	}
	f.action = rules.GetAction()
	for name, p := range rules.GetPolicies() {
		at := fmt.Sprintf("rules.policies[%q]", name)
		if p.GetCondition() != nil || p.GetCheckedCondition() != nil {
			return nil, fmt.Errorf("%s: %s.condition: not implemented by Legate", Name, at)
		}
		perm, err := orOf(p.GetPermissions(), at+".permissions", permission)
		if err != nil {
			return nil, err
		}
		prin, err := orOf(p.GetPrincipals(), at+".principals", principal)
		if err != nil {
			return nil, err
		}
		f.policies = append(f.policies, and{perm, prin})
	}
	return f, nil
}

// facts is what the policies see of a connection.
type facts struct {
	local, remote, direct netip.AddrPort
	sni                   string
}

func addrPort(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		ap := t.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

type matcher interface{ match(f *facts) bool }

type anyOf []matcher
type and []matcher
type not struct{ m matcher }
type always struct{}
type cidr struct {
	p   netip.Prefix
	get func(f *facts) netip.AddrPort
}
type portRange struct{ lo, hi uint32 } // [lo, hi)
type serverName struct{ s headermatch.String }

func (m anyOf) match(f *facts) bool {
	for _, x := range m {
		if x.match(f) {
			return true
		}
	}
	return false
}

func (m and) match(f *facts) bool {
	for _, x := range m {
		if !x.match(f) {
			return false
		}
	}
	return true
}

func (m not) match(f *facts) bool         { return !m.m.match(f) }
func (always) match(*facts) bool          { return true }
func (m cidr) match(f *facts) bool        { a := m.get(f); return a.IsValid() && m.p.Contains(a.Addr()) }
func (m portRange) match(f *facts) bool   { p := uint32(f.local.Port()); return p >= m.lo && p < m.hi }
func (m *serverName) match(f *facts) bool { return m.s.Match(f.sni) }

func orOf[T any](items []T, at string, one func(T, string) (matcher, error)) (matcher, error) {
	out := make(anyOf, 0, len(items))
	for i, it := range items {
		m, err := one(it, fmt.Sprintf("%s[%d]", at, i))
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func andOf[T any](items []T, at string, one func(T, string) (matcher, error)) (matcher, error) {
	m, err := orOf(items, at, one)
	if err != nil {
		return nil, err
	}
	return and(m.(anyOf)), nil
}

func compileCIDR(addr string, bits uint32, at string, get func(f *facts) netip.AddrPort) (matcher, error) {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %s.address_prefix = %q: malformed IP address", Name, at, addr)
	}
	ip = ip.Unmap()
	if int(bits) > ip.BitLen() {
		return nil, fmt.Errorf("%s: %s.prefix_len = %d; must be <= %d", Name, at, bits, ip.BitLen())
	}
	p, _ := ip.Prefix(int(bits))
	return cidr{p: p, get: get}, nil
}

func local(f *facts) netip.AddrPort  { return f.local }
func remote(f *facts) netip.AddrPort { return f.remote }
func direct(f *facts) netip.AddrPort { return f.direct }

func permission(p *rbacv3.Permission, at string) (matcher, error) {
	switch r := p.GetRule().(type) {
	case *rbacv3.Permission_Any:
		return always{}, nil
	case *rbacv3.Permission_AndRules:
		return andOf(r.AndRules.GetRules(), at+".and_rules.rules", permission)
	case *rbacv3.Permission_OrRules:
		return orOf(r.OrRules.GetRules(), at+".or_rules.rules", permission)
	case *rbacv3.Permission_NotRule:
		m, err := permission(r.NotRule, at+".not_rule")
		return not{m}, err
	case *rbacv3.Permission_DestinationIp:
		return compileCIDR(r.DestinationIp.GetAddressPrefix(), r.DestinationIp.GetPrefixLen().GetValue(), at+".destination_ip", local)
	case *rbacv3.Permission_DestinationPort:
		return portRange{r.DestinationPort, r.DestinationPort + 1}, nil
	case *rbacv3.Permission_DestinationPortRange:
		return portRange{uint32(r.DestinationPortRange.GetStart()), uint32(r.DestinationPortRange.GetEnd())}, nil
	case *rbacv3.Permission_RequestedServerName:
		s, err := headermatch.CompileString(r.RequestedServerName, at+".requested_server_name")
		if err != nil {
			return nil, fmt.Errorf("%s: %v", Name, err)
		}
		return &serverName{s}, nil
	}
	return nil, fmt.Errorf("%s: %s: %T: not implemented by Legate (a network RBAC permission Legate implements reads addresses, ports or the SNI)", Name, at, p.GetRule())
}

func principal(p *rbacv3.Principal, at string) (matcher, error) {
	switch r := p.GetIdentifier().(type) {
	case *rbacv3.Principal_Any:
		return always{}, nil
	case *rbacv3.Principal_AndIds:
		return andOf(r.AndIds.GetIds(), at+".and_ids.ids", principal)
	case *rbacv3.Principal_OrIds:
		return orOf(r.OrIds.GetIds(), at+".or_ids.ids", principal)
	case *rbacv3.Principal_NotId:
		m, err := principal(r.NotId, at+".not_id")
		return not{m}, err
	case *rbacv3.Principal_SourceIp:
		return compileCIDR(r.SourceIp.GetAddressPrefix(), r.SourceIp.GetPrefixLen().GetValue(), at+".source_ip", direct)
	case *rbacv3.Principal_DirectRemoteIp:
		return compileCIDR(r.DirectRemoteIp.GetAddressPrefix(), r.DirectRemoteIp.GetPrefixLen().GetValue(), at+".direct_remote_ip", direct)
	case *rbacv3.Principal_RemoteIp:
		return compileCIDR(r.RemoteIp.GetAddressPrefix(), r.RemoteIp.GetPrefixLen().GetValue(), at+".remote_ip", remote)
	}
	return nil, fmt.Errorf("%s: %s: %T: not implemented by Legate (a network RBAC principal Legate implements reads addresses)", Name, at, p.GetIdentifier())
}

// rules are a filter's compiled configuration; immutable.
type rules struct {
	statPrefix string
	allowAll   bool
	action     rbacv3.RBAC_Action
	policies   []matcher
}

// build makes the filter of r, a *rules, with its counters.
func build(ctx *listener.ChainContext, config any) (listener.ConnFilter, error) {
	r, err := listener.ConfigOf[*rules](Name, config)
	if err != nil {
		return nil, err
	}
	return &filter{
		rules:   r,
		allowed: ctx.Stats.Counter(stats.PrefixJoin(r.statPrefix, "rbac.allowed")),
		denied:  ctx.Stats.Counter(stats.PrefixJoin(r.statPrefix, "rbac.denied")),
	}, nil
}

// filter is one configured filter.
type filter struct {
	*rules
	allowed, denied *stats.Counter
}

// OnConnection applies the rules: ALLOW admits a connection some policy matches, DENY one no
// policy matches, LOG admits every connection.
func (f *filter) OnConnection(c *listener.Conn) bool {
	ok := f.allowAll || f.decide(&facts{local: addrPort(c.LocalAddr()), remote: addrPort(c.RemoteAddr()), direct: addrPort(c.DirectRemoteAddr()), sni: c.ServerName()})
	if ok {
		f.allowed.Inc()
	} else {
		f.denied.Inc()
	}
	return ok
}

func (f *filter) decide(fc *facts) bool {
	matched := anyOf(f.policies).match(fc)
	switch f.action {
	case rbacv3.RBAC_ALLOW:
		return matched
	case rbacv3.RBAC_DENY:
		return !matched
	}
	return true // LOG
}
