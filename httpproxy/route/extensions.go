package route

import (
	"fmt"

	omitcanaryv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/omit_canary_hosts/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	previousprioritiesv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
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

// RetryPriorities is the kind of retry priority extensions: Compile applies a retry policy's
// retry_priority with the factory Options.Extensions has for it.
var RetryPriorities = registry.Kind[RetryPriority]{Category: registry.RetryPriority}

// RetryPriority sets on p how retries spread over the priority levels; config is a message of
// the registered type and path names it in errors.
type RetryPriority func(path string, config proto.Message, p *RetryPolicy) error

// PreviousPriorities is the retry priority that leaves attempted levels out of the priority
// load (RetryPolicy.PriorityUpdateFrequency).
const PreviousPriorities = "envoy.retry_priorities.previous_priorities"

// The retry host predicates' Envoy names.
const (
	PreviousHostsPredicate   = "envoy.retry_host_predicates.previous_hosts"
	OmitCanaryHostsPredicate = "envoy.retry_host_predicates.omit_canary_hosts"
)

// Register adds the retry host predicates routes compile (Policy.PreviousHosts and
// Policy.OmitCanaryHosts), the retry priority (Policy.PriorityUpdateFrequency) and the HTTP matching input virtual host matchers read
// (envoy.matching.inputs.request_headers).
func Register(b *registry.Builder) {
	registry.Add(b, RequestInputs, "envoy.matching.inputs.request_headers", &matcherv3.HttpRequestHeaderMatchInput{}, requestHeadersInput)
	registry.Add(b, RetryHostPredicates, OmitCanaryHostsPredicate, &omitcanaryv3.OmitCanaryHostsPredicate{},
		func(_ string, _ proto.Message, p *RetryPolicy) error { p.OmitCanaryHosts = true; return nil })
	registry.Add(b, RetryHostPredicates, PreviousHostsPredicate, &previoushostsv3.PreviousHostsPredicate{},
		func(_ string, _ proto.Message, p *RetryPolicy) error { p.PreviousHosts = true; return nil })
	registry.Add(b, RetryPriorities, PreviousPriorities, &previousprioritiesv3.PreviousPrioritiesConfig{}, previousPriorities)
}

// previousPriorities reads PreviousPrioritiesConfig, whose update_frequency Envoy requires to
// be above 0.
func previousPriorities(path string, config proto.Message, p *RetryPolicy) error {
	f := config.(*previousprioritiesv3.PreviousPrioritiesConfig).GetUpdateFrequency()
	if f <= 0 {
		return fmt.Errorf("%s.update_frequency = %d: must be greater than 0", path, f)
	}
	p.PriorityUpdateFrequency = uint32(f)
	return nil
}

// builtin is the registry of this package's predicates, for a Compile without Extensions.
func builtin() (*registry.Registry, error) {
	b := registry.NewBuilder()
	Register(b)
	return b.Build()
}
