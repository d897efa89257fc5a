package filterstate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Object is one filter state value.
type Object interface {
	// Plain returns the object's plain serialization (Envoy's serializeAsString, which
	// %FILTER_STATE(KEY:PLAIN)% prints); ok is false when it has none.
	Plain() (s string, ok bool)
	// Typed returns the object's typed serialization as a JSON value (Envoy's
	// serializeAsProto rendered as JSON, which %FILTER_STATE(KEY)% prints); nil when it has
	// none.
	Typed() *structpb.Value
}

// Fielder is an Object with named fields (Envoy's getField), read by
// %FILTER_STATE(KEY:FIELD:NAME)%.
type Fielder interface {
	Field(name string) (string, bool)
}

// Protoer is an Object whose typed form is a message of its own (Envoy's serializeAsProto),
// which gRPC access logs pack (filter_state_objects_to_log); others pack Typed's value.
type Protoer interface {
	Proto() proto.Message
}

// Sharing says whether an object reaches the upstream connections made for its connection
// (Envoy's StreamSharingMayImpactPooling).
type Sharing uint8

const (
	// NotShared: the object stays with its connection or stream (Envoy's None).
	NotShared Sharing = iota
	// SharedWithUpstream: every upstream connection made for the connection gets it, and
	// keeps sharing it onwards (SharedWithUpstreamConnection).
	SharedWithUpstream
	// SharedWithUpstreamOnce: the upstream connection gets it, not shared any further
	// (SharedWithUpstreamConnectionOnce).
	SharedWithUpstreamOnce
)

// Options are how an object is set.
type Options struct {
	// ReadOnly refuses a later Set of the same name (Envoy's StateType::ReadOnly).
	ReadOnly bool
	Sharing  Sharing
}

// ErrReadOnly is returned by Set for a name whose object is read-only.
var ErrReadOnly = errors.New("filter state object is read only")

// State is the filter state of a connection or of a stream (whose parent is its
// connection's).
type State struct {
	parent *State
	mu     sync.RWMutex
	// entries are the objects in the order first set; guarded by mu.
	entries []Entry
	// held is set (under mu) when entries has an object, so that Reset of a state nothing
	// was set in, the common case of a reused stream, takes no lock.
	held atomic.Bool
}

// Entry is one named object with how it was set.
type Entry struct {
	Name   string
	Object Object
	Options
}

// NewChild returns an empty state whose reads fall through to parent's (a stream's state,
// whose parent is its connection's). parent may be nil.
func NewChild(parent *State) *State { return &State{parent: parent} }

// Reset empties s, keeping its storage, and makes parent its parent: a stream reused for
// another request (the connection manager's streams are pooled) starts with no objects.
func (s *State) Reset(parent *State) {
	// Reads follow parent without the lock, so it is written as the owner's alone either way.
	s.parent = parent
	if !s.held.Load() {
		return
	}
	// No defer: nothing here can panic, and this runs twice for every request.
	s.mu.Lock()
	clear(s.entries)
	s.entries = s.entries[:0]
	s.held.Store(false)
	s.mu.Unlock()
}

