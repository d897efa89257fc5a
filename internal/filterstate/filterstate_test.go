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
