package route

import (
	omitcanaryv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/omit_canary_hosts/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/registry"
)

// RetryHostPredicates is the kind of retry host predicate extensions: Compile applies each
// retry_host_predicate of a retry policy with the factory Options.Extensions has for it.
var RetryHostPredicates = registry.Kind[RetryHostPredicate]{Category: registry.RetryHostPredicate}

// RetryHostPredicate sets on p what the predicate asks of a retry's host selection; config is
// a message of the registered type and path names it in errors.
type RetryHostPredicate func(path string, config proto.Message, p *RetryPolicy) error

// The retry host predicates' Envoy names.
const (
	PreviousHostsPredicate   = "envoy.retry_host_predicates.previous_hosts"
	OmitCanaryHostsPredicate = "envoy.retry_host_predicates.omit_canary_hosts"
)

// Register adds the retry host predicates routes compile (Policy.PreviousHosts and
// Policy.OmitCanaryHosts) and the HTTP matching input virtual host matchers read
// (envoy.matching.inputs.request_headers).
func Register(b *registry.Builder) {
	registry.Add(b, RequestInputs, "envoy.matching.inputs.request_headers", &matcherv3.HttpRequestHeaderMatchInput{}, requestHeadersInput)
	registry.Add(b, RetryHostPredicates, OmitCanaryHostsPredicate, &omitcanaryv3.OmitCanaryHostsPredicate{},
		func(_ string, _ proto.Message, p *RetryPolicy) error { p.OmitCanaryHosts = true; return nil })
	registry.Add(b, RetryHostPredicates, PreviousHostsPredicate, &previoushostsv3.PreviousHostsPredicate{},
		func(_ string, _ proto.Message, p *RetryPolicy) error { p.PreviousHosts = true; return nil })
}

// builtin is the registry of this package's predicates, for a Compile without Extensions.
func builtin() (*registry.Registry, error) {
	b := registry.NewBuilder()
	Register(b)
	return b.Build()
}
