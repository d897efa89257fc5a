package filterstate

import (
	"context"
	"errors"
	"testing"
)

// TestSetGet: a stream reads its own object before its connection's, a read-only object
// cannot be replaced, a mutable one can, and a nil State reads as empty.
func TestSetGet(t *testing.T) {
	conn := &State{}
	if !conn.Empty() {
		t.Fatal("zero State is not empty")
	}
	if err := conn.Set("k", String("conn"), Options{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	if err := conn.Set("k", String("again"), Options{}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Set over a read-only object: %v; want ErrReadOnly", err)
	}
	if err := conn.Set("m", String("1"), Options{}); err != nil {
		t.Fatal(err)
	}
	if err := conn.Set("m", String("2"), Options{}); err != nil {
		t.Errorf("Set over a mutable object: %v", err)
	}
	if err := conn.Set("nil", nil, Options{}); err == nil {
		t.Error("Set of a nil object: no error")
	}
	stream := NewChild(conn)
	if err := stream.Set("k", String("stream"), Options{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"k": "stream", "m": "2"} {
		got, _ := stream.Get(name).Plain()
		if got != want {
			t.Errorf("stream.Get(%q) = %q; want %q", name, got, want)
		}
	}
	if got, _ := conn.Get("k").Plain(); got != "conn" {
		t.Errorf("conn.Get(k) = %q; want conn (the stream's hides it, does not change it)", got)
	}
	var none *State
	if none.Get("k") != nil || !none.Empty() || none.Shared() != nil {
		t.Error("a nil State is not empty")
	}
}

// TestSharing: Shared lists the objects shared with upstream (a stream's before its
// connection's, a name once); the connection they reach keeps sharing SharedWithUpstream
// objects and stops sharing the once-shared ones; the context carries them.
func TestSharing(t *testing.T) {
	conn := &State{}
	conn.Set("always", String("a"), Options{Sharing: SharedWithUpstream})
	conn.Set("once", String("o"), Options{Sharing: SharedWithUpstreamOnce})
	conn.Set("mine", String("m"), Options{})
	stream := NewChild(conn)
	stream.Set("always", String("s"), Options{Sharing: SharedWithUpstream})
	sh := stream.Shared()
	if len(sh) != 2 || sh[0].Name != "always" || sh[1].Name != "once" {
		t.Fatalf("Shared() = %+v; want always (the stream's) and once", sh)
	}
	if v, _ := sh[0].Object.Plain(); v != "s" {
		t.Errorf("shared always = %q; want the stream's s", v)
	}
	ctx := WithUpstream(context.Background(), sh)
	if WithUpstream(context.Background(), nil) != context.Background() {
		t.Error("WithUpstream of nothing made a new context")
	}
	inner := Inherit(Upstream(ctx))
	if got := inner.Shared(); len(got) != 1 || got[0].Name != "always" {
		t.Errorf("inherited Shared() = %+v; want only always", got)
	}
	if inner.Get("once") == nil || inner.Get("mine") != nil {
		t.Error("the inner connection should hold once (not shared further) and not mine")
	}
	if Inherit(nil) != nil {
		t.Error("Inherit(nil) made a state")
	}
	var adopted State
	adopted.Adopt(inner)
	if adopted.Get("always") == nil {
		t.Error("Adopt lost an object")
	}
}

// TestReset: a reused state starts empty under its new parent, whether objects were set in
// it (by Set or by Inherit) or not, and takes objects again afterwards.
func TestReset(t *testing.T) {
	connA, connB := &State{}, &State{}
	if err := connA.Set("a", String("A"), Options{}); err != nil {
		t.Fatal(err)
	}
	if err := connB.Set("b", String("B"), Options{}); err != nil {
		t.Fatal(err)
	}
	s := NewChild(connA)
	if err := s.Set("k", String("1"), Options{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	s.Reset(connB)
	if s.Get("k") != nil || s.Get("a") != nil {
		t.Error("after Reset the stream still reads the objects of its last use")
	}
	if got, _ := s.Get("b").Plain(); got != "B" {
		t.Errorf("after Reset(connB), Get(b) = %q; want B", got)
	}
	s.Reset(connA) // nothing was set since the last Reset
	if s.Get("b") != nil {
		t.Error("an empty state's Reset kept its old parent")
	}
	if err := s.Set("k", String("2"), Options{}); err != nil {
		t.Errorf("Set after Reset of a read-only name: %v", err)
	}
	s.Reset(nil)
	if !s.Empty() {
		t.Error("Reset(nil) after a Set is not empty")
	}
	in := Inherit([]Entry{{Name: "x", Object: String("X"), Options: Options{Sharing: SharedWithUpstream}}})
	in.Reset(nil)
	if !in.Empty() {
		t.Error("Reset of an inherited state kept its objects")
	}
}
