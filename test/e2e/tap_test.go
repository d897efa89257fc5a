package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tapdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/tap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/tap/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/xds/xdstest"
)

// tapListener is a listener on addr whose connection manager runs the tap filter
// (tapConfig is its common_config) and answers every request locally with 200 "hello".
func tapListener(addr, tapConfig string) string {
	host, port, _ := strings.Cut(addr, ":")
	return `
  listeners:
  - name: web
    address: {socket_address: {address: ` + host + `, port_value: ` + port + `}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: web
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                direct_response: {status: 200, body: {inline_string: hello}}
          http_filters:
          - name: envoy.filters.http.tap
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.tap.v3.Tap
              common_config: ` + tapConfig + `
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
`
}

func sendRequest(t *testing.T, addr, path string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	req.Header.Set("X-Test", "e2e")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// headerOf returns the value of key in a trace message's headers.
func headerOf(m *tapdatav3.HttpBufferedTrace_Message, key string) string {
	for _, h := range m.GetHeaders() {
		if h.GetKey() == key {
			return h.GetValue()
		}
	}
	return ""
}

// TestTapAdminSession: POST /tap through a running Legate receives traces of matching
// requests only, with their headers; it ends cleanly when the client disconnects, after
// which a new session can attach.
func TestTapAdminSession(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig+tapListener("127.0.0.1:0", `{admin_config: {config_id: demo}}`)))
	addr := p.boundListenerAddr("web")
	if code, _, body := p.post("/tap"); code != http.StatusBadRequest || body != "/tap requires a JSON/YAML body" {
		t.Errorf("POST /tap without a body = %d %q; want 400 and Envoy's reason", code, body)
	}
	const session = `
config_id: demo
tap_config:
  match: {http_request_headers_match: {headers: [{name: ":path", string_match: {prefix: "/tapped"}}]}}
  output_config: {sinks: [{format: JSON_BODY_AS_STRING, streaming_admin: {}}]}
`
	for round := range 2 { // the second round attaches again after the first detached
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.admin+"/tap", strings.NewReader(session))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("round %d: POST /tap = %d %s", round, resp.StatusCode, b)
		}
		sendRequest(t, addr, "/skipped")
		sendRequest(t, addr, "/tapped/1")
		sendRequest(t, addr, "/skipped")
		sendRequest(t, addr, "/tapped/2")
		dec := json.NewDecoder(resp.Body)
		var paths []string
		for range 2 {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				t.Fatalf("round %d: reading the tap stream: %v", round, err)
			}
			var tw tapdatav3.TraceWrapper
			if err := protojson.Unmarshal(raw, &tw); err != nil {
				t.Fatalf("trace is not a TraceWrapper: %v\n%s", err, raw)
			}
			reqMsg := tw.GetHttpBufferedTrace().GetRequest()
			if got := headerOf(reqMsg, "x-test"); got != "e2e" {
				t.Errorf("request header x-test = %q; want e2e", got)
			}
			paths = append(paths, headerOf(reqMsg, ":path"))
		}
		if diff := cmp.Diff([]string{"/tapped/1", "/tapped/2"}, paths); diff != "" {
			t.Errorf("round %d: tapped paths (-want +got):\n%s", round, diff)
		}
		cancel()
		resp.Body.Close()
		if round == 0 {
			waitDetached(t, p)
		}
	}
}

