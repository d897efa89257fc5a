package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestUpstreamHTTPFiltersEnvoyConfig: on the binary, the router's upstream_http_filters in
// Envoy's documented shape (header_mutation, then the terminal upstream_codec) add a header
// that names the picked host to the request the backend receives, and a response header.
func TestUpstreamHTTPFiltersEnvoyConfig(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Join(r.Header.Values("X-Upstream-Host"), ","))
	}))
	t.Cleanup(backend.Close)
	router := `          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
              upstream_http_filters:
              - name: envoy.filters.http.header_mutation
                typed_config:
                  "@type": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation
                  mutations:
                    request_mutations:
                    - append: {header: {key: x-upstream-host, value: "%UPSTREAM_HOST%"}, append_action: OVERWRITE_IF_EXISTS_OR_ADD}
                    response_mutations:
                    - append: {header: {key: x-upstream-filter, value: ran}}
              - name: envoy.filters.http.upstream_codec
                typed_config:
                  "@type": type.googleapis.com/envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec`
	const plainRouter = `          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}`
	cfg := strings.Replace(policyConfig(backend.Listener.Addr().String(), "", ""), plainRouter, router, 1)
	if !strings.Contains(cfg, "upstream_http_filters") {
		t.Fatal("the router's configuration was not replaced")
	}
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second}
	code, h, body := send(t, client, http.MethodGet, "http://"+p.listenerAddr("http")+"/", nil, "X-Upstream-Host", "spoofed")
	if want := backend.Listener.Addr().String(); code != 200 || body != want || h.Get("X-Upstream-Filter") != "ran" {
		t.Errorf("GET = %d, backend saw x-upstream-host %q, x-upstream-filter %q; want 200, %q, ran", code, body, h.Get("X-Upstream-Filter"), want)
	}
}
