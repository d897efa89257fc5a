package pool

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// benchResponse is the upstream response of the proxy benchmark: a 100-byte body.
var benchResponse = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n" + strings.Repeat("x", 99) + "\n"

// BenchmarkHTTP1 compares one keep-alive HTTP/1.1 round trip (request with a few headers,
// 100-byte response body read to the end) through the pool with net/http.Transport against
// the same local upstream.
func BenchmarkHTTP1(b *testing.B) {
	s := newRawServer(b, benchResponse, 0)
	headers := []Field{{Name: "User-Agent", Value: "wrk"}, {Name: "Accept", Value: "*/*"}, {Name: "X-Forwarded-Proto", Value: "http"}, {Name: "X-Request-Id", Value: "0123456789abcdef"}}
	b.Run("pool", func(b *testing.B) {
		cm, store := newClusterManager(b, staticCluster("", s.addr()))
		m := newManager(b, cm, store, nil)
		h := onlyHost(b, m)
		b.RunParallel(func(pb *testing.PB) {
			var resp Response
			req := Request{Method: "GET", Path: "/", Host: "example.com", Header: headers}
			ctx := context.Background()
			for pb.Next() {
				if err := m.RoundTrip(ctx, h, &req, &resp); err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Close()
			}
		})
	})
	b.Run("net_http_transport", func(b *testing.B) {
		tr := &http.Transport{MaxIdleConnsPerHost: 64}
		defer tr.CloseIdleConnections()
		b.RunParallel(func(pb *testing.PB) {
			req, _ := http.NewRequest("GET", "http://"+s.addr()+"/", nil)
			req.Host = "example.com"
			for _, f := range headers {
				req.Header.Set(f.Name, f.Value)
			}
			for pb.Next() {
				res, err := tr.RoundTrip(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		})
	})
}

// BenchmarkIdleWatch measures the two ways of watching an idle connection that idle.go
// weighs, per request on a connection with nothing to read: "peek", the check the pool makes
// when it takes a connection, and "parked_reader", a goroutine blocked reading the idle
// connection that the request must stop (read deadline) and restart.
func BenchmarkIdleWatch(b *testing.B) {
	s := newRawServer(b, benchResponse, 0)
	dial := func(b *testing.B) net.Conn {
		c, err := net.Dial("tcp", s.addr())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
	}
	b.Run("peek", func(b *testing.B) {
		nc := dial(b)
		c := &h1conn{}
		c.raw, _ = rawSocket(nc)
		c.peek = c.peekSocket
		b.ReportAllocs()
		for b.Loop() {
			if err := c.raw.Read(c.peek); err != nil || c.found != idleClean {
				b.Fatalf("peek = %v, %v; want a clean connection", err, c.found)
			}
		}
	})
	b.Run("parked_reader", func(b *testing.B) {
		nc := dial(b)
		br := bufio.NewReader(nc)
		watch, stopped := make(chan bool), make(chan error)
		go func() { // one reader per connection, parked while the connection is idle
			for <-watch {
				_, err := br.Peek(1)
				stopped <- err
			}
		}()
		defer close(watch)
		b.ReportAllocs()
		for b.Loop() {
			watch <- true // released to the idle list
			nc.SetReadDeadline(aLongTimeAgo)
			if err := <-stopped; !errors.Is(err, os.ErrDeadlineExceeded) {
				b.Fatalf("parked read = %v; want a deadline error", err)
			}
			nc.SetReadDeadline(time.Time{})
		}
	})
}

// nginxResponse is the head nginx answers the rigs' upstream requests with (bench/lib.sh's
// upstream_conf) and its 101-byte body.
var nginxResponse = "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Fri, 27 Nov 2026 11:44:49 GMT\r\n" +
	"Content-Type: text/plain\r\nContent-Length: 101\r\nConnection: keep-alive\r\n\r\n" + strings.Repeat("x", 100) + "\n"

// BenchmarkResponseHead parses nginx's response head from a reader's buffer, as an upstream
// connection does for each response (run it under callgrind for instructions per head).
func BenchmarkResponseHead(b *testing.B) {
	src := strings.NewReader(nginxResponse)
	br := bufio.NewReader(src)
	var resp Response
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(nginxResponse)
		br.Reset(src)
		br.Peek(1)
		if _, err := readResponseHead(br, &resp, false, defaultHeadLimits); err != nil || len(resp.Header) != 5 {
			b.Fatalf("readResponseHead: %v, %d fields", err, len(resp.Header))
		}
	}
}
