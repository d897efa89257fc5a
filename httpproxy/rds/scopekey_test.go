package rds

import (
	"net/http"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/legateproxy/legate/httpproxy/route"
)

// TestKeyBuilder: each fragment takes an element of a header's value by position or by key,
// "host" names the authority, and a fragment that cannot be extracted leaves no key.
func TestKeyBuilder(t *testing.T) {
	extractor := func(name, sep string, index int, key, kvSep string) *hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder {
		hv := &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor{Name: name, ElementSeparator: sep}
		if key != "" {
			hv.ExtractType = &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_Element{
				Element: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_KvElement{Key: key, Separator: kvSep}}
		} else {
			hv.ExtractType = &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_Index{Index: uint32(index)}
		}
		return &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder{Type: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_{HeaderValueExtractor: hv}}
	}
	for _, tc := range []struct {
		name      string
		fragments []*hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder
		header    http.Header
		authority string
		want      string
		ok        bool
	}{
		{"index 0", []*hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder{extractor("x-k", ",", 0, "", "")}, http.Header{"X-K": {"a,b"}}, "", "a", true},
		{"index 1", []*hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder{extractor("x-k", ",", 1, "", "")}, http.Header{"X-K": {"a,b"}}, "", "b", true},
		{"index out of range", []*hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder{extractor("x-k", ",", 2, "", "")}, http.Header{"X-K": {"a,b"}}, "", "", false},
		{"missing header", []*hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder{extractor("x-k", ",", 0, "", "")}, http.Header{}, "", "", false},
		{"element", []*hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder{extractor("x-k", ";", 0, "t", "=")}, http.Header{"X-K": {"u=1;t=v=2"}}, "", "v=2", true},
		{"element absent", []*hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder{extractor("x-k", ";", 0, "t", "=")}, http.Header{"X-K": {"u=1"}}, "", "", false},
		{"two fragments", []*hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder{extractor("x-k", ",", 0, "", ""), extractor(":authority", ":", 0, "", "")},
			http.Header{"X-K": {"a"}}, "host:80", "a\x00host", true},
		// "Host" names :authority, as in Envoy's header map (go-control-plane's e2e suite keys
		// its scopes on it): an HTTP/1 request's Host header is the request's authority.
		{"host is authority", []*hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder{extractor("Host", ":", 0, "", "")},
			http.Header{}, "example.com:9002", "example.com", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewKeyBuilder("b", &hcmv3.ScopedRoutes_ScopeKeyBuilder{Fragments: tc.fragments})
			if err != nil {
				t.Fatal(err)
			}
			got, ok := b.Key(&route.Request{Header: tc.header, Authority: tc.authority})
			if got != tc.want || ok != tc.ok {
				t.Errorf("Key() = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// FuzzScopeKey: key extraction never panics and a key from a one-fragment builder is part of
// the header value.
func FuzzScopeKey(f *testing.F) {
	f.Add("a=1;b=2", ";", "b", "=", uint32(0))
	f.Add("x,y,z", ",", "", "", uint32(2))
	f.Fuzz(func(t *testing.T, value, sep, key, kvSep string, index uint32) {
		hv := &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor{Name: "x-k", ElementSeparator: sep}
		if key != "" {
			hv.ExtractType = &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_Element{
				Element: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_KvElement{Key: key, Separator: kvSep}}
		} else {
			hv.ExtractType = &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_Index{Index: index % 64}
		}
		b, err := NewKeyBuilder("b", &hcmv3.ScopedRoutes_ScopeKeyBuilder{Fragments: []*hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder{
			{Type: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_{HeaderValueExtractor: hv}},
		}})
		if err != nil {
			return
		}
		got, ok := b.Key(&route.Request{Header: http.Header{"X-K": {value}}})
		if ok && len(got) > len(value) {
			t.Errorf("key(%q) = %q; longer than the header", value, got)
		}
	})
}
