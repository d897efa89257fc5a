package listener

import (
	"bufio"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// matchListener has a filter chain per criterion; each chain is named after what it matches.
const matchListener = `
name: match
address: {socket_address: {address: 127.0.0.1, port_value: 0}}
listener_filters: [{name: envoy.filters.listener.tls_inspector}]
filter_chains:
- {name: port, filter_chain_match: {destination_port: 8443}, filters: [{name: test.greet}]}
- {name: dst-ip, filter_chain_match: {prefix_ranges: [{address_prefix: 192.168.0.0, prefix_len: 16}]}, filters: [{name: test.greet}]}
- {name: exact, filter_chain_match: {server_names: [www.example.com]}, filters: [{name: test.greet}]}
- {name: wild, filter_chain_match: {server_names: ["*.example.com"]}, filters: [{name: test.greet}]}
- {name: wild-com, filter_chain_match: {server_names: ["*.com"]}, filters: [{name: test.greet}]}
- {name: tls-h2, filter_chain_match: {transport_protocol: tls, application_protocols: [h2]}, filters: [{name: test.greet}]}
- {name: tls-http11, filter_chain_match: {transport_protocol: tls, application_protocols: [http/1.1]}, filters: [{name: test.greet}]}
- {name: tls, filter_chain_match: {transport_protocol: tls}, filters: [{name: test.greet}]}
- {name: src, filter_chain_match: {source_prefix_ranges: [{address_prefix: 10.0.0.0, prefix_len: 8}]}, filters: [{name: test.greet}]}
- {name: src-narrow, filter_chain_match: {source_prefix_ranges: [{address_prefix: 10.1.0.0, prefix_len: 16}]}, filters: [{name: test.greet}]}
- {name: src-port, filter_chain_match: {source_ports: [5555]}, filters: [{name: test.greet}]}
- {name: src-local, filter_chain_match: {source_type: SAME_IP_OR_LOOPBACK, source_prefix_ranges: [{address_prefix: 10.9.0.0, prefix_len: 16}]}, filters: [{name: test.greet}]}
default_filter_chain: {name: default, filters: [{name: test.greet}]}
`

func TestSelectChain(t *testing.T) {
	l := listenerFromYAML(t, matchListener)
	var chains []*chain
	for _, fc := range l.FilterChains {
		chains = append(chains, &chain{cfg: fc})
	}
	def := &chain{cfg: l.DefaultFilterChain}
	ap := netip.MustParseAddrPort
	local := ap("127.0.0.1:10000")
	peer := ap("127.0.0.1:40000")
	tests := []struct {
		name  string
		facts connFacts
		want  string // "" for no chain
		noDef bool
	}{
		{"raw from loopback falls to the default chain", connFacts{dst: local, src: peer}, "default", false},
		{"no match without a default chain", connFacts{dst: local, src: peer}, "", true},
		{"destination port", connFacts{dst: ap("127.0.0.1:8443"), src: peer}, "port", false},
		{"destination port wins over a better later criterion", connFacts{dst: ap("127.0.0.1:8443"), src: peer, sni: "www.example.com", transport: "tls"}, "port", false},
		{"destination prefix", connFacts{dst: ap("192.168.1.1:10000"), src: peer}, "dst-ip", false},
		{"exact server name", connFacts{dst: local, src: peer, sni: "www.example.com", transport: "tls"}, "exact", false},
		{"wildcard at any depth", connFacts{dst: local, src: peer, sni: "a.b.example.com", transport: "tls"}, "wild", false},
		{"longest wildcard suffix", connFacts{dst: local, src: peer, sni: "api.example.com", transport: "tls"}, "wild", false},
		{"shorter wildcard", connFacts{dst: local, src: peer, sni: "foo.com", transport: "tls"}, "wild-com", false},
		{"wildcard needs a label before the suffix", connFacts{dst: local, src: peer, sni: "example.com", transport: "tls"}, "wild-com", false},
		{"unknown name falls to chains without server_names", connFacts{dst: local, src: peer, sni: "other.org", transport: "tls"}, "tls", false},
		{"alpn", connFacts{dst: local, src: peer, sni: "other.org", transport: "tls", alpn: []string{"h2"}}, "tls-h2", false},
		{"alpn follows the client's order", connFacts{dst: local, src: peer, transport: "tls", alpn: []string{"http/1.1", "h2"}}, "tls-http11", false},
		{"alpn not configured", connFacts{dst: local, src: peer, transport: "tls", alpn: []string{"spdy/3"}}, "tls", false},
		{"source prefix", connFacts{dst: local, src: ap("10.2.0.1:40000")}, "src", false},
		{"longest source prefix", connFacts{dst: local, src: ap("10.1.2.3:40000")}, "src-narrow", false},
		{"source port", connFacts{dst: local, src: ap("172.16.0.1:5555")}, "src-port", false},
		{"source type before source prefix: loopback goes the local-only way", connFacts{dst: local, src: ap("127.0.0.1:5555")}, "default", false},
		{"external source skips the local-only chain", connFacts{dst: local, src: ap("10.9.0.1:40000")}, "src", false},
		{"source type same ip", connFacts{dst: ap("10.9.0.1:10000"), src: ap("10.9.0.1:40000")}, "src-local", false},
		{"pipe: IP criteria never match", connFacts{}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.facts
			f.ip = f.dst.IsValid()
			if f.transport == "" {
				f.transport = "raw_buffer"
			}
			d := def
			if tc.noDef {
				d = nil
			}
			got := ""
			if c := selectChain(chains, d, &f); c != nil {
				got = c.cfg.Name
			}
			if got != tc.want {
				t.Errorf("selectChain(%+v) = %q; want %q", f, got, tc.want)
			}
		})
	}
}

