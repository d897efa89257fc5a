package extensions_test

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/extensions"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
)

// TestEveryExtensionLoads: New builds, and the loader resolves the typed_config type of every
// extension it lists (the loader refuses a type it cannot resolve as an extension Legate does
// not implement).
func TestEveryExtensionLoads(t *testing.T) {
	r, err := extensions.New()
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if len(r.Entries()) == 0 {
		t.Fatal("New() registered nothing")
	}
	for _, e := range r.Entries() {
		if _, err := protoregistry.GlobalTypes.FindMessageByURL(e.TypeURL()); err != nil {
			t.Errorf("%s %s: FindMessageByURL(%q) = %v; want the loader to resolve it", e.Category, e.Name, e.TypeURL(), err)
		}
	}
}

// TestNetworkFiltersHaveFactories: every network filter the loader accepts (every network
// filter entry of the registry, whose typed_config types the loader resolves) is built
// through the registry, as exactly one of a non-terminal or a terminal filter; the
// connection manager and the TCP proxy included, whose server-built dependencies reach them
// as the listener manager's Services.
func TestNetworkFiltersHaveFactories(t *testing.T) {
	r, err := extensions.New()
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	n := 0
	for _, e := range r.Entries() {
		if e.Category != registry.NetworkFilter {
			continue
		}
		_, _, conn := registry.Lookup(r, listener.ConnFilters, e.Name, e.TypeURL())
		_, _, terminal := registry.Lookup(r, listener.TerminalFilters, e.Name, e.TypeURL())
		if conn == terminal {
			t.Errorf("%s: non-terminal factory %v, terminal factory %v; want exactly one", e.Name, conn, terminal)
		}
		n++
	}
	if n < 10 {
		t.Errorf("%d network filters built through the registry; want at least 10 (http_connection_manager, tcp_proxy, echo, direct_response, connection_limit, local_ratelimit, sni_cluster, rbac, ratelimit, ext_authz)", n)
	}
	for _, name := range []string{config.HTTPConnectionManagerFilter, config.TCPProxyFilter} {
		if _, _, ok := registry.Lookup(r, config.NetworkFilterConfigs, name, ""); !ok {
			t.Errorf("%s: no config.NetworkFilterConfigs parser; its typed_config would reach the factory undecoded", name)
		}
	}
}

// TestUDPListenerFiltersHaveFactories checks that every UDP listener filter the loader accepts
// has a parser on the configuration path and a factory the listener manager builds it with.
func TestUDPListenerFiltersHaveFactories(t *testing.T) {
	r, err := extensions.New()
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	n := 0
	for _, e := range r.Entries() {
		if e.Category != registry.UDPListenerFilter {
			continue
		}
		if _, _, ok := registry.Lookup(r, config.UDPListenerFilterConfigs, e.Name, e.TypeURL()); !ok {
			t.Errorf("%s: no config.UDPListenerFilterConfigs parser", e.Name)
		}
		if _, _, ok := registry.Lookup(r, listener.UDPFilters, e.Name, e.TypeURL()); !ok {
			t.Errorf("%s: no listener.UDPFilters factory", e.Name)
		}
		n++
	}
	if n != 1 {
		t.Errorf("%d UDP listener filters; want 1 (%s)", n, config.UDPProxyFilter)
	}
}
