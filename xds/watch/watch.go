// Package watch is the contract between Legate's xDS client and the owners of the resources
// it delivers: an owner describes its resource type (Type: type URL, decoder, stats and init
// target names), and watches resources of that type by name through any Client (xds.Client
// implements it). The client keeps the transports, ACKs and NACKs, and the subscriptions'
// stats; the owner keeps what a resource means. The package sits below every owner (runtime,
// TLS, the route table, the cluster and listener managers), so that they depend on the
// contract, not on the client; the server hands them the client.
//
// It also holds the resource type URLs and the decoding steps every type shares (type URL
// check, unmarshal, typed_struct opening, protoc-gen-validate rules), so that an owner's
// decoder refuses a resource with the same words whichever type it is.
package watch

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// Type is one resource type watched by name. Its owner implements it; the client calls its
// methods from its transport goroutines, without locks, so they must not block.
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
