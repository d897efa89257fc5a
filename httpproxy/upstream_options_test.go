package httpproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestUpstreamMaxStreamDurationReply: a cluster's max_stream_duration ends an attempt whose
// response has not started with Envoy's 504 "upstream max stream duration reached" (the
// request was whole), counted in upstream_rq_max_duration_reached.
func TestUpstreamMaxStreamDurationReply(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-r.Context().Done()
			return
		}
		w.Write([]byte("ok"))
	}))
	defer up.Close()
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "common_http_protocol_options: {max_stream_duration: 0.2s}", up.Listener.Addr().String())},
		hcm:      simpleHCM("web", ""),
	})
	c := e.client()
	if resp, body := e.get(c, "/fast"); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("/fast = %d %q; want 200 ok", resp.StatusCode, body)
	}
	resp, body := e.get(c, "/slow")
	if resp.StatusCode != http.StatusGatewayTimeout || body != "upstream max stream duration reached" {
		t.Fatalf("/slow = %d %q; want 504 \"upstream max stream duration reached\"", resp.StatusCode, body)
	}
	if got := e.stat("cluster.web.upstream_rq_max_duration_reached"); got != 1 {
		t.Errorf("upstream_rq_max_duration_reached = %d; want 1", got)
	}
}

// TestUpstreamMaxHeadersCountReply: an upstream response with more header fields than the
// cluster's max_headers_count is answered 503 as a protocol error reset.
func TestUpstreamMaxHeadersCountReply(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 10 {
			w.Header().Set(fmt.Sprintf("X-H%d", i), "v")
		}
	}))
	defer up.Close()
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "common_http_protocol_options: {max_headers_count: 8}", up.Listener.Addr().String())},
		hcm:      simpleHCM("web", ""),
	})
	resp, body := e.get(e.client(), "/")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.HasSuffix(body, "reset reason: protocol error") {
		t.Fatalf("response = %d %q; want 503 with reset reason protocol error", resp.StatusCode, body)
	}
	if got := e.stat("cluster.web.upstream_cx_protocol_error"); got != 1 {
		t.Errorf("upstream_cx_protocol_error = %d; want 1", got)
	}
}

// TestUpstreamMaxStreamDurationBodyArriving: max_stream_duration reached while the client is
// still sending the request body is answered 408, as Envoy answers it.
func TestUpstreamMaxStreamDurationBodyArriving(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer up.Close()
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "common_http_protocol_options: {max_stream_duration: 0.2s}", up.Listener.Addr().String())},
		hcm:      simpleHCM("web", ""),
	})
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// 10 of the 100 body bytes announced; the rest never comes.
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || string(body) != "upstream max stream duration reached" {
		t.Fatalf("response = %d %q; want 408 \"upstream max stream duration reached\"", resp.StatusCode, body)
	}
}
