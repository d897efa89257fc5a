package listener

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/legateproxy/legate/internal/matcher/network"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener/httpinspector"
	"github.com/legateproxy/legate/listener/originaldst"
	"github.com/legateproxy/legate/listener/proxyprotocol"
	"github.com/legateproxy/legate/listener/tlsinspector"
)

// matchingRegistry is a registry holding the network matching inputs (and the listener
// filters).
func matchingRegistry(t testing.TB) *registry.Registry {
	return testExtensions(t)
}

// testExtensions is the registry the listener tests run with: the listener filters, the
// filter chain matcher's inputs and the tests' terminal filters.
func testExtensions(t testing.TB) *registry.Registry {
	t.Helper()
	b := registry.NewBuilder()
	network.Register(b)
	tlsinspector.Register(b)
	httpinspector.Register(b)
	proxyprotocol.Register(b)
	originaldst.Register(b)
	registerTestTerminals(b)
	r, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Matcher YAML pieces: an input by its message and an action naming a chain.
func in(msg string) string {
	return `{name: in, typed_config: {"@type": type.googleapis.com/envoy.extensions.matching.common_inputs.network.v3.` + msg + `}}`
}

func to(chain string) string {
	return `{action: {name: chain, typed_config: {"@type": type.googleapis.com/google.protobuf.StringValue, value: ` + chain + `}}}`
}

func chains(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString("- {name: " + n + ", filters: [{name: test.greet}]}\n")
	}
	return b.String()
}

// greetFrom dials addr from the loopback address from (any when ""), writes first and returns
// the name of the filter chain that greets it.
func greetFrom(t *testing.T, addr, from string, first []byte) string {
	t.Helper()
	d := net.Dialer{Timeout: wait}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write(first); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the greeting: %v", err)
	}
	return strings.TrimSpace(line)
}

// TestFilterChainMatcherOverSockets selects filter chains with filter_chain_matcher over real
// connections: crypto/tls ClientHellos for server name, ALPN and transport protocol, a
// second loopback address for the source IP range matcher, and, after an in-place update of
// the matcher, the destination port. It covers matcher_list (single, and), a nested
// prefix_match_map that falls back to a shorter prefix when a longer one's nested matcher does
// not match, fall-through to the next list entry, on_no_match at two levels, the IP range
// custom matcher, and an action naming no chain (the default chain serves).
func TestFilterChainMatcherOverSockets(t *testing.T) {
	g := newGreeter()
	matcherListener := `
name: matcher
address: {socket_address: {address: 127.0.0.1, port_value: 0}}
listener_filters: [{name: envoy.filters.listener.tls_inspector}]
filter_chains:
` + chains("api", "tls-h2", "www", "tls", "from-2", "port") + `
default_filter_chain: {name: default, filters: [{name: test.greet}]}
filter_chain_matcher:
`
	m := testManager(t, ManagerConfig{Services: g.services(), Extensions: matchingRegistry(t)})
	if _, err := m.AddOrUpdate(listenerFromYAML(t, matcherListener+`  matcher_list:
    matchers:
    - predicate: {single_predicate: {input: `+in("ServerNameInput")+`, value_match: {prefix: api.}}}
      on_match: `+to("api")+`
    - predicate:
        and_matcher:
          predicate:
          - {single_predicate: {input: `+in("TransportProtocolInput")+`, value_match: {exact: tls}}}
          - {single_predicate: {input: `+in("ApplicationProtocolInput")+`, value_match: {contains: "'h2'"}}}
      on_match: `+to("tls-h2")+`
    - predicate: {single_predicate: {input: `+in("TransportProtocolInput")+`, value_match: {exact: tls}}}
      on_match:
        matcher:
          matcher_tree:
            input: `+in("ServerNameInput")+`
            prefix_match_map:
              map:
                "www.": `+to("www")+`
                "www.example.":
                  matcher:
                    matcher_tree:
                      input: `+in("ApplicationProtocolInput")+`
                      exact_match_map: {map: {"'spdy/3'": `+to("api")+`}}
    - predicate: {single_predicate: {input: `+in("TransportProtocolInput")+`, value_match: {exact: tls}}}
      on_match: `+to("tls")+`
  on_no_match:
    matcher:
      matcher_tree:
        input: `+in("SourceIPInput")+`
        custom_match:
          name: ip
          typed_config:
            "@type": type.googleapis.com/xds.type.matcher.v3.IPMatcher
            range_matchers:
            - {ranges: [{address_prefix: 127.0.0.0, prefix_len: 8}], on_match: `+to("no-such-chain")+`}
            - {ranges: [{address_prefix: 127.0.0.2, prefix_len: 32}], on_match: `+to("from-2")+`}
`), "1"); err != nil {
		t.Fatal(err)
	}
	addr := addrOf(t, m, "matcher")
	tests := []struct {
		name, from string
		first      []byte
		want       string
	}{
		{"server name prefix", "", helloBytes(t, "api.example.com", "h2"), "api"},
		{"tls and alpn", "", helloBytes(t, "other.org", "http/1.1", "h2"), "tls-h2"},
		{"longest prefix's nested matcher fails: shorter prefix", "", helloBytes(t, "www.example.com", "http/1.1"), "www"},
		{"nested matcher fails: next list entry", "", helloBytes(t, "other.org", "http/1.1"), "tls"},
		{"longest source range", "127.0.0.2", []byte("hello\n"), "from-2"},
		{"action naming no chain: default chain", "127.0.0.1", []byte("hello\n"), "default"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := greetFrom(t, addr, tc.from, tc.first); got != tc.want {
				t.Errorf("filter chain = %q; want %q", got, tc.want)
			}
		})
	}

	// The matcher alone changes: the listener updates in place, keeping its socket.
	_, port, _ := net.SplitHostPort(addr)
	updated, err := m.AddOrUpdate(listenerFromYAML(t, matcherListener+`  matcher_tree:
    input: `+in("DestinationPortInput")+`
    exact_match_map: {map: {"`+port+`": `+to("port")+`}}
`), "2")
	if err != nil || !updated {
		t.Fatalf("AddOrUpdate = %v, %v; want an update", updated, err)
	}
	if got := addrOf(t, m, "matcher"); got != addr {
		t.Fatalf("address after the update = %s; want %s kept", got, addr)
	}
	if got := greetFrom(t, addr, "", []byte("hello\n")); got != "port" {
		t.Errorf("filter chain by destination port = %q; want port", got)
	}
}