// waitDetached polls until a new session could attach, i.e. the server noticed the
// client left (the server learns it asynchronously from the closed connection).
func waitDetached(t *testing.T, p *proc) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.admin+"/tap", strings.NewReader(`{config_id: probe, tap_config: {match: {any_match: true}, output_config: {sinks: [{streaming_admin: {}}]}}}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		// An unknown config id is only checked once no other session is attached.
		if strings.HasPrefix(string(b), "Unknown config id 'probe'") {
			return
		}
		<-time.After(20 * time.Millisecond)
	}
	t.Fatal("the /tap session did not detach within 10s of the client leaving")
}

func TestTapUnavailableWithoutFilter(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig))
	if code, _, _ := p.post("/tap"); code != http.StatusNotFound {
		t.Errorf("POST /tap without a tap filter = %d; want 404", code)
	}
}

// TestTapFilePerTap: a static file_per_tap configuration writes one parseable
// TraceWrapper file per matching request.
func TestTapFilePerTap(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "trace")
	p := start(t, "-c", writeConfig(t, minimalConfig+tapListener("127.0.0.1:0", `
                static_config:
                  match: {http_request_headers_match: {headers: [{name: ":path", string_match: {exact: "/file"}}]}}
                  output_config: {sinks: [{format: JSON_BODY_AS_BYTES, file_per_tap: {path_prefix: "`+prefix+`"}}]}`)))
	addr := p.boundListenerAddr("web")
	sendRequest(t, addr, "/file")
	sendRequest(t, addr, "/other")
	sendRequest(t, addr, "/file")
	files, _ := filepath.Glob(prefix + "_*.json")
	if len(files) != 2 {
		t.Fatalf("trace files = %v; want 2", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tw tapdatav3.TraceWrapper
		if err := protojson.Unmarshal(b, &tw); err != nil {
			t.Fatalf("%s is not a TraceWrapper: %v\n%s", f, err, b)
		}
		if got := headerOf(tw.GetHttpBufferedTrace().GetRequest(), ":path"); got != "/file" {
			t.Errorf("%s: :path = %q; want /file", f, got)
		}
	}
}

// TestTapBodiesAndStatus: traces of real traffic carry the request body (cut at
// max_buffered_rx_bytes and marked truncated), :status and the response headers the client
// got, and the response body — both from an upstream and from a direct response.
func TestTapBodiesAndStatus(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Up", "1")
		w.WriteHeader(http.StatusCreated)
		w.Write(append([]byte("echo: "), b...))
	}))
	t.Cleanup(up.Close)
	_, upPort, _ := strings.Cut(up.Listener.Addr().String(), ":")
	cfg := strings.Replace(minimalConfig, "port_value: 1}", "port_value: "+upPort+"}", 1) + tapListener("127.0.0.1:0", `{admin_config: {config_id: demo}}`)
	cfg = strings.Replace(cfg, `              - match: {prefix: "/"}
                direct_response:`, `              - match: {prefix: "/echo"}
                route: {cluster: backend}
              - match: {prefix: "/"}
                direct_response:`, 1)
	p := start(t, "-c", writeConfig(t, cfg))
	addr := p.boundListenerAddr("web")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.admin+"/tap", strings.NewReader(`
config_id: demo
tap_config:
  match: {any_match: true}
  output_config: {max_buffered_rx_bytes: 5, sinks: [{format: JSON_BODY_AS_STRING, streaming_admin: {}}]}
`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /tap = %d %s", resp.StatusCode, b)
	}
	dec := json.NewDecoder(resp.Body)
	next := func() *tapdatav3.HttpBufferedTrace {
		t.Helper()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("reading the tap stream: %v", err)
		}
		var tw tapdatav3.TraceWrapper
		if err := protojson.Unmarshal(raw, &tw); err != nil {
			t.Fatalf("trace is not a TraceWrapper: %v\n%s", err, raw)
		}
		return tw.GetHttpBufferedTrace()
	}

	post, err := http.Post("http://"+addr+"/echo", "text/plain", strings.NewReader("hello tap"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(post.Body)
	post.Body.Close()
	tr := next()
	type message struct {
		Status, Server, Up, Body string
		Truncated                bool
	}
	summary := func(m *tapdatav3.HttpBufferedTrace_Message) message {
		return message{Status: headerOf(m, ":status"), Server: headerOf(m, "server"), Up: headerOf(m, "x-up"),
			Body: m.GetBody().GetAsString(), Truncated: m.GetBody().GetTruncated()}
	}
	if diff := cmp.Diff(message{Body: "hello", Truncated: true}, summary(tr.GetRequest())); diff != "" {
		t.Errorf("proxied request (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(message{Status: "201", Server: post.Header.Get("Server"), Up: "1", Body: string(got)}, summary(tr.GetResponse())); diff != "" {
		t.Errorf("proxied response (-want +got):\n%s", diff)
	}
	if string(got) != "echo: hello tap" || post.Header.Get("Server") == "" {
		t.Errorf("client got %q, server %q; want the upstream's echo and a server header", got, post.Header.Get("Server"))
	}

	sendRequest(t, addr, "/local")
	tr = next()
	if diff := cmp.Diff(message{Status: "200", Server: "envoy", Body: "hello"}, summary(tr.GetResponse())); diff != "" {
		t.Errorf("direct response (-want +got):\n%s", diff)
	}
	if tr.GetRequest().GetBody() != nil {
		t.Errorf("request without a body has a trace body %v; want none", tr.GetRequest().GetBody())
	}
}

// TestTapGoneWithLastFilter: /tap exists while an LDS listener runs an admin-configured tap
// filter and disappears (404) once that listener is removed and its connection manager closed.
func TestTapGoneWithLastFilter(t *testing.T) {
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-tap", ADS: true})
	// The listener is tapListener's, decoded from its YAML into the LDS resource.
	j, err := yaml.YAMLToJSON([]byte(tapListener("127.0.0.1:0", `{admin_config: {config_id: demo}}`)))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Listeners []json.RawMessage }
	if err := json.Unmarshal(j, &doc); err != nil || len(doc.Listeners) != 1 {
		t.Fatalf("tapListener YAML: %v, %d listeners", err, len(doc.Listeners))
	}
	lis := &listenerv3.Listener{}
	if err := protojson.Unmarshal(doc.Listeners[0], lis); err != nil {
		t.Fatal(err)
	}
	set := func(version string, ls ...types.Resource) {
		t.Helper()
		xds.Set(version, map[resourcev3.Type][]types.Resource{resourcev3.ListenerType: ls})
	}
	set("v1", lis)
	// A removed listener drains for --drain-time-s before its connection manager closes.
	p := start(t, "--drain-time-s", "1", "-c", writeConfig(t, adsBootstrap("e2e-tap", xds, []string{"lds_config"})))
	tapStatus := func() int { code, _, _ := p.post("/tap"); return code }
	waitStatus := func(want int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for tapStatus() != want {
			if time.Now().After(deadline) {
				t.Fatalf("POST /tap = %d after 20s; want %d", tapStatus(), want)
			}
			<-time.After(20 * time.Millisecond)
		}
	}
	waitStatus(http.StatusBadRequest) // /tap exists (and wants a body)
	set("v2")
	waitStatus(http.StatusNotFound)
}
