package admin

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tapdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/tap/v3"
	commontapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/tap/v3"
	tapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/tap/v3"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/legateproxy/legate/httpproxy/filters/tap"
	"github.com/legateproxy/legate/httpproxy/route"
)

// tapServer is an admin server whose /tap is watched from a Manager with one
// admin-configured tap filter (config_id "demo").
func tapServer(t *testing.T) (*httptest.Server, *tap.Filter) {
	t.Helper()
	reg := NewRegistry()
	m := tap.NewManager()
	WatchTap(reg, m)
	f, err := tap.New(&tapv3.Tap{CommonConfig: tapAdminConfig("demo")}, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return httptest.NewServer(New(Config{}, reg)), f
}

func tapAdminConfig(id string) *commontapv3.CommonExtensionConfig {
	return &commontapv3.CommonExtensionConfig{ConfigType: &commontapv3.CommonExtensionConfig_AdminConfig{
		AdminConfig: &commontapv3.AdminConfig{ConfigId: id},
	}}
}

func postTap(t *testing.T, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/tap", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// synthetic feeds one request/response pair straight to the filter.
func synthetic(f *tap.Filter, path string, reqBody, respBody string) {
	tp := f.NewTapper()
	tp.RequestHeaders(&route.Request{Authority: "svc", Path: path, Method: "POST", Scheme: "http", Header: http.Header{"X-Id": {path}}})
	tp.RequestBody([]byte(reqBody))
	tp.ResponseHeaders(200, http.Header{"Content-Type": {"text/plain"}})
	tp.ResponseBody([]byte(respBody))
	tp.End()
}

func TestTapUnavailableWithoutFilter(t *testing.T) {
	reg := NewRegistry()
	m := tap.NewManager()
	WatchTap(reg, m)
	srv := httptest.NewServer(New(Config{}, reg))
	defer srv.Close()
	resp := postTap(t, context.Background(), srv.URL, `{config_id: demo}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /tap without a tap filter: status = %d; want 404", resp.StatusCode)
	}
	f, err := tap.New(&tapv3.Tap{CommonConfig: tapAdminConfig("demo")}, m)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.lookup("/tap"); !ok {
		t.Errorf("/tap not registered after a tap filter with admin_config appeared")
	}
	f.Close()
	if _, ok := reg.lookup("/tap"); ok {
		t.Errorf("/tap still registered after the last tap filter closed")
	}
}

func TestTapBadRequests(t *testing.T) {
	srv, _ := tapServer(t)
	defer srv.Close()
	const sink = `output_config: {sinks: [{streaming_admin: {}}]}`
	tests := []struct {
		name, body, want string
	}{
		{"empty body", "", "/tap requires a JSON/YAML body"},
		{"unknown field", `{config_id: demo, nope: 1}`, "Unable to parse JSON as proto ("},
		{"no tap_config", `config_id: demo`, "Proto constraint validation failed (invalid TapRequest.TapConfig: value is required)"},
		{"unknown config id", `{config_id: other, tap_config: {match: {any_match: true}, ` + sink + `}}`,
			"Unknown config id 'other'. No extension has registered with this id."},
		{"bad predicate", `{config_id: demo, tap_config: {match: {and_match: {rules: [{any_match: true}]}}, ` + sink + `}}`,
			"Proto constraint validation failed (invalid TapRequest.TapConfig: embedded message failed validation | caused by: "},
		{"bad regex", `{config_id: demo, tap_config: {match: {http_request_headers_match: {headers: [{name: a, string_match: {safe_regex: {regex: "("}}}]}}, ` + sink + `}}`,
			"tap_config.match.http_request_headers_match.headers: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := postTap(t, context.Background(), srv.URL, tc.body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("status = %d; want 400", resp.StatusCode)
			}
			if !strings.HasPrefix(string(b), tc.want) || strings.Contains(string(b), "\n") {
				t.Errorf("body = %q; want one line starting %q", b, tc.want)
			}
		})
	}
	t.Run("GET", func(t *testing.T) {
		resp, err := http.Get(srv.URL + "/tap")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET /tap: status = %d; want 400", resp.StatusCode)
		}
	})
}

// TestTapSession: an attached session receives the matching streams only, with headers
// and buffered bodies; a second session is refused; when the client goes away the tap
// detaches and no goroutine is left.
func TestTapSession(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv, f := tapServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := postTap(t, ctx, srv.URL, `
config_id: demo
tap_config:
  match:
    http_request_headers_match: {headers: [{name: ":path", string_match: {prefix: "/keep"}}]}
  output_config:
    max_buffered_tx_bytes: 5
    sinks: [{format: JSON_BODY_AS_STRING, streaming_admin: {}}]
`)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /tap: status = %d (%s); want 200", resp.StatusCode, b)
	}
	second := postTap(t, context.Background(), srv.URL, `{config_id: demo, tap_config: {match: {any_match: true}, output_config: {sinks: [{streaming_admin: {}}]}}}`)
	b, _ := io.ReadAll(second.Body)
	second.Body.Close()
	if second.StatusCode != http.StatusBadRequest || string(b) != "An attached /tap admin stream already exists. Detach it." {
		t.Errorf("second POST /tap: %d %q; want 400 and Envoy's message", second.StatusCode, b)
	}

	synthetic(f, "/skip", "a", "b")
	synthetic(f, "/keep/1", "ping", "pong-pong")
	synthetic(f, "/skip", "c", "d")
	synthetic(f, "/keep/2", "", "ok")

	dec := json.NewDecoder(resp.Body)
	var got []string
	for range 2 {
		var raw json.RawMessage
		done := make(chan error, 1)
		go func() { done <- dec.Decode(&raw) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("reading the tap stream: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no trace within 5s")
		}
		var tw tapdatav3.TraceWrapper
		if err := protojson.Unmarshal(raw, &tw); err != nil {
			t.Fatalf("trace is not a TraceWrapper: %v\n%s", err, raw)
		}
		tr := tw.GetHttpBufferedTrace()
		h := tr.GetRequest().GetHeaders()[1]
		got = append(got, h.GetKey()+"="+h.GetValue()+" body="+tr.GetRequest().GetBody().GetAsString()+
			" resp="+tr.GetResponse().GetBody().GetAsString()+" truncated="+boolText(tr.GetResponse().GetBody().GetTruncated()))
	}
	want := []string{
		":path=/keep/1 body=ping resp=pong- truncated=true",
		":path=/keep/2 body= resp=ok truncated=false",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("traces (-want +got):\n%s", diff)
	}

	cancel()
	resp.Body.Close()
	srv.Close() // waits for the /tap handler to return
	if tp := f.NewTapper(); tp != nil {
		t.Errorf("the tap is still attached after the client went away")
	}
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// TestTapProtoText: a PROTO_TEXT session streams proto text.
func TestTapProtoText(t *testing.T) {
	srv, f := tapServer(t)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := postTap(t, ctx, srv.URL, `{config_id: demo, tap_config: {match: {any_match: true}, output_config: {sinks: [{format: PROTO_TEXT, streaming_admin: {}}]}}}`)
	defer resp.Body.Close()
	synthetic(f, "/x", "q", "r")
	buf := make([]byte, 4096)
	done := make(chan string, 1)
	go func() {
		var b strings.Builder
		for !strings.Contains(b.String(), "response") {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		done <- b.String()
	}()
	select {
	case text := <-done:
		if !strings.HasPrefix(text, "http_buffered_trace") {
			t.Errorf("proto text stream = %q; want it to start with http_buffered_trace", text)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no trace within 5s")
	}
	cancel()
}
