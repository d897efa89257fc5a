package watch

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// Response is one response for a resource type whose owner applies responses whole
// (Streams): CDS and LDS, whose state-of-the-world responses remove what they do not list,
// EDS, whose responses carry many subscriptions' resources at once, and SRDS and VHDS,
// wildcard per transport.
type Response struct {
	// Version is version_info (system_version_info in delta responses).
	Version string
	// Resources are the resources in the response.
	Resources []*anypb.Any
	// Names are, in a delta response, the name of each resource; nil in a state-of-the-world
	// one.
	Names []string
	// Aliases are, in a delta response, the aliases of each resource (on-demand VHDS: the
	// names a request asked for that the resource answers); nil in a state-of-the-world one.
	Aliases [][]string
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

// Naming names the resources of one response, for an owner that decodes them one by one, and
// makes the checks every type applied whole shares: the name a delta response gives a
// resource is the resource's own, and no name comes twice in a response.
type Naming struct {
	kind string // "cluster", "listener": the word errors start with
	u    *Response
	seen map[string]bool
}

// NewNaming returns the Naming of u's resources, which are of kind.
func NewNaming(kind string, u *Response) *Naming {
	return &Naming{kind: kind, u: u, seen: make(map[string]bool, len(u.Resources))}
}

// Name returns the name of u's i-th resource: decoded, its own name ("" when it did not
// decode), else the name the delta response gave it, else fallback's reading of the raw
// resource. The error is err, the decode's, when set; else a name differing from the
// response's, or one the response listed before.
func (n *Naming) Name(i int, decoded string, fallback func(*anypb.Any) string, err error) (string, error) {
	name := decoded
	switch {
	case name != "":
	case n.u.Names != nil:
		name = n.u.Names[i]
	default:
		name = fallback(n.u.Resources[i])
	}
	if err == nil && n.u.Names != nil && n.u.Names[i] != name {
		err = fmt.Errorf("%s %q: resource name %q differs from the %s's name", n.kind, name, n.u.Names[i], n.kind)
	}
	if err == nil && n.seen[name] {
		err = fmt.Errorf("%s %q: listed more than once in the response; %s names must be unique", n.kind, name, n.kind)
	}
	if name != "" {
		n.seen[name] = true
	}
	return name, err
}

// Seen reports whether the response listed a resource of that name, for a state-of-the-world
// response's removals.
func (n *Naming) Seen(name string) bool { return n.seen[name] }
