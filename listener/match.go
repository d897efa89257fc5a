package listener

import (
	"net"
	"net/netip"
	"strings"

	"github.com/legateproxy/legate/config"
)

// connFacts is what filter chain selection knows about a new connection.
type connFacts struct {
	dst, src  netip.AddrPort // valid only when ip
	directSrc netip.AddrPort // the socket's peer; src is the PROXY header's source when one came
	ip        bool           // false for pipe connections
	sni       string
	alpn      []string
	transport string // "tls" or "raw_buffer"
}

// clientHello is what the TLS inspector (or, for plain text, the HTTP inspector) learnt.
type clientHello struct {
	serverName string   // SNI, lower-cased; "" without
	alpn       []string // application protocols, in client order
}

func factsOf(local, remote, direct net.Addr, hello clientHello, tls bool) connFacts {
	f := connFacts{sni: hello.serverName, alpn: hello.alpn, transport: "raw_buffer"}
	if tls {
		f.transport = "tls"
	}
	l, ok1 := local.(*net.TCPAddr)
	r, ok2 := remote.(*net.TCPAddr)
	if ok1 && ok2 {
		f.ip = true
		f.dst = unmapped(l.AddrPort())
		f.src = unmapped(r.AddrPort())
		f.directSrc = f.src
		if d, ok := direct.(*net.TCPAddr); ok {
			f.directSrc = unmapped(d.AddrPort())
		}
	}
	return f
}

func unmapped(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// The selection steps, in Envoy's order (FilterChainMatch's documentation).
const (
	stepDestinationPort = iota
	stepDestinationIP
	stepServerName
	stepTransportProtocol
	stepApplicationProtocols
	stepDirectSourceIP
	stepSourceType
	stepSourceIP
	stepSourcePort
	numSteps
)

// selectChain picks the filter chain for f among chains: at each step only the chains that
// match the connection most specifically stay (an empty criterion matches with the lowest
// specificity); when none matches at some step the result is def (which may be nil). This is
// Envoy's matching tree read as pruning: there is no backtracking to less specific chains.
func selectChain(chains []*chain, def *chain, f *connFacts) *chain {
	var buf [16]*chain
	cand := append(buf[:0], chains...)
	for step := 0; step < numSteps && len(cand) > 0; step++ {
		best := -1
		for _, c := range cand {
			if s := score(step, &c.cfg.Match, f); s > best {
				best = s
			}
		}
		if best < 0 {
			return def
		}
		kept := cand[:0]
		for _, c := range cand {
			if score(step, &c.cfg.Match, f) == best {
				kept = append(kept, c)
			}
		}
		cand = kept
	}
	if len(cand) == 0 {
		return def
	}
	return cand[0] // config validation leaves at most one; the first configured wins otherwise
}

// score says how specifically m matches f at one step: -1 no match, 0 matches through an empty
// criterion, higher is more specific.
func score(step int, m *config.FilterChainMatch, f *connFacts) int {
	switch step {
	case stepDestinationPort:
		switch {
		case m.DestinationPort == 0:
			return 0
		case f.ip && uint32(f.dst.Port()) == m.DestinationPort:
			return 1
		}
		return -1
	case stepDestinationIP:
		return prefixScore(m.PrefixRanges, f.dst.Addr(), f.ip)
	case stepServerName:
		return serverNameScore(m.ServerNames, f.sni)
	case stepTransportProtocol:
		switch m.TransportProtocol {
		case "":
			return 0
		case f.transport:
			return 1
		}
		return -1
	case stepApplicationProtocols:
		return alpnScore(m.ApplicationProtocols, f.alpn)
	case stepDirectSourceIP:
		return prefixScore(m.DirectSourcePrefixRanges, f.directSrc.Addr(), f.ip)
	case stepSourceType:
		if m.SourceType == config.SourceAny {
			return 0
		}
		local := !f.ip || f.src.Addr().IsLoopback() || f.src.Addr() == f.dst.Addr()
		if local == (m.SourceType == config.SourceSameIPOrLoopback) {
			return 1
		}
		return -1
	case stepSourceIP:
		return prefixScore(m.SourcePrefixRanges, f.src.Addr(), f.ip)
	case stepSourcePort:
		if len(m.SourcePorts) == 0 {
			return 0
		}
		for _, p := range m.SourcePorts {
			if f.ip && uint32(f.src.Port()) == p {
				return 1
			}
		}
		return -1
	}
	return -1
}

// prefixScore is 1 + the longest matching prefix length (longest prefix match).
func prefixScore(ranges []netip.Prefix, ip netip.Addr, isIP bool) int {
	if len(ranges) == 0 {
		return 0
	}
	best := -1
	if !isIP {
		return best
	}
	for _, p := range ranges {
		if p.Contains(ip) && p.Bits()+1 > best {
			best = p.Bits() + 1
		}
	}
	return best
}

// serverNameScore ranks an exact name above every wildcard and longer wildcard suffixes above
// shorter ones: for www.example.com, www.example.com, then *.example.com, then *.com.
func serverNameScore(names []string, sni string) int {
	if len(names) == 0 {
		return 0
	}
	best := -1
	if sni == "" {
		return best
	}
	for _, n := range names {
		switch {
		case n == sni:
			return len(sni) + 2
		case strings.HasPrefix(n, "*.") && len(sni) > len(n)-1 && strings.HasSuffix(sni, n[1:]):
			if s := len(n); s > best {
				best = s
			}
		}
	}
	return best
}

// alpnScore prefers the protocol the client listed first.
func alpnScore(protos, offered []string) int {
	if len(protos) == 0 {
		return 0
	}
	for i, o := range offered {
		for _, p := range protos {
			if p == o {
				return len(offered) - i
			}
		}
	}
	return -1
}
