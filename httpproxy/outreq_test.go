package httpproxy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
)

// seenRequest is a request as one side saw it.
type seenRequest struct {
	path, authority string
	header          http.Header
}

// inboundRecorder is a filter that, once the response headers are known, sends the request
// as the connection manager's filters see it then.
type inboundRecorder struct{ seen chan seenRequest }

func (f *inboundRecorder) OnRequest(*filter.Exchange) *filter.Reply { return nil }
func (f *inboundRecorder) OnResponse(x *filter.Exchange, _ http.Header) {
	f.seen <- seenRequest{x.Request.Path, x.Request.Authority, x.Request.Header.Clone()}
}

// TestRouterLeavesInboundRequest: the router builds the upstream request from the inbound one
// (path and host rewrites, x-envoy-original-path, x-envoy-expected-rq-timeout-ms, the route's
// header mutations, the x-envoy-* request headers it consumes) without changing the inbound
// request the filters see; the access log shows the upstream request, as Envoy's shows the
// request its router rewrote in place.
func TestRouterLeavesInboundRequest(t *testing.T) {
	upstream := make(chan seenRequest, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstream <- seenRequest{r.URL.RequestURI(), r.Host, r.Header.Clone()}
	}))
	t.Cleanup(up.Close)
	rec := &inboundRecorder{seen: make(chan seenRequest, 1)}
	filters := filter.NewRegistry()
	if err := filters.Register("test.inbound", func(*anypb.Any, *filter.Context) (filter.Filter, error) { return rec, nil }); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "access.log")
	hcm := fmt.Sprintf(`stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/old/"}
      route: {cluster: web, prefix_rewrite: "/new/", host_rewrite_literal: "upstream.example", timeout: 7s}
      request_headers_to_add:
      - header: {key: x-multi, value: added}
        append_action: APPEND_IF_EXISTS_OR_ADD
      - header: {key: x-replaced, value: new}
        append_action: OVERWRITE_IF_EXISTS_OR_ADD
      request_headers_to_remove: [x-secret]
http_filters:
- name: test.inbound
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
access_log:
- name: envoy.access_loggers.file
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
    path: %s
    log_format: {text_format_source: {inline_string: "%%REQ(:PATH)%% %%REQ(:AUTHORITY)%% %%REQ(X-ENVOY-ORIGINAL-PATH)%% %%REQ(X-ENVOY-EXPECTED-RQ-TIMEOUT-MS)%% %%REQ(X-REPLACED)%% %%REQ(X-SECRET)%%\n"}}
`, logPath)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      hcm,
		filters:  filters,
	})
	req, err := http.NewRequest(http.MethodGet, "http://"+e.addr+"/old/item?q=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "front.example"
	for k, v := range map[string]string{
		"X-Multi": "sent", "X-Replaced": "old", "X-Secret": "s3",
		"X-Envoy-Upstream-Rq-Timeout-Ms": "5000", "X-Envoy-Retry-On": "5xx", "X-Envoy-Max-Retries": "2",
	} {
		req.Header.Set(k, v)
	}
	resp, err := e.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	out, in := receive(t, upstream), receive(t, rec.seen)

	// The upstream request.
	if out.path != "/new/item?q=1" || out.authority != "upstream.example" {
		t.Errorf("upstream request target = %s %s; want /new/item?q=1 upstream.example", out.authority, out.path)
	}
	for k, want := range map[string][]string{
		"X-Envoy-Original-Path":          {"/old/item?q=1"},
		"X-Envoy-Expected-Rq-Timeout-Ms": {"5000"},
		"X-Multi":                        {"sent", "added"},
		"X-Replaced":                     {"new"},
		"X-Secret":                       nil,
		"X-Envoy-Upstream-Rq-Timeout-Ms": nil,
		"X-Envoy-Retry-On":               nil,
		"X-Envoy-Max-Retries":            nil,
	} {
		if got := out.header[k]; !slices.Equal(got, want) {
			t.Errorf("upstream %s = %q; want %q", k, got, want)
		}
	}

	// The inbound request, as the filters see it once the response is in.
	if in.path != "/old/item?q=1" || in.authority != "front.example" {
		t.Errorf("inbound request target = %s %s; want it unchanged: front.example /old/item?q=1", in.authority, in.path)
	}
	for k, want := range map[string][]string{
		"X-Envoy-Original-Path":          nil,
		"X-Envoy-Expected-Rq-Timeout-Ms": nil,
		"X-Multi":                        {"sent"},
		"X-Replaced":                     {"old"},
		"X-Secret":                       {"s3"},
		"X-Envoy-Upstream-Rq-Timeout-Ms": {"5000"},
		"X-Envoy-Retry-On":               {"5xx"},
		"X-Envoy-Max-Retries":            {"2"},
	} {
		if got := in.header[k]; !slices.Equal(got, want) {
			t.Errorf("inbound %s = %q; want %q (unchanged)", k, got, want)
		}
	}

	waitLogLines(t, e, logPath, []string{"/new/item?q=1 upstream.example /old/item?q=1 5000 new -"})
}

// receive waits for a request from seen.
func receive(t *testing.T, seen <-chan seenRequest) seenRequest {
	t.Helper()
	select {
	case r := <-seen:
		return r
	case <-time.After(wait):
		t.Fatal("no request seen")
	}
	return seenRequest{}
}
