package pool

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// benchResponse is the upstream response of the proxy benchmark: a 100-byte body.
var benchResponse = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n" + strings.Repeat("x", 99) + "\n"

// BenchmarkHTTP1 compares one keep-alive HTTP/1.1 round trip (request with a few headers,
// 100-byte response body read to the end) through the pool with net/http.Transport against
// the same local upstream.
func BenchmarkHTTP1(b *testing.B) {
	s := newRawServer(b, benchResponse, 0)
	headers := []Field{{"User-Agent", "wrk"}, {"Accept", "*/*"}, {"X-Forwarded-Proto", "http"}, {"X-Request-Id", "0123456789abcdef"}}
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