// TestFilterChainMatchOverSockets drives real connections through the TLS inspector: crypto/tls
// ClientHellos for SNI, ALPN and transport protocol, a second loopback source address for
// source ranges, and plain bytes for the default chain.
func TestFilterChainMatchOverSockets(t *testing.T) {
	g := newGreeter()
	cfg := ManagerConfig{Services: g.services()}
	l := listenerFromYAML(t, `
name: match
address: {socket_address: {address: 127.0.0.1, port_value: 0}}
listener_filters: [{name: envoy.filters.listener.tls_inspector}]
filter_chains:
- {name: exact, filter_chain_match: {server_names: [www.example.com]}, filters: [{name: test.greet}]}
- {name: wild, filter_chain_match: {server_names: ["*.example.com"]}, filters: [{name: test.greet}]}
- {name: tls-h2, filter_chain_match: {transport_protocol: tls, application_protocols: [h2]}, filters: [{name: test.greet}]}
- {name: tls, filter_chain_match: {transport_protocol: tls}, filters: [{name: test.greet}]}
- {name: from-2, filter_chain_match: {source_prefix_ranges: [{address_prefix: 127.0.0.2, prefix_len: 32}]}, filters: [{name: test.greet}]}
default_filter_chain: {name: default, filters: [{name: test.greet}]}
`)
	noDefault := listenerFromYAML(t, `
name: strict
address: {socket_address: {address: 127.0.0.1, port_value: 0}}
listener_filters: [{name: envoy.filters.listener.tls_inspector}]
filter_chains:
- {name: only-tls, filter_chain_match: {transport_protocol: tls}, filters: [{name: test.greet}]}
`)
	m := testManager(t, cfg, l, noDefault)
	addr := addrOf(t, m, "match")
	tests := []struct {
		name  string
		first []byte
		from  string
		want  string
	}{
		{"sni exact", helloBytes(t, "www.example.com"), "", "exact"},
		{"sni wildcard", helloBytes(t, "img.example.com", "http/1.1"), "", "wild"},
		{"alpn h2", helloBytes(t, "other.org", "h2", "http/1.1"), "", "tls-h2"},
		{"tls without sni", helloBytes(t, "", "http/1.1"), "", "tls"},
		{"raw bytes", []byte("GET / HTTP/1.1\r\n\r\n"), "", "default"},
		{"source range", []byte("hello\n"), "127.0.0.2", "from-2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := net.Dialer{Timeout: wait}
			if tc.from != "" {
				d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(tc.from)}
			}
			c, err := d.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(wait))
			c.Write(tc.first)
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				t.Fatalf("reading the greeting: %v", err)
			}
			if got := strings.TrimSpace(line); got != tc.want {
				t.Errorf("filter chain = %q; want %q", got, tc.want)
			}
		})
	}
	t.Run("no match closes and counts", func(t *testing.T) {
		_, c, _ := greet(t, addrOf(t, m, "strict"), []byte("plain\n"))
		if c != nil {
			c.Close()
			t.Fatalf("a raw connection was served by a tls-only listener")
		}
		wantStat(t, m.cfg.Stats, "listener.127.0.0.1_0.no_filter_chain_match", 1)
	})
}

func BenchmarkSelectChain(b *testing.B) {
	l := listenerFromYAML(b, matchListener)
	var chains []*chain
	for _, fc := range l.FilterChains {
		chains = append(chains, &chain{cfg: fc})
	}
	f := connFacts{ip: true, dst: netip.MustParseAddrPort("127.0.0.1:10000"), src: netip.MustParseAddrPort("127.0.0.1:40000"),
		sni: "api.example.com", transport: "tls", alpn: []string{"h2", "http/1.1"}}
	b.ReportAllocs()
	for b.Loop() {
		if selectChain(chains, nil, &f) == nil {
			b.Fatal("no chain")
		}
	}
}
