package admin

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/sinks/hystrix"
)

type hystrixCluster struct {
	Rq2xx           stats.Counter `stat:"upstream_rq_2xx"`
	Rq5xx           stats.Counter `stat:"upstream_rq_5xx"`
	MembershipTotal stats.Gauge   `stat:"membership_total,never_import"`
}

type streamClient struct {
	resp   *http.Response
	body   *bufio.Reader
	cancel context.CancelFunc
}

// openStream starts a GET on path and returns once the headers are in.
func openStream(t *testing.T, c *http.Client, url string) *streamClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return &streamClient{resp: resp, body: bufio.NewReader(resp.Body), cancel: cancel}
}

// readFlush reads one flush's events, up to and including the ping, with a
// deadline: the read runs on a goroutine that ends when the body closes.
func (s *streamClient) readFlush(t *testing.T) string {
	t.Helper()
	type result struct {
		text string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		var b strings.Builder
		for {
			line, err := s.body.ReadString('\n')
			b.WriteString(line)
			if err != nil {
				ch <- result{b.String(), err}
				return
			}
			if strings.HasSuffix(b.String(), "\n:\n\n") || b.String() == ":\n\n" {
				ch <- result{b.String(), nil}
				return
			}
		}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("reading stream: %v after %q", r.err, r.text)
		}
		return r.text
	case <-time.After(5 * time.Second):
		t.Fatal("no flush within 5s")
		return ""
	}
}

func (s *streamClient) close() {
	s.cancel()
	s.resp.Body.Close()
}

func waitForClients(t *testing.T, sink *hystrix.Sink, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for sink.Clients() != n {
		if time.Now().After(deadline) {
			t.Fatalf("Clients() = %d after 5s; want %d", sink.Clients(), n)
		}
		runtime.Gosched()
	}
}