// Set puts obj under name, replacing an object there unless it is read-only. An object of
// the parent's of the same name is hidden, not changed.
func (s *State) Set(name string, obj Object, o Options) error {
	if obj == nil {
		return fmt.Errorf("filter state %q: nil object", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.entries {
		if s.entries[i].Name != name {
			continue
		}
		if s.entries[i].ReadOnly {
			return fmt.Errorf("filter state %q: %w", name, ErrReadOnly)
		}
		s.entries[i] = Entry{Name: name, Object: obj, Options: o}
		return nil
	}
	s.entries = append(s.entries, Entry{Name: name, Object: obj, Options: o})
	s.held.Store(true)
	return nil
}

// Get returns the object under name, the stream's before its connection's; nil for none.
func (s *State) Get(name string) Object {
	for ; s != nil; s = s.parent {
		s.mu.RLock()
		for i := range s.entries {
			if s.entries[i].Name == name {
				obj := s.entries[i].Object
				s.mu.RUnlock()
				return obj
			}
		}
		s.mu.RUnlock()
	}
	return nil
}

// Empty reports whether the state, and its parents, hold no object.
func (s *State) Empty() bool {
	for ; s != nil; s = s.parent {
		s.mu.RLock()
		n := len(s.entries)
		s.mu.RUnlock()
		if n > 0 {
			return false
		}
	}
	return true
}

// Adopt sets every object of from in s, as it was set there. from must not be used by
// anyone else (a listener filter's state, handed to the connection it built); nil adds
// nothing.
func (s *State) Adopt(from *State) {
	if from == nil {
		return
	}
	for _, e := range from.entries {
		// A name from holds once; s is new, so nothing is read-only yet.
		_ = s.Set(e.Name, e.Object, e.Options)
	}
}

// Shared returns the objects shared with the upstream connection, the stream's before its
// connection's (a name once); nil for none.
func (s *State) Shared() []Entry {
	var out []Entry
	for ; s != nil; s = s.parent {
		s.mu.RLock()
		for _, e := range s.entries {
			if e.Sharing != NotShared && !has(out, e.Name) {
				out = append(out, e)
			}
		}
		s.mu.RUnlock()
	}
	return out
}

func has(es []Entry, name string) bool {
	for i := range es {
		if es[i].Name == name {
			return true
		}
	}
	return false
}

// Inherit returns the state of a connection that an upstream connection carrying shared
// reached (an internal listener's): the objects shared once are no longer shared. Nil for
// no objects.
func Inherit(shared []Entry) *State {
	if len(shared) == 0 {
		return nil
	}
	s := &State{entries: make([]Entry, 0, len(shared))}
	for _, e := range shared {
		if e.Sharing == SharedWithUpstreamOnce {
			e.Sharing = NotShared
		}
		s.entries = append(s.entries, e)
	}
	s.held.Store(true)
	return s
}

type upstreamKey struct{}

// WithUpstream returns ctx carrying the objects an upstream connection dialled with it
// shares (State.Shared of the downstream connection); ctx itself when there are none.
func WithUpstream(ctx context.Context, shared []Entry) context.Context {
	if len(shared) == 0 {
		return ctx
	}
	return context.WithValue(ctx, upstreamKey{}, shared)
}

// Upstream returns the objects WithUpstream put in ctx; nil for none. They are shared and
// must not be modified.
func Upstream(ctx context.Context) []Entry {
	sh, _ := ctx.Value(upstreamKey{}).([]Entry)
	return sh
}

// String is an object that is a string (Envoy's StringAccessor): its plain serialization is
// the string, its typed one a JSON string.
type String string

// Plain returns the string.
func (v String) Plain() (string, bool) { return string(v), true }

// Typed returns the string as a JSON string value.
func (v String) Typed() *structpb.Value { return structpb.NewStringValue(string(v)) }

// Proto returns the string as a google.protobuf.StringValue, Envoy's StringAccessor's.
func (v String) Proto() proto.Message { return wrapperspb.String(string(v)) }

// Header is one header field of a HeaderMap.
type Header struct{ Key, Value string }

// HeaderMap is an object that is a list of header fields (Envoy's tunnel response headers
// and trailers): its typed serialization is Envoy's config.core.v3.HeaderMap as JSON,
// {"headers":[{"key":K,"value":V},...]}; it has no plain one.
type HeaderMap []Header

// Plain: a header map has no plain serialization.
func (HeaderMap) Plain() (string, bool) { return "", false }

// Typed returns the fields as a HeaderMap message's JSON.
func (h HeaderMap) Typed() *structpb.Value {
	list := make([]*structpb.Value, len(h))
	for i, f := range h {
		list[i] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"key": structpb.NewStringValue(f.Key), "value": structpb.NewStringValue(f.Value)}})
	}
	return structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"headers": structpb.NewListValue(&structpb.ListValue{Values: list})}})
}

// Proto returns the fields as Envoy's config.core.v3.HeaderMap.
func (h HeaderMap) Proto() proto.Message {
	out := &corev3.HeaderMap{Headers: make([]*corev3.HeaderValue, len(h))}
	for i, f := range h {
		out.Headers[i] = &corev3.HeaderValue{Key: f.Key, Value: f.Value}
	}
	return out
}

// Field returns the first value of the header named name (as stored: lower case).
func (h HeaderMap) Field(name string) (string, bool) {
	for _, f := range h {
		if f.Key == name {
			return f.Value, true
		}
	}
	return "", false
}
