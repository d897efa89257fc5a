package httpproxy

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// headRecorder is an HTTP/1.1 upstream that hands each request head it reads, as sent, to
// heads, and answers every request with resp (a whole response, connection kept). It reads
// a request's body when it is four bytes long or chunked.
func headRecorder(t *testing.T, resp string) (addr string, heads <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					var head strings.Builder
					for {
						line, err := br.ReadString('\n')
						if err != nil {
							return
						}
						head.WriteString(line)
						if line == "\r\n" {
							break
						}
					}
					switch lower := strings.ToLower(head.String()); {
					case strings.Contains(lower, "content-length: 4\r\n"):
						io.ReadFull(br, make([]byte, 4))
					case strings.Contains(lower, "transfer-encoding: chunked\r\n"):
						for last := ""; ; { // up to the last chunk's empty trailer section
							line, err := br.ReadString('\n')
							if err != nil {
								return
							}
							if last == "0\r\n" && line == "\r\n" {
								break
							}
							last = line
						}
					}
					ch <- head.String()
					if _, err := io.WriteString(c, resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), ch
}

// exchangeRaw sends req on a new connection and returns the first response the proxy writes
// (its body framed by content-length, or chunked without trailers).
func exchangeRaw(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out strings.Builder
	n, chunked := -1, false
	for {
		line, err := br.ReadString('\n')
		out.WriteString(line)
		if err != nil {
			t.Fatalf("reading the response: %v (so far %q)", err, out.String())
		}
		if l := strings.ToLower(line); strings.HasPrefix(l, "content-length: ") {
			n = 0
			for _, d := range strings.TrimSpace(l[len("content-length: "):]) {
				n = n*10 + int(d-'0')
			}
		}
		chunked = chunked || strings.EqualFold(line, "transfer-encoding: chunked\r\n")
		if line == "\r\n" {
			break
		}
	}
	for last := ""; chunked; {
		line, err := br.ReadString('\n')
		out.WriteString(line)
		if err != nil {
			t.Fatalf("reading the chunked body: %v (so far %q)", err, out.String())
		}
		if last == "0\r\n" && line == "\r\n" {
			return out.String()
		}
		last = line
	}
	body := make([]byte, max(n, 0))
	if _, err := io.ReadFull(br, body); err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	out.Write(body)
	return out.String()
}

func nextHead(t *testing.T, heads <-chan string) string {
	t.Helper()
	select {
	case h := <-heads:
		return h
	case <-time.After(wait):
		t.Fatal("the upstream got no request")
		return ""
	}
}

const upstreamReply = "HTTP/1.1 200 OK\r\nX-ReSp_name: r\r\nContent-Length: 2\r\n\r\nok"

