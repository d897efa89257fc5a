package httpproxy

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy/filters/headermutation"
)

// TestNameBitsCoverParsedNames checks the request name filter never hides a header the
// request has: every name parseHead put in the map, in any case, is one the filter may hold.
// It also checks that for a plain request the filter does skip the lookups the connection
// manager and the router make of headers such a request lacks (the point of it).
func TestNameBitsCoverParsedNames(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-"
	for range 2000 {
		var head strings.Builder
		head.WriteString("GET / HTTP/1.1\r\nHost: x\r\n")
		for range 1 + r.IntN(12) {
			name := make([]byte, 1+r.IntN(30))
			for i := range name {
				name[i] = letters[r.IntN(len(letters))]
			}
			fmt.Fprintf(&head, "%s: v\r\n", name)
		}
		head.WriteString("\r\n")
		h, keys, vals := http.Header{}, nameBits(0), []string(nil)
		if _, err := parseHead(head.String(), h, &keys, &vals, 100, &config.HTTP1Options{}, nil); err != nil {
			t.Fatalf("parseHead(%q): %v", head.String(), err)
		}
		for k := range h {
			if !keys.mayHave(k) {
				t.Fatalf("filter %#x hides %q of %q", keys, k, head.String())
			}
		}
	}

	h, keys, vals := http.Header{}, nameBits(0), []string(nil)
	if _, err := parseHead("GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n", h, &keys, &vals, 100, &config.HTTP1Options{}, nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{hdrXFF, hdrXFProto, hdrRequestID, hdrRetryOn, hdrMaxRetries, hdrUpstreamTimeout, hdrContentType, hdrEnvoyInternal, hdrExternalAddress} {
		if keys.mayHave(k) {
			t.Errorf("filter of a request with User-Agent and Accept may hold %s; want its lookup skipped", k)
		}
	}
}

// TestRouterSeesHeadersFiltersAdd checks the name filter does not hide from the router a
// header an HTTP filter added: x-envoy-upstream-rq-timeout-ms and x-envoy-max-retries set by
// header_mutation are consumed as if the client had sent them (the upstream sees the
// expected timeout they set, and not them).
func TestRouterSeesHeadersFiltersAdd(t *testing.T) {
	up, heads := headRecorder(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up)},
		filters:  filtersOf(t, nil, headermutation.Register),
		hcm: webHCM + `http_filters:
- name: envoy.filters.http.header_mutation
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation
    mutations:
      request_mutations:
      - append: {header: {key: x-envoy-upstream-rq-timeout-ms, value: "1234"}, append_action: OVERWRITE_IF_EXISTS_OR_ADD}
      - append: {header: {key: x-envoy-max-retries, value: "2"}, append_action: OVERWRITE_IF_EXISTS_OR_ADD}
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`,
	})
	if resp, _ := e.get(e.client(), "/"); resp.StatusCode != 200 {
		t.Fatalf("status %d; want 200", resp.StatusCode)
	}
	head := strings.ToLower(<-heads)
	if !strings.Contains(head, "x-envoy-expected-rq-timeout-ms: 1234\r\n") {
		t.Errorf("upstream head %q; want x-envoy-expected-rq-timeout-ms: 1234 (the filter's timeout)", head)
	}
	for _, gone := range []string{"x-envoy-upstream-rq-timeout-ms", "x-envoy-max-retries"} {
		if strings.Contains(head, gone) {
			t.Errorf("upstream head %q has %s; want it consumed by the router", head, gone)
		}
	}
}
