package httpproxy

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/buffer"
)

// rewriteFilter rewrites the bodies of requests that carry x-rewrite: the request body is
// upper-cased (and its trailers, when it may have some, get x-rewritten), the response body
// is upper-cased between brackets with its trailers moved into it ("|name=value" before the
// closing bracket), as grpc_web moves gRPC's.
type rewriteFilter struct{}

func (rewriteFilter) OnRequest(x *filter.Exchange) *filter.Reply {
	if x.Request.Header.Get("X-Rewrite") != "" {
		x.RewriteRequestBody(func(src filter.Body) io.Reader { return &upperBody{src: src} })
	}
	return nil
}

func (rewriteFilter) OnResponse(x *filter.Exchange, h http.Header) {
	if x.Request.Header.Get("X-Hold") != "" {
		x.HoldResponseHeaders()
		x.RewriteResponseBody(func(src filter.Body) io.Reader { return &headerBody{src: src, h: h} })
		return
	}
	if x.Request.Header.Get("X-Rewrite") != "" {
		h.Set("X-Rewritten-Status", strconv.Itoa(x.Status))
		h.Del("Trailer") // the trailers move into the body
		x.RewriteResponseBody(func(src filter.Body) io.Reader { return &bracketBody{src: src} })
	}
}

// headerBody moves a body into the x-held-body header (the head waits for it) and answers
// "moved" instead.
type headerBody struct {
	src  filter.Body
	h    http.Header
	done bool
}

func (b *headerBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	body, err := io.ReadAll(b.src)
	if err != nil {
		return 0, err
	}
	b.h.Set("X-Held-Body", string(body))
	b.done = true
	return copy(p, "moved"), nil
}

// upperBody upper-cases a body and marks its trailers.
type upperBody struct{ src filter.Body }

func (u *upperBody) Read(p []byte) (int, error) {
	n, err := u.src.Read(p)
	copy(p[:n], bytes.ToUpper(p[:n]))
	if err == io.EOF {
		if t := u.src.Trailers(); t != nil {
			t.Set("X-Rewritten", "yes")
		}
	}
	return n, err
}

// bracketBody is "[" + the body upper-cased + the trailers + "]".
type bracketBody struct {
	src     filter.Body
	started bool
	pending []byte
	done    bool
}

func (b *bracketBody) Read(p []byte) (int, error) {
	if !b.started {
		b.started = true
		b.pending = append(b.pending, '[')
	}
	for len(b.pending) == 0 && !b.done {
		var buf [512]byte
		n, err := b.src.Read(buf[:])
		b.pending = append(b.pending, bytes.ToUpper(buf[:n])...)
		if err == io.EOF {
			t := b.src.Trailers()
			for _, k := range slices.Sorted(func(yield func(string) bool) {
				for k := range t {
					if !yield(k) {
						return
					}
				}
			}) {
				b.pending = append(b.pending, "|"+k+"="+t.Get(k)...)
				delete(t, k)
			}
			b.pending = append(b.pending, ']')
			b.done = true
		} else if err != nil {
			return 0, err
		}
	}
	if len(b.pending) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

// rewriteUpstream echoes request bodies with what it saw of their framing and trailers, and
// streams /stream in two parts, the second once release is closed.
func rewriteUpstream(t *testing.T, release <-chan struct{}) string {
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Up-Length", strconv.FormatInt(r.ContentLength, 10))
		w.Header().Set("X-Up-Trailer", r.Trailer.Get("X-Rewritten"))
		w.Header().Set("Trailer", "X-Up-Done")
		w.Write(body)
		w.Header().Set("X-Up-Done", "yes")
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "second")
	})
	return serveBothProtocols(t, mux).Listener.Addr().String()
}

const rewriteHCM = `stat_prefix: rewrite
http_protocol_options: {enable_trailers: true}
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/local"}
      direct_response: {status: 202, body: {inline_string: "local answer"}}
    - match: {prefix: "/h2/"}
      route: {cluster: h2, prefix_rewrite: "/"}
    - match: {prefix: "/"}
      route: {cluster: h1}
http_filters:
%s- name: test.rewrite
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`

// rewriteServer serves rewriteHCM with extra filters before the rewriting one.
func rewriteServer(t *testing.T, e *env, extra string) string {
	filters := filtersOf(t, nil, buffer.Register)
	if err := filters.Register("test.rewrite", func(*anypb.Any, *filter.Context) (filter.Filter, error) { return rewriteFilter{}, nil }); err != nil {
		t.Fatal(err)
	}
	addr, _ := serveFilters(t, e, filters, strings.Replace(rewriteHCM, "%s", extra, 1))
	return addr
}

