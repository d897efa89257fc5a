package httpproxy

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy/filters/headermutation"
	"github.com/legateproxy/legate/internal/http1"
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
		h, idx, vals := http.Header{}, inIndex{}, []string(nil)
		idx.reset()
		if err := parseHead(new(http1.RequestHead), head.String(), h, &idx, &vals, 100, &config.HTTP1Options{}, nil); err != nil {
			t.Fatalf("parseHead(%q): %v", head.String(), err)
		}
		idx.fill(h, &vals)
		for k := range h {
			if !idx.keys.mayHave(k) {
				t.Fatalf("filter %#x hides %q of %q", idx.keys, k, head.String())
			}
		}
	}

	h, idx, vals := http.Header{}, inIndex{}, []string(nil)
	idx.reset()
	if err := parseHead(new(http1.RequestHead), "GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n", h, &idx, &vals, 100, &config.HTTP1Options{}, nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{hdrXFF, hdrXFProto, hdrRequestID, hdrRetryOn, hdrMaxRetries, hdrUpstreamTimeout, hdrContentType, hdrEnvoyInternal, hdrExternalAddress} {
		if idx.keys.mayHave(k) {
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

// TestUpstreamHeaderKeepsArrivalOrder checks the upstream request written from the inbound
// index (inIndex.fields) against the one written from the header map: the same lines, and
// with the index the client's fields in the order they came (repeated names apart, as sent),
// then the connection manager's. The map path is forced by a header_mutation filter (the
// index is given up once a filter has the map); its one added field is left out of the
// comparison. The cases change the map where the index must notice: a name listed in
// Connection, an x-forwarded-for the connection manager extends (each fails without its
// inIndex.changed); and a chunked body's Content-Length, which the upstream codec drops
// either way.
func TestUpstreamHeaderKeepsArrivalOrder(t *testing.T) {
	up, heads := headRecorder(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	const mutation = `http_filters:
- name: envoy.filters.http.header_mutation
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation
    mutations: {request_mutations: [{append: {header: {key: x-mutated, value: "1"}}}]}
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`
	const hcm = "use_remote_address: true\nhttp_protocol_options: {allow_chunked_length: true}\n" + webHCM
	indexed := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up)}, hcm: hcm})
	mapped := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up)}, filters: filtersOf(t, nil, headermutation.Register), hcm: hcm + mutation})
	for _, tc := range []struct {
		name, fields string
		want         []string // the upstream's lines after the request line, by the index
	}{
		{"plain", "B: 2\r\nA: 1\r\nb: 3\r\nUser-Agent: t\r\n", []string{
			"host: x", "b: 2", "a: 1", "b: 3", "user-agent: t", "x-forwarded-for: 127.0.0.1",
			"x-envoy-internal: true", "x-forwarded-proto: http", "x-request-id: *",
			"x-envoy-expected-rq-timeout-ms: 15000",
		}},
		{"connection names a field", "Connection: x-drop\r\nX-Drop: 1\r\nA: 1\r\n", nil},
		{"chunked with content-length", "Content-Length: 3\r\nTransfer-Encoding: chunked\r\nA: 1\r\n", nil},
		{"x-forwarded-for extended", "X-Forwarded-For: 10.0.0.1\r\nA: 1\r\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := "GET / HTTP/1.1\r\nHost: x\r\n" + tc.fields + "\r\n"
			if strings.Contains(tc.fields, "chunked") {
				req = "POST / HTTP/1.1\r\nHost: x\r\n" + tc.fields + "\r\n3\r\nabc\r\n0\r\n\r\n"
			}
			var got [2][]string
			for i, e := range []*env{indexed, mapped} {
				if resp := exchangeRaw(t, e.addr, req); !strings.HasPrefix(resp, "HTTP/1.1 200 ") {
					t.Fatalf("response %q; want 200", resp)
				}
				lines := strings.Split(strings.TrimSuffix(<-heads, "\r\n\r\n"), "\r\n")[1:]
				for _, l := range lines {
					if k, _, _ := strings.Cut(l, ": "); k == "x-request-id" {
						l = k + ": *"
					}
					if l != "x-mutated: 1" {
						got[i] = append(got[i], l)
					}
				}
			}
			if tc.want != nil && !slices.Equal(got[0], tc.want) {
				t.Errorf("upstream head by the index:\n%s\nwant:\n%s", strings.Join(got[0], "\n"), strings.Join(tc.want, "\n"))
			}
			slices.Sort(got[0])
			slices.Sort(got[1])
			if !slices.Equal(got[0], got[1]) {
				t.Errorf("upstream head by the index (sorted):\n%s\nby the map (sorted):\n%s", strings.Join(got[0], "\n"), strings.Join(got[1], "\n"))
			}
		})
	}
}
