package config

import (
	"slices"
	"testing"

	"github.com/legateproxy/legate/internal/registry"
)

// TestImplementedTypesRegistered holds package config's decoders to its registrations: every
// typed_config type config reads is one it registers, so that the loader, which takes the
// registry's types, never refuses an implemented extension as "does not implement this
// extension" (the TLS inspector once was).
func TestImplementedTypesRegistered(t *testing.T) {
	r := Limits{}.extensions()
	implemented := []string{TCPProxyTypeURL, routerFilterTypeURL,
		googleRE2TypeURL, "type.googleapis.com/" + upstreamHTTPOptionsKey}
	for _, u := range implemented {
		if _, ok := r.Find(u); !ok {
			t.Errorf("config implements %s, which it does not register", u)
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
