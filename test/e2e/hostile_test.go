package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestHostileClientsKeepServing runs a bounded hostile-client suite against the binary while a
// normal client keeps sending requests: HTTP/2 rapid reset (HEADERS then RST_STREAM, as fast as
// the socket takes them), header floods over HTTP/1.1 and HTTP/2, and slowloris connections
// trickling a request head under request_headers_timeout. Legate must refuse the floods, close
// the slow connections at the timeout, and keep answering the normal client throughout.
func TestHostileClientsKeepServing(t *testing.T) {
	var upstreamRequests atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamRequests.Add(1)
		io.WriteString(w, "upstream ok")
	}))
	defer up.Close()
	host, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  clusters:
  - name: backend
    connect_timeout: 1s
    load_assignment:
      cluster_name: backend
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: ` + host + `, port_value: ` + port + `}}}}]}]
  listeners:
  - name: ingress
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress_http
          request_headers_timeout: 1s
          route_config:
            virtual_hosts:
            - {name: all, domains: ["*"], routes: [{match: {prefix: "/"}, route: {cluster: backend}}]}
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`
	p := start(t, "-c", writeConfig(t, cfg))
	addr := p.ingressAddr()

	// The normal client: one keep-alive connection, a request every 10 ms, until the end.
	normal := &http.Client{Timeout: 5 * time.Second}
	var served, refused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			resp, err := normal.Get("http://" + addr + "/normal")
			if err != nil {
				refused.Add(1)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && string(b) == "upstream ok" {
				served.Add(1)
			} else {
				refused.Add(1)
			}
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
	}()
	phase := func(name string, attack func()) {
		t.Helper()
		before := served.Load()
		attack()
		deadline := time.After(5 * time.Second)
		for served.Load() < before+20 {
			select {
			case <-deadline:
				t.Fatalf("%s: the normal client got %d answers in the 5 s after the attack; want 20", name, served.Load()-before)
			case <-time.After(10 * time.Millisecond): // the normal client's next answer
			}
		}
	}

	phase("rapid reset", func() {
		before := upstreamRequests.Load()
		resets, cut := rapidReset(t, addr, 2*time.Second)
		got := upstreamRequests.Load() - before
		t.Logf("rapid reset: %d streams reset; %d upstream requests in that time (the normal client's included)", resets, got)
		if !cut {
			t.Error("rapid reset: the attacking connection was still open after 2 s")
		}
		if got > int64(resets)/10 {
			t.Errorf("rapid reset: %d upstream requests for %d reset streams; want under 10 %%", got, resets)
		}
		if v, _ := p.stat("http.ingress_http.downstream_rq_too_many_premature_resets"); v == 0 {
			t.Error("http.ingress_http.downstream_rq_too_many_premature_resets = 0 after the attack")
		}
	})
	phase("header flood HTTP/1.1", func() {
		var b strings.Builder
		b.WriteString("GET /flood HTTP/1.1\r\nHost: x\r\n")
		for i := range 200 {
			fmt.Fprintf(&b, "X-Flood-%d: %s\r\n", i, strings.Repeat("v", 100))
		}
		b.WriteString("\r\n")
		status := rawHTTP1Status(t, addr, b.String())
		if status != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("HTTP/1.1 request with 200 headers = %d; want 431", status)
		}
	})
	phase("header flood HTTP/2", func() {
		status := h2Flood(t, addr, 150)
		if status != http.StatusRequestHeaderFieldsTooLarge && status != -1 {
			t.Errorf("HTTP/2 request with 150 headers = %d; want 431 or a stream reset", status)
		}
	})
	phase("slowloris", func() {
		const n = 20
		var closed atomic.Int64
		var sw sync.WaitGroup
		for range n {
			sw.Go(func() {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer c.Close()
				head := "GET /slow HTTP/1.1\r\nHost: x\r\nX-Slow: "
				end := time.Now().Add(4 * time.Second)
				for i := 0; time.Now().Before(end); i++ {
					if _, err := c.Write([]byte{head[i%len(head)]}); err != nil {
						closed.Add(1)
						return
					}
					c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
					if _, err := c.Read(make([]byte, 512)); err != nil && !isTimeoutErr(err) {
						closed.Add(1) // answered 408 and closed, or closed
						return
					}
				}
			})
		}
		sw.Wait()
		if got := closed.Load(); got != n {
			t.Errorf("slowloris: %d of %d connections closed within 4 s under request_headers_timeout 1s", got, n)
		}
	})
	if v, _ := p.stat("http.ingress_http.downstream_rq_header_timeout"); v == 0 {
		t.Error("http.ingress_http.downstream_rq_header_timeout = 0 after the slowloris phase")
	}
	t.Logf("normal client: %d answered, %d failed", served.Load(), refused.Load())
}

func isTimeoutErr(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// rawHTTP1Status sends one raw request head and returns the response status.
func rawHTTP1Status(t *testing.T, addr, req string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, req)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// h2Conn opens a prior-knowledge HTTP/2 connection and returns its framer after the preface
// and SETTINGS.
func h2Conn(t *testing.T, addr string) (net.Conn, *http2.Framer) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return c, fr
}

func h2Headers(fields ...string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for i := 0; i+1 < len(fields); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return buf.Bytes()
}

// rapidReset opens streams and resets each at once for d, or until the server closes the
// connection; it returns how many it reset and whether the server cut the connection.
func rapidReset(t *testing.T, addr string, d time.Duration) (n int, cut bool) {
	t.Helper()
	c, fr := h2Conn(t, addr)
	defer c.Close()
	go io.Copy(io.Discard, c) // the server's frames are not the point; keep its writes flowing
	block := h2Headers(":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/reset")
	end := time.Now().Add(d)
	c.SetWriteDeadline(end.Add(time.Second))
	for id := uint32(1); time.Now().Before(end); id += 2 {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
			return n, true
		}
		if err := fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			return n, true
		}
		n++
	}
	return n, false
}

// h2Flood sends one request with n extra headers and returns its status, or -1 when the stream
// or connection was reset.
func h2Flood(t *testing.T, addr string, n int) int {
	t.Helper()
	c, fr := h2Conn(t, addr)
	defer c.Close()
	fields := []string{":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/flood"}
	for i := range n {
		fields = append(fields, fmt.Sprintf("x-flood-%d", i), "v")
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h2Headers(fields...), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	dec := hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return -1
		}
		switch f := f.(type) {
		case *http2.HeadersFrame:
			hs, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range hs {
				if h.Name == ":status" {
					var code int
					fmt.Sscan(h.Value, &code)
					return code
				}
			}
		case *http2.RSTStreamFrame, *http2.GoAwayFrame:
			return -1
		}
	}
}
