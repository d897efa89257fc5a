package httpproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/nettest"
)

// bodyFaultOutlier ejects a host after five 5xx or five gateway failures in a row.
const bodyFaultOutlier = "outlier_detection: {consecutive_5xx: 5, consecutive_gateway_failure: 5, enforcing_consecutive_gateway_failure: 100, interval: 0.2s, base_ejection_time: 30s, max_ejection_percent: 100}"

// bodyFaultEnv is a listener in front of one healthy upstream (it reads the request body
// and answers 200, or 500 for /fail) with outlier detection, logging each request's
// "%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS%" to the returned path.
func bodyFaultEnv(t *testing.T, upstream http.Handler, cluster string) (*env, string, string) {
	if upstream == nil {
		upstream = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				return
			}
			if r.URL.Path == "/fail" {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			io.WriteString(w, "ok")
		})
	}
	up := serveBothProtocols(t, upstream).Listener.Addr().String()
	path := filepath.Join(t.TempDir(), "access.log")
	hcm := simpleHCM("web", "") + fmt.Sprintf(`access_log:
- name: envoy.access_loggers.file
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
    path: %s
    log_format: {text_format_source: {inline_string: "%%RESPONSE_CODE%% %%RESPONSE_FLAGS%% %%RESPONSE_CODE_DETAILS%%\n"}}
`, path)
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", cluster, up)}, hcm: hcm})
	return e, up, path
}

// accessLog returns the lines written to the file access log at path so far.
func (e *env) accessLog(path string) []string {
	e.t.Helper()
	f, err := e.logs.Open(path)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := f.Flush(); err != nil {
		e.t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// rawRequest sends req on a new connection, half-closes it when closeWrite is set, and returns
// everything the proxy sent back until it closed the connection.
func (e *env) rawRequest(req string, closeWrite bool) string {
	e.t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(c, req); err != nil {
		e.t.Fatal(err)
	}
	if closeWrite {
		c.(*net.TCPConn).CloseWrite()
	}
	got, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, net.ErrClosed) && !isConnReset(err) {
		e.t.Fatalf("reading the answer to %q: %v (got %q)", req, err, got)
	}
	return string(got)
}

// isConnReset reports a read that ended with the peer's RST (it closed with unread bytes).
func isConnReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && strings.Contains(oe.Err.Error(), "reset")
}

// expectBodyFaultsUncharged checks that the host at up was charged nothing for the bad
// requests: not ejected, no 5xx or protocol error counted for the cluster.
func expectBodyFaultsUncharged(t *testing.T, e *env, up string) {
	t.Helper()
	if f := e.hostAt("web", up).HealthFlags(); f != 0 {
		t.Errorf("host flags = %v; want none (the client's errors are not the host's)", f)
	}
	for _, name := range []string{
		"cluster.web.upstream_rq_5xx", "cluster.web.upstream_rq_503",
		"cluster.web.outlier_detection.ejections_detected_consecutive_5xx",
		"cluster.web.outlier_detection.ejections_detected_consecutive_gateway_failure",
		"cluster.web.upstream_cx_protocol_error",
		"http.ingress.rq_reset_after_downstream_response_started",
	} {
		if got := e.stat(name); got != 0 {
			t.Errorf("%s = %d; want 0", name, got)
		}
	}
}

// expectNoHostError checks that the host at up counted no rq_error: the pool charges a
// failure reading the request body to no host.
func expectNoHostError(t *testing.T, e *env, up string) {
	t.Helper()
	if got := e.hostStats("web", up).Rq().Error; got != 0 {
		t.Errorf("host rq_error = %d; want 0", got)
	}
}

// expectEjectable shows the outlier detection the test relies on works: five 500s from the
// upstream eject its host.
func expectEjectable(t *testing.T, e *env, up string) {
	t.Helper()
	c := e.client()
	for range 5 {
		e.get(c, "/fail")
	}
	waitFlag(t, e.hostAt("web", up), host.FailedOutlierCheck)
}

