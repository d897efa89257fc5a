package httpproxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
)

// BenchmarkProxyH2 measures proxied requests from prior-knowledge HTTP/2 clients, many
// streams at once on each connection (as h2load -m does): to an HTTP/1.1 upstream
// ("to-http1", the raw upstream of BenchmarkProxy) and to an HTTP/2 one ("to-h2c", Go's
// server). "direct-h2c" is the same client straight to the HTTP/2 upstream, for the ratio.
func BenchmarkProxyH2(b *testing.B) {
	e, h2up := h2BenchEnv(b)
	b.Run("to-http1", func(b *testing.B) { benchH2Client(b, e.addr, "/h1") })
	b.Run("to-h2c", func(b *testing.B) { benchH2Client(b, e.addr, "/h2") })
	b.Run("direct-h2c", func(b *testing.B) { benchH2Client(b, h2up, "/h2") })
}

// h2BenchEnv is a proxy routing /h1 to the raw HTTP/1.1 upstream and the rest to an HTTP/2
// upstream (Go's server, 100-byte bodies), whose address it returns too.
func h2BenchEnv(tb testing.TB) (*env, string) {
	raw := rawUpstream(tb)
	body := make([]byte, 100)
	h2up := serveBothProtocols(tb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	}))
	e := newEnv(tb, envOptions{
		clusters: []string{staticCluster("h1", "", raw), staticCluster("h2", h2ClusterOptions, h2up.Listener.Addr().String())},
		hcm:      twoRouteHCM("/h1", "h1", "h2", ""),
	})
	return e, h2up.Listener.Addr().String()
}

// benchH2Client sends GETs for path to addr from 4×GOMAXPROCS goroutines sharing two
// HTTP/2 connections.
func benchH2Client(b *testing.B, addr, path string) {
	var conns []*http2.ClientConn
	tr := &http2.Transport{AllowHTTP: true}
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		cc, err := tr.NewClientConn(c)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, cc)
	}
	b.Cleanup(func() {
		for _, cc := range conns {
			cc.Close()
		}
	})
	b.ReportAllocs()
	b.SetParallelism(4)
	var next atomic.Uint32
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		cc := conns[next.Add(1)%uint32(len(conns))]
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			b.Error(err)
			return
		}
		for pb.Next() {
			resp, err := cc.RoundTrip(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}

// TestServeForLoad runs a proxy for an external load generator (h2load) when
// LEGATE_LOAD_SERVE is set: it prints "proxy <addr> h2c <addr>" (the listener, routing /h1 to
// the raw HTTP/1.1 upstream and the rest to the HTTP/2 upstream, and that upstream itself)
// and serves until its standard input closes.
func TestServeForLoad(t *testing.T) {
	if os.Getenv("LEGATE_LOAD_SERVE") == "" {
		t.Skip("set LEGATE_LOAD_SERVE to serve a proxy for h2load")
	}
	e, h2up := h2BenchEnv(t)
	fmt.Printf("proxy %s h2c %s\n", e.addr, h2up)
	io.Copy(io.Discard, os.Stdin)
}
