package accesslog

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/legateproxy/legate/internal/headermatch"
)

// compileHeaderMatch compiles a header_filter's route.v3.HeaderMatcher with the route table's
// compiler (headermatch), so both match headers the same way.
func compileHeaderMatch(path string, h *routev3.HeaderMatcher) (*headermatch.Header, error) {
	if h == nil {
		return nil, fmt.Errorf("%s: is required", path)
	}
	m, err := headermatch.CompileHeader(h, path)
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// matchHeader applies a header_filter's matcher to e's request headers.
func matchHeader(m *headermatch.Header, e *Entry) bool {
	v, ok := requestHeaderValue(e, m.Key())
	return m.Match(v, ok)
}

// RequestHeader returns the first value of a request header as Envoy's header map holds it:
// key is normalised by headermatch.Key, so "host" and ":authority" both read the entry's
// authority and the other pseudo-headers read their fields. ok is false when it is absent.
func RequestHeader(e *Entry, key string) (string, bool) {
	if v, ok := pseudoHeader(e, key); ok {
		return v, v != ""
	}
	if vs := e.RequestHeaders[key]; len(vs) > 0 {
		return vs[0], true
	}
	return "", false
}

// requestHeaderValue returns a request header (a pseudo-header from the entry's fields),
// several values joined with ","; ok is false when it is absent.
func requestHeaderValue(e *Entry, key string) (string, bool) {
	if v, ok := pseudoHeader(e, key); ok {
		return v, v != ""
	}
	return headermatch.Value(e.RequestHeaders[key])
}

// pseudoHeader returns the entry field that stands for a request pseudo-header
// (":method", ":path", ":authority", ":scheme"; "" when unset); ok is false for
// any other key, which the caller looks up in RequestHeaders.
func pseudoHeader(e *Entry, key string) (v string, ok bool) {
	switch key {
	case ":method":
		return e.Method, true
	case ":path":
		return e.Path, true
	case ":authority":
		return e.Authority, true
	case ":scheme":
		return e.Scheme, true
	}
	return "", false
}