// TestMalformedRequestBodyIsClientError: a request whose chunked body is malformed is the
// client's protocol error, as Envoy's codec reports it: 400 "Bad Request" with
// connection: close, flag DPE and details http1.codec_error, downstream_cx_protocol_error;
// the healthy upstream is charged nothing, so ten such requests do not eject it.
func TestMalformedRequestBodyIsClientError(t *testing.T) {
	e, up, logPath := bodyFaultEnv(t, nil, bodyFaultOutlier)
	bad := []string{
		"5\r\nhello\r\nzz\r\n", // a chunk size that is not hex
		"5\r\nhello!!\r\n",     // chunk data longer than its size
		"5\r\nhello\r\n-1\r\n", // a negative chunk size
	}
	const n = 10
	for i := range n {
		got := e.rawRequest("POST /upload HTTP/1.1\r\nHost: web\r\nTransfer-Encoding: chunked\r\n\r\n"+bad[i%len(bad)], false)
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(got)), nil)
		if err != nil {
			t.Fatalf("request %d: answer %q: %v", i, got, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusBadRequest || string(body) != "Bad Request" || !resp.Close {
			t.Fatalf("request %d = %d %q (close %v); want 400 \"Bad Request\" closing the connection", i, resp.StatusCode, body, resp.Close)
		}
	}
	expectBodyFaultsUncharged(t, e, up)
	expectNoHostError(t, e, up)
	for name, want := range map[string]uint64{
		"http.ingress.downstream_cx_protocol_error": n,
		"http.ingress.downstream_rq_4xx":            n,
		"http.ingress.downstream_rq_5xx":            0,
	} {
		if got := e.stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
	waitLogLines(t, e, logPath, slices.Repeat([]string{"400 DPE http1.codec_error"}, n))
	expectEjectable(t, e, up)
}

// TestTruncatedUploadIsClientError: a client that closes its side before sending the
// Content-Length it announced went away mid-request: Envoy does not answer it (flag DC,
// downstream_cx_destroy_remote_active_rq), and the upstream is charged nothing.
func TestTruncatedUploadIsClientError(t *testing.T) {
	e, up, logPath := bodyFaultEnv(t, nil, bodyFaultOutlier)
	const n = 10
	for i := range n {
		if got := e.rawRequest("POST /upload HTTP/1.1\r\nHost: web\r\nContent-Length: 100\r\n\r\nonly part of it", true); got != "" {
			t.Fatalf("request %d answered %q; want no answer to a client that left", i, got)
		}
	}
	expectBodyFaultsUncharged(t, e, up)
	expectNoHostError(t, e, up)
	if got := e.stat("http.ingress.downstream_cx_destroy_remote_active_rq"); got != n {
		t.Errorf("downstream_cx_destroy_remote_active_rq = %d; want %d", got, n)
	}
	waitLogLines(t, e, logPath, slices.Repeat([]string{"0 DC downstream_remote_disconnect"}, n))
	expectEjectable(t, e, up)
}

// TestRequestBodyFaultWhileResponseStreams: an HTTP/2 upstream answers at once and streams
// its response while the client's chunked body is still on its way; when the body turns
// out malformed, the response cannot be completed and is cut, flagged DPE, and the host is
// charged nothing (no outlier report, no reset after the response started).
func TestRequestBodyFaultWhileResponseStreams(t *testing.T) {
	started := make(chan struct{}, 1)
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "started\n")
		w.(http.Flusher).Flush()
		started <- struct{}{}
		io.Copy(io.Discard, r.Body)
	})
	e, up, logPath := bodyFaultEnv(t, upstream, bodyFaultOutlier+"\n"+h2ClusterOptions)
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	io.WriteString(c, "POST /stream HTTP/1.1\r\nHost: web\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response head: %v", err)
	}
	select {
	case <-started:
	case <-time.After(wait):
		t.Fatal("the upstream did not start its response")
	}
	first, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || first != "started\n" {
		t.Fatalf("first body line = %q, %v; want %q", first, err, "started\n")
	}
	io.WriteString(c, "zz\r\n") // not a chunk size
	if rest, err := io.ReadAll(resp.Body); err == nil {
		t.Errorf("the response ended cleanly (%q); want it cut", rest)
	}
	expectBodyFaultsUncharged(t, e, up)
	expectNoHostError(t, e, up)
	if got := e.stat("http.ingress.downstream_cx_protocol_error"); got != 1 {
		t.Errorf("downstream_cx_protocol_error = %d; want 1", got)
	}
	waitLogLines(t, e, logPath, []string{"200 DPE http1.codec_error"})
}

// waitLogLines waits until the access log at path holds want: a stream's line is written
// once its response ended, which the client may see first when the response is cut (an
// answer that closes the connection comes after its line).
func waitLogLines(t *testing.T, e *env, path string, want []string) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(wait)
	for {
		got := e.accessLog(path)
		if strings.Join(got, "\n") == strings.Join(want, "\n") {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("access log = %q; want %q", got, want)
		}
	}
}