// TestHTTP1RequestChecks: the connection manager's http_protocol_options decide which
// HTTP/1 requests reach a route, with Envoy's answers: HTTP/1.0 only with accept_http_10 (426
// in HTTP/1.1 and the connection closed otherwise), default_host_for_http_10 as the host of an
// HTTP/1.0 request without one (400 when there is neither), an absolute-form target only with
// allow_absolute_url (404 and downstream_rq_non_relative_path otherwise), and a chunked
// request with Content-Length only with allow_chunked_length (read as chunked, the length
// dropped).
func TestHTTP1RequestChecks(t *testing.T) {
	up, heads := headRecorder(t, upstreamReply)
	cl := staticCluster("web", "", up)
	defaults := newEnv(t, envOptions{clusters: []string{cl}, hcm: simpleHCM("web", "")})
	opts := newEnv(t, envOptions{clusters: []string{cl}, hcm: simpleHCM("web", "") +
		"http_protocol_options: {accept_http_10: true, default_host_for_http_10: legacy.example, allow_absolute_url: false, allow_chunked_length: true}\n"})
	noDefaultHost := newEnv(t, envOptions{clusters: []string{cl}, hcm: simpleHCM("web", "") +
		"http_protocol_options: {accept_http_10: true}\n"})

	t.Run("http/1.0 refused by default", func(t *testing.T) {
		got := exchangeRaw(t, defaults.addr, "GET /old HTTP/1.0\r\nHost: x\r\n\r\n")
		if !strings.HasPrefix(got, "HTTP/1.1 426 Upgrade Required\r\n") || !strings.Contains(got, "connection: close\r\n") {
			t.Errorf("response = %q; want HTTP/1.1 426 with connection: close", got)
		}
	})
	t.Run("http/1.0 with a default host", func(t *testing.T) {
		got := exchangeRaw(t, opts.addr, "GET /old HTTP/1.0\r\n\r\n")
		if !strings.HasPrefix(got, "HTTP/1.0 200 OK\r\n") {
			t.Fatalf("response = %q; want HTTP/1.0 200", got)
		}
		if h := nextHead(t, heads); !strings.Contains(h, "\r\nhost: legacy.example\r\n") {
			t.Errorf("upstream request = %q; want host: legacy.example", h)
		}
	})
	t.Run("http/1.0 without a host", func(t *testing.T) {
		if got := exchangeRaw(t, noDefaultHost.addr, "GET /old HTTP/1.0\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.0 400 ") {
			t.Errorf("response = %q; want 400", got)
		}
	})
	t.Run("absolute url refused", func(t *testing.T) {
		if got := exchangeRaw(t, opts.addr, "GET http://x/p HTTP/1.1\r\nHost: x\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 404 ") {
			t.Errorf("response = %q; want 404", got)
		}
		if n := opts.stat("http.ingress.downstream_rq_non_relative_path"); n != 1 {
			t.Errorf("downstream_rq_non_relative_path = %d; want 1", n)
		}
	})
	t.Run("absolute url accepted by default", func(t *testing.T) {
		if got := exchangeRaw(t, defaults.addr, "GET http://x/p HTTP/1.1\r\nHost: x\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 200 ") {
			t.Errorf("response = %q; want 200", got)
		}
		if h := nextHead(t, heads); !strings.HasPrefix(h, "GET /p HTTP/1.1\r\n") {
			t.Errorf("upstream request = %q; want GET /p", h)
		}
	})
	t.Run("chunked with content-length", func(t *testing.T) {
		req := "POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n"
		if got := exchangeRaw(t, defaults.addr, req); !strings.HasPrefix(got, "HTTP/1.1 400 ") {
			t.Errorf("without allow_chunked_length: response = %q; want 400", got)
		}
		if got := exchangeRaw(t, opts.addr, req); !strings.HasPrefix(got, "HTTP/1.1 200 ") {
			t.Fatalf("with allow_chunked_length: response = %q; want 200", got)
		}
		// The body is re-framed upstream with the length Legate knows: none, so chunked.
		if h := nextHead(t, heads); !strings.Contains(h, "\r\ntransfer-encoding: chunked\r\n") || strings.Contains(h, "content-length") {
			t.Errorf("upstream request = %q; want chunked without content-length", h)
		}
	})
}

// TestHTTP1HeaderKeyFormat: HTTP/1 header names leave in lower case by default (Envoy's
// codec), in proper case with proper_case_words (the connection manager's for responses, the
// cluster's for requests), and as their sender spelled them with the preserve_case formatter
// (the connection manager's for requests, the cluster's for responses), the names Legate adds
// in lower case. send_fully_qualified_url puts an absolute-form target on the request line.
func TestHTTP1HeaderKeyFormat(t *testing.T) {
	const preserve = `{header_key_format: {stateful_formatter: {name: preserve_case, typed_config: {"@type": type.googleapis.com/envoy.extensions.http.header_formatters.preserve_case.v3.PreserveCaseFormatterConfig}}}}`
	const proper = `{header_key_format: {proper_case_words: {}}}`
	const req = "GET /p HTTP/1.1\r\nHost: x\r\nX-CuStOm_name: c\r\n\r\n"
	tests := []struct {
		name                string
		cluster, hcm        string // http_protocol_options, or ""
		wantUp, notUp       []string
		wantDown, notDown   []string
		wantRequestLineFrom string
	}{
		{
			name:   "default lower case",
			wantUp: []string{"\r\nhost: x\r\n", "\r\nx-custom_name: c\r\n", "\r\nx-forwarded-proto: http\r\n"}, notUp: []string{"Host", "X-"},
			wantDown: []string{"\r\nx-resp_name: r\r\n", "\r\ncontent-length: 2\r\n", "\r\nserver: envoy\r\n"}, notDown: []string{"X-", "Content-"},
		},
		{
			name: "proper case", cluster: proper, hcm: proper,
			wantUp:   []string{"\r\nHost: x\r\n", "\r\nX-Custom_Name: c\r\n", "\r\nX-Forwarded-Proto: http\r\n"},
			wantDown: []string{"\r\nX-Resp_Name: r\r\n", "\r\nContent-Length: 2\r\n", "\r\nServer: envoy\r\n"},
		},
		{
			name: "preserve case", cluster: preserve, hcm: preserve,
			wantUp:   []string{"\r\nX-CuStOm_name: c\r\n", "\r\nx-forwarded-proto: http\r\n"},
			wantDown: []string{"\r\nX-ReSp_name: r\r\n", "\r\nserver: envoy\r\n"},
		},
		{
			name: "preserve case on the cluster only keeps the response's", cluster: preserve,
			wantUp:   []string{"\r\nx-custom_name: c\r\n"},
			wantDown: []string{"\r\nX-ReSp_name: r\r\n"},
		},
		{
			name: "fully qualified url", cluster: "{send_fully_qualified_url: true}",
			wantRequestLineFrom: "GET http://x/p HTTP/1.1\r\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up, heads := headRecorder(t, upstreamReply)
			var cl, hcm string
			if tt.cluster != "" {
				cl = "http_protocol_options: " + tt.cluster
			}
			if tt.hcm != "" {
				hcm = "http_protocol_options: " + tt.hcm + "\n"
			}
			e := newEnv(t, envOptions{clusters: []string{staticCluster("web", cl, up)}, hcm: simpleHCM("web", "") + hcm})
			down := exchangeRaw(t, e.addr, req)
			head := nextHead(t, heads)
			if !strings.HasPrefix(down, "HTTP/1.1 200 OK\r\n") {
				t.Fatalf("response = %q; want 200", down)
			}
			if tt.wantRequestLineFrom != "" && !strings.HasPrefix(head, tt.wantRequestLineFrom) {
				t.Errorf("upstream request = %q; want it to start %q", head, tt.wantRequestLineFrom)
			}
			checkLines(t, "upstream request", head, tt.wantUp, tt.notUp)
			checkLines(t, "response", down, tt.wantDown, tt.notDown)
		})
	}
}

