// Package watch is the contract between Legate's xDS client and the owners of the resources
// it delivers: an owner describes its resource type (Type: type URL, decoder, stats and init
// target names), and watches resources of that type by name through any Client (xds.Client
// implements it). The client keeps the transports, ACKs and NACKs, and the subscriptions'
// stats; the owner keeps what a resource means. The package sits below every owner (runtime,
// TLS, the route table, the cluster and listener managers), so that they depend on the
// contract, not on the client; the server hands them the client.
//
// The contract, in full:
//   - One subscription per (config source, name) is shared by every watcher of it. The
//     decoder's error rejects a resource for all of them: the response is NACKed with the
//     error's text, update_rejected counts it, and the last accepted value keeps serving.
//   - A watcher that is a Checker vets each new value before any watcher receives it (ECDS:
//     a filter's type_urls and factory). Every Accept runs first, then every Build, in the
//     order the watches were made, without locks; one refusal rejects the value for every
//     watcher, as a decoder's error does, and the Builds that accepted it are discarded.
//     A value is checked once: unchanged values are not checked again, and a watcher that
//     joins later checks the current value itself.
//   - A Type that is Observed has stats of its own on each subscription (ECDS's
//     config_reload and config_fail, counted by the client through its Observer; the owner
//     counts what only it sees, such as config_conflict, through Subscription.Observer).
//   - A subscription's stats and init target are named by the Type of the watch that makes
//     it (RDS's carry the first connection manager's stat_prefix); the decoder is the type's.
//   - A type whose owner applies responses whole (CDS, LDS, EDS, SRDS, VHDS) is not watched
//     by name but streamed (Streams.Stream): the owner's Applier gets each response, and its
//     error is the NACK.
//   - The client keeps each watched subscription's last accepted resource and rejection
//     (States), which the owner's config dump shows.
//
// It also holds the resource type URLs and the decoding steps every type shares (type URL
// check, unmarshal, typed_struct opening, protoc-gen-validate rules), so that an owner's
// decoder refuses a resource with the same words whichever type it is.
package watch

import (
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// Type is one resource type watched by name. Its owner implements it; the client calls its
// methods from its transport goroutines, without locks, so they must not block. Watches of
// one type URL share the decoder of the first watch's Type; StatPrefix, InitTarget and
// Observe are asked of the Type given to the watch that makes a subscription, so that its
// stats may carry that watcher's name (RDS: the first connection manager's stat_prefix).
type Type interface {
	// TypeURL is the resource's type URL (RuntimeType, ...).
	TypeURL() string
	// Short names the type in logs ("RTDS").
	Short() string
	// Decode validates a resource and returns its name and the value its watchers receive.
	// An error rejects the resource: the response is NACKed with the error's text while the
	// last accepted value keeps serving. The name is returned whenever the resource has one,
	// even with an error, so that the rejection is recorded on its subscription.
	Decode(a *anypb.Any) (name string, val any, err error)
	// StatPrefix is the prefix of the stats of the subscription to the resource called name
	// (update_attempt, update_success, ...).
	StatPrefix(name string) string
	// InitTarget names the init target of a subscription made before the client runs, which
	// the server's initialization waits for; "" registers none.
	InitTarget(name string) string
}

// Watcher receives one watched resource.
type Watcher interface {
	// Update receives the resource's value after every accepted change, and nil when the
	// resource is removed or its first fetch ends without one (timed out or rejected). It is
	// called without any of the client's locks held, on a transport or timer goroutine.
	Update(val any)
}

// Checker is a Watcher whose watch vets each new value of its resource before any watcher
// receives it: a value one Checker refuses is rejected for every watcher of the resource.
type Checker interface {
	Watcher
	// Check is the watch's check; the client reads it once, when the watch is made.
	Check() Check
}

// Check is one watcher's check of new values. Its functions run on a transport goroutine,
// without the client's locks, and must not block; either may be nil (accepts).
type Check struct {
	// Accept runs first, for every watcher of the value: a cheap test that keeps any Build
	// from running on a value some watcher refuses (ECDS: config_discovery.type_urls).
	Accept func(val any) error
	// Build runs once every Accept passed: it may build what the value will serve and keep
	// it for the Update that follows (ECDS: the filter's instance), returning discard (nil:
	// nothing) to release that should the value be refused after all by a later Build, or
	// not delivered.
	Build func(val any) (discard func(), err error)
	// StandIn marks a Build that runs only while no other watcher of the resource has one:
	// a check made for watchers not built yet (a warming listener's, for its filters).
	StandIn bool
}

// Observed is a Type whose subscriptions have stats of their own beside the client's.
type Observed interface {
	Type
	// Observe is called when the subscription to name is made, with the client's lock held;
	// the Observer receives that subscription's outcomes until Done.
	Observe(name string) Observer
}

// Observer receives one subscription's outcomes. The client calls it with its lock held: it
// must only count.
type Observer interface {
	// Changed records an accepted new value.
	Changed()
	// Failed records a rejected resource or an initial fetch that timed out.
	Failed()
	// Done is called once, when the subscription ends.
	Done()
}

// Func is a Watcher made of a function.
type Func func(val any)

// Update calls f.
func (f Func) Update(val any) { f(val) }

// Subscription is one watcher's hold on a watched resource.
type Subscription interface {
	// Ready reports whether the resource arrived or its first fetch ended without it.
	Ready() bool
	// Value is the resource's current value, nil until one arrives.
	Value() any
	// InitTarget is the init target the subscription registers (Type.InitTarget), "" for none.
	InitTarget() string
	// Observer is the subscription's Observer (Observed types), nil for other types.
	Observer() Observer
	// Cancel ends the watch; the last watcher's cancel unsubscribes. Cancelling twice is
	// harmless.
	Cancel()
}

// Client is the xDS client's watch API.
type Client interface {
	// Watch subscribes w to the resource of type t called name, delivered by the config
	// source cs (whose self is refused: a watch has no parent resource). The subscription is
	// shared by every watcher of the same (source, name). Errors name the field path below
	// cs.
	Watch(t Type, cs *corev3.ConfigSource, name string, w Watcher) (Subscription, error)
}

// State is what the config dumps show of one subscription of a watched type.
type State struct {
	Name    string
	Version string
	// Resource is the last accepted resource, nil until one arrives or after its removal;
	// Updated is when it was accepted.
	Resource *anypb.Any
	Updated  time.Time
	// ErrorState is the last rejection since the last accepted resource (FailureState).
	ErrorState *adminv3.UpdateFailureState
}

// States is implemented by a client that keeps the subscriptions of watched types: States
// returns those of typeURL, by name then transport, for the owner's config dump (RDS's
// dynamic_route_configs).
type States interface {
	States(typeURL string) []State
}
