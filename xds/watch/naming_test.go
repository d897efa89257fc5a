package watch

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"
)

// TestNaming: a resource is named by its decoded name, else the delta response's, else the
// fallback's; a delta name that differs from the resource's, and a name listed twice, are
// errors; a decode error is kept as it is; Seen reports what the response listed.
func TestNaming(t *testing.T) {
	raw := func(*anypb.Any) string { return "raw" }
	decodeErr := errors.New("bad")
	delta := &Response{Resources: make([]*anypb.Any, 4), Names: []string{"a", "b", "c", "a"}}
	n := NewNaming("cluster", delta)
	for _, tc := range []struct {
		i       int
		decoded string
		err     error
		want    string
		wantErr string
	}{
		{0, "a", nil, "a", ""},
		{1, "x", nil, "x", `cluster "x": resource name "b" differs from the cluster's name`},
		{2, "", decodeErr, "c", "bad"},
		{3, "a", nil, "a", `cluster "a": listed more than once in the response; cluster names must be unique`},
	} {
		name, err := n.Name(tc.i, tc.decoded, raw, tc.err)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if name != tc.want || got != tc.wantErr {
			t.Errorf("Name(%d, %q) = %q, %q; want %q, %q", tc.i, tc.decoded, name, got, tc.want, tc.wantErr)
		}
	}
	if !n.Seen("c") || n.Seen("b") {
		t.Errorf("Seen(c), Seen(b) = %v, %v; want true, false", n.Seen("c"), n.Seen("b"))
	}
	sotw := NewNaming("listener", &Response{Resources: make([]*anypb.Any, 1)})
	if name, err := sotw.Name(0, "", raw, decodeErr); name != "raw" || err != decodeErr {
		t.Errorf("state of the world, undecoded: Name = %q, %v; want \"raw\", the decode error", name, err)
	}
}
