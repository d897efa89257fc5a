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

// TestRouterLookupsMissTheNamesLegateSets checks that the names the router looks up on every
// request (and a plain request does not have) share no filter bit with those a plain request
// carries upstream once the connection manager and the router have set theirs
// (x-forwarded-proto, x-request-id, x-envoy-expected-rq-timeout-ms): their lookups stay a
// test of a bit. With the second and last bytes alone, x-envoy-max-retries shared
// x-request-id's bit and x-envoy-upstream-rq-timeout-ms x-envoy-expected-rq-timeout-ms's.
func TestRouterLookupsMissTheNamesLegateSets(t *testing.T) {
	var idx inIndex
	idx.reset()
	for _, k := range []string{"User-Agent", "Accept", hdrXFProto, hdrRequestID} {
		idx.add(k, "v")
	}
	var o outHeader
	o.full = http.Header{}
	o.reset(http.Header{}, &idx, new([]string))
	o.setKey(lookupKeys.expectedTimeout, []string{"15000"})
	for _, k := range []lookupKey{lookupKeys.upstreamTimeout, lookupKeys.retryOn, lookupKeys.maxRetries, lookupKeys.contentType, lookupKeys.xff} {
		if k.bit != nameBit(k.name) {
			t.Errorf("lookupKeys bit of %s = %#x; want nameBit's %#x", k.name, k.bit, nameBit(k.name))
		}
		if o.keys&k.bit != 0 {
			t.Errorf("filter %#x may hold %s; want its lookup skipped", o.keys, k.name)
		}
	}
	if got := o.getKey(lookupKeys.expectedTimeout); !slices.Equal(got, []string{"15000"}) {
		t.Errorf("getKey(%s) = %q; want the edit", hdrExpectedTimeout, got)
	}
}

// TestOutHeaderListWithEdits checks the upstream fields written from the inbound list: in
// their order, the edits after them, a field an edit replaces or removes left out whether or
// not the edits' names share filter bits with the list's.
func TestOutHeaderListWithEdits(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(o *outHeader)
		want []pool.Field
	}{
		{"no edit", func(o *outHeader) {}, []pool.Field{{Name: "User-Agent", Value: "u"}, {Name: "Accept", Value: "a"}, {Name: hdrXFProto, Value: "http"}}},
		{"added name", func(o *outHeader) { o.setKey(lookupKeys.expectedTimeout, []string{"15000"}) },
			[]pool.Field{{Name: "User-Agent", Value: "u"}, {Name: "Accept", Value: "a"}, {Name: hdrXFProto, Value: "http"}, {Name: hdrExpectedTimeout, Value: "15000"}}},
		{"replaced field", func(o *outHeader) { o.set("Accept", []string{"b"}) },
			[]pool.Field{{Name: "User-Agent", Value: "u"}, {Name: hdrXFProto, Value: "http"}, {Name: "Accept", Value: "b"}}},
		{"removed field", func(o *outHeader) { o.del(hdrXFProto) }, []pool.Field{{Name: "User-Agent", Value: "u"}, {Name: "Accept", Value: "a"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var idx inIndex
			idx.reset()
			for _, f := range []pool.Field{{Name: "User-Agent", Value: "u"}, {Name: "Accept", Value: "a"}, {Name: hdrXFProto, Value: "http"}} {
				idx.add(f.Name, f.Value)
			}
			var o outHeader
			o.full = http.Header{}
			o.reset(http.Header{}, &idx, new([]string))
			tt.edit(&o)
			if got := o.appendFields(nil); !slices.Equal(got, tt.want) {
				t.Errorf("appendFields() = %v; want %v", got, tt.want)
			}
		})
	}
}
