package e2e

import (
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