// TestFilterChainMatcherErrors checks that a filter_chain_matcher Legate cannot run is refused
// when the listener is added, with the field path.
func TestFilterChainMatcherErrors(t *testing.T) {
	g := newGreeter()
	m := testManager(t, ManagerConfig{Services: g.services(), Extensions: matchingRegistry(t)})
	listener := func(matcher string) string {
		return `
name: bad
address: {socket_address: {address: 127.0.0.1, port_value: 0}}
filter_chains:
` + chains("a") + `
filter_chain_matcher:
` + matcher
	}
	tests := []struct{ name, matcher, want string }{
		{"unknown input", `  matcher_tree: {input: {name: x, typed_config: {"@type": type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput, header_name: x}}, exact_match_map: {map: {a: ` + to("a") + `}}}`,
			`filter_chain_matcher.matcher_tree.input.typed_config: type "type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput" (name "x"): not implemented by Legate as a envoy.matching.network.input`},
		{"unknown action", `  matcher_tree: {input: ` + in("ServerNameInput") + `, exact_match_map: {map: {a: {action: {name: r, typed_config: {"@type": type.googleapis.com/google.protobuf.UInt32Value, value: 1}}}}}}`,
			`filter_chain_matcher.matcher_tree.exact_match_map.map["a"].action.typed_config: type "type.googleapis.com/google.protobuf.UInt32Value" (name "r"): not implemented by Legate`},
		{"keep_matching", `  matcher_list: {matchers: [{predicate: {single_predicate: {input: ` + in("ServerNameInput") + `, value_match: {exact: a}}}, on_match: {keep_matching: true, action: {name: c, typed_config: {"@type": type.googleapis.com/google.protobuf.StringValue, value: a}}}}]}`,
			`filter_chain_matcher.matcher_list.matchers[0].on_match.keep_matching: set; not implemented by Legate`},
		{"unknown custom matcher", `  matcher_tree: {input: ` + in("SourceIPInput") + `, custom_match: {name: d, typed_config: {"@type": type.googleapis.com/xds.type.matcher.v3.ServerNameMatcher}}}`,
			`filter_chain_matcher.matcher_tree.custom_match.typed_config: type "type.googleapis.com/xds.type.matcher.v3.ServerNameMatcher" (name "d"): not implemented by Legate`},
		{"bad regex", `  matcher_list: {matchers: [{predicate: {single_predicate: {input: ` + in("ServerNameInput") + `, value_match: {safe_regex: {google_re2: {}, regex: "("}}}}, on_match: ` + to("a") + `}]}`,
			`filter_chain_matcher.matcher_list.matchers[0].predicate.single_predicate.value_match.safe_regex.regex = "(": invalid RE2`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.AddOrUpdate(listenerFromYAML(t, listener(tc.matcher)), "1")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("AddOrUpdate error = %v; want it to contain %q", err, tc.want)
			}
		})
	}
}
