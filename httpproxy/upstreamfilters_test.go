package httpproxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/legateproxy/legate/httpproxy/filters/buffer"
	"github.com/legateproxy/legate/httpproxy/filters/headermutation"
)

// attemptRecorder is an upstream that records the x-attempt-host values of each request it
// receives; the first request of all the recorders sharing first answers 503.
type attemptRecorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen [][]string
	ok   bool // answered 200
}

func newAttemptRecorder(t *testing.T, first *atomic.Bool) *attemptRecorder {
	r := &attemptRecorder{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.seen = append(r.seen, req.Header.Values("X-Attempt-Host"))
		if first.CompareAndSwap(false, true) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		r.ok = true
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *attemptRecorder) requests() (seen [][]string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen, r.ok
}

// upstreamHCM routes every request to cluster web, retrying a 5xx once on another host,
// with the router's upstream_http_filters.
func upstreamHCM(upstreamFilters string) string {
	return `stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/"}
      route:
        cluster: web
        retry_policy:
          retry_on: 5xx
          num_retries: 1
          retry_back_off: {base_interval: 0.001s}
          retry_host_predicate: [{name: envoy.retry_host_predicates.previous_hosts}]
          host_selection_retry_max_attempts: 10
http_filters:
- name: envoy.filters.http.router
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
    upstream_http_filters:
` + upstreamFilters + `
    - name: envoy.filters.http.upstream_codec
      typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec}
`
}

// TestUpstreamHeaderMutationPerAttempt: an upstream header_mutation runs for each attempt,
// after the host is picked: each upstream receives the header naming itself, once (the
// first attempt's change does not reach the retry), and the response mutation names the
// host that answered.
func TestUpstreamHeaderMutationPerAttempt(t *testing.T) {
	var first atomic.Bool
	a, b := newAttemptRecorder(t, &first), newAttemptRecorder(t, &first)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", a.srv.Listener.Addr().String(), b.srv.Listener.Addr().String())},
		filters:  filtersOf(t, nil, headermutation.Register),
		hcm: upstreamHCM(`    - name: envoy.filters.http.header_mutation
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation
        mutations:
          request_mutations: [{append: {header: {key: x-attempt-host, value: "%UPSTREAM_HOST%"}, append_action: APPEND_IF_EXISTS_OR_ADD}}]
          response_mutations: [{append: {header: {key: x-answered-by, value: "%UPSTREAM_HOST%"}}}]`),
	})
	resp, body := e.get(e.client(), "/")
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("GET / = %d %q; want 200 ok", resp.StatusCode, body)
	}
	var answered string
	for _, r := range []*attemptRecorder{a, b} {
		addr := r.srv.Listener.Addr().String()
		got, ok := r.requests()
		if len(got) != 1 || len(got[0]) != 1 || got[0][0] != addr {
			t.Errorf("upstream %s received x-attempt-host %q; want one request with [%s]", addr, got, addr)
		}
		if ok {
			answered = addr
		}
	}
	if got := resp.Header.Get("X-Answered-By"); got != answered {
		t.Errorf("x-answered-by = %q; want the host that answered, %s", got, answered)
	}
}

// TestUpstreamBufferFilter: an upstream buffer filter reads the body whole for the attempt
// (the upstream receives it with its length) and answers 413 past max_request_bytes.
func TestUpstreamBufferFilter(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d %d", r.ContentLength, len(b))
	}))
	t.Cleanup(up.Close)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		filters:  filtersOf(t, nil, buffer.Register),
		hcm: upstreamHCM(`    - name: envoy.filters.http.buffer
      typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer, max_request_bytes: 8}`),
	})
	c := e.client()
	for _, tc := range []struct {
		body       string
		wantStatus int
		wantBody   string
	}{
		{"12345678", 200, "8 8"},
		{"123456789", 413, "Payload Too Large"},
	} {
		// A reader without a length: the client sends it chunked.
		req, err := http.NewRequest(http.MethodPost, "http://"+e.addr+"/", io.MultiReader(strings.NewReader(tc.body)))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.wantStatus || string(b) != tc.wantBody {
			t.Errorf("POST %d bytes = %d %q; want %d %q", len(tc.body), resp.StatusCode, b, tc.wantStatus, tc.wantBody)
		}
	}
}

// hmFilter is the YAML list item of an upstream header_mutation filter setting x-from.
func hmFilter(indent, from string) string {
	return indent + `- name: envoy.filters.http.header_mutation
` + indent + `  typed_config:
` + indent + `    "@type": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation
` + indent + `    mutations: {request_mutations: [{append: {header: {key: x-from, value: ` + from + `}, append_action: APPEND_IF_EXISTS_OR_ADD}}]}`
}

// TestClusterUpstreamFilters: a cluster's HttpProtocolOptions.http_filters run for its
// attempts in place of the router's upstream_http_filters, which still run for clusters
// without their own.
func TestClusterUpstreamFilters(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Join(r.Header.Values("X-From"), ","))
	}))
	t.Cleanup(up.Close)
	addr := up.Listener.Addr().String()
	own := staticCluster("own", `typed_extension_protocol_options:
  envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
    "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
    explicit_http_config: {http_protocol_options: {}}
    http_filters:
`+hmFilter("    ", "cluster")+`
    - name: envoy.filters.http.upstream_codec
      typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec}`, addr)
	hcm := strings.Replace(upstreamHCM(hmFilter("    ", "router")), `    - match: {prefix: "/"}`, `    - match: {prefix: "/own"}
      route: {cluster: own}
    - match: {prefix: "/"}`, 1)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", addr), own},
		filters:  filtersOf(t, nil, headermutation.Register),
		hcm:      hcm,
	})
	c := e.client()
	for path, want := range map[string]string{"/own": "cluster", "/web": "router"} {
		resp, body := e.get(c, path)
		if resp.StatusCode != 200 || body != want {
			t.Errorf("GET %s = %d, upstream saw x-from %q; want 200 %q", path, resp.StatusCode, body, want)
		}
	}
}