// TestBodyRewrite: filters rewrite request and response bodies (and trailers) as they stream,
// on HTTP/1.1 and HTTP/2 downstream and upstream; a rewritten body loses its length (chunked
// on HTTP/1.1); a local reply is rewritten; a HEAD response is not; a held head waits for the
// rewritten body, whose rewriter may still change the headers, and goes with its length.
func TestBodyRewrite(t *testing.T) {
	release := make(chan struct{})
	up := rewriteUpstream(t, release)
	e := newEnv(t, envOptions{clusters: []string{
		staticCluster("h1", "http_protocol_options: {enable_trailers: true}", up),
		staticCluster("h2", "http2_protocol_options: {}", up),
	}, hcm: simpleHCM("h1", "")})
	addr := rewriteServer(t, e, "")
	clients := []struct {
		name string
		c    *http.Client
		h2   bool
	}{{"http1", e.client(), false}, {"h2c", h2cClient(t), true}}
	body := strings.Repeat("hello body ", 3000) // several reads
	for _, cl := range clients {
		for _, upstream := range []string{"/", "/h2/"} {
			t.Run(cl.name+" to "+upstream, func(t *testing.T) {
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+upstream+"echo", strings.NewReader(body))
				req.Header.Set("X-Rewrite", "1")
				if cl.h2 {
					req.Trailer = http.Header{"X-Rewritten": nil} // declared: the rewriter may fill it
				}
				resp, got := doRead(t, cl.c, req)
				want := "[" + strings.ToUpper(body) + "|X-Up-Done=yes]"
				if got != want {
					t.Errorf("body = %.40q... (%d bytes); want %.40q... (%d bytes)", got, len(got), want, len(want))
				}
				if v := resp.Header.Get("X-Up-Length"); v != "-1" {
					t.Errorf("upstream saw content-length %s; want -1 (the rewritten body has no length)", v)
				}
				if resp.ContentLength != -1 || (!cl.h2 && !slices.Equal(resp.TransferEncoding, []string{"chunked"})) {
					t.Errorf("response length %d, transfer-encoding %v; want -1, chunked on HTTP/1.1", resp.ContentLength, resp.TransferEncoding)
				}
				if len(resp.Trailer) != 0 {
					t.Errorf("response trailers %v; want none (moved into the body)", resp.Trailer)
				}
				if v := resp.Header.Get("X-Rewritten-Status"); v != "200" {
					t.Errorf("the filter saw status %q; want 200", v)
				}
				if cl.h2 && resp.Header.Get("X-Up-Trailer") != "yes" {
					t.Errorf("upstream request trailer x-rewritten = %q; want yes", resp.Header.Get("X-Up-Trailer"))
				}
			})
		}
		t.Run(cl.name+" local reply", func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/local", nil)
			req.Header.Set("X-Rewrite", "1")
			resp, got := doRead(t, cl.c, req)
			// (http2 gives a response written whole before the handler returns its length.)
			if resp.StatusCode != 202 || got != "[LOCAL ANSWER]" || (!cl.h2 && resp.ContentLength != -1) {
				t.Errorf("local reply = %d %q (length %d); want 202 [LOCAL ANSWER] without a length", resp.StatusCode, got, resp.ContentLength)
			}
		})
		t.Run(cl.name+" HEAD", func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodHead, "http://"+addr+"/local", nil)
			req.Header.Set("X-Rewrite", "1")
			resp, got := doRead(t, cl.c, req)
			if resp.StatusCode != 202 || got != "" || resp.ContentLength != int64(len("local answer")) {
				t.Errorf("HEAD = %d %q (length %d); want 202, no body, the reply's length", resp.StatusCode, got, resp.ContentLength)
			}
		})
	}
	for _, path := range []string{"/local", "/echo", "/h2/echo"} {
		t.Run("held head "+path, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, strings.NewReader("posted"))
			req.Header.Set("X-Hold", "1")
			resp, got := doRead(t, e.client(), req)
			want := "posted"
			if path == "/local" {
				want = "local answer"
			}
			if got != "moved" || resp.ContentLength != int64(len("moved")) || resp.Header.Get("X-Held-Body") != want {
				t.Errorf("held response = %q (length %d), x-held-body %q; want moved, its length, %q", got, resp.ContentLength, resp.Header.Get("X-Held-Body"), want)
			}
		})
	}
	t.Run("streaming", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/stream", nil)
		req.Header.Set("X-Rewrite", "1")
		resp, err := e.client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		first := make([]byte, len("[FIRST"))
		// The upstream holds its second part until the client has the first, rewritten.
		if _, err := io.ReadFull(br, first); err != nil || string(first) != "[FIRST" {
			t.Fatalf("first part = %q, %v; want [FIRST", first, err)
		}
		close(release)
		rest, err := io.ReadAll(br)
		if err != nil || string(rest) != "SECOND]" {
			t.Fatalf("rest = %q, %v; want SECOND]", rest, err)
		}
	})
}

// TestBodyRewriteBuffered: a body a filter read whole (the buffer filter) is rewritten whole
// and keeps a length.
func TestBodyRewriteBuffered(t *testing.T) {
	up := rewriteUpstream(t, nil)
	e := newEnv(t, envOptions{clusters: []string{staticCluster("h1", "http_protocol_options: {enable_trailers: true}", up), staticCluster("h2", "http2_protocol_options: {}", up)}, hcm: simpleHCM("h1", "")})
	addr := rewriteServer(t, e, `- name: envoy.filters.http.buffer
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer, max_request_bytes: 100000}
`)
	body := strings.Repeat("abc", 1000)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/echo", strings.NewReader(body))
	req.Header.Set("X-Rewrite", "1")
	resp, got := doRead(t, e.client(), req)
	if want := "[" + strings.ToUpper(body) + "|X-Up-Done=yes]"; got != want {
		t.Errorf("body = %.40q (%d bytes); want %.40q (%d bytes)", got, len(got), want, len(want))
	}
	if v := resp.Header.Get("X-Up-Length"); v != strconv.Itoa(len(body)) {
		t.Errorf("upstream saw content-length %s; want %d (rewritten whole)", v, len(body))
	}
}

// doRead sends req through c and reads the whole response.
func doRead(t *testing.T, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return resp, string(b)
}
