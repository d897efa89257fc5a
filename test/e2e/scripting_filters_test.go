package e2e

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// loggedConfig is authzConfig (listener "authz") whose connection manager also writes an
// access log line of logFormat to logPath for every request.
func loggedConfig(backend, logPath, logFormat, filters, extraClusters string) string {
	const at = "          stat_prefix: authz\n"
	return strings.Replace(authzConfig(backend, filters, extraClusters), at, at+`          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: `+logPath+`
              log_format: {text_format_source: {inline_string: "`+logFormat+`\n"}}
`, 1)
}

// TestHeaderToMetadataEnvoyConfig: an Envoy-shaped header_to_metadata setup turns a request
// header (removed before the backend) and a missing one into dynamic metadata that the binary's
// access log prints with %DYNAMIC_METADATA%.
func TestHeaderToMetadataEnvoyConfig(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "access.log")
	cfg := loggedConfig(namedBackend(t, 0, "backend"), logPath,
		`%REQ(:PATH)% version=%DYNAMIC_METADATA(envoy.lb:version)% tier=%DYNAMIC_METADATA(envoy.lb:tier)%`,
		`          - name: envoy.filters.http.header_to_metadata
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config
              request_rules:
              - header: x-version
                on_header_present: {metadata_namespace: envoy.lb, key: version, type: STRING}
                on_header_missing: {metadata_namespace: envoy.lb, key: version, value: unknown, type: STRING}
                remove: true
              - header: x-tier
                on_header_present: {metadata_namespace: envoy.lb, key: tier, type: NUMBER}`, "")
	p := start(t, "-c", writeConfig(t, cfg), "--file-flush-interval-msec", "20")
	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + p.listenerAddr("authz")
	if code, _, body := send(t, client, http.MethodGet, url+"/one", nil, "x-version", "v2", "x-tier", "3"); code != 200 || body != "backend" {
		t.Fatalf("GET /one = %d %q; want 200 backend", code, body)
	}
	if got := waitFileLine(t, logPath, "/one "); got != "/one version=v2 tier=3" {
		t.Errorf("log line = %q; want version v2 and tier 3", got)
	}
	send(t, client, http.MethodGet, url+"/two", nil)
	if got := waitFileLine(t, logPath, "/two "); got != "/two version=unknown tier=-" {
		t.Errorf("log line = %q; want version unknown (on_header_missing), no tier", got)
	}
}

// TestLuaEnvoyConfig: a Lua filter shaped like Envoy's Lua sandbox (a library function in
// the script, a request header added on the way in, response headers on the way out, one
// of them the response body's size, an
// authorization call through a cluster with httpCall and a local answer with respond) runs
// on the binary; a script error is counted under http.authz.lua.errors and the request goes
// on.
func TestLuaEnvoyConfig(t *testing.T) {
	backend := fmt.Sprintf("127.0.0.1:%d", httpBackend(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "backend foo=%s user=%s", r.Header.Get("Foo"), r.Header.Get("X-User-Id"))
	}))
	auth := fmt.Sprintf("127.0.0.1:%d", httpBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("X-User-Id", "7")
	}))
	authHost, authPort, _ := net.SplitHostPort(auth)
	cfg := authzConfig(backend, `          - name: envoy.filters.http.lua
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
              default_source_code:
                inline_string: |
                  local mylibrary = {}
                  function mylibrary.foobar()
                    return "bar"
                  end

                  function envoy_on_request(request_handle)
                    local headers = request_handle:headers()
                    headers:add("foo", mylibrary.foobar())
                    if headers:get(":path") == "/broken" then
                      error("broken on purpose")
                    end
                    local reply, body = request_handle:httpCall("auth", {
                      [":method"] = "GET",
                      [":path"] = "/check",
                      [":authority"] = "auth",
                      ["authorization"] = headers:get("authorization") or "",
                    }, "", 5000)
                    if reply[":status"] ~= "200" then
                      request_handle:logInfo("denied " .. headers:get(":path"))
                      request_handle:respond({[":status"] = "403", ["content-type"] = "text/plain"}, "denied by lua")
                    end
                    headers:add("x-user-id", reply["x-user-id"])
                  end

                  function envoy_on_response(response_handle)
                    response_handle:headers():add("x-lua-status", response_handle:headers():get(":status"))
                    local body_size = response_handle:body():length()
                    response_handle:headers():add("response-body-size", tostring(body_size))
                  end`, `  - name: auth
    connect_timeout: 1s
    load_assignment:
      cluster_name: auth
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: `+authHost+`, port_value: `+authPort+`}}}}]}]
`)
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + p.listenerAddr("authz")
	code, h, body := send(t, client, http.MethodGet, url+"/", nil, "Authorization", "Bearer good")
	if code != 200 || body != "backend foo=bar user=7" || h.Get("X-Lua-Status") != "200" || h.Get("Response-Body-Size") != "22" {
		t.Errorf("GET with a good token = %d %q x-lua-status %q response-body-size %q; want 200 \"backend foo=bar user=7\" 200 22",
			code, body, h.Get("X-Lua-Status"), h.Get("Response-Body-Size"))
	}
	if code, _, body := send(t, client, http.MethodGet, url+"/", nil, "Authorization", "Bearer bad"); code != 403 || body != "denied by lua" {
		t.Errorf("GET with a bad token = %d %q; want 403 denied by lua", code, body)
	}
	if code, _, body := send(t, client, http.MethodGet, url+"/broken", nil); code != 200 || body != "backend foo=bar user=" {
		t.Errorf("GET /broken = %d %q; want the request to go on after the script error", code, body)
	}
	if v, _ := p.stat("http.authz.lua.errors"); v != 1 {
		t.Errorf("http.authz.lua.errors = %d; want 1", v)
	}
}
