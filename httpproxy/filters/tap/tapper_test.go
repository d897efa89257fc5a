package tap

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tapdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/tap/v3"
	tapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/tap/v3"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/httpproxy/filter"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tapFilter builds a filter from its YAML configuration.
func tapFilter(t testing.TB, m *Manager, y string) *Filter {
	t.Helper()
	f, err := newFromYAML(t, m, y)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// attach starts an admin session from a YAML TapRequest.
func attach(t testing.TB, m *Manager, y string) *Session {
	t.Helper()
	req, err := ParseRequest([]byte(y))
	if err != nil {
		t.Fatalf("ParseRequest: %v", err)
	}
	s, err := m.Attach(req)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// next reads the session's next message, failing after a deadline.
func next(t testing.TB, s *Session) *tapdatav3.TraceWrapper {
	t.Helper()
	select {
	case tw := <-s.Traces():
		return tw
	case <-time.After(5 * time.Second):
		t.Fatal("no trace within 5s")
		return nil
	}
}

func noMore(t testing.TB, s *Session) {
	t.Helper()
	select {
	case tw := <-s.Traces():
		t.Fatalf("unexpected trace %v", tw)
	default:
	}
}

// stream feeds a full exchange to t.
func stream(t *Tapper, reqH map[string]string, reqBody []string, reqTr map[string]string, status int, respH map[string]string, respBody []string, respTr map[string]string) bool {
	t.RequestHeaders(request(reqH))
	for _, c := range reqBody {
		t.RequestBody([]byte(c))
	}
	if reqTr != nil {
		t.RequestTrailers(header(reqTr))
	}
	t.ResponseHeaders(status, header(respH))
	for _, c := range respBody {
		t.ResponseBody([]byte(c))
	}
	if respTr != nil {
		t.ResponseTrailers(header(respTr))
	}
	return t.End()
}

func hv(k, v string) *corev3.HeaderValue { return &corev3.HeaderValue{Key: k, Value: v} }

func reqHeaderList(extra ...*corev3.HeaderValue) []*corev3.HeaderValue {
	return append([]*corev3.HeaderValue{hv(":authority", "example.com"), hv(":path", "/"), hv(":method", "GET"), hv(":scheme", "http")}, extra...)
}

const adminFilter = `common_config: {admin_config: {config_id: demo}}`

func TestBufferedTrace(t *testing.T) {
	m := NewManager()
	f := tapFilter(t, m, adminFilter)
	s := attach(t, m, `
config_id: demo
tap_config:
  match: {http_request_headers_match: {headers: [{name: x-tap, present_match: true}]}}
  output_config:
    max_buffered_rx_bytes: 4
    sinks: [{streaming_admin: {}}]
`)
	if got := stream(f.NewTapper(), map[string]string{"x-other": "1"}, []string{"body"}, nil, 200, nil, nil, nil); got {
		t.Errorf("End() of a stream without x-tap = true; want false")
	}
	noMore(t, s)
	got := stream(f.NewTapper(), map[string]string{"X-Tap": "1", "B": "2"}, []string{"hello", " world"}, map[string]string{"grpc-x": "t"},
		201, map[string]string{"Content-Type": "text/plain"}, []string{"ok", "!"}, map[string]string{"grpc-status": "0"})
	if !got {
		t.Errorf("End() of a matching stream = false; want true")
	}
	want := &tapdatav3.TraceWrapper{Trace: &tapdatav3.TraceWrapper_HttpBufferedTrace{HttpBufferedTrace: &tapdatav3.HttpBufferedTrace{
		Request: &tapdatav3.HttpBufferedTrace_Message{
			Headers:  reqHeaderList(hv("b", "2"), hv("x-tap", "1")),
			Body:     &tapdatav3.Body{BodyType: &tapdatav3.Body_AsBytes{AsBytes: []byte("hell")}, Truncated: true},
			Trailers: []*corev3.HeaderValue{hv("grpc-x", "t")},
		},
		Response: &tapdatav3.HttpBufferedTrace_Message{
			Headers:  []*corev3.HeaderValue{hv(":status", "201"), hv("content-type", "text/plain")},
			Body:     &tapdatav3.Body{BodyType: &tapdatav3.Body_AsBytes{AsBytes: []byte("ok!")}},
			Trailers: []*corev3.HeaderValue{hv("grpc-status", "0")},
		},
	}}}
	if diff := cmp.Diff(want, next(t, s), protocmp.Transform()); diff != "" {
		t.Errorf("trace (-want +got):\n%s", diff)
	}
	noMore(t, s)
}

func TestStreamedTrace(t *testing.T) {
	m := NewManager()
	f := tapFilter(t, m, adminFilter)
	s := attach(t, m, `
config_id: demo
tap_config:
  match: {http_response_headers_match: {headers: [{name: ":status", string_match: {exact: "500"}}]}}
  output_config:
    streaming: true
    max_buffered_rx_bytes: 3
    max_buffered_tx_bytes: 2
    sinks: [{format: JSON_BODY_AS_STRING, streaming_admin: {}}]
`)
	tp := f.NewTapper()
	tp.RequestHeaders(request(nil))
	tp.RequestBody([]byte("ab"))
	tp.RequestBody([]byte("cd"))
	noMore(t, s) // not matched yet: kept back
	tp.ResponseHeaders(500, http.Header{})
	tp.ResponseBody([]byte("xyz"))
	if !tp.End() {
		t.Errorf("End() = false; want true")
	}
	id := tp.ID()
	seg := func(p any) *tapdatav3.TraceWrapper {
		s := &tapdatav3.HttpStreamedTraceSegment{TraceId: id}
		switch v := p.(type) {
		case *tapdatav3.HttpStreamedTraceSegment_RequestHeaders:
			s.MessagePiece = v
		case *tapdatav3.HttpStreamedTraceSegment_RequestBodyChunk:
			s.MessagePiece = v
		case *tapdatav3.HttpStreamedTraceSegment_ResponseHeaders:
			s.MessagePiece = v
		case *tapdatav3.HttpStreamedTraceSegment_ResponseBodyChunk:
			s.MessagePiece = v
		}
		return &tapdatav3.TraceWrapper{Trace: &tapdatav3.TraceWrapper_HttpStreamedTraceSegment{HttpStreamedTraceSegment: s}}
	}
	want := []*tapdatav3.TraceWrapper{
		seg(&tapdatav3.HttpStreamedTraceSegment_RequestHeaders{RequestHeaders: &corev3.HeaderMap{Headers: reqHeaderList()}}),
		seg(&tapdatav3.HttpStreamedTraceSegment_RequestBodyChunk{RequestBodyChunk: &tapdatav3.Body{BodyType: &tapdatav3.Body_AsString{AsString: "abc"}, Truncated: true}}),
		seg(&tapdatav3.HttpStreamedTraceSegment_ResponseHeaders{ResponseHeaders: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{hv(":status", "500")}}}),
		seg(&tapdatav3.HttpStreamedTraceSegment_ResponseBodyChunk{ResponseBodyChunk: &tapdatav3.Body{BodyType: &tapdatav3.Body_AsString{AsString: "xy"}, Truncated: true}}),
	}
	var got []*tapdatav3.TraceWrapper
	for range want {
		got = append(got, next(t, s))
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("segments (-want +got):\n%s", diff)
	}
	noMore(t, s)
}

// TestStreamedBodyMatch: a body matcher decides on a chunk; the parts kept before are
// flushed, then the stream goes on segment by segment.
func TestStreamedBodyMatch(t *testing.T) {
	m := NewManager()
	f := tapFilter(t, m, adminFilter)
	s := attach(t, m, `
config_id: demo
tap_config:
  match: {http_request_generic_body_match: {patterns: [{string_match: "KEY"}]}}
  output_config: {streaming: true, sinks: [{streaming_admin: {}}]}
`)
	tp := f.NewTapper()
	tp.RequestHeaders(request(nil))
	tp.RequestBody([]byte("xK"))
	noMore(t, s)
	tp.RequestBody([]byte("EYz"))
	tp.ResponseHeaders(200, http.Header{})
	tp.End()
	var kinds []string
	var body []byte
	for range 3 {
		seg := next(t, s).GetHttpStreamedTraceSegment()
		switch {
		case seg.GetRequestHeaders() != nil:
			kinds = append(kinds, "request_headers")
		case seg.GetRequestBodyChunk() != nil:
			kinds = append(kinds, "request_body_chunk")
			body = append(body, seg.GetRequestBodyChunk().GetAsBytes()...)
		case seg.GetResponseHeaders() != nil:
			kinds = append(kinds, "response_headers")
		}
	}
	if diff := cmp.Diff([]string{"request_headers", "request_body_chunk", "response_headers"}, kinds); diff != "" {
		t.Errorf("segments (-want +got):\n%s", diff)
	}
	if string(body) != "xKEYz" {
		t.Errorf("request body chunk = %q; want %q", body, "xKEYz")
	}
	noMore(t, s)
}

func TestFilePerTap(t *testing.T) {
	formats := []struct {
		format string
		ext    string
		parse  func([]byte, *tapdatav3.TraceWrapper) error
	}{
		{"JSON_BODY_AS_BYTES", ".json", func(b []byte, m *tapdatav3.TraceWrapper) error { return protojson.Unmarshal(b, m) }},
		{"JSON_BODY_AS_STRING", ".json", func(b []byte, m *tapdatav3.TraceWrapper) error { return protojson.Unmarshal(b, m) }},
		{"PROTO_BINARY", ".pb", func(b []byte, m *tapdatav3.TraceWrapper) error { return proto.Unmarshal(b, m) }},
		{"PROTO_BINARY_LENGTH_DELIMITED", ".pb_length_delimited", func(b []byte, m *tapdatav3.TraceWrapper) error {
			return protodelim.UnmarshalFrom(bytes.NewReader(b), m)
		}},
		{"PROTO_TEXT", ".pb_text", func(b []byte, m *tapdatav3.TraceWrapper) error { return prototext.Unmarshal(b, m) }},
	}
	for _, tc := range formats {
		t.Run(tc.format, func(t *testing.T) {
			dir := t.TempDir()
			prefix := filepath.Join(dir, "trace")
			f := tapFilter(t, NewManager(), `
common_config:
  static_config:
    match: {http_request_headers_match: {headers: [{name: ":path", string_match: {prefix: "/tapped"}}]}}
    output_config: {sinks: [{format: `+tc.format+`, file_per_tap: {path_prefix: "`+prefix+`"}}]}
`)
			tp := f.NewTapper()
			stream(tp, map[string]string{":path": "/tapped"}, []string{"ping"}, nil, 200, map[string]string{"X-A": "b"}, []string{"pong"}, nil)
			stream(f.NewTapper(), map[string]string{":path": "/other"}, nil, nil, 200, nil, nil, nil)
			files, _ := filepath.Glob(prefix + "_*")
			wantName := FileName(prefix, tp.ID(), mustFormat(t, tc.format))
			if diff := cmp.Diff([]string{wantName}, files); diff != "" {
				t.Fatalf("files (-want +got):\n%s", diff)
			}
			if !strings.HasSuffix(wantName, tc.ext) {
				t.Errorf("file name %q; want extension %q", wantName, tc.ext)
			}
			b, err := os.ReadFile(wantName)
			if err != nil {
				t.Fatal(err)
			}
			var got tapdatav3.TraceWrapper
			if err := tc.parse(b, &got); err != nil {
				t.Fatalf("parse %s: %v\n%s", tc.format, err, b)
			}
			req := got.GetHttpBufferedTrace().GetRequest()
			body := req.GetBody().GetAsBytes()
			if tc.format == "JSON_BODY_AS_STRING" {
				body = []byte(req.GetBody().GetAsString())
			}
			if string(body) != "ping" {
				t.Errorf("request body = %q; want %q", body, "ping")
			}
			wantHeaders := []*corev3.HeaderValue{hv(":authority", "example.com"), hv(":path", "/tapped"), hv(":method", "GET"), hv(":scheme", "http")}
			if diff := cmp.Diff(wantHeaders, req.GetHeaders(), protocmp.Transform()); diff != "" {
				t.Errorf("request headers (-want +got):\n%s", diff)
			}
		})
	}
}

func mustFormat(t testing.TB, name string) Format {
	t.Helper()
	for v, n := range map[Format]string{0: "JSON_BODY_AS_BYTES", 1: "JSON_BODY_AS_STRING", 2: "PROTO_BINARY", 3: "PROTO_BINARY_LENGTH_DELIMITED", 4: "PROTO_TEXT"} {
		if n == name {
			return v
		}
	}
	t.Fatalf("no format %s", name)
	return 0
}

// TestFilterStream drives the filter as the connection manager does: NewStream per stream,
// then the stream's parts through filter.Stream; the trace carries :status, both bodies
// (truncated at the configured limits) and both trailer sets.
func TestFilterStream(t *testing.T) {
	m := NewManager()
	f := tapFilter(t, m, adminFilter)
	x := &filter.Exchange{Request: request(map[string]string{"x-tap": "1"})}
	// No session: nothing is tapped.
	if st := f.NewStream(x); st != nil {
		t.Errorf("NewStream without a session = %v; want nil", st)
	}
	s := attach(t, m, `{config_id: demo, tap_config: {match: {any_match: true}, output_config: {max_buffered_rx_bytes: 4, max_buffered_tx_bytes: 6, sinks: [{streaming_admin: {}}]}}}`)
	if r := f.OnRequest(x); r != nil {
		t.Errorf("OnRequest = %+v; want nil", r)
	}
	st := f.NewStream(x)
	if st == nil {
		t.Fatal("NewStream with a matching session = nil; want a stream")
	}
	st.RequestBody([]byte("abc"))
	st.RequestBody([]byte("def"))
	st.RequestTrailers(http.Header{"Grpc-Req": {"t"}})
	st.ResponseHeaders(201, http.Header{"Content-Type": {"text/plain"}})
	st.ResponseBody([]byte("hello world"))
	st.ResponseTrailers(http.Header{"Grpc-Status": {"0"}})
	st.End()
	want := &tapdatav3.HttpBufferedTrace{
		Request: &tapdatav3.HttpBufferedTrace_Message{
			Headers:  reqHeaderList(hv("x-tap", "1")),
			Body:     &tapdatav3.Body{BodyType: &tapdatav3.Body_AsBytes{AsBytes: []byte("abcd")}, Truncated: true},
			Trailers: []*corev3.HeaderValue{hv("grpc-req", "t")},
		},
		Response: &tapdatav3.HttpBufferedTrace_Message{
			Headers:  []*corev3.HeaderValue{hv(":status", "201"), hv("content-type", "text/plain")},
			Body:     &tapdatav3.Body{BodyType: &tapdatav3.Body_AsBytes{AsBytes: []byte("hello ")}, Truncated: true},
			Trailers: []*corev3.HeaderValue{hv("grpc-status", "0")},
		},
	}
	if diff := cmp.Diff(want, next(t, s).GetHttpBufferedTrace(), protocmp.Transform()); diff != "" {
		t.Errorf("trace (-want +got):\n%s", diff)
	}
	s.Close()
	if st := f.NewStream(x); st != nil {
		t.Errorf("NewStream after the session closed = %v; want nil", st)
	}
}

func TestRecordHeadersReceivedTime(t *testing.T) {
	m := NewManager()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m.now = func() time.Time { return at }
	f := tapFilter(t, m, adminFilter+"\nrecord_headers_received_time: true")
	s := attach(t, m, `{config_id: demo, tap_config: {match: {any_match: true}, output_config: {sinks: [{streaming_admin: {}}]}}}`)
	stream(f.NewTapper(), nil, nil, nil, 200, nil, nil, nil)
	tr := next(t, s).GetHttpBufferedTrace()
	for name, ts := range map[string]time.Time{"request": tr.GetRequest().GetHeadersReceivedTime().AsTime(), "response": tr.GetResponse().GetHeadersReceivedTime().AsTime()} {
		if !ts.Equal(at) {
			t.Errorf("%s headers_received_time = %v; want %v", name, ts, at)
		}
	}
}

func TestSampling(t *testing.T) {
	for _, tc := range []struct {
		rate string
		want bool
	}{{"{numerator: 0}", false}, {"{numerator: 100}", true}} {
		t.Run(tc.rate, func(t *testing.T) {
			f := tapFilter(t, NewManager(), `
common_config:
  static_config:
    match: {any_match: true}
    tap_enabled: {default_value: `+tc.rate+`}
    output_config: {sinks: [{file_per_tap: {path_prefix: "`+filepath.Join(t.TempDir(), "x")+`"}}]}
`)
			if got := f.NewTapper() != nil; got != tc.want {
				t.Errorf("stream admitted = %v; want %v", got, tc.want)
			}
		})
	}
}

func TestHeaderValueSanitized(t *testing.T) {
	if got, want := headerValue("k", "a\xffb\xc3\xa9").GetValue(), "a!bé"; got != want {
		t.Errorf("headerValue = %q; want %q", got, want)
	}
}

func newFromYAML(t testing.TB, m *Manager, y string) (*Filter, error) {
	t.Helper()
	return New(mustTapYAML(t, y), m)
}

func mustTapYAML(t testing.TB, y string) *tapv3.Tap {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	pb := &tapv3.Tap{}
	if err := protojson.Unmarshal(j, pb); err != nil {
		t.Fatal(err)
	}
	return pb
}

func adminFilterFor(id string) string {
	return `common_config: {admin_config: {config_id: ` + id + `}}`
}

// TestTraceOwnsItsStrings: the connection manager's header strings may share a buffer it
// reuses for the next request; a trace handed to the admin must not change with it.
func TestTraceOwnsItsStrings(t *testing.T) {
	m := NewManager()
	f := tapFilter(t, m, adminFilter)
	s := attach(t, m, `{config_id: demo, tap_config: {match: {any_match: true}, output_config: {sinks: [{streaming_admin: {}}]}}}`)
	buf := []byte("/path-in-a-reused-buffer")
	r := request(nil)
	r.Path = unsafe.String(&buf[0], len(buf))
	tp := f.NewTapper()
	tp.RequestHeaders(r)
	tp.ResponseHeaders(200, http.Header{})
	tp.End()
	copy(buf, "XXXXXXXXXXXXXXXXXXXXXXXX")
	if got := next(t, s).GetHttpBufferedTrace().GetRequest().GetHeaders()[1].GetValue(); got != "/path-in-a-reused-buffer" {
		t.Errorf(":path in the trace = %q; want %q", got, "/path-in-a-reused-buffer")
	}
}