func TestHystrixStream(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sink, err := hystrix.New(nil, store.FlushInterval())
	if err != nil {
		t.Fatal(err)
	}
	store.AddSink(sink)
	var web hystrixCluster
	store.Register("cluster.web.", &web)
	web.MembershipTotal.Set(2)

	reg := NewRegistry()
	for _, e := range append(HomeEndpoints(reg), HystrixEndpoints(sink)...) {
		if err := reg.Register(e); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(New(Config{}, reg))
	transport := &http.Transport{}
	client := &http.Client{Transport: transport}
	defer func() {
		srv.Close() // waits for the stream handlers to return
		transport.CloseIdleConnections()
		sink.Close()
	}()

	a := openStream(t, client, srv.URL+"/hystrix_event_stream")
	b := openStream(t, client, srv.URL+"/dashboard_event_stream")
	t.Run("headers", func(t *testing.T) {
		for _, s := range []*streamClient{a, b} {
			got := map[string]string{}
			for _, k := range []string{"Content-Type", "Cache-Control", "Access-Control-Allow-Headers", "Access-Control-Allow-Origin", "X-Content-Type-Options", "Transfer-Encoding"} {
				got[k] = s.resp.Header.Get(k)
			}
			want := map[string]string{
				"Content-Type":                 "text/event-stream",
				"Cache-Control":                "no-cache",
				"Access-Control-Allow-Headers": "Accept, Cache-Control, X-Requested-With, Last-Event-ID",
				"Access-Control-Allow-Origin":  "*",
				"X-Content-Type-Options":       "nosniff",
				"Transfer-Encoding":            "",
			}
			if s.resp.StatusCode != http.StatusOK {
				t.Errorf("%s status = %d; want 200", s.resp.Request.URL.Path, s.resp.StatusCode)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s headers (-want +got):\n%s", s.resp.Request.URL.Path, diff)
			}
			if !s.resp.Close {
				t.Errorf("%s: response not marked Connection: close", s.resp.Request.URL.Path)
			}
			if len(s.resp.TransferEncoding) != 0 {
				t.Errorf("%s transfer encoding = %v; want none (raw stream)", s.resp.Request.URL.Path, s.resp.TransferEncoding)
			}
		}
	})
	waitForClients(t, sink, 2)

	t.Run("two clients read every flush", func(t *testing.T) {
		counts := []struct{ ok, fail uint64 }{{0, 0}, {7, 1}, {3, 0}}
		var want []string // requestCount per flush, cumulative over the window
		total := 0
		for i, c := range counts {
			web.Rq2xx.Add(c.ok)
			web.Rq5xx.Add(c.fail)
			if i > 0 {
				total += int(c.ok + c.fail)
			}
			want = append(want, `"requestCount": `+strconv.Itoa(total)+`,`)
			store.Flush()
			ga, gb := a.readFlush(t), b.readFlush(t)
			if ga != gb {
				t.Errorf("flush %d: the clients saw different bytes:\n%s\n%s", i, ga, gb)
			}
			if !strings.Contains(ga, want[i]) || !strings.Contains(ga, `"name": "web"`) || !strings.HasSuffix(ga, "}\n\n:\n\n") {
				t.Errorf("flush %d = %s\nwant %s for cluster web, ending with the ping", i, ga, want[i])
			}
		}
	})

	t.Run("a client that leaves is freed at once", func(t *testing.T) {
		a.close()
		waitForClients(t, sink, 1)
		store.Flush()
		if got := b.readFlush(t); !strings.Contains(got, `"name": "web"`) {
			t.Errorf("remaining client read %q", got)
		}
		b.close()
		waitForClients(t, sink, 0)
	})
}

// TestHystrixWire reads the stream off a raw connection: Envoy's headers
// and an unchunked body that is exactly the events.
func TestHystrixWire(t *testing.T) {
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sink, err := hystrix.New(nil, store.FlushInterval())
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	store.AddSink(sink)
	srv, _ := testServer(t, HystrixEndpoints(sink)...)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, "GET /hystrix_event_stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	r := bufio.NewReader(conn)
	var head []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading headers: %v", err)
		}
		if line == "\r\n" {
			break
		}
		if !strings.HasPrefix(line, "Date: ") {
			head = append(head, strings.TrimSuffix(line, "\r\n"))
		}
	}
	want := []string{
		"HTTP/1.1 200 OK",
		"Access-Control-Allow-Headers: Accept, Cache-Control, X-Requested-With, Last-Event-ID",
		"Access-Control-Allow-Origin: *",
		"Cache-Control: no-cache",
		"Connection: close",
		"Content-Type: text/event-stream",
		"X-Content-Type-Options: nosniff",
	}
	if diff := cmp.Diff(want, head); diff != "" {
		t.Errorf("response head (-want +got):\n%s", diff)
	}
	waitForClients(t, sink, 1)
	store.Flush() // no clusters: the flush is the ping alone
	buf := make([]byte, 3)
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != ":\n\n" {
		t.Errorf("body = %q, %v; want %q", buf, err, ":\n\n")
	}
}

func TestHystrixUnavailableWithoutSink(t *testing.T) {
	if eps := HystrixEndpoints(nil); len(eps) != 0 {
		t.Fatalf("HystrixEndpoints(nil) = %d endpoints; want none", len(eps))
	}
	srv, _ := testServer(t, HystrixEndpoints(nil)...)
	for _, path := range []string{"/hystrix_event_stream", "/dashboard_event_stream"} {
		t.Run(path, func(t *testing.T) {
			code, _, body := fetch(t, http.MethodGet, srv.URL+path, "", "")
			if code != http.StatusNotFound {
				t.Errorf("GET %s = %d; want 404", path, code)
			}
			if !strings.HasPrefix(body, "invalid path. admin commands are:\n") || strings.Contains(body, "event_stream") {
				t.Errorf("GET %s body = %q; want the help text without the stream endpoints", path, body)
			}
		})
	}
}

func TestHystrixHelp(t *testing.T) {
	sink, err := hystrix.New(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	reg := NewRegistry()
	for _, e := range HystrixEndpoints(sink) {
		if err := reg.Register(e); err != nil {
			t.Fatal(err)
		}
	}
	want := "admin commands are:\n" +
		"  /dashboard_event_stream: send circuit-breaker dashboard event stream (same as /hystrix_event_stream)\n" +
		"  /hystrix_event_stream: send hystrix event stream\n"
	if got := reg.HelpText(); got != want {
		t.Errorf("HelpText() (-want +got):\n%s", cmp.Diff(want, got))
	}
}
