package setfilterstate

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/set_filter_state/v3"

	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/internal/registry"
)

// TestThroughProxy runs the filter in a connection manager with a real upstream over
// HTTP/1.1: each request's values (from its headers, one reading an earlier one) land in its
// own filter state, which the access log prints; a request without the header skips the
// skip_if_empty value, and nothing leaks from one request of a connection to the next.
func TestThroughProxy(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "access.log")
	value := func(key, extra, format string) string {
		return fmt.Sprintf(`{object_key: %s, factory_key: envoy.string, %s format_string: {text_format_source: {inline_string: %q}}}`, key, extra, format)
	}
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", filtertest.Upstream(t))},
		Register: []func(*registry.Builder){Register},
		HCM: fmt.Sprintf(`access_log:
- name: envoy.access_loggers.file
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
    path: %s
    log_format: {text_format_source: {inline_string: "%%REQ(:PATH)%% tenant=%%FILTER_STATE(acme.tenant:PLAIN)%% route=%%FILTER_STATE(acme.route)%%\n"}}
`, logPath) + filtertest.HCM(`- name: `+Name+`
  typed_config:
    "@type": `+TypeURL+`
    on_request_headers:
    - `+value("acme.tenant", "skip_if_empty: true,", "%REQ(x-tenant)%")+`
    - `+value("acme.route", "", "%REQ(:PATH)%-%FILTER_STATE(acme.tenant:PLAIN)%")+`
`, ""),
	})
	c := p.Client()
	if resp, body := p.Get(c, "/a", "x-tenant", "blue"); resp.StatusCode != 200 || body != "upstream" {
		t.Fatalf("GET /a = %d %q; want 200 upstream", resp.StatusCode, body)
	}
	p.Get(c, "/b")
	want := []string{`/a tenant=blue route="/a-blue"`, `/b tenant=- route="/b--"`}
	filtertest.WaitLog(t, logPath, want)
}

// TestRefused: a factory Legate lacks is refused at load with its path.
func TestRefused(t *testing.T) {
	_, err := FromAny(filtertest.AnyFromYAML(t, `on_request_headers: [{object_key: k, factory_key: envoy.network.upstream_server_name, format_string: {text_format_source: {inline_string: v}}}]`, &httpv3.Config{}))
	if err == nil || !strings.Contains(err.Error(), `on_request_headers[0].factory_key: "envoy.network.upstream_server_name": not implemented by Legate`) {
		t.Errorf("FromAny: %v; want the factory refused", err)
	}
}
