package route

import (
	omitcanaryv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/omit_canary_hosts/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"

	"github.com/legateproxy/legate/internal/registry"
)

// Register declares the retry host predicates routes compile (Policy.PreviousHosts and
// Policy.OmitCanaryHosts).
func Register(b *registry.Builder) {
	b.Declare(registry.RetryHostPredicate, "envoy.retry_host_predicates.omit_canary_hosts", &omitcanaryv3.OmitCanaryHostsPredicate{})
	b.Declare(registry.RetryHostPredicate, "envoy.retry_host_predicates.previous_hosts", &previoushostsv3.PreviousHostsPredicate{})
}
