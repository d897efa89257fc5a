package httpproxy

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAccessLogFilterRuntime checks that access log filters of the connection manager read
// their runtime_key through Deps.Runtime: a status_code_filter whose threshold the runtime
// lowers, and a runtime_filter sampling by x-request-id with the runtime's percentage.
func TestAccessLogFilterRuntime(t *testing.T) {
	up := grpcish(t)
	dir := t.TempDir()
	errs, sampled := filepath.Join(dir, "errors.log"), filepath.Join(dir, "sampled.log")
	hcm := webHCM + `access_log:` +
		fileLogYAML(errs, "%REQ(:PATH)% %RESPONSE_CODE%\n", "{status_code_filter: {comparison: {op: GE, value: {default_value: 500, runtime_key: log.min_status}}}}") +
		fileLogYAML(sampled, "%REQ(:PATH)%\n", "{runtime_filter: {runtime_key: log.sample, percent_sampled: {numerator: 0}}}")
	runtime := map[string]uint64{"log.min_status": 404, "log.sample": 50}
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      hcm,
		runtime: func(key string, def uint64) uint64 {
			if v, ok := runtime[key]; ok {
				return v
			}
			return def
		},
	})
	c := e.client()
	c.Transport.(*http.Transport).MaxConnsPerHost = 1
	// Request ids whose first 8 hex digits are 49 and 50 modulo 100: below and at the
	// runtime's 50 percent.
	e.get(c, "/ok", "x-request-id", "00000031-0000-4000-8000-000000000000")
	e.get(c, "/missing", "x-status", "404", "x-request-id", "00000032-0000-4000-8000-000000000000")
	e.get(c, "/fail", "x-status", "503", "x-request-id", "00000095-0000-4000-8000-000000000000")
	e.get(c, "/sync", "x-request-id", "00000063-0000-4000-8000-000000000000") // 99: not sampled
	if diff := cmp.Diff([]string{"/missing 404", "/fail 503"}, e.readLog(t, errs)); diff != "" {
		t.Errorf("errors.log (-want +got):\n%s", diff)
	}
	// 0x95 = 149: 49 modulo 100, sampled.
	if diff := cmp.Diff([]string{"/ok", "/fail"}, e.readLog(t, sampled)); diff != "" {
		t.Errorf("sampled.log (-want +got):\n%s", diff)
	}
}
