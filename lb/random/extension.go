package random

import (
	randomv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/random/v3"

	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/lb"
)

// Register registers the balancer under envoy.load_balancing_policies.random, the extension
// package config converts the policy's configuration as; the cluster manager builds it.
func Register(b *registry.Builder) {
	registry.Add(b, lb.Balancers, "envoy.load_balancing_policies.random", &randomv3.Random{}, Factory)
}