// checkLines reports which of want the message lacks and which of not it holds.
func checkLines(t *testing.T, what, msg string, want, not []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s = %q; want %q in it", what, msg, w)
		}
	}
	for _, w := range not {
		if strings.Contains(msg, w) {
			t.Errorf("%s = %q; want no %q in it", what, msg, w)
		}
	}
}

// TestUpstreamChunkedWithLength: an HTTP/1.1 upstream response with both Transfer-Encoding:
// chunked and Content-Length is a protocol error (503) unless the cluster's
// allow_chunked_length, as in Envoy's codec.
func TestUpstreamChunkedWithLength(t *testing.T) {
	up, _ := headRecorder(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("strict", "", up), staticCluster("lenient", "http_protocol_options: {allow_chunked_length: true}", up)},
		hcm:      twoRouteHCM("/lenient", "lenient", "strict", ""),
	})
	if got := exchangeRaw(t, e.addr, "GET /strict HTTP/1.1\r\nHost: x\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 503 ") {
		t.Errorf("strict cluster: response = %q; want 503", got)
	}
	if n := e.stat("cluster.strict.upstream_cx_protocol_error"); n != 1 {
		t.Errorf("upstream_cx_protocol_error = %d; want 1", n)
	}
	got := exchangeRaw(t, e.addr, "GET /lenient HTTP/1.1\r\nHost: x\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 200 ") || !strings.HasSuffix(got, "ok\r\n0\r\n\r\n") {
		t.Errorf("lenient cluster: response = %q; want 200 with the chunked body", got)
	}
}

// TestUpgradeHeaderKeyFormat: the HTTP/1.1 request of an upgrade (WebSocket) goes upstream
// with its names in the cluster's header_key_format, lower case by default.
func TestUpgradeHeaderKeyFormat(t *testing.T) {
	up, heads := headRecorder(t, "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n")
	hcm := simpleHCM("web", "") + "upgrade_configs: [{upgrade_type: websocket}]\n"
	const req = "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nX-Foo_bar: 1\r\n\r\n"
	for _, tc := range []struct {
		name, cluster string
		want          []string
	}{
		{"default", "", []string{"\r\nhost: x\r\n", "\r\nconnection: upgrade\r\n", "\r\nupgrade: websocket\r\n", "\r\nx-foo_bar: 1\r\n"}},
		{"proper case", "http_protocol_options: {header_key_format: {proper_case_words: {}}}",
			[]string{"\r\nHost: x\r\n", "\r\nConnection: upgrade\r\n", "\r\nUpgrade: websocket\r\n", "\r\nX-Foo_Bar: 1\r\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{clusters: []string{staticCluster("web", tc.cluster, up)}, hcm: hcm})
			if got := exchangeRaw(t, e.addr, req); !strings.HasPrefix(got, "HTTP/1.1 101 ") {
				t.Fatalf("response = %q; want 101", got)
			}
			checkLines(t, "upstream upgrade request", nextHead(t, heads), tc.want, nil)
		})
	}
}