// TestH2ClientLeavingIsNotChargedToUpstream: an HTTP/2 client that resets its stream, or
// closes its connection, while the upstream has not answered yet ends the upstream request,
// and that is not the host's failure: no 504 or 5xx for the cluster, no outlier report, and
// the stream is logged DR (http2.remote_reset) or DC (downstream_remote_disconnect), as
// Envoy logs them.
func TestH2ClientLeavingIsNotChargedToUpstream(t *testing.T) {
	started := make(chan struct{}, 1)
	holding := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
	})
	for _, tc := range []struct {
		name      string
		closeConn bool
		log       string
	}{
		{"reset", false, "0 DR http2.remote_reset"},
		{"close", true, "0 DC downstream_remote_disconnect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, up, logPath := bodyFaultEnv(t, holding, bodyFaultOutlier)
			for i := range 6 {
				fr, conn := frameClient(t, e.addr)
				if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: requestBlock("/held"), EndHeaders: true, EndStream: true}); err != nil {
					t.Fatal(err)
				}
				select {
				case <-started:
				case <-time.After(wait):
					t.Fatal("the request did not reach the upstream")
				}
				if tc.closeConn {
					conn.Close()
				} else if err := fr.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
					t.Fatal(err)
				}
				waitLogLines(t, e, logPath, slices.Repeat([]string{tc.log}, i+1))
			}
			expectBodyFaultsUncharged(t, e, up)
			if got := e.stat("cluster.web.upstream_rq_504"); got != 0 {
				t.Errorf("upstream_rq_504 = %d; want 0", got)
			}
		})
	}
}

// TestH2ShortRequestBodyIsClientError: an HTTP/2 request that ends its stream short of the
// content-length it declared breaks HTTP/2's messaging rules: the client's protocol error
// (DPE, http2.violation.of.messaging.rule), never answered 503 nor charged to the host.
func TestH2ShortRequestBodyIsClientError(t *testing.T) {
	e, up, logPath := bodyFaultEnv(t, nil, bodyFaultOutlier)
	fr, conn := frameClient(t, e.addr)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(wait))
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "web"}, {":path", "/upload"}, {"content-length", "10"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteData(1, true, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events(t, fr, 1) {
		if ev.Kind == "headers" && ev.Status != "400" {
			t.Errorf("answered %s; want 400 or a reset", ev.Status)
		}
	}
	waitLogLines(t, e, logPath, []string{"400 DPE http2.violation.of.messaging.rule"})
	expectBodyFaultsUncharged(t, e, up)
	expectNoHostError(t, e, up)
}

// TestEarlyAnswerCutIsUpstreamFailure: an upstream answers an upload the client has paused,
// then cuts its response short. The body read Legate interrupted for the early answer is not
// the client's fault: the cut is the upstream's (UC), reported as such.
func TestEarlyAnswerCutIsUpstreamFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nettest.Serve(t, ln, func(c net.Conn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(wait))
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		// The answer comes before the body; the response is cut (FIN) while the upload is
		// still read, so the cut is a clean close.
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
		c.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, br)
	})
	path := filepath.Join(t.TempDir(), "access.log")
	hcm := simpleHCM("web", "") + fmt.Sprintf(`access_log:
- name: envoy.access_loggers.file
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
    path: %s
    log_format: {text_format_source: {inline_string: "%%RESPONSE_CODE%% %%RESPONSE_FLAGS%%\n"}}
`, path)
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", ln.Addr().String())}, hcm: hcm})
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	// 64 KiB of the body, more than Legate buffers before writing upstream, then a pause.
	io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: web\r\nContent-Length: 1000000\r\n\r\n"+strings.Repeat("x", 64<<10))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the cut response ended cleanly; want it cut")
	}
	waitLogLines(t, e, path, []string{"200 UC"})
}

// TestClientLeavingMidResponse: an HTTP/1 client that closes its connection while a streamed
// response is written to it went away (DC, downstream_cx_destroy_remote_active_rq); the
// upstream did nothing wrong (no rq_reset_after_downstream_response_started, no UC).
func TestClientLeavingMidResponse(t *testing.T) {
	firstSent := make(chan struct{})
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(hdrContentType, "text/event-stream")
		io.WriteString(w, sseEvent(0))
		w.(http.Flusher).Flush()
		close(firstSent)
		for r.Context().Err() == nil { // until Legate drops the exchange
			if _, err := io.WriteString(w, sseEvent(1)); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	e, _, logPath := bodyFaultEnv(t, upstream, "")
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(wait))
	io.WriteString(c, "GET /events HTTP/1.1\r\nHost: web\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d; want 200", resp.StatusCode)
	}
	<-firstSent
	c.Close()
	waitLogLines(t, e, logPath, []string{"200 DC downstream_remote_disconnect"})
	for name, want := range map[string]uint64{
		"http.ingress.downstream_cx_destroy_remote_active_rq":     1,
		"http.ingress.rq_reset_after_downstream_response_started": 0,
	} {
		if got := e.stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
}
