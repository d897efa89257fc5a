package pool

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// BenchmarkHTTP2 runs HTTP/2 round trips through the pool (a request with a few headers, a
// 100-byte response body read to the end) from parallel goroutines sharing the pool's
// connections. The upstream is a raw-frame h2c server answering every request with the same
// pre-encoded HEADERS and DATA, so that allocs/op counts the pool's and its HTTP/2 client's
// allocations alone.
func BenchmarkHTTP2(b *testing.B) {
	addr := cannedH2Server(b)
	headers := []Field{{Name: "User-Agent", Value: "h2load"}, {Name: "Accept", Value: "*/*"}, {Name: "X-Forwarded-Proto", Value: "http"}, {Name: "X-Request-Id", Value: "0123456789abcdef"}}
	cm, store := newClusterManager(b, staticCluster(typedOptions("explicit_http_config: {http2_protocol_options: {}}"), addr))
	m := newManager(b, cm, store, nil)
	h := onlyHost(b, m)
	b.ReportAllocs()
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
}

// cannedH2Server serves h2c connections that answer each request stream with a 200, a
// content-type and content-length, and a 100-byte body; it flushes when it has read all that
// has arrived.
func cannedH2Server(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	var blk bytes.Buffer
	enc := hpack.NewEncoder(&blk)
	for _, f := range [][2]string{{":status", "200"}, {"content-type", "text/plain"}, {"content-length", "100"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	body := []byte(strings.Repeat("x", 99) + "\n")
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go serveScripted(nc, func(fr *http2.Framer, id uint32) {
				fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk.Bytes(), EndHeaders: true})
				fr.WriteData(id, true, body)
			})
		}
	}()
	return ln.Addr().String()
}
