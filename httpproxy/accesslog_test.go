package httpproxy

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAccessLogAndForwarding(t *testing.T) {
	up := echo(t, "a")
	path := filepath.Join(t.TempDir(), "access.log")
	hcm := fmt.Sprintf(`stat_prefix: ingress
use_remote_address: true
always_set_request_id_in_response: true
server_name: legate-test
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/"}
      route: {cluster: web}
access_log:
- name: envoy.access_loggers.file
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
    path: %s
    log_format: {text_format_source: {inline_string: "%%REQ(:METHOD)%% %%REQ(:PATH)%% %%RESPONSE_CODE%% %%UPSTREAM_CLUSTER%% %%REQ(X-CUSTOM)%% %%RESPONSE_FLAGS%%\n"}}
`, path)
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.Listener.Addr().String())}, hcm: hcm})
	// One connection: its goroutine writes a request's log line before it reads the next
	// request, so once the third response is in, the first two lines are written.
	c := e.client()
	c.Transport.(*http.Transport).MaxConnsPerHost = 1
	resp, _ := e.get(c, "/logged?q=1", "x-custom", "v1", "x-forwarded-for", "10.0.0.1")
	if got, want := resp.Header.Get("X-Seen-Xff"), "10.0.0.1, 127.0.0.1"; got != want {
		t.Errorf("upstream x-forwarded-for = %q; want %q", got, want)
	}
	if got := resp.Header.Get("Server"); got != "legate-test" {
		t.Errorf("server = %q; want legate-test", got)
	}
	if got, up := resp.Header.Get("X-Request-Id"), resp.Header.Get("X-Seen-Request-Id"); got == "" || got != up {
		t.Errorf("x-request-id in response = %q, upstream saw %q; want the same non-empty id", got, up)
	}
	e.get(c, "/nowhere", "host", "unknown")
	e.get(c, "/sync")
	f, err := e.logs.Open(path) // the file the connection manager writes to
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "GET /logged?q=1 200 web v1 -\nGET /nowhere 200 web - -\n"
	if got := string(b); !strings.HasPrefix(got, want) {
		t.Errorf("access log = %q; want %q", got, want)
	}
}
