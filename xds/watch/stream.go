package watch

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// Response is one response for a resource type whose owner applies responses whole
// (Streams): CDS and LDS, whose state-of-the-world responses remove what they do not list,
// and EDS, whose responses carry many subscriptions' resources at once.
type Response struct {
	// Version is version_info (system_version_info in delta responses).
	Version string
	// Resources are the resources in the response.
	Resources []*anypb.Any
	// Names are, in a delta response, the name of each resource; nil in a state-of-the-world
	// one.
	Names []string
	// Removed are the names a delta response removes.
	Removed []string
	// Full is set for state-of-the-world responses: for a wildcard stream, the resources it
	// does not list are gone.
	Full bool
}

// Applier applies the responses of its streams. The client calls it on the goroutine of the
// transport that delivers them, one response at a time per transport, without its locks.
type Applier interface {
	// Apply applies r, delivered on s, and returns the reason to NACK it (the error_detail's
	// text), or nil to ACK it. What the owner accepted of a rejected response stays accepted.
	Apply(s Stream, r Response) error
	// Failed records a failure of s's transport (update_failure).
	Failed(s Stream)
}

// Stream is an owner's subscription to one resource type on one transport.
type Stream interface {
	// SetNames adds and removes subscribed resource names and wakes the transport.
	SetNames(add, remove []string)
}

// Streams is the xDS client's API for the types whose owners apply responses whole.
type Streams interface {
	// Stream subscribes a to the resources of type typeURL that the config source cs delivers
	// (whose self is refused, as in Watch): every resource when wildcard (CDS, LDS), else the
	// names the owner sets (EDS). Calls with the same applier for sources that share a
	// transport return the same Stream, so an owner can key its state by Stream. Subscribing
	// before the client runs delays the transport until it does. Errors name the field path
	// below cs.
	Stream(typeURL string, cs *corev3.ConfigSource, wildcard bool, a Applier) (Stream, error)
	// HasADS reports whether the bootstrap configures an ADS stream (ads_config).
	HasADS() bool
}
