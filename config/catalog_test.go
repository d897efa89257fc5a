package config

import (
	"slices"
	"testing"

	"github.com/legateproxy/legate/bootstrap"
	"github.com/legateproxy/legate/internal/registry"
)

// TestImplementedTypesInCatalog holds package config's decoders to the loader's extension
// catalog (bootstrap.Extensions): every typed_config type config builds is one the loader
// resolves, so that no implemented extension is refused at load as "does not implement this
// extension" (the TLS inspector once was).
func TestImplementedTypesInCatalog(t *testing.T) {
	catalog := bootstrap.SupportedTypeURLs()
	implemented := []string{tlsInspectorTypeURL, TCPProxyTypeURL, routerFilterTypeURL, googleRE2TypeURL,
		"type.googleapis.com/" + upstreamHTTPOptionsKey}
	for e := range registry.All(Limits{}.extensions(), lbPolicies) {
		implemented = append(implemented, e.TypeURL())
	}
	for _, u := range implemented {
		if !slices.Contains(catalog, u) {
			t.Errorf("config implements %s, which bootstrap.Extensions does not list", u)
		}
	}
}

// TestRegisterBuilds: config's registrations build a registry (a converter without the
// server's registry uses it) with every load balancing policy config decodes.
func TestRegisterBuilds(t *testing.T) {
	b := registry.NewBuilder()
	Register(b)
	r, err := b.Build()
	if err != nil {
		t.Fatalf("Build() = %v", err)
	}
	var got []string
	for e := range registry.All(r, lbPolicies) {
		got = append(got, e.Name)
	}
	want := []string{
		"envoy.load_balancing_policies.cluster_provided", "envoy.load_balancing_policies.least_request",
		"envoy.load_balancing_policies.maglev", "envoy.load_balancing_policies.random",
		"envoy.load_balancing_policies.ring_hash", "envoy.load_balancing_policies.round_robin",
		"envoy.load_balancing_policies.wrr_locality",
	}
	if !slices.Equal(got, want) {
		t.Errorf("load balancing policies = %v; want %v", got, want)
	}
}
