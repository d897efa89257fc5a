package httpproxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestEarlyHTTP2AnswerReleasesRequestBody: an HTTP/2 upstream that answers an HTTP/1 upload
// before reading it leaves x/net/http2's transport in a Read of the request body. Once the
// answer is forwarded, that Read must not touch the body again: the stream that held it goes
// on to serve other requests, whose bodies must arrive whole (before, a late Read consumed
// or failed the next request's body: 400s and short bodies under load).
func TestEarlyHTTP2AnswerReleasesRequestBody(t *testing.T) {
	early := serveBothProtocols(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge) // the body is not read
	}))
	echoUp := serveBothProtocols(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d:%s", len(b), b)
	}))
	e := newEnv(t, envOptions{
		clusters: []string{
			staticCluster("early", h2ClusterOptions, early.Listener.Addr().String()),
			staticCluster("echo", "", echoUp.Listener.Addr().String()),
		},
		hcm: twoRouteHCM("/early", "early", "echo", ""),
	})
	c := e.client()
	body := strings.Repeat("0123456789", 2000)
	end := time.Now().Add(3 * time.Second)
	for i := 0; i < 40 && time.Now().Before(end); i++ {
		// An upload the upstream answers at once, with more of it sent after the answer.
		up, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		up.SetDeadline(time.Now().Add(wait))
		io.WriteString(up, "POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nfirst bytes")
		resp, err := http.ReadResponse(bufio.NewReader(up), nil)
		if err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("upload %d = %d; want 413", i, resp.StatusCode)
		}
		// Another request's body, served while the upload's connection is still open.
		r, err := c.Post("http://"+e.addr+"/echo", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		got, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if want := fmt.Sprintf("%d:%s", len(body), body); r.StatusCode != http.StatusOK || string(got) != want {
			t.Fatalf("request %d after an early answer = %d %.40q; want 200 %.40q", i, r.StatusCode, got, want)
		}
		up.Write(bytes.Repeat([]byte("late"), 1000)) // what a late Read would take
		up.Close()
	}
}

// TestRequestBodyNotReplayedAcrossRequests: a stream whose request body was buffered for
// retries keeps the buffer's storage for its next request; a next request without retries
// must still send its own body (it was replaced by the empty buffer: 0 bytes upstream, or a
// request cut short of its content-length).
func TestRequestBodyNotReplayedAcrossRequests(t *testing.T) {
	echoUp := serveBothProtocols(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d:%s", len(b), b)
	}))
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", echoUp.Listener.Addr().String())},
		hcm: `stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/retried"}
      route: {cluster: web, retry_policy: {retry_on: 5xx, num_retries: 1}}
    - match: {prefix: "/"}
      route: {cluster: web}
`,
	})
	c := e.client()
	c.Transport.(*http.Transport).MaxConnsPerHost = 1 // one connection, served by one goroutine
	for i := range 20 {
		for _, path := range []string{"/retried", "/plain"} {
			body := fmt.Sprintf("body %d for %s", i, path)
			r, err := c.Post("http://"+e.addr+path, "text/plain", strings.NewReader(body))
			if err != nil {
				t.Fatalf("POST %s: %v", path, err)
			}
			got, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if want := fmt.Sprintf("%d:%s", len(body), body); r.StatusCode != http.StatusOK || string(got) != want {
				t.Fatalf("POST %s (%d) = %d %q; want 200 %q", path, i, r.StatusCode, got, want)
			}
		}
	}
}
