package httpproxy

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/legateproxy/legate/pool"
)

// TestOutHeaderEdits checks that the upstream header reads, lists and materialises the
// inbound header through the router's edits, and never writes the inbound map.
func TestOutHeaderEdits(t *testing.T) {
	in := http.Header{"A": {"1"}, "B": {"2", "3"}, "C": {"4"}}
	var o outHeader
	o.full = http.Header{}
	o.reset(in, &inIndex{keys: allNames}, new([]string))
	o.set("C", []string{"5"})
	o.del("B")
	o.del("Absent") // nothing to remove: no edit
	o.set("D", []string{"6"})
	if len(o.edits) != 3 {
		t.Errorf("edits = %v; want C, B and D", o.edits)
	}
	if got := o.get("B"); got != nil {
		t.Errorf("get(B) = %q after del; want nil", got)
	}
	if got := o.get("A"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("get(A) = %q; want the inbound value", got)
	}
	fields := o.appendFields(nil)
	slices.SortFunc(fields, func(a, b pool.Field) int {
		if a.Name != b.Name {
			return strings.Compare(a.Name, b.Name)
		}
		return strings.Compare(a.Value, b.Value)
	})
	want := []pool.Field{{Name: "A", Value: "1"}, {Name: "C", Value: "5"}, {Name: "D", Value: "6"}}
	if !slices.Equal(fields, want) {
		t.Errorf("fields = %v; want %v", fields, want)
	}
	full := o.header()
	if len(full) != 3 || full.Get("C") != "5" || full.Get("D") != "6" || full.Get("A") != "1" {
		t.Errorf("header() = %v; want A=1, C=5, D=6", full)
	}
	full["A"] = append(full["A"], "7") // the clipped slice is copied, not written through
	o.del("D")
	if got := o.get("D"); got != nil || len(o.full) != 2 {
		t.Errorf("after del(D) whole: get = %q, header %v", got, o.full)
	}
	wantIn := http.Header{"A": {"1"}, "B": {"2", "3"}, "C": {"4"}}
	if len(in) != len(wantIn) || !slices.Equal(in["A"], wantIn["A"]) || !slices.Equal(in["B"], wantIn["B"]) || !slices.Equal(in["C"], wantIn["C"]) {
		t.Errorf("inbound header changed: %v", in)
	}
	o.release()
	o.reset(in, &inIndex{keys: allNames}, new([]string))
	if len(o.full) != 0 || o.whole || len(o.edits) != 0 || !slices.Equal(o.get("C"), []string{"4"}) {
		t.Errorf("reset did not start again from the inbound header: %+v", o)
	}
}
