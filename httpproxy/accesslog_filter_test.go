package httpproxy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// grpcish is an upstream answering with the status of x-status and the grpc-status of
// x-grpc-status, in the headers (a trailers-only gRPC response) or, with x-grpc-trailer, in
// the trailers.
func grpcish(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := r.Header.Get("X-Grpc-Status")
		if st != "" && r.Header.Get("X-Grpc-Trailer") != "" {
			w.Header().Set("Trailer", "Grpc-Status")
		} else if st != "" {
			w.Header().Set("Grpc-Status", st)
		}
		code := http.StatusOK
		if v := r.Header.Get("X-Status"); v != "" {
			fmt.Sscan(v, &code)
		}
		w.WriteHeader(code)
		w.Write([]byte("body"))
		if st != "" && r.Header.Get("X-Grpc-Trailer") != "" {
			w.Header().Set("Grpc-Status", st)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// fileLogYAML is a file access_log entry writing format to path, with an optional filter.
func fileLogYAML(path, format, filter string) string {
	s := fmt.Sprintf(`
- name: envoy.access_loggers.file
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
    path: %s
    log_format: {text_format_source: {inline_string: %q}}`, path, format)
	if filter != "" {
		s += "\n  filter: " + filter
	}
	return s
}

// readLog flushes the access log at path and returns its lines.
func (e *env) readLog(t *testing.T, path string) []string {
	t.Helper()
	f, err := e.logs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestAccessLogFilters sends requests over one connection to a connection manager with an
// unfiltered access log and logs filtered by header_filter, grpc_status_filter and
// status_code_filter, and checks each log's exact lines; %CONNECTION_ID% is the listener
// connection's id, the same for every request of a connection.
func TestAccessLogFilters(t *testing.T) {
	up := grpcish(t)
	dir := t.TempDir()
	all, debug, grpc, failed := filepath.Join(dir, "all.log"), filepath.Join(dir, "debug.log"), filepath.Join(dir, "grpc.log"), filepath.Join(dir, "failed.log")
	hcm := webHCM + `access_log:` +
		fileLogYAML(all, "%REQ(:PATH)% %RESPONSE_CODE% %CONNECTION_ID%\n", "") +
		fileLogYAML(debug, "%REQ(:PATH)% %REQ(X-DEBUG)%\n", "{header_filter: {header: {name: x-debug, string_match: {exact: 'yes'}}}}") +
		fileLogYAML(grpc, "%REQ(:PATH)% %RESPONSE_CODE%\n", "{grpc_status_filter: {statuses: [NOT_FOUND, UNAVAILABLE]}}") +
		fileLogYAML(failed, "%REQ(:PATH)%\n", "{and_filter: {filters: [{status_code_filter: {comparison: {op: GE, value: {default_value: 500, runtime_key: k}}}}, {not_health_check_filter: {}}]}}")
	// The gRPC statuses come in HTTP/1 trailers, which Envoy's codec keeps only with
	// enable_trailers.
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", h1Trailers, up.Listener.Addr().String())}, hcm: hcm})
	c := e.client()
	c.Transport.(*http.Transport).MaxConnsPerHost = 1
	requests := []struct {
		path string
		hdr  []string
	}{
		{"/plain", nil},
		{"/debug", []string{"x-debug", "yes"}},
		{"/debug-no", []string{"x-debug", "no"}},
		{"/grpc-header", []string{"x-grpc-status", "5"}},
		{"/grpc-trailer", []string{"x-grpc-status", "14", "x-grpc-trailer", "1"}},
		{"/grpc-ok", []string{"x-grpc-status", "0"}},
		{"/unavailable", []string{"x-status", "503"}},
		{"/error", []string{"x-status", "500", "x-debug", "yes"}},
	}
	for _, r := range requests {
		e.get(c, r.path, r.hdr...)
	}
	// A request's line is written before the connection reads the next request: this one
	// makes sure the others are in.
	e.get(c, "/sync")
	lines := e.readLog(t, all)
	if len(lines) < len(requests) {
		t.Fatalf("all.log has %d lines; want at least %d", len(lines), len(requests))
	}
	var id string
	var got []string
	for i, l := range lines[:len(requests)] {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("all.log line %d = %q; want path, code and connection id", i, l)
		}
		if i == 0 {
			id = f[2]
		}
		if f[2] != id || id == "0" {
			t.Errorf("all.log line %d: %%CONNECTION_ID%% = %s; want the connection's non-zero id (%s)", i, f[2], id)
		}
		got = append(got, f[0]+" "+f[1])
	}
	want := []string{"/plain 200", "/debug 200", "/debug-no 200", "/grpc-header 200", "/grpc-trailer 200", "/grpc-ok 200", "/unavailable 503", "/error 500"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("all.log (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		path string
		want []string
	}{
		{debug, []string{"/debug yes", "/error yes"}},
		{grpc, []string{"/grpc-header 200", "/grpc-trailer 200", "/unavailable 503"}},
		{failed, []string{"/unavailable", "/error"}},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			if diff := cmp.Diff(tc.want, e.readLog(t, tc.path)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", filepath.Base(tc.path), diff)
			}
		})
	}
	// Another connection has another id.
	c2 := e.client()
	e.get(c2, "/second")
	e.get(c, "/sync2")
	for _, l := range e.readLog(t, all) {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "/second" && f[2] == id {
			t.Errorf("second connection's %%CONNECTION_ID%% = %s; want one other than the first connection's", f[2])
		}
	}
}
